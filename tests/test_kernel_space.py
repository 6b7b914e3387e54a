"""The gemm_bias_relu space and action space, without nvcc: parsing, domains, rejections,
rendering, launch shapes, enumeration."""

from __future__ import annotations

import hashlib
import itertools
import json
import random
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernels import get_family
from kernels.base import Action, Candidate, Rejection, UnknownAction
from kernels.gemm_bias_relu import DOMAINS, FAMILY, GemmParams
from kernels.gemm_bias_relu.arch import MAX_GRID_Y, MAX_SMEM_BY_ARCH
from kernels.gemm_bias_relu.shape import Shape
from kernels.gemm_bias_relu.space import SEED_DOMAINS, enumerate_space, sample_space
from kernels.gemm_bias_relu.validity import validate

ROOT = Candidate(FAMILY.baseline)
SEED_NAMES = (
    "apply_tiling", "apply_vectorize", "apply_register_block", "apply_unroll",
    "change_block_config", "apply_shared_memory_load", "avoid_bank_conflict", "revert_last",
)
#: The documented argument names and domains of every transform.
DOCUMENTED_DOMAINS: dict[str, list[tuple[str, tuple[int | bool, ...]]]] = {
    "apply_tiling": [("tile_size", (8, 16, 32, 64))],
    "apply_vectorize": [("vec_width", (1, 2, 4))],
    "apply_register_block": [("m", (1, 2, 4, 8, 16)), ("n", (1, 2, 4, 8, 16))],
    "apply_unroll": [("factor", (1, 2, 4, 8))],
    "change_block_config": [("x", (8, 16, 32, 64, 128, 256)), ("y", (1, 2, 4, 8, 16, 32))],
    "apply_shared_memory_load": [("on", (False, True))],
    "avoid_bank_conflict": [("pad", (0, 1, 2, 4))],
    "revert_last": [],
    "apply_coalesce": [("on", (False, True))],
    "apply_fragment_interleave": [("on", (False, True))],
    "apply_double_buffer": [("stages", (1, 2))],
    "apply_block_swizzle": [("group", (1, 2, 4, 8))],
    "apply_tf32x3": [("on", (False, True))],
    "apply_warp_tiling": [("wm", (32, 64)), ("wn", (32, 64))],
    "apply_split_k": [("splits", (1, 2, 4, 8, 16, 32))],
    "specialize_shape": [("on", (False, True))],
    "apply_wgmma": [("n", (0, 64, 128))],
    "apply_global_fragments": [("on", (False, True))],
    "apply_mma_pipeline": [("window", (1, 2, 4))],
    "apply_warp_specialization": [("producers", (0, 1, 2))],
    "apply_async_copy": [("on", (False, True))],
    "apply_fragment_prefetch": [("on", (False, True))],
    "apply_lane_quads": [("on", (False, True))],
    "apply_stream_k": [("waves", (0, 1, 2))],
    "apply_precision_split": [("scheme", (0, 3, 6))],
    "apply_split_pass": [("on", (False, True))],
    "apply_pass_cluster": [("ctas", (1, 2))],
}


def smem_root() -> Candidate:
    result = FAMILY.apply(ROOT, "apply_shared_memory_load(true)")
    assert isinstance(result, Candidate)
    return result


def chain(*texts: str) -> Candidate | Rejection:
    return FAMILY.apply_chain([Action.parse(t) for t in texts])


def any_action() -> st.SearchStrategy[Action]:
    """A transform uniformly, then one of its concrete actions (from the registry's domains)."""
    specs = list(FAMILY.transforms)
    return st.sampled_from(specs).flatmap(lambda spec: st.sampled_from(list(spec.actions())))


@pytest.fixture(scope="module")
def space() -> list[GemmParams]:
    """The whole valid space for sm_90 (~160k points, a few seconds: built once)."""
    return FAMILY.space()


@pytest.fixture(scope="module")
def space_set(space: list[GemmParams]) -> set[GemmParams]:
    return set(space)


