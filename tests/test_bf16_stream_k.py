"""Stream-K on the bf16 kernels of the split workspace: the launch (grid, the workspace's
stream-K region after the blocks, the pass or reset before and the fix-up after), what
validity accepts, and that the points without it keep their source. The kernels themselves
run on the host in tests/test_gemm_emulated.py and on the GPU in tests/test_gpu_wgmma.py."""

from __future__ import annotations

from dataclasses import replace

import pytest
from bf16_points import BF3, BF3_CLUSTER, BF3_ON_DEMAND, BF3_ON_DEMAND_SK, BF3_PASS, BF3_STREAM_K

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
