"""Lane quads (``apply_lane_quads``) without a GPU: the transform and its rules, the thread
mapping the kernel source computes (evaluated here from the rendered C), what stays as it was,
and the expert's chains that end a SIMT-only campaign."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from async_copy_points import SIMT
from expert_rules import expert_rules, simt_only
from frag_prefetch_points import QUADS, WIDE, quad_variants

from kernels.base import Candidate, Rejection
from kernels.gemm_bias_relu import FAMILY, GemmParams
from kernels.gemm_bias_relu.shape import Shape
from kernels.gemm_bias_relu.space import REPLAY_DOMAINS, SEED_DOMAINS
from kernels.gemm_bias_relu.validity import validate

SHAPE = Shape(4096, 4096, 4096)


def test_transform_turns_it_on() -> None:
    got = FAMILY.apply(Candidate(replace(QUADS, lane_quads=False), shape=SHAPE),
                       "apply_lane_quads(true)")
    assert not isinstance(got, Rejection), got
    assert got.params == QUADS
    assert QUADS.to_dict()["lane_quads"] is True


@pytest.mark.parametrize(("start", "reason"), [
    (FAMILY.baseline, "requires_shared_memory"),
    (replace(SIMT, tf32x3=True).canonical(), "tensor_core_kernel"),
    # one thread along M: no 2x2 quads to form
    (replace(SIMT, block_x=64, block_y=1, reg_m=4, reg_n=4), "lane_quads_shape"),
])
def test_rejections_name_the_reason(start: GemmParams, reason: str) -> None:
    got = FAMILY.apply(Candidate(start, shape=SHAPE), "apply_lane_quads(true)")
    assert isinstance(got, Rejection), got
    assert got.reason == reason, got


def test_old_points_keep_their_keys_source_and_spaces() -> None:
    assert "lane_quads" not in SIMT.to_dict()
    assert "lane quads" not in FAMILY.render(SIMT)
    assert "lane quads" not in FAMILY.render(WIDE)
    assert SEED_DOMAINS["lane_quads"] == (False,)
    assert REPLAY_DOMAINS["lane_quads"] == (False,)
    assert not any(p.lane_quads for p in FAMILY.space())
    # off the shared-memory path the field means nothing and is dropped
    assert not replace(FAMILY.baseline, lane_quads=True).canonical().lane_quads


def _mapping(params: GemmParams) -> list[tuple[int, int]]:
    """(tm, tn) of every thread, from the C expressions of the rendered kernel."""
    src = FAMILY.render(params)
    exprs = {name: re.search(rf"const int {name} = (.+);", src) for name in ("tn", "tm")}
    assert all(exprs.values()), "the source names tn and tm"
    py = {k: m.group(1).replace("/", "//") for k, m in exprs.items() if m is not None}
    out = []
    for tq in range(params.threads):
        out.append((eval(py["tm"], {"tq": tq}), eval(py["tn"], {"tq": tq})))  # noqa: S307
    return out


@pytest.mark.parametrize("params", [p for p in quad_variants() if p.threads % 32 == 0])
def test_quads_share_fragments_and_keep_each_warps_footprint(params: GemmParams) -> None:
    coords = _mapping(params)
    tm_n, tn_n = params.threads_m, params.threads_n
    # a permutation of the block's threads over its (row, column) fragments
    assert sorted(coords) == [(m, n) for m in range(tm_n) for n in range(tn_n)]
    for t in range(params.threads):
        assert coords[t][0] == coords[t ^ 1][0]  # lanes t, t^1: the same A fragment
        assert coords[t][1] == coords[t ^ 2][1]  # lanes t, t^2: the same B fragment
    # a warp spans the rows and columns it spanned in the row-major layout (C's stores and the
    # L1 sectors they touch are unchanged)
    plain = [(t // tn_n, t % tn_n) for t in range(params.threads)]
    for w in range(0, params.threads, 32):
        for axis in (0, 1):
            assert ({c[axis] for c in coords[w:w + 32]}
                    == {c[axis] for c in plain[w:w + 32]})


def test_quads_8x8_launch_64x128_tiles_three_ctas_an_sm() -> None:
    launch = FAMILY.launch(QUADS, SHAPE)
    assert not isinstance(launch, Rejection)
    assert launch.block == (16, 8, 1)
    assert (QUADS.block_m, QUADS.block_n) == (64, 128)
    assert launch.grid == (32, 64, 1)
    assert validate(QUADS) is None
    assert QUADS.min_blocks_per_sm == 3
    assert "__launch_bounds__(THREADS, 3)" in FAMILY.render(QUADS)


def test_the_expert_offers_quads_and_the_128_thread_blocks() -> None:
    rules = expert_rules(SIMT, simt_only(), SHAPE)
    pipe = "apply_fragment_prefetch(true) ; apply_lane_quads(true)"
    assert rules[:4] == [pipe, f"{pipe} ; change_block_config(16, 8)",
                         f"{pipe} ; change_block_config(8, 16)",
                         f"{pipe} ; apply_register_block(8, 16) ; change_block_config(8, 16)"]
    # at the 64x128 kernel the other two blocks are left to offer (after stream-K, whose rules
    # tests/test_stream_k.py checks), and nothing of the pipeline
    at_end = [r for r in expert_rules(QUADS, simt_only(), SHAPE)
              if not r.startswith("apply_stream_k")]
    assert at_end[:2] == ["change_block_config(8, 16)",
                          "apply_register_block(8, 16) ; change_block_config(8, 16)"]
    assert not any("apply_lane_quads" in r or "prefetch" in r for r in at_end)