# ---- Action parsing ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("apply_tiling(16)", Action("apply_tiling", (16,))),
        ("  apply_register_block ( 4 ,8 )  ", Action("apply_register_block", (4, 8))),
        ("apply_tiling(+32)", Action("apply_tiling", (32,))),
        ("apply_shared_memory_load(true)", Action("apply_shared_memory_load", (True,))),
        ("apply_shared_memory_load(ON)", Action("apply_shared_memory_load", (True,))),
        ("apply_shared_memory_load(yes)", Action("apply_shared_memory_load", (True,))),
        ("apply_coalesce(False)", Action("apply_coalesce", (False,))),
        ("apply_coalesce(off)", Action("apply_coalesce", (False,))),
        ("apply_coalesce(no)", Action("apply_coalesce", (False,))),
        ("revert_last()", Action("revert_last")),
        ("revert_last( )", Action("revert_last")),
    ],
)
def test_action_parse_good(text: str, expected: Action) -> None:
    parsed = Action.parse(text)
    assert parsed == expected
    # True == 1 in Python: the parsed types must be exact, not just equal
    assert [type(a) for a in parsed.args] == [type(a) for a in expected.args]


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("apply_tiling", "apply_tiling"),
        ("apply_tiling(16", "apply_tiling(16"),
        ("apply tiling(16)", "apply tiling(16)"),
        ("16(3)", "16(3)"),
        ("", "expected name(arg, ...)"),
        ("apply_tiling(1.5)", "'1.5'"),
        ("apply_tiling(sixteen)", "'sixteen'"),
        ("apply_tiling(16,)", "''"),
        ("apply_tiling((16))", "'(16)'"),
        ("apply_register_block(4 8)", "'4 8'"),
    ],
)
def test_action_parse_bad_names_the_problem(text: str, named: str) -> None:
    with pytest.raises(ValueError, match="action") as info:
        Action.parse(text)
    assert named in str(info.value)


def test_parse_many_splits_on_semicolons_and_newlines() -> None:
    text = "apply_coalesce(true); apply_shared_memory_load(on)\n\napply_tiling(32);"
    assert Action.parse_many(text) == [
        Action("apply_coalesce", (True,)),
        Action("apply_shared_memory_load", (True,)),
        Action("apply_tiling", (32,)),
    ]
    assert Action.parse_many("  ;\n ") == []


def test_parse_many_names_the_bad_element() -> None:
    with pytest.raises(ValueError, match=r"apply_vectorize\(four\)"):
        Action.parse_many("apply_tiling(16);apply_vectorize(four);apply_unroll(2)")


def test_every_action_round_trips_through_text() -> None:
    count = 0
    for spec in FAMILY.transforms:
        for action in spec.actions():
            again = Action.parse(str(action))
            assert again == action
            assert [type(a) for a in again.args] == [type(a) for a in action.args]
            count += 1
    assert count == sum(
        len(list(itertools.product(*(c for _, c in args)))) for args in DOCUMENTED_DOMAINS.values()
    )


# ---- the registry ----------------------------------------------------------------------------


def test_registry_holds_the_seed_transforms_and_coalesce_with_documented_domains() -> None:
    registry = FAMILY.transforms
    assert registry.names()[: len(SEED_NAMES)] == list(SEED_NAMES)
    assert set(registry.names()) == set(DOCUMENTED_DOMAINS)
    for name, args in DOCUMENTED_DOMAINS.items():
        spec = registry.get(name)
        assert [(a.name, a.choices) for a in spec.args] == args, name
        for arg, (_, choices) in zip(spec.args, args, strict=True):
            assert arg.kind == ("bool" if isinstance(choices[0], bool) else "int")
            assert arg.doc
        assert spec.doc
        assert spec.origin == ("seed" if name in SEED_NAMES else "expert")
        assert name in registry
    assert "apply_magic" not in registry


def test_registry_json_form_lists_choices() -> None:
    specs = json.loads(json.dumps([spec.to_dict() for spec in FAMILY.transforms]))
    by_name = {s["name"]: s for s in specs}
    assert by_name["change_block_config"]["args"][1]["choices"] == [1, 2, 4, 8, 16, 32]
    assert by_name["apply_shared_memory_load"]["args"][0]["type"] == "bool"
    assert by_name["revert_last"]["args"] == []


