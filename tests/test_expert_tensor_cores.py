"""The expert's rules for the tensor-core path, on the GPU's whole space (no replay needed),
and the precision split they offer at a campaign's tolerance."""

from __future__ import annotations

from agent.policies.base import HistoryItem, PolicyContext, Proposal, key_of
from agent.policies.expert import ExpertPolicy
from agent.spaces import FullSpace
from kernels.gemm_bias_relu import FAMILY
from kernels.gemm_bias_relu.params import GemmParams
from kernels.gemm_bias_relu.precision import schemes_for
from kernels.gemm_bias_relu.shape import Shape


def incumbent(params: GemmParams, spill_bytes: int = 0) -> HistoryItem:
    params = params.canonical()
    return HistoryItem(id="inc", iteration=5, params=params, key=key_of(params), status="ok",
                       avg_us=3000.0, accepted=True,
                       compile={"spill_bytes": spill_bytes, "regs_per_thread": 128})


def context(inc: HistoryItem) -> PolicyContext:
    return PolicyContext(family=FAMILY, space=FullSpace(FAMILY, "sm_90"), arch="sm_90",
                         incumbent=inc, history=[inc], seed=1, iteration=6, threshold_pct=0.5)


def test_a_register_blocked_simt_kernel_is_offered_the_tensor_cores() -> None:
    simt = GemmParams(coalesced=True, smem=True, reg_m=8, reg_n=8, vec=4, pad=4)
    proposals = ExpertPolicy().propose(context(incumbent(simt)), 40)
    tc = [p for p in proposals if p.action == "apply_tf32x3(true)"]
    assert len(tc) == 1
    assert "FP32 FMA" in tc[0].reason
    assert tc[0].params.tf32x3


def test_a_spilling_tensor_core_kernel_gets_a_smaller_warp_tile_first() -> None:
    tc = GemmParams(tf32x3=True, block_x=64, block_y=2, warp_m=32, warp_n=64, tile_k=32)
    proposals = ExpertPolicy().propose(context(incumbent(tc, spill_bytes=32)), 5)
    assert proposals[0].action == "apply_warp_tiling(32, 32)"
    assert "spills" in proposals[0].reason
    assert "apply_double_buffer(2)" in [p.action for p in proposals]


def test_an_unblocked_simt_kernel_is_not_sent_to_the_tensor_cores_by_rule() -> None:
    simt = GemmParams(coalesced=True, smem=True, reg_m=2, reg_n=2)
    proposals = ExpertPolicy().propose(context(incumbent(simt)), 8)
    assert all(not p.action.startswith("apply_tf32x3") for p in proposals)


def test_a_hopper_tensor_core_kernel_is_offered_wgmma_then_its_own_moves() -> None:
    tc = GemmParams(tf32x3=True, block_x=64, block_y=4, tile_k=32, stages=2)
    proposals = ExpertPolicy().propose(context(incumbent(tc)), 6)
    assert proposals[0].action == "apply_wgmma(128)"
    assert "sm_90" in proposals[0].reason
    assert proposals[0].params.wgmma == 128
    assert proposals[0].params.block_x == 128
    # on a wgmma kernel: no mma.sync warp tiles; two warpgroups, four buffers, swizzle
    wg = proposals[0].params
    small = GemmParams(**{**wg.__dict__, "block_y": 1, "stages": 1})
    actions = [p.action for p in ExpertPolicy().propose(context(incumbent(small)), 6)]
    assert actions[:4] == ["change_block_config(128, 2)", "apply_double_buffer(2)",
                           "apply_block_swizzle(4)", "apply_mma_pipeline(4)"]
    assert not any(a.startswith("apply_warp_tiling") for a in actions)
    # the shape the campaigns settle on: the MMAs kept in flight across K-tiles
    tuned = GemmParams(**{**wg.__dict__, "block_y": 2, "stages": 2, "swizzle": 4})
    first = ExpertPolicy().propose(context(incumbent(tuned)), 6)[0]
    assert first.action == "apply_mma_pipeline(4)"
    assert first.params.mma_window == 4
    # measured slower on the H200: neither global fragments nor two one-warpgroup CTAs
    done = ExpertPolicy().propose(context(incumbent(first.params)), 6)
    assert not any("apply_global_fragments" in p.action or ";" in p.action for p in done)
    # the windowed kernel: producer warpgroups take the copies and the split
    assert [p.action for p in done][:2] == ["apply_warp_specialization(2)",
                                            "apply_warp_specialization(1)"]
    ws = done[0].params
    assert ws.producers == 2
    # with producers, three stages ahead beat four on the H200
    after = [p.action for p in ExpertPolicy().propose(context(incumbent(ws)), 6)]
    assert after[0] == "apply_double_buffer(1)"


