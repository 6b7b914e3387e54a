"""Declarative user families (``kernels.userspec``): the example spec directory loads, validates
into one normal form with a content hash, builds a family whose every sampled point renders and
compiles with the real nvcc, whose actions and rule book work, and which the engine runs; a
Jinja-templated spec and a Kernel Tuner description get there too; the GPU side's new rules
judge as documented."""

from __future__ import annotations

import copy
import json
import random
import shutil
from pathlib import Path
from typing import Any

import pytest
from repo import ROOT

from kernels import get_family, register_family, unregister_family
from kernels.base import Candidate, Dims, Rejection
from kernels.family import KernelFamily, describe, reference_setup
from kernels.userspec import (
    SpecError,
    SpecFamily,
    build_family,
    family_key,
    from_kernel_tuner,
    load_spec_dir,
    spec_hash,
    validate_spec,
)
from worker import launch_contract as lc
from worker.compile import Compiler

EXAMPLE = ROOT / "examples" / "transpose"


def example() -> dict[str, Any]:
    return load_spec_dir(EXAMPLE)


@pytest.fixture(scope="module")
def family() -> SpecFamily:
    return build_family(example())


@pytest.fixture(scope="module")
def compiler(tmp_path_factory: pytest.TempPathFactory) -> Compiler:
    return Compiler(tmp_path_factory.mktemp("nvcc"), arch="sm_90")


# ---- loading, normal form, identity -------------------------------------------------------
def test_the_directory_and_the_json_body_are_one_content() -> None:
    spec = example()
    assert set(spec["files"]) == {"transpose.cu", "vec_access.cuh", "reference.cu"}
    assert spec["files"]["transpose.cu"] == (EXAMPLE / "transpose.cu").read_text()
    body = json.loads(json.dumps(spec))  # what the API receives
    assert validate_spec(body) == validate_spec(spec)
    assert spec_hash(body) == spec_hash(spec)


def test_the_normal_form_is_a_fixed_point_and_fills_the_defaults() -> None:
    normal = validate_spec(example())
    assert validate_spec(normal) == normal
    assert spec_hash(normal) == spec_hash(example())
    assert normal["tunables"][0] == {"name": "tile_x", "values": [16, 32, 64]}
    assert normal["launch"]["grid"][2] == "1"
    assert normal["launch"]["dynamic_smem"] == "0"
    assert normal["correctness"] == {"rule": "exact", "tolerance": 1e-4, "atol": 0.0}
    assert normal["distributions"][1]["default"] == {"kind": "mixed", "scale": 1.0}


def test_the_hash_follows_content_not_json_order() -> None:
    spec = example()
    reordered = json.loads(json.dumps(spec, sort_keys=True))
    reordered["tunables"] = spec["tunables"]  # their order is the spec's (it renders)
    assert list(reordered) != list(spec)
    assert spec_hash(reordered) == spec_hash(spec)
    swapped = {**spec, "tunables": dict(reversed(list(spec["tunables"].items())))}
    assert spec_hash(swapped) != spec_hash(spec)
    changed = copy.deepcopy(spec)
    changed["files"]["transpose.cu"] += "\n// one more line\n"
    assert spec_hash(changed) != spec_hash(spec)
    other = copy.deepcopy(spec)
    other["tunables"]["tiles"] = [1, 2, 4]
    assert spec_hash(other) != spec_hash(spec)
    key = family_key(spec)
    assert key == f"transpose@{spec_hash(spec)[:12]}"


def test_the_kernel_tuner_launch_form_normalizes_to_the_same_expressions() -> None:
    spec = example()
    kt = copy.deepcopy(spec)
    kt["launch"] = {"problem_size": ["n", "ceil_div(m, tiles)"],
                    "grid_div_x": ["tile_x"], "grid_div_y": ["tile_y"],
                    "block_size_names": ["tile_x", "tile_y"]}
    normal = validate_spec(kt)["launch"]
    assert normal["grid"] == ["ceil_div(n, (tile_x))", "ceil_div(ceil_div(m, tiles), (tile_y))",
                              "1"]
    assert normal["block"] == ["tile_x", "tile_y", "1"]