def test_unknown_action_is_refused_naming_it_and_the_known_ones() -> None:
    with pytest.raises(UnknownAction, match="apply_magic") as info:
        FAMILY.apply(ROOT, "apply_magic(3)")
    assert "apply_tiling" in str(info.value)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("apply_tiling(7)", "tile_size=7"),
        ("apply_tiling(128)", "tile_size=128"),
        ("apply_vectorize(3)", "vec_width=3"),
        ("change_block_config(16, 3)", "y=3"),
        ("avoid_bank_conflict(-1)", "pad=-1"),
        # bool and int are not interchangeable even where True == 1
        ("apply_vectorize(true)", "vec_width=True"),
        ("apply_coalesce(1)", "on=1"),
        ("apply_shared_memory_load(0)", "on=0"),
    ],
)
def test_out_of_domain_argument_is_refused_naming_it(text: str, named: str) -> None:
    with pytest.raises(UnknownAction, match="outside its domain") as info:
        FAMILY.transforms.check(Action.parse(text))
    assert named in str(info.value)
    with pytest.raises(UnknownAction):
        FAMILY.apply(ROOT, text)


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("apply_register_block(4)", "takes 2 argument(s)"),
        ("apply_tiling()", "takes 1 argument(s)"),
        ("apply_tiling(16, 32)", "got 2"),
        ("revert_last(1)", "takes 0 argument(s)"),
    ],
)
def test_wrong_arity_is_refused_naming_it(text: str, named: str) -> None:
    with pytest.raises(UnknownAction) as info:
        FAMILY.transforms.check(Action.parse(text))
    assert named in str(info.value)


# ---- transform semantics ---------------------------------------------------------------------


@pytest.mark.parametrize("name", ["apply_tiling", "avoid_bank_conflict"])
def test_smem_transforms_require_shared_memory(name: str) -> None:
    for action in FAMILY.transforms.get(name).actions():
        result = FAMILY.apply(ROOT, action)
        assert isinstance(result, Rejection), action
        assert result.reason == "requires_shared_memory"
        assert "apply_shared_memory_load(true)" in result.message
    # with staging on, the same transforms work
    assert isinstance(FAMILY.apply(smem_root(), f"{name}(8)" if name == "apply_tiling"
                                   else f"{name}(1)"), Candidate)


@pytest.mark.parametrize(
    ("start", "text"),
    [
        ("root", "apply_vectorize(1)"),
        ("root", "apply_register_block(1, 1)"),
        ("root", "apply_unroll(1)"),
        ("root", "change_block_config(16, 16)"),
        ("root", "apply_shared_memory_load(false)"),
        ("root", "apply_coalesce(false)"),
        ("smem", "apply_tiling(16)"),
        ("smem", "avoid_bank_conflict(0)"),
        ("smem", "apply_shared_memory_load(true)"),
    ],
)
def test_noop_is_no_change(start: str, text: str) -> None:
    node = ROOT if start == "root" else smem_root()
    result = FAMILY.apply(node, text)
    assert isinstance(result, Rejection)
    assert result.reason == "no_change"
    assert str(Action.parse(text)) in result.message


def test_transforms_set_their_field() -> None:
    cases: dict[str, dict[str, Any]] = {
        "apply_vectorize(4)": {"vec": 4},
        "apply_register_block(2, 8)": {"reg_m": 2, "reg_n": 8},
        "apply_unroll(8)": {"unroll": 8},
        "change_block_config(128, 2)": {"block_x": 128, "block_y": 2},
        "apply_shared_memory_load(true)": {"smem": True},
        "apply_coalesce(true)": {"coalesced": True},
    }
    for text, changes in cases.items():
        result = FAMILY.apply(ROOT, text)
        assert isinstance(result, Candidate), text
        assert result.params == replace(FAMILY.baseline, **changes), text
        assert result.parent is ROOT
        assert result.lineage() == [str(Action.parse(text))]
    smem = smem_root()
    tiled = FAMILY.apply(smem, "apply_tiling(64)")
    padded = FAMILY.apply(smem, "avoid_bank_conflict(4)")
    assert isinstance(tiled, Candidate)
    assert tiled.params.tile_k == 64
    assert isinstance(padded, Candidate)
    assert padded.params.pad == 4


def test_turning_smem_off_resets_smem_only_fields() -> None:
    node = chain("apply_shared_memory_load(true)", "apply_tiling(64)", "avoid_bank_conflict(2)",
                 "apply_shared_memory_load(false)")
    assert isinstance(node, Candidate)
    assert node.params == FAMILY.baseline


