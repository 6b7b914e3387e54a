"""The SIMT kernel's cp.async pipeline without a GPU: the transform and its rejections, keys
of older points, shared memory and registers, and every variant compiled by the real nvcc
with no spills (the GPU side is tests/test_gpu_async_copy.py)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pytest
from async_copy_points import ASYNC, SIMT, variants

from agent.policies.base import key_of
from kernels.base import Candidate, Rejection
from kernels.gemm_bias_relu import FAMILY, GemmParams
from kernels.gemm_bias_relu.validity import validate
from worker.compile import Compiler, compile_candidate


def test_the_transform_switches_the_copy_and_keeps_the_rest() -> None:
    on = FAMILY.apply(Candidate(SIMT), "apply_async_copy(true)")
    assert isinstance(on, Candidate)
    assert on.params == ASYNC
    assert on.params.to_dict()["async_copy"] is True
    off = FAMILY.apply(on, "apply_async_copy(false)")
    assert isinstance(off, Candidate)
    assert off.params == SIMT
    # three buffers instead of two register-staged ones: one more tile in shared memory
    assert ASYNC.smem_bytes == 3 * SIMT.smem_bytes // 2
    # no registers hold the next tile
    assert ASYNC.est_regs_per_thread < SIMT.est_regs_per_thread


def test_keys_of_older_points_are_unchanged() -> None:
    assert "async_copy" not in SIMT.to_dict()
    assert "async_copy" not in FAMILY.baseline.to_dict()
    assert key_of(ASYNC) != key_of(SIMT)
    assert len({key_of(p) for p in variants()}) == len(variants())


def test_rejections_name_the_problem() -> None:
    direct = FAMILY.apply(Candidate(FAMILY.baseline), "apply_async_copy(true)")
    assert isinstance(direct, Rejection)
    assert direct.reason == "requires_shared_memory"
    tc = GemmParams(tf32x3=True, block_x=64, block_y=4, tile_k=32, stages=2).canonical()
    rej = FAMILY.apply(Candidate(tc), "apply_async_copy(true)")
    assert isinstance(rej, Rejection)
    assert rej.reason == "tensor_core_kernel"
    misaligned = validate(replace(ASYNC, pad=1))
    assert misaligned is not None
    assert misaligned.reason == "async_copy_alignment"
    assert "padding 1 floats must be a multiple of 4" in misaligned.message
    with pytest.raises(ValueError, match="async_copy must be true/false"):
        GemmParams.from_dict({"smem": True, "async_copy": 1})


def test_the_source_copies_by_cp_async_and_stages_nothing_in_registers() -> None:
    source = FAMILY.render(ASYNC)
    assert "cp.async.cg.shared.global" in source  # B's rows, 16 bytes
    assert "cp.async.ca.shared.global [%0], [%1], 4;" in source  # A's elements, transposed
    assert "#define NBUF 3" in source
    assert "float ta[" not in source
    assert "cp.async" not in FAMILY.render(SIMT)


def test_every_variant_compiles_without_spills(compiler: Compiler) -> None:
    points = variants()
    for p in points:
        assert validate(p) is None, p
    with ThreadPoolExecutor(compiler.workers) as pool:  # nvcc runs outside the GIL
        results = list(pool.map(lambda p: compile_candidate(compiler, FAMILY, p), points))
    for p, r in zip(points, results, strict=True):
        assert r.status == "ok", (p, r.error)
        assert r.spill_bytes == 0, (p, r.spill_bytes)
        assert r.regs_per_thread is not None
    # the campaign's best, with cp.async: no more registers than register-staged (2 CTAs/SM)
    staged = compile_candidate(compiler, FAMILY, SIMT)
    copied = compile_candidate(compiler, FAMILY, ASYNC)
    assert staged.regs_per_thread is not None
    assert copied.regs_per_thread is not None
    assert copied.regs_per_thread <= staged.regs_per_thread <= 128


def test_the_expert_does_not_offer_cp_async_which_lost_on_the_h200() -> None:
    """Measured 2026-11-30 (docs/GPU.md): the best SIMT kernel ran 15 % slower with cp.async;
    the expert goes from a register-blocked SIMT kernel to the tensor cores instead."""
    from agent.policies.base import HistoryItem, PolicyContext
    from agent.policies.expert import ExpertPolicy
    from agent.spaces import FullSpace

    def proposals(params: GemmParams) -> list[str]:
        inc = HistoryItem(id="inc", iteration=5, params=params, key=key_of(params), status="ok",
                          avg_us=3000.0, accepted=True,
                          compile={"spill_bytes": 0, "regs_per_thread": 128})
        ctx = PolicyContext(family=FAMILY, space=FullSpace(FAMILY, "sm_90"), arch="sm_90",
                            incumbent=inc, history=[inc], seed=1, iteration=6,
                            threshold_pct=0.5)
        # by rule (local search walks every transform, cp.async among them, in seeded order)
        return [p.action for p in ExpertPolicy().propose(ctx, 40)
                if not p.reason.startswith("local search")]

    actions = proposals(SIMT)
    assert "apply_async_copy(true)" not in actions
    assert "apply_tf32x3(true)" in actions
