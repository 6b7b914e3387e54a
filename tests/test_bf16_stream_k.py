"""Stream-K on the bf16 kernels of the split workspace: the launch (grid, the workspace's
stream-K region after the blocks, the pass or reset before and the fix-up after), what
validity accepts, that the points without it keep their source, and the schedule as the
rendered formulas walk it at the headline shapes and the edges (every K tile of every tile
done once, every part summed by the fix-up in K order). The kernels themselves
run on the host in tests/test_gemm_emulated.py and on the GPU in tests/test_gpu_wgmma.py."""

from __future__ import annotations

from dataclasses import replace

import pytest
from bf16_points import BF3, BF3_CLUSTER, BF3_ON_DEMAND, BF3_ON_DEMAND_SK, BF3_PASS, BF3_STREAM_K
from stream_k_points import check_fix_up

from kernels.base import LaunchConfig, Rejection
from kernels.gemm_bias_relu import FAMILY, GemmParams
from kernels.gemm_bias_relu.launch import (
    SK_FIXUP_NAME,
    SK_HEADER_FLOATS,
    SPLIT_PASS_NAME,
    SPLIT_REGION_ALIGN,
    SPLIT_RESET_NAME,
    split_region_bytes,
)
from kernels.gemm_bias_relu.shape import Shape
from kernels.gemm_bias_relu.validity import split_pass_workspace_bytes, validate


def launch(params: GemmParams, shape: Shape, sm_count: int = 132) -> LaunchConfig:
    got = FAMILY.launch(params, shape, sm_count=sm_count)
    assert isinstance(got, LaunchConfig), got
    return got


@pytest.mark.parametrize(("params", "prologue"), [(BF3_STREAM_K, SPLIT_PASS_NAME),
                                                  (BF3_ON_DEMAND_SK, SPLIT_RESET_NAME)])
def test_launch_at_3000_5000_2000(params: GemmParams, prologue: str) -> None:
    # 24 x 40 = 960 tiles of 128 x 128 on 132 SMs (one CTA each): 7 whole waves, the 36 tiles
    # past them (27 % of a wave) shared by all 132 CTAs of the eighth row
    shape = Shape(3000, 5000, 2000)
    got = launch(params, shape)
    assert got.grid == (132, 8, 1)
    assert got.block == (128, 3, 1)
    assert got.tile == (128, 128)
    assert got.prologue is not None
    assert got.prologue.kernel_name == prologue
    assert got.epilogue is not None
    assert got.epilogue.kernel_name == SK_FIXUP_NAME
    assert got.epilogue.grid == (36, 1, 1)
    assert got.epilogue.args == ("workspace", "bias", "C", "M", "N", "K", 132)
    region = split_region_bytes(params, shape)
    assert region % SPLIT_REGION_ALIGN == 0
    assert 0 <= region - split_pass_workspace_bytes(params, shape) < SPLIT_REGION_ALIGN
    assert got.workspace_bytes == region + 4 * (SK_HEADER_FLOATS + 2 * 132 * 128 * 128)
    # without stream-K: the same kernel a tile a CTA, the workspace the blocks alone
    plain = launch(replace(params, stream_k=0), shape)
    assert plain.grid == (40, 24, 1)
    assert plain.epilogue is None
    assert plain.workspace_bytes == split_pass_workspace_bytes(params, shape)


def test_the_rest_takes_a_whole_wave_with_it_where_it_is_too_small() -> None:
    # 8192³: 4096 tiles are 31 waves and 4 tiles, too few to share in 8 parts a tile over 132
    # CTAs: the stream-K row takes the 31st wave with them (136 tiles); stream_k=2 always does
    assert launch(BF3_STREAM_K, Shape(8192, 8192, 8192)).grid == (132, 31, 1)
    four = launch(BF3_STREAM_K, Shape(4096, 4096, 4096))  # 1024 tiles: 7 waves and 100
    assert four.grid == (132, 8, 1)
    two = launch(replace(BF3_STREAM_K, stream_k=2), Shape(4096, 4096, 4096))
    assert two.grid == (132, 7, 1)
    assert two.epilogue is not None
    assert two.epilogue.grid == (232, 1, 1)
    # one tile: one CTA; another GPU's SM count sizes the grid
    assert launch(BF3_STREAM_K, Shape(1, 1, 1)).grid == (1, 1, 1)
    assert launch(BF3_STREAM_K, Shape(3000, 5000, 2000), sm_count=114).grid == (114, 9, 1)