def test_revert_last_returns_the_parent() -> None:
    first = FAMILY.apply(ROOT, "apply_coalesce(true)")
    assert isinstance(first, Candidate)
    second = FAMILY.apply(first, "apply_unroll(4)")
    assert isinstance(second, Candidate)
    back = FAMILY.apply(second, "revert_last()")
    assert isinstance(back, Candidate)
    assert back.params == first.params
    assert back.parent is ROOT
    back_again = FAMILY.apply(back, "revert_last()")
    assert isinstance(back_again, Candidate)
    assert back_again.params == FAMILY.baseline


def test_revert_last_on_root_is_no_parent() -> None:
    result = FAMILY.apply(ROOT, "revert_last()")
    assert isinstance(result, Rejection)
    assert result.reason == "no_parent"
    assert result.message


def test_smem_over_limit_is_rejected_with_numbers() -> None:
    result = chain("apply_shared_memory_load(true)", "change_block_config(256, 4)",
                   "apply_register_block(8, 1)", "apply_tiling(64)")
    assert isinstance(result, Rejection)
    assert result.reason == "smem_over_limit"
    smem, limit = result.figures["smem_bytes"], result.figures["max_smem_limit"]
    assert isinstance(smem, int)
    assert isinstance(limit, int)
    assert limit == MAX_SMEM_BY_ARCH["sm_90"]
    # 256 threads along M x 8 rows, 4 along N, 64 deep, 4-byte floats
    assert smem == 4 * 64 * (256 * 8 + 4) > limit
    assert str(smem) in result.message
    assert str(limit) in result.message
    record = json.loads(json.dumps(result.to_dict()))
    assert record["reason"] == "smem_over_limit"
    assert record["smem_bytes"] == smem


def test_smem_limit_depends_on_arch() -> None:
    params = GemmParams(smem=True, reg_m=8, reg_n=8, tile_k=64, pad=4)
    assert params.smem_bytes == 4 * 64 * (128 + 4 + 128 + 4)
    assert validate(params, "sm_90") is None
    rejection = FAMILY.validate(params, "sm_75")
    assert rejection is not None
    assert rejection.reason == "smem_over_limit"
    assert rejection.figures["max_smem_limit"] == FAMILY.max_smem_limit("sm_75") == 65536
    with pytest.raises(ValueError, match="sm_42"):
        FAMILY.max_smem_limit("sm_42")


BLOCK_SHAPES = list(itertools.product(DOMAINS["block_x"], DOMAINS["block_y"]))


@pytest.mark.parametrize(("x", "y"), BLOCK_SHAPES)
def test_block_config_threads_bounds(x: int, y: int) -> None:
    result = FAMILY.apply(ROOT, Action("change_block_config", (x, y)))
    if (x, y) == (16, 16):
        assert isinstance(result, Rejection)
        assert result.reason == "no_change"
    elif 32 <= x * y <= 1024:
        assert isinstance(result, Candidate)
        assert result.params.threads == x * y
    else:
        assert isinstance(result, Rejection)
        assert result.reason == "threads_per_block"
        assert result.figures["threads_per_block"] == x * y
        assert result.figures["max_threads_per_block"] == 1024
        assert result.figures["min_threads_per_block"] == 32
        assert f"{x * y} threads" in result.message


def test_register_file_rejection_carries_numbers() -> None:
    result = chain("change_block_config(32, 32)", "apply_register_block(8, 8)")
    assert isinstance(result, Rejection)
    assert result.reason == "register_file"
    assert result.figures["threads_per_block"] == 1024
    assert result.figures["est_regs_per_thread"] * 1024 > result.figures["registers_per_sm"]


def test_vector_must_divide_the_smem_tile_width() -> None:
    # non-coalesced: threadIdx.y (1 thread) runs along N, so the tile is 1 column wide
    result = chain("apply_shared_memory_load(true)", "change_block_config(64, 1)",
                   "apply_vectorize(2)")
    assert isinstance(result, Rejection)
    assert result.reason == "vector_exceeds_tile"
    assert result.figures == {"vec": 2, "block_n": 1}