def test_no_wgmma_off_hopper() -> None:
    tc = GemmParams(tf32x3=True, block_x=64, block_y=4, tile_k=32, stages=2).canonical()
    ctx = PolicyContext(family=FAMILY, space=FullSpace(FAMILY, "sm_80"), arch="sm_80",
                        incumbent=incumbent(tc), history=[incumbent(tc)], seed=1, iteration=6,
                        threshold_pct=0.5)
    assert all("wgmma" not in p.action for p in ExpertPolicy().propose(ctx, 30))


# ---- the precision split chosen by the campaign's tolerance -----------------------------------
SHAPE = Shape.parse("4096x4096x4096")


def rule_walk(tolerance: float, steps: int = 30) -> list[Proposal]:
    """Every rule-book proposal (local search left out) of a campaign at ``tolerance`` that
    accepts the rule book's first move each time, from a register-blocked staged SIMT kernel at
    4096³, until the rule book has nothing left."""
    params = GemmParams(coalesced=True, smem=True, reg_m=8, reg_n=8, vec=4, pad=4).canonical()
    history: list[HistoryItem] = []
    seen: list[Proposal] = []
    for i in range(steps):
        inc = HistoryItem(id=f"c{i}", iteration=i, params=params, key=key_of(params),
                          status="ok", avg_us=3000.0 - i, accepted=True,
                          compile={"spill_bytes": 0, "regs_per_thread": 128})
        history.append(inc)
        ctx = PolicyContext(family=FAMILY, space=FullSpace(FAMILY, "sm_90"), arch="sm_90",
                            incumbent=inc, history=list(history), seed=1, iteration=i + 1,
                            threshold_pct=0.5, shape=SHAPE, tolerance=tolerance)
        ruled = [p for p in ExpertPolicy().propose(ctx, 40)
                 if not p.reason.startswith("local search")]
        if not ruled:
            return seen
        seen += ruled
        params = ruled[0].params
    raise AssertionError(f"the rule book still proposes after {steps} steps")


def test_the_default_tolerance_reaches_bf16x3_on_the_warp_specialized_kernel() -> None:
    assert schemes_for(1e-4) == ["bf16x3", "bf16x6", "tf32x3"]
    walk = rule_walk(1e-4)
    bf16 = [p for p in walk if p.action == "apply_precision_split(3)"]
    assert bf16, [p.action for p in walk]
    # offered from the tf32x3 wgmma kernels it fits, the warp-specialized pipeline kept
    assert all(p.params.bf16_split == 3 and p.params.wgmma for p in bf16)
    assert any(p.params.producers == 2 for p in bf16)
    assert "tolerance 0.0001" in bf16[0].reason
    # on the bf16 kernel the walk goes on: its producers staged by cp.async
    assert any(p.action == "apply_async_copy(true)" and p.params.bf16_split == 3 for p in walk)
    # never the tighter (slower) bf16x6 where bf16x3 fits
    assert not any(p.params.bf16_split == 6 for p in walk)


def test_a_tolerance_of_1e_5_never_proposes_bf16x3_but_bf16x6() -> None:
    assert schemes_for(1e-5) == ["bf16x6", "tf32x3"]
    walk = rule_walk(1e-5)
    assert any(p.params.tf32x3 and p.params.producers for p in walk)  # the tf32x3 path stays
    assert not any(p.params.bf16_split == 3 for p in walk)
    six = [p for p in walk if p.action == "apply_precision_split(6)"]
    assert six, [p.action for p in walk]
    assert "tolerance 1e-05" in six[0].reason


def test_a_tolerance_no_split_meets_keeps_the_simt_kernel() -> None:
    assert schemes_for(1e-7) == []
    walk = rule_walk(1e-7)
    assert walk
    assert not any(p.params.tf32x3 or p.params.bf16_split for p in walk)
    # the SIMT kernel's own end instead: its register pipeline with lane quads
    assert any("apply_lane_quads(true)" in p.action for p in walk)
    # the same kernel at the default tolerance is sent to the tensor cores first
    assert rule_walk(1e-4)[0].action == "apply_tf32x3(true)"