@pytest.mark.parametrize(("params", "wrong"), [
    (replace(BF3, stream_k=1), {"split_pass": False}),
    (replace(BF3_CLUSTER, stream_k=1), {"pass_cluster": 2}),
])
def test_rejections_name_the_reason(params: GemmParams, wrong: dict[str, object]) -> None:
    got = validate(params.canonical())
    assert isinstance(got, Rejection), got
    assert got.reason == "stream_k_split_workspace", got
    assert {k: got.figures[k] for k in wrong} == wrong
    assert "split_pass" in got.message


def test_points_without_it_keep_their_source() -> None:
    for params in (BF3_PASS, BF3_ON_DEMAND):
        assert params.canonical().stream_k == 0
        assert "stream_k" not in params.to_dict()
        source = FAMILY.render(params)
        assert "stream-K" not in source
        assert SK_FIXUP_NAME not in source
    assert BF3_STREAM_K.canonical().stream_k == 1  # kept on the bf16 kernels
    assert SK_FIXUP_NAME in FAMILY.render(BF3_STREAM_K)
    assert validate(BF3_STREAM_K) is None
    assert validate(BF3_ON_DEMAND_SK) is None


def _walk(params: GemmParams, shape: Shape, sm_count: int = 132) -> None:
    """Walk the stream-K row as the kernel's roles and the fix-up compute it (the rendered
    formulas, checked to be there) and check that every tile's K tiles are done once: stored
    whole by one CTA, or as parts in slots the fix-up sums, each slot written once."""
    src = FAMILY.render(params)
    for formula in ("sk_pid = (int)(run_begin / ktiles)",
                    "sk_kt = (int)(run_begin - (long long)sk_pid * ktiles)",
                    "sk_len = (int)(run_end - run_begin)",
                    "for (int pid = sk_pid, kt0 = sk_kt, left = sk_len; left > 0; ++pid, kt0 = 0)",
                    "kt_end = min(ktiles, kt0 + left)",
                    "to = kt_end - kt_begin == ktiles ? -1 : pid == sk_pid ? 0 : 1",
                    "c_lo = (int)(((lo + 1) * ctas - 1) / work)",
                    "c_hi = (int)((hi * ctas - 1) / work)",
                    "slot = begin / k_tiles == blockIdx.x ? 0 : 1"):
        assert formula in src, formula
    got = launch(params, shape, sm_count)
    ctas, rows, _ = got.grid
    tiles = -(-shape.m // params.tc_block_m) * -(-shape.n // params.tc_block_n)
    k_tiles = params.k_tiles(shape.k)
    dp = (rows - 1) * ctas
    work = (tiles - dp) * k_tiles
    done: dict[int, int] = {t: 1 for t in range(dp)}
    slots: dict[tuple[int, int], tuple[int, int, int]] = {}  # (cta, slot) -> (tile, k0, k1)
    for c in range(ctas):
        run_begin = dp * k_tiles + c * work // ctas
        run_end = dp * k_tiles + (c + 1) * work // ctas
        first = run_begin // k_tiles
        pid, kt0, left = first, run_begin - first * k_tiles, run_end - run_begin
        assert left < 2**31
        while left > 0:
            kt_end = min(k_tiles, kt0 + left)
            left -= kt_end - kt0
            if kt_end - kt0 == k_tiles:
                done[pid] = done.get(pid, 0) + 1
            else:
                to = 0 if pid == first else 1
                assert (c, to) not in slots
                slots[(c, to)] = (pid, kt0, kt_end)
            pid, kt0 = pid + 1, 0
    check_fix_up(tiles, dp, ctas, k_tiles, done, slots)


@pytest.mark.parametrize("shape", [Shape(4096, 4096, 4096), Shape(8192, 8192, 8192),
                                   Shape(2048, 2048, 8192), Shape(3000, 5000, 2000),
                                   Shape(1, 1, 1), Shape(128, 128, 64), Shape(130, 70, 201),
                                   Shape(1000, 1002, 999), Shape(2304, 4224, 513),
                                   Shape(64, 128, 1 << 20), Shape(16384, 16384, 64)])
@pytest.mark.parametrize("params", [BF3_STREAM_K, replace(BF3_STREAM_K, stream_k=2),
                                    replace(BF3_ON_DEMAND_SK, block_y=1, wgmma=64)],
                         ids=["rest", "rest+wave", "on demand 64x64"])
def test_every_k_tile_of_every_tile_is_done_once(params: GemmParams, shape: Shape) -> None:
    _walk(params.canonical(), shape)