@settings(max_examples=100, deadline=None)
@given(actions=st.lists(any_action(), max_size=12))
def test_random_walks_stay_inside_the_space(
    actions: list[Action], space_set: set[GemmParams]
) -> None:
    """Agent-style walk: a rejection leaves the walk where it is. Every candidate reached is a
    valid canonical point of the enumerated space, and differs from the one before."""
    node = ROOT
    for action in actions:
        result = FAMILY.apply(node, action)
        if isinstance(result, Rejection):
            assert result.reason
            assert result.message
            json.dumps(result.to_dict())
            continue
        assert result.params != node.params
        assert result.params == result.params.canonical()
        assert validate(result.params) is None
        seed_point = all(getattr(result.params, k) in v for k, v in SEED_DOMAINS.items())
        assert (result.params in space_set) == seed_point  # expert points lie outside it
        node = result


# ---- rendering -------------------------------------------------------------------------------


def test_rendering_is_deterministic() -> None:
    params = GemmParams(smem=True, coalesced=True, reg_m=4, reg_n=4, vec=4, pad=1, unroll=4)
    first, second = FAMILY.render(params), FAMILY.render(replace(params))
    assert first.encode() == second.encode()
    assert FAMILY.source_hash(params) == FAMILY.source_hash(replace(params))
    assert FAMILY.source_hash(params) == hashlib.sha256(first.encode()).hexdigest()
    assert 'extern "C" __global__' in first
    assert "gemm_bias_relu(" in first
    assert FAMILY.render(params) != FAMILY.render(replace(params, pad=2))


def test_smem_only_fields_do_not_change_the_source_without_smem() -> None:
    baseline = FAMILY.render(FAMILY.baseline)
    for tile_k, pad in itertools.product(DOMAINS["tile_k"], DOMAINS["pad"]):
        params = GemmParams(tile_k=tile_k, pad=pad)
        assert FAMILY.render(params) == baseline
        assert params.canonical() == FAMILY.baseline
    with_smem = {FAMILY.source_hash(GemmParams(smem=True, tile_k=t)) for t in DOMAINS["tile_k"]}
    assert len(with_smem) == len(DOMAINS["tile_k"])


def test_distinct_points_render_distinct_sources(space: list[GemmParams]) -> None:
    sample = random.Random(7).sample(space, 300)
    assert len({FAMILY.source_hash(p) for p in sample}) == len(sample)


# ---- launch configuration ---------------------------------------------------------------------


@pytest.mark.parametrize("shape_text", ["1x1x1", "17x33x65", "4096x4095x31", "1x4096x1"])
def test_launch_grid_covers_the_shape(shape_text: str, space: list[GemmParams]) -> None:
    shape = Shape.parse(shape_text)
    points = [FAMILY.baseline, *random.Random(shape_text).sample(space, 400)]
    for params in points:
        launch = FAMILY.launch(params, shape)
        assert not isinstance(launch, Rejection), params
        gx, gy, gz = launch.grid
        assert gz == 1
        assert gx * params.block_n >= shape.n, params
        assert (gx - 1) * params.block_n < shape.n, params
        assert gy * params.block_m >= shape.m, params
        assert (gy - 1) * params.block_m < shape.m, params
        assert launch.block == (params.block_x, params.block_y, 1)
        assert launch.block[0] * launch.block[1] == params.threads <= 1024
        assert launch.dynamic_smem_bytes == params.smem_bytes
        assert launch.kernel_name == "gemm_bias_relu"


def test_launch_without_smem_has_no_dynamic_smem() -> None:
    launch = FAMILY.launch(GemmParams(tile_k=64, pad=4), Shape(64, 64, 64))
    assert not isinstance(launch, Rejection)
    assert launch.dynamic_smem_bytes == 0
    assert launch.to_dict()["grid"] == [4, 4, 1]


def test_launch_refuses_too_many_row_tiles_with_numbers() -> None:
    params = GemmParams(block_x=32, block_y=1, coalesced=True)  # one row of C per block
    assert params.block_m == 1
    launch = FAMILY.launch(params, Shape(MAX_GRID_Y + 1, 8, 8))
    assert isinstance(launch, Rejection)
    assert launch.reason == "grid_limit"
    assert launch.figures == {"grid_y": MAX_GRID_Y + 1, "max_grid_y": MAX_GRID_Y}
    assert not isinstance(FAMILY.launch(params, Shape(MAX_GRID_Y, 8, 8)), Rejection)


