"""The expert's rules for split-K and shape specialization, on the GPU's whole space."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from agent.policies.base import HistoryItem, PolicyContext, key_of
from agent.policies.expert import STAGNATION_WINDOW, ExpertPolicy
from agent.spaces import FullSpace
from kernels.base import Dims, Rejection
from kernels.gemm_bias_relu import FAMILY
from kernels.gemm_bias_relu.params import GemmParams
from kernels.gemm_bias_relu.rules import MIN_K_TILES_PER_SPLIT
from kernels.gemm_bias_relu.shape import Shape

H200 = {"sm_count": 132, "max_threads_per_sm": 2048, "max_regs_per_sm": 65536,
        "max_blocks_per_sm": 32, "max_smem_per_sm": 233472}
#: 16x16 threads, 8x8 register blocks: 128x128 output tiles, 256 threads
SIMT = GemmParams(coalesced=True, smem=True, reg_m=8, reg_n=8, vec=4, pad=4)
#: 64x2 threads = 4 warps, 32x64 warp tiles: 64x128 output tiles
TC = GemmParams(tf32x3=True, block_x=64, block_y=2, warp_m=32, warp_n=64, tile_k=32, stages=2)


def incumbent(params: GemmParams, occupancy: float | None = 25.0) -> HistoryItem:
    params = params.canonical()
    return HistoryItem(id="inc", iteration=5, params=params, key=key_of(params), status="ok",
                       avg_us=3000.0, accepted=True,
                       compile={"spill_bytes": 0, "regs_per_thread": 128},
                       profile={"theoretical_occupancy_pct": occupancy} if occupancy else {})


def context(inc: HistoryItem, shape: Shape | None, *, stagnation: int = 0,
            device: dict[str, Any] | None = None) -> PolicyContext:
    return PolicyContext(family=FAMILY, space=FullSpace(FAMILY, "sm_90"), arch="sm_90",
                         incumbent=inc, history=[inc], seed=1, iteration=6, threshold_pct=0.5,
                         stagnation=stagnation, shape=shape, device=device or H200)


def ruled(proposals: list[Any], name: str) -> list[Any]:
    """Proposals of transform ``name`` made by a rule (not local search, not a two-step move)."""
    return [p for p in proposals if p.action.startswith(name) and " ; " not in p.action
            and not p.reason.startswith("local search")]


def test_a_grid_of_four_ctas_on_a_long_k_is_split_as_far_as_the_domain_goes() -> None:
    # 256x256 in 128x128 tiles: 4 CTAs; 25 % occupancy of 8-warp blocks = 2 per SM -> 264 slots
    proposals = ExpertPolicy().propose(context(incumbent(SIMT), Shape(256, 256, 65536)), 60)
    split = ruled(proposals, "apply_split_k")
    assert [p.action for p in split] == ["apply_split_k(32)", "apply_split_k(16)"]
    assert "4 CTAs (2x2 output tiles)" in split[0].reason
    assert "132 SMs x 2 resident CTAs = 264 slots" in split[0].reason
    assert "4096 tiles of 16" in split[0].reason
    assert split[0].params.split_k == 32
    assert proposals.index(split[0]) < 3  # among the first moves, not buried in local search


def test_the_smallest_split_that_fills_the_gpu_is_first() -> None:
    # 512x512 in 64x128 tensor-core tiles: 8x4 = 32 CTAs; 12.5 % of 4-warp blocks = 2 per SM
    inc = incumbent(TC, occupancy=12.5)
    proposals = ExpertPolicy().propose(context(inc, Shape(512, 512, 16384)), 60)
    split = ruled(proposals, "apply_split_k")
    assert [p.action for p in split] == ["apply_split_k(16)", "apply_split_k(8)"]
    assert "32 CTAs" in split[0].reason
    assert "-> 512 CTAs" in split[0].reason
    assert split[0].params.tf32x3


def test_resident_ctas_come_from_registers_and_smem_without_a_profile() -> None:
    # 128 registers (ptxas) x 256 threads: 2 blocks per SM by registers
    proposals = ExpertPolicy().propose(
        context(incumbent(SIMT, occupancy=None), Shape(1024, 1024, 8192)), 60)
    split = ruled(proposals, "apply_split_k")
    # 8x8 = 64 CTAs for 264 slots: a split of 8 fills them (512 CTAs), 4 does not (256)
    assert [p.action for p in split] == ["apply_split_k(8)", "apply_split_k(4)"]


@pytest.mark.parametrize(("shape", "why"), [
    (Shape(4096, 4096, 4096), "1024 CTAs fill the GPU"),
    (Shape(8192, 1024, 4096), "512 CTAs fill the GPU (no split by rule)"),
    (Shape(256, 256, 16 * MIN_K_TILES_PER_SPLIT), "K too short to share"),
])
def test_no_split_by_rule_when_the_grid_is_full_or_k_is_short(shape: Shape, why: str) -> None:
    proposals = ExpertPolicy().propose(context(incumbent(SIMT), shape), 80)
    assert ruled(proposals, "apply_split_k") == [], why


def test_no_split_rule_without_a_shape_or_without_staged_tiles() -> None:
    assert ruled(ExpertPolicy().propose(context(incumbent(SIMT), None), 60),
                 "apply_split_k") == []
    direct = GemmParams(coalesced=True, reg_m=4, reg_n=4, vec=4)
    assert ruled(ExpertPolicy().propose(context(incumbent(direct), Shape(256, 256, 65536)), 60),
                 "apply_split_k") == []


def test_an_incumbent_split_that_fills_the_gpu_is_left_alone() -> None:
    split = replace(SIMT, split_k=32)
    proposals = ExpertPolicy().propose(context(incumbent(split), Shape(512, 512, 65536)), 60)
    # 16 CTAs x 32 = 512 >= 264 slots
    assert ruled(proposals, "apply_split_k") == []


def test_more_sms_need_a_larger_split() -> None:
    big = dict(H200, sm_count=264)
    proposals = ExpertPolicy().propose(
        context(incumbent(SIMT), Shape(1024, 1024, 8192), device=big), 60)
    assert [p.action for p in ruled(proposals, "apply_split_k")][:1] == ["apply_split_k(16)"]


# ---- specialize_shape -------------------------------------------------------------------------


def test_specialize_shape_waits_until_the_structure_has_settled() -> None:
    shape = Shape(4096, 4096, 4096)
    calm = ExpertPolicy().propose(context(incumbent(SIMT), shape,
                                          stagnation=STAGNATION_WINDOW - 1), 5000)
    assert not any(p.action == "specialize_shape(true)" for p in calm)
    assert len(calm) > 40  # the whole neighbourhood, but not that move
    settled = ExpertPolicy().propose(context(incumbent(SIMT), shape,
                                             stagnation=STAGNATION_WINDOW), 40)
    special = ruled(settled, "specialize_shape(true)")
    assert len(special) == 1
    assert f"no acceptance in {STAGNATION_WINDOW} evaluations" in special[0].reason
    assert special[0].params.fixed_shape == shape
    assert FAMILY.validate(special[0].params) is None
    assert not isinstance(FAMILY.launch(special[0].params, shape), Rejection)


def test_a_specialized_incumbent_is_not_specialized_again_and_keeps_its_shape() -> None:
    shape = Shape(1024, 1024, 1024)
    fixed = replace(SIMT, shape_m=1024, shape_n=1024, shape_k=1024)
    proposals = ExpertPolicy().propose(context(incumbent(fixed), shape,
                                               stagnation=STAGNATION_WINDOW), 200)
    assert not any(p.action == "specialize_shape(true)" for p in proposals)
    for p in proposals:
        if "specialize_shape(false)" not in p.action:
            assert p.params.fixed_shape == shape, p.action


def test_no_specialization_without_a_shape() -> None:
    proposals = ExpertPolicy().propose(context(incumbent(SIMT), None,
                                               stagnation=STAGNATION_WINDOW), 5000)
    assert not any(p.action.startswith("specialize_shape") for p in proposals)


# ---- the engine hands the campaign's shape and device to the policy ----------------------------


def test_the_engine_gives_policies_the_campaign_shape_and_device(tmp_path: Any) -> None:
    from replay_support import create, new_database, replay, run

    seen: list[tuple[Dims | None, dict[str, Any] | None]] = []

    class Capture(ExpertPolicy):
        def propose(self, ctx: PolicyContext, n: int) -> list[Any]:
            seen.append((ctx.shape, ctx.device))
            return super().propose(ctx, n)

    _url, sessions = new_database(tmp_path)
    cid = create(sessions, policy="expert", budget_iterations=4)
    run(sessions, cid, policy=Capture())
    assert seen
    for shape, device in seen:
        assert shape == Shape(4096, 4096, 4096)
        assert device is not None
        assert device["sm_count"] == replay().dataset.meta["device"]["sm_count"] == 132
