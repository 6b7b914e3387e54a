"""The SIMT kernel's register pipeline (``apply_fragment_prefetch``) and the 8x16 / 16x8
register blocks, without a GPU: the transform, its validity rules, the launch, and the
variants built by the real nvcc without spills (a stratified sample; all of them under
``--full``), its hot loop fully unrolled."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pytest
from async_copy_points import SIMT
from expert_rules import expert_rules, simt_only
from frag_prefetch_points import PREFETCH, UNSTRIDED, WIDE, variants
from sampling import param_values, stratified

from kernels.base import Candidate, Rejection
from kernels.gemm_bias_relu import FAMILY, GemmParams
from kernels.gemm_bias_relu.shape import Shape
from kernels.gemm_bias_relu.space import REPLAY_DOMAINS, SEED_DOMAINS
from kernels.gemm_bias_relu.validity import validate
from worker.compile import Compiler, compile_candidate

SHAPE = Shape(4096, 4096, 4096)


def test_transform_turns_it_on_and_drops_the_unroll_factor() -> None:
    got = FAMILY.apply(Candidate(SIMT, shape=SHAPE), "apply_fragment_prefetch(true)")
    assert not isinstance(got, Rejection)
    assert got.params.frag_prefetch
    assert got.params.unroll == 1
    assert got.params == PREFETCH
    # the unroll factor means nothing to the pipelined kernel: no evaluation is spent on it
    again = FAMILY.apply(got, "apply_unroll(4)")
    assert isinstance(again, Rejection)
    assert again.reason == "no_change"


@pytest.mark.parametrize(("start", "action", "reason"), [
    (FAMILY.baseline, "apply_fragment_prefetch(true)", "requires_shared_memory"),
    (replace(SIMT, stages=1), "apply_fragment_prefetch(true)", "frag_prefetch_pipeline"),
    (replace(SIMT, async_copy=True), "apply_fragment_prefetch(true)", "frag_prefetch_pipeline"),
    (PREFETCH, "apply_double_buffer(1)", "frag_prefetch_pipeline"),
    (replace(SIMT, tf32x3=True).canonical(), "apply_fragment_prefetch(true)",
     "tensor_core_kernel"),
    (WIDE, "apply_register_block(16, 16)", "register_file"),
])
def test_rejections_name_the_reason(start: GemmParams, action: str, reason: str) -> None:
    got = FAMILY.apply(Candidate(start, shape=SHAPE), action)
    assert isinstance(got, Rejection), got
    assert got.reason == reason, got


def test_old_points_keep_their_keys_and_the_seed_space_its_size() -> None:
    assert "frag_prefetch" not in SIMT.to_dict()
    assert PREFETCH.to_dict()["frag_prefetch"] is True
    assert 16 not in SEED_DOMAINS["reg_m"]
    assert 16 not in REPLAY_DOMAINS["reg_n"]
    assert all(not p.frag_prefetch and p.reg_m <= 8 for p in FAMILY.space())


def test_wide_block_launches_the_same_tile_in_128_threads() -> None:
    launch = FAMILY.launch(WIDE, SHAPE)
    assert not isinstance(launch, Rejection)
    assert launch.block == (8, 16, 1)
    assert launch.grid == (32, 32, 1)
    assert (WIDE.block_m, WIDE.block_n) == (128, 128)
    assert validate(WIDE) is None
    assert WIDE.min_blocks_per_sm == 2


def spill_class(params: GemmParams) -> str:
    """Which spill bound :func:`test_every_variant_compiles_without_spills` holds it to."""
    if (params.reg_m, params.reg_n) == (16, 8) or (params.reg_n == 16 and params.lane_quads):
        return "64 bytes"
    return "any" if params == UNSTRIDED else "none"


def test_every_variant_compiles_without_spills(compiler: Compiler, full: bool) -> None:
    """Every variant under ``--full`` (``make test-full``); else a stratified sample: each value
    of each parameter, each spill bound, and WIDE (8 of 24)."""
    points = variants()
    if not full:
        points = [p for _, p in stratified(
            [(str(i), p) for i, p in enumerate(points)], keep=[WIDE],
            strata=lambda _, p: [*param_values(p), ("spills", spill_class(p))])]
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda p: compile_candidate(compiler, FAMILY, p), points))
    for params, res in zip(points, results, strict=True):
        assert res.status == "ok", (params, res.error)
        assert res.spill_bytes is not None
        # 16x8 in 128 threads, and 8x16 with lane quads, are what ptxas packs into 255
        # registers with a few spilled bytes; UNSTRIDED spills (see its comment); the rest fit
        if spill_class(params) == "64 bytes":
            assert res.spill_bytes <= 64, (params.to_dict(), res.spill_bytes)
        elif spill_class(params) == "none":
            assert res.spill_bytes == 0, (params.to_dict(), res.spill_bytes)
    wide = results[points.index(WIDE)]
    assert wide.regs_per_thread is not None
    assert wide.regs_per_thread > 128


def test_the_source_unrolls_the_tile_and_keeps_one_barrier_per_tile() -> None:
    src = FAMILY.render(WIDE)
    assert "__launch_bounds__(THREADS, 2)" in src
    assert src.count("__syncthreads()") == 2  # the prologue's and the one per tile
    assert "load_frags(fa[(kk + 1) & 1]" in src


def test_the_expert_chains_the_pipeline_from_a_plain_kernel_after_the_tensor_cores() -> None:
    # from a plain register-blocked kernel the chains bring the double buffer and the rest
    # (tests/test_lane_quads.py checks where they start from the staged 8x8 kernel)
    plain = replace(SIMT, coalesced=False, interleave=False, stages=1, swizzle=1)
    rules = expert_rules(plain, simt_only(), SHAPE)
    chain = [r for r in rules if "change_block_config(8, 16)" in r]
    # (swizzle 1 here: the chains group the blocks by four row-tiles too)
    pipe = ("apply_coalesce(true) ; apply_fragment_interleave(true) ; apply_double_buffer(2) ; "
            "apply_fragment_prefetch(true) ; apply_lane_quads(true) ; apply_block_swizzle(4)")
    assert chain == [f"{pipe} ; change_block_config(8, 16)",
                     f"{pipe} ; apply_register_block(8, 16) ; change_block_config(8, 16)"]
    # where the tensor cores may be had and were not tried, they come first and alone
    everything = expert_rules(SIMT, None, SHAPE)
    assert "apply_tf32x3(true)" in everything
    assert not any("apply_fragment_prefetch" in r for r in everything)