# ---- the enumerated space ----------------------------------------------------------------------


def test_space_is_valid_canonical_and_without_duplicates(
    space: list[GemmParams], space_set: set[GemmParams]
) -> None:
    assert len(space) > 100_000
    assert len(space_set) == len(space)
    assert FAMILY.baseline in space_set
    assert smem_root().params in space_set
    for params in space:
        assert params.canonical() == params
        assert validate(params) is None
    # the order is deterministic
    assert list(itertools.islice(enumerate_space("sm_90", SEED_DOMAINS), 200)) == space[:200]


def test_space_holds_every_valid_point_of_the_domains(space_set: set[GemmParams]) -> None:
    rng = random.Random(11)
    names = list(SEED_DOMAINS)
    valid = 0
    for _ in range(3000):
        params = GemmParams(**{n: rng.choice(SEED_DOMAINS[n]) for n in names}).canonical()
        in_space = params in space_set
        assert in_space == (validate(params) is None), params
        valid += in_space
    assert 0 < valid < 3000  # the sample met both valid and invalid points


# ---- parameters from JSON ----------------------------------------------------------------------


def test_params_from_dict_good() -> None:
    assert GemmParams.from_dict({}) == FAMILY.baseline
    params = GemmParams.from_dict({"smem": True, "tile_k": 32, "block_x": 64, "block_y": 4})
    assert (params.smem, params.tile_k, params.block_x, params.block_y) == (True, 32, 64, 4)
    assert GemmParams.from_dict(params.to_dict()) == params
    # the family's reader canonicalises
    assert FAMILY.params_from_dict({"tile_k": 64, "pad": 2}) == FAMILY.baseline


def test_params_from_dict_rejects_unknown_keys() -> None:
    with pytest.raises(ValueError, match=r"unknown parameter\(s\) \['bogus', 'tile_m'\]"):
        GemmParams.from_dict({"tile_m": 16, "smem": True, "bogus": 1})


@pytest.mark.parametrize(
    ("data", "named"),
    [
        ({"smem": 1}, "smem must be true/false"),
        ({"coalesced": "true"}, "coalesced must be true/false"),
        ({"block_x": True}, "block_x must be an integer"),
        ({"tile_k": 16.0}, "tile_k must be an integer"),
        ({"vec": "4"}, "vec must be an integer"),
        ({"pad": None}, "pad must be an integer"),
    ],
)
def test_params_from_dict_rejects_wrong_types(data: dict[str, object], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        GemmParams.from_dict(data)


def test_out_of_domain_params_are_rejected_by_validate() -> None:
    params = GemmParams.from_dict({"block_x": 48})
    rejection = validate(params)
    assert rejection is not None
    assert rejection.reason == "out_of_domain"
    assert rejection.figures == {"field": "block_x", "value": 48}


def test_get_family() -> None:
    assert get_family("gemm_bias_relu") is FAMILY
    with pytest.raises(ValueError, match="gemm_bias_relu"):
        get_family("conv2d")


# ---- Shape ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("4096x4096x4096", (4096, 4096, 4096)),
        ("1x1x1", (1, 1, 1)),
        ("17*33*65", (17, 33, 65)),
        ("4,5,6", (4, 5, 6)),
        ("2×3×4", (2, 3, 4)),
        (" 8X9X10 ", (8, 9, 10)),
    ],
)
def test_shape_parse_good(text: str, expected: tuple[int, int, int]) -> None:
    shape = Shape.parse(text)
    assert (shape.m, shape.n, shape.k) == expected
    assert Shape.parse(str(shape)) == shape
    assert shape.flops == 2 * expected[0] * expected[1] * expected[2]


@pytest.mark.parametrize(
    "text", ["4096x4096", "1x2x3x4", "", "axbxc", "-1x2x3", "1.5x2x3", "0x1x1", "1x0x1"]
)
def test_shape_parse_bad(text: str) -> None:
    with pytest.raises(ValueError, match="shape"):
        Shape.parse(text)