# ---- the family --------------------------------------------------------------------------
def test_the_built_family_satisfies_the_contract(family: SpecFamily) -> None:
    assert isinstance(family, KernelFamily)
    assert family.name == family_key(example())
    assert family.display_name == "transpose"
    assert family.version_hash == spec_hash(example())
    assert family.reference_style == "same_signature"
    assert reference_setup(family) == {"style": "same_signature", "outputs_dtype": "float64"}
    about = describe(family)
    assert about["correctness"] == "exact"
    assert about["transforms"] == [
        "set_tile_x", "set_tile_y", "set_rows", "set_vec", "set_use_smem", "set_pad",
        "set_tiles", "apply_tiling", "apply_shared_memory_transpose", "apply_register_block",
        "revert_last"]
    assert family.metric.amount(family.default_dims) == 8 * 8192 * 8192
    assert family.metric.unit == "GB/s"


def test_registered_under_its_key_and_found_by_it(family: SpecFamily) -> None:
    register_family(family, replace=True)
    try:
        assert get_family(family.name) is family
    finally:
        unregister_family(family.name)


def test_the_naive_point_comes_first_and_every_listed_point_is_valid(
        family: SpecFamily) -> None:
    space = family.space()
    assert space[0] == family.baseline
    assert family.baseline.use_smem is False
    assert family.baseline.rows == 1
    assert len(space) == len(set(space))
    assert all(family.validate(p) is None for p in space)
    # the restrictions hold on every listed point, and the ones they exclude are refused
    assert all(p.tile_y % p.rows == 0 and (p.use_smem or p.pad == 0) for p in space)
    refused = family.params_from_dict({"use_smem": False, "pad": 1})
    rejection = family.validate(refused)
    assert isinstance(rejection, Rejection)
    assert rejection.reason == "restriction"
    assert "use_smem or pad == 0" in rejection.message


def test_blocks_over_the_limit_are_refused_with_the_figures(family: SpecFamily) -> None:
    big = family.params_from_dict({"tile_x": 64, "tile_y": 64, "rows": 1, "vec": 1})
    rejection = family.validate(big)
    assert isinstance(rejection, Rejection)
    # the restriction states it first; the block check would give the thread count
    assert rejection.reason == "restriction"
    spec = example()
    spec["restrictions"] = [r for r in spec["restrictions"] if "<= 1024" not in r]
    loose = build_family(spec)
    rejection = loose.validate(loose.params_from_dict(big.to_dict()))
    assert isinstance(rejection, Rejection)
    assert rejection.reason == "threads_over_limit"
    assert rejection.figures["threads_per_block"] == 4096


def test_params_from_json_refuse_unknown_and_out_of_domain(family: SpecFamily) -> None:
    with pytest.raises(ValueError, match="unknown parameter"):
        family.params_from_dict({"tile_z": 4})
    with pytest.raises(ValueError, match="outside"):
        family.params_from_dict({"tile_x": 48})
    with pytest.raises(ValueError, match="outside"):
        family.params_from_dict({"use_smem": 1})
    p = family.params_from_dict({"tile_x": 64})
    assert p.tile_x == 64
    assert p.tile_y == family.baseline.tile_y


def test_rendering_is_deterministic_and_inlines_the_includes(family: SpecFamily) -> None:
    p = family.params_from_dict({"use_smem": True, "pad": 1, "tile_y": 32, "rows": 4})
    text = family.render(p)
    assert text == build_family(example()).render(p)
    assert "#define use_smem 1\n" in text
    assert "#define pad 1\n" in text
    assert '#include "vec_access.cuh"' not in text
    assert "tf_load" in text
    assert '#line 1 "vec_access.cuh"' in text
    assert family.source_hash(p) != family.source_hash(family.baseline)


