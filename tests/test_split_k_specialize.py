"""Split-K and shape specialization without a GPU: parameters and keys, the two transforms and
their rejections, launch configurations (grid z, workspace, epilogue), the K decomposition in
numpy, rendering, random walks, and every new transform x argument compiled with nvcc."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Hashable
from concurrent.futures import Future
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sampling import param_values, stratified

from agent.policies.base import key_of
from core.evaluation import CompileResult
from kernels.base import Action, Candidate, Rejection, params_key
from kernels.gemm_bias_relu import FAMILY, GemmParams
from kernels.gemm_bias_relu.launch import (
    REDUCE_MAX_BLOCKS,
    REDUCE_THREADS,
    REDUCE_VEC,
    SPLITK_REDUCE_NAME,
)
from kernels.gemm_bias_relu.params import DOMAINS
from kernels.gemm_bias_relu.shape import Shape
from kernels.gemm_bias_relu.space import REPLAY_DOMAINS, enumerate_space, in_replay_space
from kernels.gemm_bias_relu.validity import MAX_WORKSPACE_BYTES, check_at_shape, validate
from worker.compile import Compiler

#: the fields a point had before split-K and shape specialization existed
LEGACY_FIELDS = ("block_x", "block_y", "coalesced", "smem", "tile_k", "reg_m", "reg_n", "vec",
                 "unroll", "pad", "interleave", "stages", "swizzle", "tf32x3", "warp_m",
                 "warp_n")
SIMT = GemmParams(coalesced=True, smem=True, reg_m=8, reg_n=8, vec=4, pad=4)  # 128x128 tile
TC = GemmParams(tf32x3=True, block_x=64, block_y=2, warp_m=32, warp_n=64, tile_k=32,
                stages=2).canonical()
SKINNY = Shape(256, 256, 65536)


def at(params: GemmParams, shape: Shape | None = None) -> Candidate:
    return Candidate(params.canonical(), shape=shape)


def apply(node: Candidate, text: str) -> Candidate | Rejection:
    return FAMILY.apply(node, text)


# ---- parameters and keys ----------------------------------------------------------------------


def test_points_without_the_new_fields_keep_their_dict_and_key() -> None:
    """Keys are hashes of ``to_dict``: the late fields are absent at their defaults, so every
    point recorded before (replay dataset, campaigns in a database) keeps its key."""
    for params in (FAMILY.baseline, SIMT.canonical(), TC):
        legacy = {name: getattr(params, name) for name in LEGACY_FIELDS}
        assert params.to_dict() == legacy
        assert Candidate(params).key == params_key(legacy) == key_of(params)
    split = replace(SIMT, split_k=4)
    assert split.to_dict()["split_k"] == 4
    assert "shape_m" not in split.to_dict()
    assert Candidate(split).key == key_of(split) != Candidate(SIMT).key
    fixed = replace(SIMT, shape_m=8, shape_n=16, shape_k=32)
    assert {k: fixed.to_dict()[k] for k in ("shape_m", "shape_n", "shape_k")} == {
        "shape_m": 8, "shape_n": 16, "shape_k": 32}
    assert key_of(fixed) == Candidate(fixed).key != key_of(SIMT)
    for params in (split, fixed):
        assert GemmParams.from_dict(json.loads(json.dumps(params.to_dict()))) == params


def test_replay_and_seed_spaces_are_unchanged_by_the_new_fields() -> None:
    replay = list(enumerate_space("sm_90", REPLAY_DOMAINS))
    assert len(replay) == 2496  # the measured dataset's size
    assert all(p.split_k == 1 and p.fixed_shape is None for p in replay)
    assert not in_replay_space(replace(replay[0], shape_m=1, shape_n=1, shape_k=1))
    assert not in_replay_space(replace(replay[-1], split_k=2))


@pytest.mark.parametrize(("data", "named"), [
    ({"shape_m": -1}, "shape_m"), ({"shape_k": True}, "shape_k"), ({"shape_n": 2.5}, "shape_n"),
])
def test_shape_fields_from_json_must_be_non_negative_integers(data: dict[str, object],
                                                              named: str) -> None:
    with pytest.raises(ValueError, match=named):
        GemmParams.from_dict(data)


def test_a_partly_specialized_shape_is_rejected_with_its_numbers() -> None:
    rejection = validate(replace(SIMT, shape_m=4, shape_n=0, shape_k=8))
    assert isinstance(rejection, Rejection)
    assert rejection.reason == "shape_fields"
    assert rejection.figures == {"shape_m": 4, "shape_n": 0, "shape_k": 8}
    assert "4x0x8" in rejection.message


def test_split_k_is_meaningless_without_staged_tiles_and_canonicalizes_away() -> None:
    assert replace(FAMILY.baseline, split_k=8).canonical() == FAMILY.baseline
    off = apply(at(replace(SIMT, split_k=8)), "apply_shared_memory_load(false)")
    assert isinstance(off, Candidate)
    assert off.params.split_k == 1


# ---- apply_split_k --------------------------------------------------------------------------


def test_apply_split_k_needs_shared_memory_tiles() -> None:
    rejection = apply(at(FAMILY.baseline, SKINNY), "apply_split_k(4)")
    assert isinstance(rejection, Rejection)
    assert rejection.reason == "requires_shared_memory"
    assert "apply_shared_memory_load(true)" in rejection.message


@pytest.mark.parametrize("start", [SIMT, TC], ids=["simt", "tf32x3"])
@pytest.mark.parametrize("splits", DOMAINS["split_k"])
def test_apply_split_k_sets_the_field_on_both_paths(start: GemmParams, splits: int) -> None:
    result = apply(at(start, SKINNY), f"apply_split_k({splits})")
    if splits == 1:
        assert isinstance(result, Rejection)
        assert result.reason == "no_change"
        return
    assert isinstance(result, Candidate)
    assert result.params.split_k == splits
    assert result.shape == SKINNY  # handed on
    back = apply(result, "apply_split_k(1)")
    assert isinstance(back, Candidate)
    assert back.params == start.canonical()


def test_more_splits_than_k_tiles_is_rejected_naming_the_numbers() -> None:
    node = at(SIMT, Shape(64, 64, 100))  # tile 16: 7 K tiles
    ok = apply(node, "apply_split_k(4)")
    assert isinstance(ok, Candidate)
    too_many = apply(node, "apply_split_k(8)")
    assert isinstance(too_many, Rejection)
    assert too_many.reason == "split_k_exceeds_k_tiles"
    assert too_many.figures == {"split_k": 8, "k": 100, "tile_k": 16, "k_tiles": 7}
    assert "K=100" in too_many.message
    assert "7 K tile(s)" in too_many.message


def test_a_deeper_tile_that_leaves_a_split_without_k_is_rejected_too() -> None:
    node = apply(at(SIMT, Shape(64, 64, 128)), "apply_split_k(8)")  # 8 tiles of 16
    assert isinstance(node, Candidate)
    deeper = apply(node, "apply_tiling(32)")  # 4 tiles of 32 for 8 splits
    assert isinstance(deeper, Rejection)
    assert deeper.reason == "split_k_exceeds_k_tiles"
    assert deeper.figures["k_tiles"] == 4
    # without a known shape the point is valid: the launch gives fewer splits on short K
    free = apply(Candidate(node.params), "apply_tiling(32)")
    assert isinstance(free, Candidate)


def test_a_workspace_over_the_limit_is_rejected_at_the_shape_and_at_launch() -> None:
    shape = Shape(16384, 16384, 4096)
    need = 4 * 32 * shape.m * shape.n
    assert need > MAX_WORKSPACE_BYTES
    rejection = apply(at(SIMT, shape), "apply_split_k(32)")
    assert isinstance(rejection, Rejection)
    assert rejection.reason == "workspace_limit"
    assert rejection.figures == {"workspace_bytes": need, "max_workspace_bytes":
                                 MAX_WORKSPACE_BYTES, "split_k": 32, "m": shape.m, "n": shape.n}
    launch = FAMILY.launch(replace(SIMT, split_k=32), shape)
    assert isinstance(launch, Rejection)
    assert launch.reason == "workspace_limit"


# ---- launch configuration ---------------------------------------------------------------------


@pytest.mark.parametrize("shape_text", ["1x1x1", "17x33x65", "131x257x61", "1000x1002x999",
                                        "256x256x65536", "8192x1024x4096", "5x7x4097"])
@pytest.mark.parametrize("splits", [2, 4, 8, 16, 32])
@pytest.mark.parametrize("start", [SIMT, TC], ids=["simt", "tf32x3"])
def test_split_k_launch_grid_workspace_and_epilogue(start: GemmParams, splits: int,
                                                    shape_text: str) -> None:
    shape = Shape.parse(shape_text)
    params = replace(start, split_k=splits)
    plain = FAMILY.launch(start, shape)
    launch = FAMILY.launch(params, shape)
    assert not isinstance(plain, Rejection)
    assert not isinstance(launch, Rejection)
    k_tiles = math.ceil(shape.k / params.tile_k)
    z = min(splits, k_tiles)  # every split has at least one K tile, whatever the shape
    assert launch.grid == (plain.grid[0], plain.grid[1], z)
    assert launch.block == plain.block
    assert launch.dynamic_smem_bytes == plain.dynamic_smem_bytes
    assert launch.workspace_bytes == 4 * z * shape.m * shape.n
    epi = launch.epilogue
    assert epi is not None
    assert epi.kernel_name == SPLITK_REDUCE_NAME
    assert epi.args[-1] == z
    assert epi.block == (REDUCE_THREADS, 1, 1)
    blocks = epi.grid[0]
    assert epi.grid[1:] == (1, 1)
    assert 1 <= blocks <= REDUCE_MAX_BLOCKS
    # a grid-stride loop: the blocks cover M x N (in float4 steps) or run at the cap
    assert blocks * REDUCE_THREADS * REDUCE_VEC >= shape.m * shape.n or blocks == REDUCE_MAX_BLOCKS
    as_dict = json.loads(json.dumps(launch.to_dict()))
    assert as_dict["epilogue"] == {"kernel_name": SPLITK_REDUCE_NAME, "grid": list(epi.grid),
                                   "block": [REDUCE_THREADS, 1, 1],
                                   "args": ["workspace", "bias", "C", "M", "N", z]}
    assert as_dict["grid"][2] == z
    assert "epilogue" not in plain.to_dict()
    assert plain.workspace_bytes == 0


def test_check_at_shape_agrees_with_the_launch() -> None:
    params = replace(SIMT, split_k=16)
    assert check_at_shape(params, SKINNY) is None
    short = Shape(256, 256, 200)  # 13 tiles of 16
    assert isinstance(check_at_shape(params, short), Rejection)
    launch = FAMILY.launch(params, short)  # still launchable there: fewer splits
    assert not isinstance(launch, Rejection)
    assert launch.grid[2] == 13


# ---- the K decomposition, in numpy -----------------------------------------------------------


def split_ranges(k: int, tile_k: int, splits: int) -> list[tuple[int, int]]:
    """The K range of each split, as the templates compute it: split z of Z takes tiles
    [z*T/Z, (z+1)*T/Z) of the T = ceil(K / tile) tiles (integer division), cut at K."""
    tiles = -(-k // tile_k)
    return [((z * tiles // splits) * tile_k, min(k, ((z + 1) * tiles // splits) * tile_k))
            for z in range(splits)]


@settings(max_examples=300, deadline=None)
@given(k=st.integers(1, 5000), tile=st.sampled_from(DOMAINS["tile_k"]),
       splits=st.sampled_from(DOMAINS["split_k"]))
def test_the_splits_cover_k_once_each_with_at_least_one_tile(k: int, tile: int,
                                                             splits: int) -> None:
    launch = FAMILY.launch(replace(SIMT, tile_k=tile, split_k=splits), Shape(3, 5, k))
    assert not isinstance(launch, Rejection)
    z = launch.grid[2]
    ranges = split_ranges(k, tile, z)
    assert ranges[0][0] == 0
    assert ranges[-1][1] == k
    for (_, end), (begin, _) in zip(ranges, ranges[1:], strict=False):
        assert end == begin  # contiguous, no overlap
    for begin, end in ranges:
        assert end > begin  # every split has work
        assert begin % tile == 0  # tile-aligned starts (vector loads stay aligned)
    sizes = [-(-(e - b) // tile) for b, e in ranges]
    assert max(sizes) - min(sizes) <= 1  # balanced to one tile


@pytest.mark.parametrize(("m", "n", "k", "splits"), [
    (1, 1, 1, 1), (17, 33, 65, 4), (31, 9, 1000, 16), (64, 48, 4096, 32)])
def test_partial_sums_then_bias_and_relu_equal_the_full_product(m: int, n: int, k: int,
                                                                splits: int) -> None:
    """What the two kernels compute, in numpy: fp32 partial products per split, summed in
    split order, then bias and ReLU (after the sum: relu of a sum is not a sum of relus)."""
    rng = np.random.default_rng(m * n + k)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    ranges = split_ranges(k, 16, min(splits, -(-k // 16)))
    workspace = np.stack([a[:, lo:hi] @ b[lo:hi, :] for lo, hi in ranges]).astype(np.float32)
    total = workspace[0].copy()
    for part in workspace[1:]:
        total += part
    out = np.maximum(total + bias, np.float32(0))
    ref = np.maximum(a.astype(np.float64) @ b.astype(np.float64) + bias, 0.0)
    scale = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)) + np.abs(bias)
    assert np.max(np.abs(out - ref) / scale) < 1e-5
    if len(ranges) > 1:  # ReLU per split would be wrong wherever a partial sum is negative
        wrong = np.maximum(np.maximum(workspace, 0).sum(axis=0) + bias, 0)
        assert np.max(np.abs(wrong - ref) / scale) > 1e-2


# ---- specialize_shape -------------------------------------------------------------------------


def test_specialize_shape_needs_a_known_shape() -> None:
    rejection = apply(at(SIMT), "specialize_shape(true)")
    assert isinstance(rejection, Rejection)
    assert rejection.reason == "shape_unknown"
    assert rejection.figures == {"action": "specialize_shape(true)"}


@pytest.mark.parametrize("start", [FAMILY.baseline, SIMT, TC, replace(SIMT, split_k=8)],
                         ids=["direct", "simt", "tf32x3", "simt-split"])
def test_specialize_shape_compiles_the_shape_in_and_refuses_others(start: GemmParams) -> None:
    shape = Shape(1000, 1002, 999)
    node = apply(at(start, shape), "specialize_shape(true)")
    assert isinstance(node, Candidate)
    p = node.params
    assert p.fixed_shape == shape
    assert (p.shape_m, p.shape_n, p.shape_k) == (1000, 1002, 999)
    assert key_of(p) != key_of(start.canonical())  # identity records the specialization
    source = FAMILY.render(p)
    assert "constexpr int M = 1000, N = 1002, K = 999;" in source
    assert "if (M_arg != M || N_arg != N || K_arg != K) __trap();" in source
    assert "shape-specialized: M = 1000, N = 1002, K = 999" in source
    assert '"shape_k": 999' in source  # the params line of the source records it too
    assert FAMILY.source_hash(p) != FAMILY.source_hash(start)  # another binary in the cache
    launch = FAMILY.launch(p, shape)
    assert not isinstance(launch, Rejection)
    assert launch.to_dict() == FAMILY.launch(start, shape).to_dict()
    other = FAMILY.launch(p, Shape(1000, 1002, 1000))
    assert isinstance(other, Rejection)
    assert other.reason == "shape_mismatch"
    assert other.figures == {"compiled_shape": "1000x1002x999", "shape": "1000x1002x1000"}
    # structure moves keep the specialization; turning it off gives the generic point back
    moved = apply(node, "apply_block_swizzle(2)")
    assert isinstance(moved, Candidate)
    assert moved.params.fixed_shape == shape
    generic = apply(node, "specialize_shape(false)")
    assert isinstance(generic, Candidate)
    assert generic.params == start.canonical()
    assert apply(node, "specialize_shape(true)") == Rejection(
        "no_change", "specialize_shape(true) leaves the kernel unchanged",
        {"action": "specialize_shape(true)"})


def test_a_specialized_split_is_checked_against_its_own_shape() -> None:
    params = replace(SIMT, split_k=16, shape_m=64, shape_n=64, shape_k=100)  # 7 K tiles
    rejection = validate(params)
    assert isinstance(rejection, Rejection)
    assert rejection.reason == "split_k_exceeds_k_tiles"
    assert validate(replace(params, split_k=4)) is None


def test_a_specialization_for_another_shape_is_dropped_for_a_new_campaign() -> None:
    fixed = replace(SIMT, shape_m=64, shape_n=64, shape_k=64)
    assert FAMILY.for_shape(fixed, Shape(64, 64, 64)) == fixed
    assert FAMILY.for_shape(fixed, Shape(128, 64, 64)) == SIMT
    assert FAMILY.for_shape(SIMT, Shape(128, 64, 64)) == SIMT
    # a candidate at another shape: its moves are refused until it is re-specialized
    node = Candidate(fixed, shape=Shape(128, 64, 64))
    stale = apply(node, "apply_unroll(2)")
    assert isinstance(stale, Rejection)
    assert stale.reason == "shape_mismatch"
    again = apply(node, "specialize_shape(true)")
    assert isinstance(again, Candidate)
    assert again.params.fixed_shape == Shape(128, 64, 64)


def test_points_without_the_new_transforms_render_none_of_their_code() -> None:
    for params in (FAMILY.baseline, SIMT, TC):
        source = FAMILY.render(params)
        for marker in ("__trap", SPLITK_REDUCE_NAME, "__restrict__ W", "M_arg", "blockIdx.z"):
            assert marker not in source
    split = FAMILY.render(replace(SIMT, split_k=4))
    assert f'extern "C" __global__ void __launch_bounds__({REDUCE_THREADS})\n' \
           f"{SPLITK_REDUCE_NAME}(" in split
    assert re.search(r"int M, int N, int K, float\* __restrict__ W\)", split)


# ---- random walks --------------------------------------------------------------------------

WALK_SHAPES = [Shape(1, 1, 1), Shape(17, 33, 65), SKINNY, Shape(8192, 1024, 4096),
               Shape(512, 512, 16384)]


def any_action() -> st.SearchStrategy[Action]:
    specs = list(FAMILY.transforms)
    return st.sampled_from(specs).flatmap(lambda spec: st.sampled_from(list(spec.actions())))


@settings(max_examples=150, deadline=None)
@given(shape=st.sampled_from(WALK_SHAPES), actions=st.lists(any_action(), max_size=14))
def test_walks_with_a_shape_end_in_launchable_points_or_reasoned_rejections(
        shape: Shape, actions: list[Action]) -> None:
    node = Candidate(FAMILY.baseline, shape=shape)
    for action in actions:
        result = FAMILY.apply(node, action)
        if isinstance(result, Rejection):
            assert result.reason
            assert result.message
            json.dumps(result.to_dict())
            continue
        p = result.params
        assert p == p.canonical()
        assert validate(p) is None
        assert check_at_shape(p, shape) is None
        assert result.shape == shape
        launch = FAMILY.launch(p, shape)
        assert not isinstance(launch, Rejection), (result.lineage(), launch)
        assert launch.grid[2] == p.split_k  # at its own shape a split never runs short
        if p.fixed_shape is not None:
            assert p.fixed_shape == shape
            assert isinstance(FAMILY.launch(p, Shape(shape.m + 1, shape.n, shape.k)), Rejection)
        node = result


# ---- nvcc ----------------------------------------------------------------------------------


def test_every_new_transform_and_argument_compiles(compiler: Compiler, full: bool) -> None:
    """apply_split_k(every split) and specialize_shape(on/off) from a SIMT kernel, an
    interleaved double-buffered one with a swizzle, a narrow-vector one and a 3xTF32 one, at
    the skinny shape and at an awkward one; both kernels of a split module are in the cubin.
    Every point under ``--full`` (``make test-full``); else a stratified sample: each value of
    each parameter, each start, and the specialized 3xTF32 and split kernels."""
    starts = [SIMT, replace(SIMT, reg_n=4, interleave=True, stages=2, swizzle=4),
              replace(SIMT, coalesced=False, reg_m=2, reg_n=2, vec=2, pad=1), TC]
    points: dict[GemmParams, tuple[str, int]] = {}
    for shape in (SKINNY, Shape(131, 257, 61)):
        for number, start in enumerate(starts):
            node = at(start, shape)
            for spec in (FAMILY.transforms.get("apply_split_k"),
                         FAMILY.transforms.get("specialize_shape")):
                for action in spec.actions():
                    result = FAMILY.apply(node, action)
                    if isinstance(result, Rejection):
                        assert result.reason in ("no_change", "split_k_exceeds_k_tiles"), result
                        continue
                    label = f"{shape} {start} -> {action}"
                    both = FAMILY.apply(result, "specialize_shape(true)")
                    for params in (result.params, *(
                            [both.params] if isinstance(both, Candidate) else [])):
                        points.setdefault(params, (label, number))
    assert len(points) >= 40

    def strata(_: str, p: GemmParams) -> list[Hashable]:
        fixed = p.fixed_shape is not None
        return [*param_values(p), ("start", points[p][1]),
                ("specialized 3xTF32", fixed and p.tf32x3), ("specialized split", fixed
                                                              and p.split_k > 1)]

    chosen = [p for _, p in stratified([(label, p) for p, (label, _) in points.items()],
                                       strata=strata)]
    if full:
        chosen = list(points)
    jobs: dict[GemmParams, tuple[str, Future[CompileResult]]] = {
        params: (points[params][0], compiler.submit(FAMILY.render(params), entry=FAMILY.name,
                                                    dynamic_smem_bytes=params.smem_bytes))
        for params in chosen}
    failed = []
    for params, (label, future) in jobs.items():
        compiled = future.result()
        if compiled.status != "ok":
            failed.append(f"{label}: {compiled.status}: {compiled.error}")
            continue
        assert isinstance(compiled.regs_per_thread, int), label
        assert compiled.smem_bytes == params.smem_bytes, label  # the main kernel's figures
        if params.split_k > 1:
            assert SPLITK_REDUCE_NAME.encode() in compiled.cubin(), label
    assert failed == []
    splits = {p.split_k for p in jobs}
    assert splits == set(DOMAINS["split_k"])
    assert any(p.fixed_shape is not None and p.tf32x3 for p in jobs)
    assert any(p.fixed_shape is not None and p.split_k > 1 for p in jobs)
    assert {points[p][1] for p in jobs} == set(range(len(starts)))