def test_shape_rejects_non_integers() -> None:
    with pytest.raises(ValueError, match=r"shape\.m"):
        Shape(True, 1, 1)
    with pytest.raises(ValueError, match=r"shape\.k"):
        Shape(1, 1, 0)


# ---- regressions of defects found and fixed ------------------------------------------------


def test_candidate_key_is_canonical() -> None:
    same_kernel = GemmParams(tile_k=64, pad=4)
    assert FAMILY.render(same_kernel) == FAMILY.render(FAMILY.baseline)
    assert Candidate(same_kernel).key == Candidate(FAMILY.baseline).key


def test_lineage_after_revert_replays_to_the_same_point() -> None:
    first = FAMILY.apply(ROOT, "apply_coalesce(true)")
    assert isinstance(first, Candidate)
    second = FAMILY.apply(first, "apply_unroll(2)")
    assert isinstance(second, Candidate)
    back = FAMILY.apply(second, "revert_last()")
    assert isinstance(back, Candidate)
    replayed = FAMILY.apply_chain([Action.parse(t) for t in back.lineage()])
    assert isinstance(replayed, Candidate)
    assert replayed.params == back.params


def test_tf32x3_fixes_the_simt_fields_and_reverts_cleanly() -> None:
    tc = chain("apply_register_block(4, 4)", "apply_tf32x3(true)")
    assert isinstance(tc, Candidate)
    assert tc.params.tf32x3
    assert (tc.params.smem, tc.params.reg_m, tc.params.reg_n) == (True, 1, 1)
    assert "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in FAMILY.render(tc.params)
    # a SIMT knob on the tensor-core kernel changes nothing: rejected before compiling
    same = FAMILY.apply(tc, "apply_register_block(8, 8)")
    assert isinstance(same, Rejection)
    assert same.reason == "no_change"
    back = FAMILY.apply(tc, "apply_tf32x3(false)")
    assert isinstance(back, Candidate)
    assert not back.params.tf32x3
    assert "mma.sync" not in FAMILY.render(back.params)


def test_warp_tiling_needs_tensor_cores_and_bounds_registers() -> None:
    no_tc = FAMILY.apply(ROOT, "apply_warp_tiling(64, 32)")
    assert isinstance(no_tc, Rejection)
    assert no_tc.reason == "requires_tensor_cores"
    too_big = chain("apply_tf32x3(true)", "change_block_config(64, 4)",
                    "apply_warp_tiling(64, 64)")
    assert isinstance(too_big, Rejection)
    assert too_big.reason == "register_file"
    assert too_big.figures["est_regs_per_thread"] > too_big.figures["max_regs_per_thread"]
    tile = chain("apply_tf32x3(true)", "change_block_config(256, 1)", "apply_warp_tiling(32, 64)")
    assert isinstance(tile, Rejection)
    assert tile.reason == "tile_too_large"


def test_sampling_the_whole_space_reaches_every_kernel_path() -> None:
    points = sample_space(random.Random(3), 400)
    assert len(set(points)) == 400
    for params in points:
        assert params.canonical() == params
        assert validate(params) is None
    # uniform over ~45 M points, nearly all of them staged SIMT tiles: the 52 k direct and 7.5 k
    # tensor-core points are rarely drawn (which is why the expert action space, not random
    # search, is the way to the tensor cores), so each path is also drawn from on its own
    assert all(p.smem for p in points if not p.tf32x3)
    for path, domains in (("tc", {**DOMAINS, "tf32x3": (True,)}),
                          ("direct", {**DOMAINS, "smem": (False,), "tf32x3": (False,)})):
        only = sample_space(random.Random(3), 20, domains=domains)
        assert len(only) == 20, path
        assert all(("tc" if p.tf32x3 else "smem" if p.smem else "direct") == path
                   for p in only), path
    assert any(p.interleave or p.stages == 2 or p.swizzle > 1 for p in points)
    assert sample_space(random.Random(3), 50) == sample_space(random.Random(3), 50)


def test_tensor_core_path_enumerates_only_valid_distinct_points() -> None:
    domains = {**DOMAINS, "smem": (True,), "tf32x3": (True,)}
    tc = list(enumerate_space("sm_90", domains))
    assert len(tc) == len(set(tc)) > 100
    assert all(p.tf32x3 and validate(p) is None for p in tc)