def test_launches_cover_every_edge_shape(family: SpecFamily) -> None:
    for p in family.sample(random.Random(3), 40):
        for dims in (*family.edge_shapes, family.default_dims):
            launch = family.launch(p, dims)
            assert not isinstance(launch, Rejection), (p, dims, launch)
            gx, gy, _ = launch.grid
            bx, by, _ = launch.block
            assert bx * p.vec == p.tile_x
            assert by * p.rows == p.tile_y
            assert gx * p.tile_x >= dims.n
            assert gy * p.tiles * p.tile_y >= dims.m
            assert launch.kernel_name == "transpose"
    ref = family.reference_launch(Dims(m=1025, n=3))
    assert ref.kernel_name == "transpose_reference"
    assert ref.grid[0] * ref.block[0] >= 1  # a grid-stride loop covers the rest


def test_sampled_points_and_the_reference_compile_with_nvcc(family: SpecFamily,
                                                            compiler: Compiler) -> None:
    points = [family.baseline, *family.sample(random.Random(11), 15)]
    results = [compiler.submit(family.render(p), entry=family.name) for p in points]
    for p, future in zip(points, results, strict=True):
        result = future.result()
        assert result.status == "ok", (p, result.error)
        assert result.spill_bytes == 0, p
    reference = compiler.compile(family.reference_source())
    assert reference.status == "ok", reference.error


def test_generic_and_macro_transforms(family: SpecFamily) -> None:
    root = Candidate(family.baseline)
    step = family.apply(root, "set_use_smem(true)")
    assert isinstance(step, Candidate)
    assert step.params.use_smem is True
    assert step.lineage() == ["set_use_smem(true)"]
    tiled = family.apply(step, "apply_tiling(32)")
    assert isinstance(tiled, Candidate)
    assert (tiled.params.tile_x, tiled.params.tile_y) == (32, 32)
    blocked = family.apply(tiled, "apply_register_block(8)")
    assert isinstance(blocked, Candidate)
    assert blocked.params.rows == 8
    assert blocked.params.tile_y == 64  # max(tile_y, 8 * 8)
    smem = family.apply(root, "apply_shared_memory_transpose()")
    assert isinstance(smem, Candidate)
    assert (smem.params.use_smem, smem.params.pad) == (True, 1)
    same = family.apply(root, "set_tile_x(32)")
    assert isinstance(same, Rejection)
    assert same.reason == "no_change"
    back = family.apply(blocked, "revert_last()")
    assert back == tiled
    with pytest.raises(ValueError, match="outside its domain"):
        family.apply(root, "set_tile_x(48)")


class _Ctx:
    """The little of a rule context the generic rule book reads."""

    def __init__(self, family: SpecFamily, params: Any) -> None:
        self.family = family
        self.arch = "sm_90"
        self.incumbent = type("Point", (), {"params": params})()

    def action_allowed(self, name: str) -> bool:
        return name != "set_tiles"


def test_the_rule_book_proposes_valid_neighbours(family: SpecFamily) -> None:
    moves = family.expert_moves(_Ctx(family, family.baseline))  # type: ignore[arg-type]
    actions = [a for a, _ in moves]
    assert "set_use_smem(true)" in actions
    assert "set_tile_x(64)" in actions
    assert "set_tile_x(16)" in actions
    assert not any(a.startswith("set_tiles") for a in actions)  # not allowed here
    assert "set_pad(1)" not in actions  # pad without shared memory is refused
    for action, reason in moves:
        point = family.apply(Candidate(family.baseline), action)
        assert isinstance(point, Candidate), action
        assert family.validate(point.params) is None, action
        assert reason


# ---- a Jinja template and a Kernel Tuner description ----------------------------------------
JINJA_KERNEL = r'''
extern "C" __global__ void scale_add(const float* __restrict__ x, float* __restrict__ y, int n)
{
    const long long base = ((long long)blockIdx.x * {{ block }} + threadIdx.x) * {{ items }};
{% for k in range(items) %}
{% if fast %}
    if (base + {{ k }} < n) y[base + {{ k }}] = __fmaf_rn(2.f, x[base + {{ k }}], 1.f);
{% else %}
    if (base + {{ k }} < n) y[base + {{ k }}] = 2.f * x[base + {{ k }}] + 1.f;
{% endif %}
{% endfor %}
}
'''
JINJA_REFERENCE = r'''
extern "C" __global__ void scale_add_ref(const float* x, float* y, int n)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) y[i] = 2.f * x[i] + 1.f;
}
'''


