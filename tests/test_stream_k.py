"""Stream-K scheduling (``apply_stream_k``) without a GPU: the transform and its rules, the launch
geometry, the schedule the kernel and its fix-up compute (their index arithmetic, read from the
rendered CUDA and evaluated here over many shapes: every K iteration of every tile done once,
each split tile's parts found where they were stored), the real nvcc build, the expert's
proposals and what stays as it was."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from expert_rules import expert_rules, simt_only
from frag_prefetch_points import PREFETCH, QUADS
from stream_k_points import SK_SHAPES, STREAM_K, STREAM_K2, check_fix_up, variants

from kernels.base import Candidate, Rejection
from kernels.gemm_bias_relu import FAMILY, GemmParams
from kernels.gemm_bias_relu.checks import tiled_shape
from kernels.gemm_bias_relu.launch import (
    SK_FIXUP_NAME,
    SK_HEADER_FLOATS,
    SK_MAX_PARTS,
    stream_k_slots,
)
from kernels.gemm_bias_relu.shape import Shape
from kernels.gemm_bias_relu.space import REPLAY_DOMAINS, SEED_DOMAINS
from kernels.gemm_bias_relu.validity import validate
from worker.compile import Compiler

SHAPE = Shape(4096, 4096, 4096)


def test_transform_turns_it_on_and_off() -> None:
    got = FAMILY.apply(Candidate(QUADS, shape=SHAPE), "apply_stream_k(1)")
    assert not isinstance(got, Rejection), got
    assert got.params == STREAM_K
    assert STREAM_K.to_dict()["stream_k"] == 1
    back = FAMILY.apply(got, "apply_stream_k(0)")
    assert not isinstance(back, Rejection)
    assert back.params == QUADS
    assert "stream_k" not in QUADS.to_dict()  # key-omitted at 0: old points keep their keys


@pytest.mark.parametrize(("start", "reason"), [
    (FAMILY.baseline, "requires_shared_memory"),
    (replace(QUADS, frag_prefetch=False), "stream_k_pipeline"),
    (replace(QUADS, split_k=4), "stream_k_pipeline"),
    (replace(QUADS, tf32x3=True).canonical(), "tensor_core_kernel"),
    (replace(PREFETCH, reg_n=2, interleave=False), "stream_k_fragment"),
])
def test_rejections_name_the_reason(start: GemmParams, reason: str) -> None:
    got = FAMILY.apply(Candidate(start, shape=SHAPE), "apply_stream_k(1)")
    assert isinstance(got, Rejection), got
    assert got.reason == reason, got


def test_old_points_keep_their_spaces() -> None:
    assert SEED_DOMAINS["stream_k"] == (0,)
    assert REPLAY_DOMAINS["stream_k"] == (0,)
    assert "stream-K" not in FAMILY.render(QUADS)
    assert SK_FIXUP_NAME in FAMILY.render(STREAM_K)
    # the geometry is the launch's: both choices are the same kernel (but for the params line)
    def body(params: GemmParams) -> str:
        return re.sub(r"^// params: .*$", "", FAMILY.render(params), flags=re.M)

    assert body(STREAM_K) == body(STREAM_K2)


def test_launch_geometry_at_4096_cubed() -> None:
    # 2048 tiles of 64x128 on 132 SMs x 3 CTAs = 396 slots: 5 whole waves and 68 tiles
    assert stream_k_slots(STREAM_K, 132) == 396
    one = FAMILY.launch(STREAM_K, SHAPE)
    assert not isinstance(one, Rejection)
    assert one.grid == (396, 6, 1)
    assert one.block == (16, 8, 1)
    assert one.epilogue is not None
    assert one.epilogue.kernel_name == SK_FIXUP_NAME
    assert one.epilogue.grid == (68, 1, 1)
    assert one.epilogue.args[-1] == 396
    assert one.workspace_bytes == 4 * (SK_HEADER_FLOATS + 2 * 396 * 64 * 128)
    assert one.tile == (64, 128)
    two = FAMILY.launch(STREAM_K2, SHAPE)
    assert not isinstance(two, Rejection)
    assert two.grid == (396, 5, 1)
    assert two.epilogue is not None
    assert two.epilogue.grid == (396 + 68, 1, 1)
    # another GPU's SM count sizes the grid (the evaluator passes the GPU's own)
    other = FAMILY.launch(STREAM_K, SHAPE, sm_count=114)
    assert not isinstance(other, Rejection)
    assert other.grid == (342, 6, 1)


def test_launch_geometry_at_the_edges() -> None:
    def geometry(shape: Shape) -> tuple[tuple[int, int, int], int]:
        launch = FAMILY.launch(STREAM_K, shape)
        assert not isinstance(launch, Rejection)
        assert launch.epilogue is not None
        return launch.grid, launch.epilogue.grid[0]

    # one tile: one CTA (a tile in at most SK_MAX_PARTS parts, never more CTAs than iterations)
    assert geometry(Shape(1, 1, 1)) == ((1, 1, 1), 1)
    assert geometry(Shape(64, 128, 4096)) == ((SK_MAX_PARTS, 1, 1), 1)
    # exactly three waves: the stream-K row takes no tile, the fix-up one idle CTA
    assert geometry(Shape(2304, 4224, 513)) == ((396, 4, 1), 1)
    # 8 tiles past two waves are too few to share in 8 parts a tile: the last wave joins them
    assert geometry(Shape(1600, 4096, 16)) == ((396, 2, 1), 404)


def _schedule(params: GemmParams, shape: Shape) -> None:
    """Walk the schedule as the kernel and the fix-up compute it (the formulas of the rendered
    source, checked to be there) and check it covers every tile's K iterations once."""
    src = FAMILY.render(params)
    for formula in (
            "it = run_begin; it < run_end;",
            "run_begin = dp * k_tiles + (long long)blockIdx.x * work / gridDim.x",
            "run_end = dp * k_tiles + (long long)(blockIdx.x + 1) * work / gridDim.x",
            "kt_end = (int)min((long long)k_tiles, kt_begin + (run_end - it))",
            "pid == (int)(run_begin / k_tiles) ? 0 : 1",
            "c_lo = (int)(((lo + 1) * ctas - 1) / work)",
            "c_hi = (int)((hi * ctas - 1) / work)",
            "slot = begin / k_tiles == blockIdx.x ? 0 : 1"):
        assert formula in src, formula
    launch = FAMILY.launch(params, shape)
    assert not isinstance(launch, Rejection)
    assert launch.epilogue is not None
    ctas, rows, _ = launch.grid
    tiles = -(-shape.m // params.block_m) * -(-shape.n // params.block_n)
    k_tiles = params.k_tiles(shape.k)
    dp = (rows - 1) * ctas
    work = (tiles - dp) * k_tiles
    assert launch.epilogue.grid[0] == max(1, tiles - dp)
    assert launch.epilogue.args[-1] == ctas
    done = {t: 1 for t in range(dp)}  # data-parallel rows: whole tiles, stored by their CTA
    slots: dict[tuple[int, int], tuple[int, int, int]] = {}  # (cta, slot) -> (tile, k0, k1)
    for c in range(ctas):
        run_begin, run_end = dp * k_tiles + c * work // ctas, dp * k_tiles + (c + 1) * work // ctas
        it = run_begin
        while it < run_end:
            pid = it // k_tiles
            kt_begin = it - pid * k_tiles
            kt_end = min(k_tiles, kt_begin + (run_end - it))
            it += kt_end - kt_begin
            if kt_end - kt_begin == k_tiles:
                done[pid] = done.get(pid, 0) + 1
                continue
            part = 0 if pid == run_begin // k_tiles else 1
            assert (c, part) not in slots, (c, part)  # two parts of one run, never one slot
            slots[(c, part)] = (pid, kt_begin, kt_end)
    check_fix_up(tiles, dp, ctas, k_tiles, done, slots, max_parts=max(SK_MAX_PARTS, 2))


@pytest.mark.parametrize("shape", [*SK_SHAPES, Shape(8192, 8192, 8192), Shape(2048, 2048, 2048),
                                   Shape(3840, 4224, 4096), Shape(64, 128, 4096),
                                   Shape(4097, 129, 16 * 3 + 1), Shape(65, 4096, 700)])
@pytest.mark.parametrize("params", [STREAM_K, STREAM_K2], ids=["rest", "rest+wave"])
def test_every_k_iteration_of_every_tile_is_done_once(params: GemmParams, shape: Shape) -> None:
    _schedule(params, shape)


def test_the_kernel_and_its_fix_up_build_without_spills(compiler: Compiler) -> None:
    for params in variants()[:3]:
        result = compiler.compile(FAMILY.render(params), entry=FAMILY.name,
                                  dynamic_smem_bytes=params.smem_bytes)
        assert result.status == "ok", result.error
        assert result.spill_bytes == 0, (params, result.spill_bytes)
        assert re.search(rf"\b{SK_FIXUP_NAME}\b", FAMILY.render(params))


def test_the_sanitizer_reads_the_tile_from_the_launch() -> None:
    # the stream-K grid counts CTAs, not tiles: the gate's tiled shape still has two tiles and a
    # tail along M and N
    shape = tiled_shape(FAMILY, STREAM_K)
    assert shape is not None
    assert (shape.m, shape.n) == (2 * 64 + 3, 2 * 128 + 4)


def test_the_expert_proposes_it_where_the_last_wave_runs_part_empty() -> None:
    # 162 registers: three CTAs an SM, 396 slots; 2048 tiles are 5.17 waves, the last 17 % full
    rules = expert_rules(QUADS, simt_only(), SHAPE, regs=162)
    assert rules[:2] == ["apply_stream_k(1)", "apply_stream_k(2)"]
    # 8192^3: 20.69 waves, the last 69 % full
    assert expert_rules(QUADS, simt_only(), Shape(8192, 8192, 8192), regs=162)[:2] == [
        "apply_stream_k(1)", "apply_stream_k(2)"]
    # exactly five waves (1980 tiles): nothing to even out
    assert not any(r.startswith("apply_stream_k")
                   for r in expert_rules(QUADS, simt_only(), Shape(3840, 4224, 4096), regs=162))
    # on: neither stream-K again nor split-K
    on = expert_rules(STREAM_K, simt_only(), SHAPE, regs=162)
    assert not any(r.startswith(("apply_stream_k", "apply_split_k")) for r in on)
    # without the register pipeline there is no stream-K to offer
    assert not any(r.startswith("apply_stream_k")
                   for r in expert_rules(replace(QUADS, frag_prefetch=False), simt_only(), SHAPE,
                                         regs=162))


def test_every_variant_is_valid() -> None:
    for params in variants():
        assert validate(params) is None, params