def jinja_spec() -> dict[str, Any]:
    return {
        "name": "scale_add_jinja",
        "dims": [{"name": "n", "min": 1, "max": 1 << 28}],
        "default_dims": {"n": 1 << 20},
        "kernel": {"name": "scale_add", "source": "k.cu.j2", "template": "jinja"},
        "tunables": {"block": [64, 128, 256], "items": [1, 2, 4], "fast": [False, True]},
        "signature": {"buffers": [{"name": "x", "count": "n"},
                                  {"name": "y", "role": "out", "count": "n"}],
                      "scalars": [{"name": "n", "value": "n"}]},
        "launch": {"grid": ["ceil_div(n, block * items)"], "block": ["block"]},
        "reference": {"source": "ref.cu", "kernel": "scale_add_ref", "outputs_dtype": "float32",
                      "grid": ["min(ceil_div(n, 256), 4096)"], "block": [256]},
        "correctness": {"rule": "abs_rel", "tolerance": 1e-6, "atol": 1e-7},
        "edge_shapes": [{"n": 1}, {"n": 7}, {"n": 1027}],
        "files": {"k.cu.j2": JINJA_KERNEL, "ref.cu": JINJA_REFERENCE},
    }


def test_a_jinja_family_renders_in_the_sandbox_and_compiles(compiler: Compiler) -> None:
    fam = build_family(jinja_spec())
    assert fam.reference_outputs_dtype == "float32"
    assert fam.correctness.kind == "abs_rel"
    assert fam.correctness.atol == 1e-7
    p = fam.params_from_dict({"items": 4, "fast": True})
    text = fam.render(p)
    assert text.count("__fmaf_rn") == 4
    assert "{{" not in text
    assert "{%" not in text
    for point in fam.space():
        assert fam.validate(point) is None
    results = [compiler.submit(fam.render(q), entry=fam.name) for q in fam.space()[:6]]
    assert all(r.result().status == "ok" for r in results)
    assert compiler.compile(fam.reference_source()).status == "ok"


FLOAT_KERNEL = r'''
extern "C" __global__ void scale_add(const float* __restrict__ x, float* __restrict__ y,
                                     float scale, double shift, int n)
{
    const long long i = (long long)blockIdx.x * {{ block }} + threadIdx.x;
    if (i < n) y[i] = scale * x[i] + (float)shift;
}
'''
FLOAT_REFERENCE = r'''
extern "C" __global__ void scale_add_ref(const float* x, double* y, float scale, double shift,
                                         int n)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) y[i] = (double)scale * x[i] + shift;
}
'''


def test_float_scalars_reach_the_kernel_and_the_reference_as_floats(compiler: Compiler) -> None:
    """A scale and a shift (an epsilon, a temperature) are scalars of a float type: their
    value expressions may read the dimensions, they are packed with pycuda's ``f`` and ``d``
    (what the GPU child's fill kernel takes its float by), and a value out of bounds or not a
    number is refused with the scalar's field."""
    spec = jinja_spec()
    spec.update(name="scale_shift", files={"k.cu.j2": FLOAT_KERNEL, "ref.cu": FLOAT_REFERENCE},
                tunables={"block": [64, 128, 256]},
                launch={"grid": ["ceil_div(n, block)"], "block": ["block"]},
                correctness={"rule": "abs_rel", "tolerance": 1e-6, "atol": 1e-7})
    spec["reference"]["outputs_dtype"] = "float64"
    spec["signature"]["scalars"] = [{"name": "scale", "dtype": "float32", "value": "2.5"},
                                    {"name": "shift", "dtype": "float64", "value": "1 / n"},
                                    {"name": "n", "value": "n"}]
    fam = build_family(spec)
    resolved = fam.signature.resolve(Dims({"n": 8}))
    assert [(s["name"], s["value"]) for s in resolved["scalars"]] == [
        ("scale", 2.5), ("shift", 0.125), ("n", 8)]
    assert isinstance(resolved["scalars"][2]["value"], int)
    assert lc.kernel_format(resolved) == "PPfdi"
    assert lc.kernel_args(resolved, {"x": 1, "y": 2})[2:] == (2.5, 0.125, 8)
    style = fam.reference_style
    assert lc.reference_format(resolved, style) == "PPfdi"
    assert compiler.compile(fam.render(fam.baseline), entry=fam.name).status == "ok"
    assert compiler.compile(fam.reference_source()).status == "ok"
    huge = copy.deepcopy(spec)
    huge["signature"]["scalars"][0]["value"] = "n * 1e30"  # expressions stay within 2**64
    with pytest.raises(SpecError) as refused:
        build_family(huge)
    assert refused.value.field == "signature.scalars[0].value"
    assert "exceeds 2**64" in str(refused.value)
    word = copy.deepcopy(spec)
    word["signature"]["scalars"][0]["value"] = "n > 3"
    with pytest.raises(SpecError, match="not a number"):
        build_family(word)


KT_SOURCE = r'''
extern "C" __global__ void vector_add(float* c, const float* a, const float* b, int n)
{
    int i = blockIdx.x * block_size_x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
'''


def kt_description() -> dict[str, Any]:
    return {
        "kernel_name": "vector_add", "kernel_source": KT_SOURCE,
        "problem_size": ["n"], "dims": {"n": 1 << 20},
        "arguments": [{"name": "c", "type": "float32", "role": "out", "size": "n"},
                      {"name": "a", "type": "float32", "size": "n"},
                      {"name": "b", "type": "float32", "size": "n"},
                      {"name": "n", "type": "int32", "value": "n"}],
        "tune_params": {"block_size_x": [32, 64, 128, 256, 512, 1024]},
        "restrictions": ["block_size_x >= 64"],
    }


def test_a_kernel_tuner_description_becomes_a_family(compiler: Compiler) -> None:
    spec = from_kernel_tuner(kt_description())
    fam = build_family(spec)
    assert fam.display_name == "vector_add"
    assert fam.domains() == {"block_size_x": (32, 64, 128, 256, 512, 1024)}
    assert fam.spec["launch"]["grid"][0] == "ceil_div(n, (block_size_x))"
    # the restriction refuses the first value: the baseline is the first valid point, and
    # the reference is the kernel there, its outputs in float32
    assert isinstance(fam.validate(fam.params_from_dict({"block_size_x": 32})), Rejection)
    assert fam.baseline.block_size_x == 64
    assert fam.reference_outputs_dtype == "float32"
    assert fam.correctness.kind == "norm"
    assert "#define block_size_x 64" in fam.reference_source()
    assert fam.reference_launch(Dims(n=100)).block == (64, 1, 1)
    assert fam.reference_launch(Dims(n=100)).grid == (2, 1, 1)
    launch = fam.launch(fam.params_from_dict({"block_size_x": 256}), Dims(n=1000))
    assert not isinstance(launch, Rejection)
    assert launch.grid == (4, 1, 1)
    assert compiler.compile(fam.render(fam.space()[-1])).status == "ok"
    assert compiler.compile(fam.reference_source()).status == "ok"


def test_kernel_tuner_fields_that_are_not_mapped_are_named() -> None:
    for key, value in (("answer", [None]), ("compiler_options", ["-O3"]), ("lang", "OpenCL"),
                       ("typo_field", 1)):
        kt = {**kt_description(), key: value}
        with pytest.raises(SpecError) as info:
            from_kernel_tuner(kt)
        assert info.value.field == key
    kt = kt_description()
    kt["tune_params"]["unroll"] = ["yes", "no"]
    with pytest.raises(SpecError) as info:
        from_kernel_tuner(kt)
    assert info.value.field == "tune_params.unroll"


# ---- the GPU side's rules (host half) --------------------------------------------------------
def test_judge_applies_each_rule() -> None:
    clean: dict[str, Any] = {"sum_err2": 0.0, "sum_ref2": 4.0, "max_abs": 0.0, "max_scaled": 0.0,
             "nonfinite": 0, "unwritten": 0}
    for kind in ("scaled", "norm", "abs_rel", "exact"):
        assert lc.judge(**clean, tol=1e-4, rule={"kind": kind})["passed"]
    small: dict[str, Any] = {**clean, "sum_err2": 1e-12, "max_abs": 1e-6, "max_scaled": 5e-5}
    assert lc.judge(**small, tol=1e-4, rule={"kind": "norm"})["passed"]
    exact = lc.judge(**small, tol=1e-4, rule={"kind": "exact"})
    assert not exact["passed"]
    assert "differs from the reference" in exact["reason"]
    over: dict[str, Any] = {**small, "max_scaled": 2e-4}
    assert lc.judge(**over, tol=1e-4, rule={"kind": "norm"})["passed"]  # norm reads no element
    abs_rel = lc.judge(**over, tol=1e-4, rule={"kind": "abs_rel", "atol": 1e-6})
    assert not abs_rel["passed"]
    assert "1e-06 + 0.0001·|ref|" in abs_rel["reason"]
    for kind in ("norm", "abs_rel", "exact"):
        bad = lc.judge(**{**clean, "unwritten": 3}, tol=1e-4, rule={"kind": kind})
        assert not bad["passed"]
        assert "never written" in bad["reason"]
        nan = lc.judge(**{**clean, "nonfinite": 1}, tol=1e-4, rule={"kind": kind})
        assert "NaN or Inf" in nan["reason"]
    wrong_ref = lc.judge(**clean, tol=1e-4, rule={"kind": "norm"}, reference_bad=2)
    assert "the reference kernel is wrong" in wrong_ref["reason"]
    # the scaled rule of the built-in families is what it was
    assert lc.judge(**over, tol=1e-4) == lc.judge(**over, tol=1e-4, rule={"kind": "scaled"})
    assert not lc.judge(**over, tol=1e-4)["passed"]
    assert lc.scale_terms({"kind": "abs_rel", "atol": 1e-6}, 1e-4) == (1.0, 1e-6 / 1e-4)
    assert lc.scale_terms({"kind": "norm"}, 1e-4) == (0.0, 1.0)


def test_the_same_signature_reference_takes_the_candidates_arguments(
        family: SpecFamily) -> None:
    sig = family.signature.resolve(Dims(m=3, n=5))
    bufs = {"input": "I", "output": "O", "output.ref": "R", "output.scale": "S"}
    assert lc.reference_format(sig, "same_signature") == lc.kernel_format(sig) == "PPii"
    assert lc.reference_args(sig, bufs, "same_signature", "float64") == ("I", "R", 3, 5)
    assert lc.reference_args(sig, bufs, "same_signature", "float32") == ("I", "O", 3, 5)
    assert lc.reference_args(sig, bufs) == ("I", "R", "S", 3, 5)  # the contract style


def test_the_evaluator_sends_the_rule_and_the_reference_style(family: SpecFamily) -> None:
    from worker.evaluate import GpuEvaluator

    ev = GpuEvaluator.__new__(GpuEvaluator)
    ev.family = family
    ev.device = {"sm_count": 132}
    from core.evaluation import EvalOptions

    ev.options = EvalOptions()
    cases = ev.checks(family.baseline, family.default_dims, iteration=0, seed=1, verify=True)
    assert {c["rule"]["kind"] for c in cases} == {"exact"}
    assert len(cases) == len(family.distributions) + len(family.edge_shapes)
    assert all(c["reference_launch"]["kernel_name"] == "transpose_reference" for c in cases)


def test_a_spec_directory_copied_elsewhere_is_the_same_family(tmp_path: Path) -> None:
    target = tmp_path / "copy"
    shutil.copytree(EXAMPLE, target)
    assert family_key(load_spec_dir(target)) == family_key(example())
