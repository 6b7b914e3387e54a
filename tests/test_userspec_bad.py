"""Bad and hostile family specs: every one is refused by :func:`validate_spec` (or
:func:`load_spec_dir`) with a :class:`SpecError` naming the field and the problem, quickly —
before anything could be stored, rendered for nvcc or run."""

from __future__ import annotations

import copy
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kernels.userspec import SpecError, build_family, load_spec_dir, validate_spec

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "transpose"
BASE = load_spec_dir(EXAMPLE)
KERNEL = "transpose.cu"

JINJA_BASE: dict[str, Any] = {
    "name": "scale_jinja",
    "dims": [{"name": "n", "min": 1, "max": 1 << 20}],
    "default_dims": {"n": 4096},
    "kernel": {"name": "k", "source": "k.cu.j2", "template": "jinja"},
    "tunables": {"block": [64, 128], "unroll": [1, 2]},
    "signature": {"buffers": [{"name": "x", "count": "n"},
                              {"name": "y", "role": "out", "count": "n"}],
                  "scalars": [{"name": "n", "value": "n"}]},
    "launch": {"grid": ["ceil_div(n, block)"], "block": ["block"]},
    "reference": {"source": "ref.cu", "kernel": "ref", "grid": [16], "block": [256]},
    "files": {
        "k.cu.j2": 'extern "C" __global__ void k(const float* x, float* y, int n)\n'
                   "{ int i = blockIdx.x * {{ block }} + threadIdx.x; if (i < n) y[i] = x[i]; }\n",
        "ref.cu": 'extern "C" __global__ void ref(const float* x, double* y, int n)\n'
                  "{ for (int i = threadIdx.x; i < n; i += 256) y[i] = x[i]; }\n",
    },
}


def edit(base: dict[str, Any], change: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
    spec = copy.deepcopy(base)
    change(spec)
    return spec


def kernel_text(spec: dict[str, Any], text: str) -> None:
    spec["files"][KERNEL] = text


def with_line(line: str) -> Callable[[dict[str, Any]], None]:
    """Put ``line`` at the top of the example's kernel source."""
    return lambda s: kernel_text(s, line + "\n" + s["files"][KERNEL])


def jinja(text: str) -> dict[str, Any]:
    spec = copy.deepcopy(JINJA_BASE)
    spec["files"]["k.cu.j2"] = text
    return spec


def buffer(i: int, **changes: Any) -> Callable[[dict[str, Any]], None]:
    return lambda s: s["signature"]["buffers"][i].update(changes)


def put(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """Set a dotted path (``correctness.tolerance``) of the spec."""
    def change(spec: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = spec
        for part in parents:
            node = node[part]
        node[last] = value
    return change


def drop(key: str) -> Callable[[dict[str, Any]], None]:
    return lambda s: s.pop(key)


_KERNEL_SIG = 'extern "C" __global__ void k(const float* x, float* y, int n)\n'
# (case id, spec, the field refused, words of the problem)
CASES: list[tuple[str, dict[str, Any], str, str]] = [
    ("missing_name", edit(BASE, drop("name")), "name", "is required"),
    ("bad_name_chars", edit(BASE, put("name", "Trans pose!")), "name", "lower-case"),
    ("name_of_a_builtin", edit(BASE, put("name", "softmax")), "name", "built-in family"),
    ("unknown_top_level_key", edit(BASE, lambda s: s.update(tunable={"x": [1]})), "tunable",
     "unknown field"),
    ("typo_in_a_buffer", edit(BASE, buffer(0, size="m * n")), "signature.buffers[0].size",
     "unknown field"),
    ("unknown_dtype", edit(BASE, buffer(1, dtype="float16")), "signature.buffers[1].dtype",
     "unknown dtype 'float16'"),
    ("non_float32_buffer", edit(BASE, buffer(0, dtype="int32")), "signature.buffers[0].dtype",
     "float32 buffers only"),
    ("count_reads_unknown_name", edit(BASE, buffer(1, count="m * k")),
     "signature.buffers[1].count", "unknown name(s) 'k'"),
    ("count_imports", edit(BASE, buffer(1, count="__import__('os').system('x')")),
     "signature.buffers[1].count", "may be called"),
    ("attribute_access", edit(BASE, buffer(0, count="m.real * n")),
     "signature.buffers[0].count", "Attribute is not allowed"),
    ("lambda", edit(BASE, put("metric.work", "lambda: 8")), "metric.work",
     "Lambda is not allowed"),
    ("comprehension", edit(BASE, lambda s: s["signature"]["scalars"][0].update(
        value="[i for i in (1, 2)][0]")), "signature.scalars[0].value", "is not allowed"),
    ("huge_exponent", edit(BASE, put("metric.work", "2**10**10")), "metric.work",
     "is too large"),
    ("list_repetition_bomb", edit(BASE, lambda s: s["restrictions"].append(
        "len((1,) * 10**9) > 0")), "restrictions[5]", "may be called"),
    ("list_arithmetic_bomb", edit(BASE, lambda s: s["restrictions"].append(
        "((1,) * 10**9) == (1,)")), "restrictions[5]", "arithmetic on a list"),
    ("empty_domain", edit(BASE, put("tunables.tiles", [])), "tunables.tiles", "empty domain"),
    ("domain_too_large", edit(BASE, lambda s: s["tunables"].update(
        unroll=list(range(1, 400)))), "tunables", "more than 1000000 points"),
    ("mixed_domain", edit(BASE, put("tunables.tiles", [1, 2.5])), "tunables.tiles",
     "integers or booleans"),
    ("restriction_unknown_name", edit(BASE, lambda s: s["restrictions"].append(
        "tile_z <= 4")), "restrictions[5]", "unknown name(s) 'tile_z'"),
    ("absolute_include", edit(BASE, with_line('#include "/etc/passwd"')), "kernel.source",
     "absolute path"),
    ("dotdot_include", edit(BASE, with_line('#include "../../secrets.h"')), "kernel.source",
     "leaves the family's directory"),
    ("system_include", edit(BASE, with_line("#include <stdio.h>")), "kernel.source",
     "#include <stdio.h> is not allowed"),
    ("include_not_declared", edit(BASE, with_line('#include "other.cuh"')), "kernel.source",
     "not one of the family's includes"),
    ("include_through_a_macro", edit(BASE, with_line('#define F "x.h"\n#include F')),
     "kernel.source", "in quotes or angle brackets"),
    ("include_as_a_digraph", edit(BASE, with_line('%:include "/etc/passwd"')),
     "kernel.source", "digraph"),
    ("include_split_over_lines", edit(BASE, with_line('#\\\ninclude "/etc/passwd"')),
     "kernel.source", "split over lines"),
    ("include_behind_a_comment", edit(BASE, lambda s: kernel_text(s, s["files"][KERNEL].replace(
        '#include "vec_access.cuh"', '#include "vec_access.cuh" /*\n#include "/etc/hosts" */'))),
     "kernel.source", "#include"),
    ("includes_list_dotdot", edit(BASE, put("includes", ["../x.cuh"])), "includes[0]",
     "leaves the family's directory"),
    ("source_too_large", edit(BASE, lambda s: kernel_text(s, s["files"][KERNEL]
                                                         + "// x\n" * 60000)),
     "files.transpose.cu", "at most 262144"),
    ("host_main", edit(BASE, lambda s: kernel_text(s, s["files"][KERNEL]
                                                  + "\nint main() { return 0; }\n")),
     "kernel.source", "main function"),
    ("host_launch", edit(BASE, lambda s: kernel_text(s, s["files"][KERNEL] + (
        "\nvoid go(float* a) { transpose<<<1, 1>>>(a, a, 1, 1); }\n"))), "kernel.source",
     "kernel launch"),
    ("host_runtime_call", edit(BASE, lambda s: kernel_text(s, s["files"][KERNEL] + (
        "\nvoid leak() { void* p; cudaMalloc(&p, 1 << 30); }\n"))), "kernel.source",
     "CUDA runtime call"),
    ("host_code_in_reference", edit(BASE, lambda s: s["files"].update({
        "reference.cu": s["files"]["reference.cu"] + "\nint main() { system(\"rm\"); }\n"})),
     "reference.source", "main function"),
    ("kernel_name_not_in_source", edit(BASE, put("kernel.name", "transpose_v2")), "kernel.name",
     "no extern \"C\" __global__ kernel 'transpose_v2'"),
    ("reference_kernel_not_in_source", edit(BASE, put("reference.kernel", "ref64")),
     "reference.kernel", "'ref64'"),
    ("jinja_class_escape", jinja(_KERNEL_SIG + "{ {{ ''.__class__ }} }\n"), "kernel.source",
     "attribute and item access are not allowed"),
    ("jinja_globals_escape", jinja(_KERNEL_SIG + "{ {{ cycler.__init__.__globals__ }} }\n"),
     "kernel.source", "attribute and item access are not allowed"),
    ("jinja_undefined_variable", jinja(_KERNEL_SIG + "{ int u = {{ unrolll }}; }\n"),
     "kernel.source", "'unrolll' is undefined"),
    ("jinja_loop_bomb", jinja(_KERNEL_SIG + "{ {% for i in range(100000) %}{% for j in "
                              "range(100000) %}{% endfor %}{% endfor %} }\n"),
     "kernel.source", "calls and loop iterations"),
    ("jinja_recursion_bomb", jinja(
        "{% macro f(d) %}{% if d %}{{ f(d - 1) }}{{ f(d - 1) }}{% endif %}{% endmacro %}"
        + _KERNEL_SIG + "{ {{ f(60) }} }\n"), "kernel.source", "the template"),  # budget or clock
    ("jinja_string_bomb", jinja(_KERNEL_SIG + "{ {{ 'x' * 100000000 }} }\n"), "kernel.source",
     "grows past"),
    ("jinja_format_bomb", jinja(_KERNEL_SIG + "{ {{ '%0999999999d' % 1 }} }\n"),
     "kernel.source", "string formatting"),
    ("jinja_include", jinja(_KERNEL_SIG + "{% include '/etc/passwd' %}\n"), "kernel.source",
     "include is not allowed"),
    ("jinja_filter", jinja(_KERNEL_SIG + "{ {{ 'x'|center(1000000000) }} }\n"),
     "kernel.source", "filter 'center' is not allowed"),
    ("grid_zero", edit(BASE, put("launch.grid", ["0", "1"])), "launch.grid[0]",
     "is 0 at default_dims"),
    ("grid_negative", edit(BASE, put("launch.grid", ["-n", "1"])), "launch.grid[0]",
     "is -8192"),
    ("block_over_1024_threads", edit(BASE, lambda s: (
        s.update(restrictions=[]), s["launch"].update(block=["tile_x * 2", "tile_y * 8"]))),
     "launch.block", "threads a block at the baseline"),
    ("reference_block_over_1024", edit(BASE, put("reference.block", [2048])),
     "reference.block[0]", "is 2048"),
    ("tolerance_zero", edit(BASE, put("correctness", {"rule": "norm", "tolerance": 0})),
     "correctness.tolerance", "must be in (0, 0.1]"),
    ("tolerance_negative", edit(BASE, put("correctness", {"rule": "norm", "tolerance": -1e-4})),
     "correctness.tolerance", "must be in (0, 0.1]"),
    ("tolerance_nan", edit(BASE, put("correctness", {"rule": "norm",
                                                     "tolerance": float("nan")})),
     "correctness.tolerance", "must be finite"),
    ("unknown_rule", edit(BASE, put("correctness", {"rule": "close_enough"})),
     "correctness.rule", "unknown rule 'close_enough'"),
    ("atol_for_norm", edit(BASE, put("correctness", {"rule": "norm", "atol": 1e-3})),
     "correctness.atol", "only the abs_rel rule"),
    ("unknown_fill_kind", edit(BASE, lambda s: s["distributions"][0].update(
        default={"kind": "gaussian"})), "distributions[0].default.kind",
     "unknown fill kind 'gaussian'"),
    ("fill_of_unknown_buffer", edit(BASE, lambda s: s["distributions"][0].update(
        fills={"weights": "normal"})), "distributions[0].fills.weights",
     "no buffer 'weights'"),
    ("fill_of_an_output", edit(BASE, lambda s: s["distributions"][0].update(
        fills={"output": "normal"})), "distributions[0].fills.output", "is an output"),
    ("no_output_buffer", edit(BASE, buffer(1, role="in")), "signature.buffers",
     "no output buffer"),
    ("inout_buffer", edit(BASE, buffer(1, role="inout")), "signature.buffers[1].role",
     "inout buffers are not supported"),
    ("duplicate_argument", edit(BASE, lambda s: s["signature"]["scalars"][0].update(
        name="input")), "signature.scalars[0].name", "declared twice"),
    ("duplicate_tunable", edit(BASE, put("tunables", [{"name": "t", "values": [1]},
                                                      {"name": "t", "values": [2]}])),
     "tunables[1]", "declared twice"),
    ("tunable_named_like_a_dim", edit(BASE, lambda s: s["tunables"].update(m=[1])),
     "tunables.m", "name of a dimension"),
    ("scalar_overflows_int32", edit(BASE, lambda s: s["signature"]["scalars"][0].update(
        value="m * n * 64")), "signature.scalars[0].value", "does not fit int32"),
    ("default_dims_out_of_bounds", edit(BASE, put("default_dims", {"m": 0, "n": 5})),
     "default_dims", "shape.m must be in [1, 65536]"),
    ("edge_shape_missing_dim", edit(BASE, put("edge_shapes", [{"m": 4}])), "edge_shapes[0]",
     "missing n"),
    ("missing_reference_file", edit(BASE, lambda s: s["files"].pop("reference.cu")),
     "reference.source", "not among the files"),
    ("file_not_named", edit(BASE, lambda s: s["files"].update({"extra.cu": "// x\n"})),
     "files.extra.cu", "is not named"),
    ("absolute_source_name", edit(BASE, put("kernel.source", "/etc/passwd")), "kernel.source",
     "absolute path"),
    ("transform_named_revert_last", edit(BASE, lambda s: s["transforms"][0].update(
        name="revert_last")), "transforms[0].name", "is taken"),
    ("transform_sets_unknown_tunable", edit(BASE, lambda s: s["transforms"][0].update(
        set={"tile_z": "t"}, args=[{"name": "t", "choices": [1]}])),
     "transforms[0].set.tile_z", "is not a tunable"),
    ("baseline_outside_domain", edit(BASE, put("baseline.tile_x", 48)), "baseline.tile_x",
     "not in its domain"),
    ("baseline_breaks_a_restriction", edit(BASE, put("baseline.pad", 1)), "baseline",
     "violates restrictions[4]"),
]


def test_there_are_enough_kinds_of_bad_spec() -> None:
    assert len(CASES) >= 20
    assert len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize(("case", "spec", "field", "words"), CASES, ids=[c[0] for c in CASES])
def test_each_bad_spec_is_refused_naming_the_field(case: str, spec: dict[str, Any],
                                                    field: str, words: str) -> None:
    start = time.perf_counter()
    with pytest.raises(SpecError) as info:
        validate_spec(spec)
    elapsed = time.perf_counter() - start
    assert info.value.field == field, (case, str(info.value))
    assert words in info.value.problem, (case, str(info.value))
    assert str(info.value) == f"{info.value.field}: {info.value.problem}"
    assert elapsed < 5.0, f"{case} took {elapsed:.1f} s to refuse"
    with pytest.raises(SpecError):  # nothing can be built from it either
        build_family(spec)


def test_the_base_specs_themselves_are_good() -> None:
    assert validate_spec(BASE)["name"] == "transpose"
    assert validate_spec(JINJA_BASE)["name"] == "scale_jinja"


# ---- the directory form -----------------------------------------------------------------
def write_dir(root: Path, spec: dict[str, Any], files: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "family.json").write_text(json.dumps(spec))
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def dir_spec() -> tuple[dict[str, Any], dict[str, str]]:
    spec = {k: v for k, v in copy.deepcopy(BASE).items() if k != "files"}
    return spec, dict(BASE["files"])


def test_a_good_directory_loads(tmp_path: Path) -> None:
    spec, files = dir_spec()
    loaded = load_spec_dir(write_dir(tmp_path / "fam", spec, files))
    assert validate_spec(loaded) == validate_spec(BASE)


def test_a_symlink_leaving_the_directory_is_refused(tmp_path: Path) -> None:
    spec, files = dir_spec()
    secret = tmp_path / "secret.cuh"
    secret.write_text("// a file outside the family\n")
    root = write_dir(tmp_path / "fam", spec, files)
    (root / "vec_access.cuh").unlink()
    os.symlink(secret, root / "vec_access.cuh")
    with pytest.raises(SpecError) as info:
        load_spec_dir(root)
    assert info.value.field == "includes[0]"
    assert "symlink" in info.value.problem


@pytest.mark.parametrize(("source", "words"), [
    ("/etc/passwd", "absolute path"), ("../transpose.cu", "leaves the family's directory"),
    ("missing.cu", "does not exist"), ("sub/./x.cu", "leaves the family's directory"),
])
def test_bad_file_names_in_a_directory_are_refused(tmp_path: Path, source: str,
                                                   words: str) -> None:
    spec, files = dir_spec()
    spec["kernel"]["source"] = source
    with pytest.raises(SpecError) as info:
        load_spec_dir(write_dir(tmp_path / "fam", spec, files))
    assert info.value.field == "kernel.source"
    assert words in info.value.problem


def test_oversized_files_and_bad_json_are_refused(tmp_path: Path) -> None:
    spec, files = dir_spec()
    files["transpose.cu"] += "// padding\n" * 30000
    with pytest.raises(SpecError) as info:
        load_spec_dir(write_dir(tmp_path / "big", spec, files))
    assert info.value.field == "kernel.source"
    assert "at most 262144" in info.value.problem
    root = tmp_path / "nan"
    root.mkdir()
    (root / "family.json").write_text('{"name": "x", "tolerance": NaN}')
    with pytest.raises(SpecError) as info:
        load_spec_dir(root)
    assert info.value.field == "family.json"
    (root / "family.json").write_text('{"name": ')
    with pytest.raises(SpecError) as info:
        load_spec_dir(root)
    assert "is not JSON" in info.value.problem
    spec, files = dir_spec()
    spec["files"] = {"transpose.cu": "x"}
    with pytest.raises(SpecError) as info:
        load_spec_dir(write_dir(tmp_path / "embedded", spec, files))
    assert info.value.field == "files"


# ---- text, render cost and expression ranges (what a reliability review sent) ------------
def _with_edges(spec: dict[str, Any], edges: list[dict[str, int]]) -> dict[str, Any]:
    spec["edge_shapes"] = edges
    return spec


def _nested(depth: int) -> list[Any]:
    out: list[Any] = []
    for _ in range(depth):
        out = [out]
    return out


_NO_MIN_EDGE = [{"m": 7, "n": 33}, {"m": 130, "n": 66}]
_JOIN_BOMB = "{{ range(70000)|join('\\n#define QQQQQQQQQQQQ 1') }}\n"

HOSTILE: list[tuple[str, dict[str, Any], str, str]] = [
    ("surrogate_in_a_source", edit(BASE, lambda s: kernel_text(
        s, s["files"][KERNEL] + "// \ud800\n")), f"files.{KERNEL}", "lone surrogate"),
    ("surrogate_in_the_description", edit(BASE, put("description", "desc \udfff")),
     "description", "lone surrogate"),
    ("surrogate_in_a_buffer_doc", edit(BASE, buffer(0, doc="rows \udc80")),
     "signature.buffers[0].doc", "lone surrogate"),
    ("surrogate_in_a_dim_doc", edit(BASE, lambda s: s["dims"][0].update(doc="\ud83d")),
     "dims[0].doc", "lone surrogate"),
    ("surrogate_in_an_expression", edit(BASE, put("metric.work", "8 * m * n \udfff")),
     "metric.work", "lone surrogate"),
    ("surrogate_in_a_key", edit(BASE, lambda s: s.update({"x\ud800": 1})), "x\\ud800",
     "lone surrogate"),
    ("surrogate_in_a_file_name", edit(BASE, lambda s: s["files"].update({"a\udfff.cu": ""})),
     "files.a\\udfff.cu", "lone surrogate"),
    ("surrogate_in_a_transform_doc", edit(BASE, lambda s: s["transforms"][0].update(
        doc="\udfffsquare")), "transforms[0].doc", "lone surrogate"),
    ("surrogate_in_an_include", edit(BASE, lambda s: s["files"].update({
        "vec_access.cuh": s["files"]["vec_access.cuh"] + "/* \udbff */\n"})),
     "files.vec_access.cuh", "lone surrogate"),
    ("surrogate_in_the_reference", edit(BASE, lambda s: s["files"].update({
        "reference.cu": "\ud800" + s["files"]["reference.cu"]})), "files.reference.cu",
     "lone surrogate"),
    ("nested_a_thousand_deep", edit(BASE, lambda s: s.update(description=_nested(1000))),
     "description" + "[0]" * 32,
     "nests deeper than 32"),
    ("jinja_join_bomb", jinja(_JOIN_BOMB + _KERNEL_SIG + "{}\n"), "kernel.source",
     "grows past 65536"),
    ("jinja_join_of_a_long_list", jinja("{{ range(65537)|join(',') }}" + _KERNEL_SIG + "{}\n"),
     "kernel.source", "grows past 65536"),
    ("jinja_length_bomb", jinja("{{ (range(60000)|join('x'))|length }}" + _KERNEL_SIG
                                + "{}\n"), "kernel.source", "the template"),
    ("jinja_output_past_the_limit", jinja(
        "{% for i in range(90000) %}#define QQQQQQQQQQQQ{{ i }} 1 // padding padding\n"
        "{% endfor %}" + _KERNEL_SIG + "{}\n"), "kernel.source", "exceeds 2097152 bytes"),
    ("count_negative_below_the_edges", _with_edges(edit(BASE, buffer(0, count="m * n - 5")),
                                                   _NO_MIN_EDGE),
     "signature.buffers[0].count", "is -4 at the dimensions' bounds m=1, n=1"),
    ("count_zero_at_a_bound", _with_edges(edit(BASE, buffer(1, count="m * n - m")),
                                          _NO_MIN_EDGE),
     "signature.buffers[1].count", "is 0 at the dimensions' bounds m=1, n=1"),
    ("count_absurd_at_the_default", edit(BASE, buffer(1, count="m * n * 1000000000")),
     "signature.buffers[1].count", "GiB at default_dims 8192x8192"),
    ("count_divides_by_zero_at_a_bound", _with_edges(edit(
        BASE, buffer(0, count="m * n // (m - 1)")), _NO_MIN_EDGE),
     "signature.buffers[0].count", "at the dimensions' bounds m=1"),
    ("grid_zero_below_the_edges", _with_edges(edit(BASE, put("launch.grid", [
        "n // tile_x", "ceil_div(m, tile_y)"])), [{"m": 64, "n": 64}]),
     "launch.grid[0]", "is 0 at the dimensions' bounds m=1, n=1"),
    ("reference_grid_negative_at_a_bound", _with_edges(edit(BASE, put(
        "reference.grid", ["m - 2"])), _NO_MIN_EDGE),
     "reference.grid[0]", "is -1 at the dimensions' bounds m=1"),
    ("reference_smem_negative_at_a_bound", _with_edges(edit(BASE, lambda s: s[
        "reference"].update(dynamic_smem="4 * (m - 3)")), _NO_MIN_EDGE),
     "reference.dynamic_smem", "is -8 bytes at the dimensions' bounds m=1"),
    ("reference_writes_float_but_float64_declared", edit(BASE, lambda s: s["files"].update({
        "reference.cu": s["files"]["reference.cu"].replace("double* __restrict__ out",
                                                           "float* __restrict__ out")})),
     "reference.outputs_dtype", "is float64, but transpose_reference takes the output "
                                "'output' as 'float* __restrict__ out' (parameter 2): declare "
                                "\"outputs_dtype\": \"float32\""),
    ("reference_takes_an_int_pointer_output", edit(BASE, lambda s: s["files"].update({
        "reference.cu": s["files"]["reference.cu"].replace("double* __restrict__ out",
                                                           "int* __restrict__ out")})),
     "reference.outputs_dtype", "it must be double*"),
    ("reference_takes_a_double_input", edit(BASE, lambda s: s["files"].update({
        "reference.cu": s["files"]["reference.cu"].replace("const float* __restrict__ in",
                                                           "const double* __restrict__ in")})),
     "signature.buffers[0]", "make it const float*"),
    ("reference_misses_a_scalar", edit(BASE, lambda s: s["files"].update({
        "reference.cu": s["files"]["reference.cu"].replace(", int n)", ")")})),
     "reference.kernel", "takes 3 parameters but is passed 4"),
    ("buffer_named_in", edit(BASE, buffer(0, name="in")), "signature.buffers[0].name",
     "keyword of the spec's Python-like expressions"),
    ("work_negative_at_a_bound", _with_edges(edit(BASE, put("metric.work", "8 * m * n - 9")),
                                             _NO_MIN_EDGE),
     "metric.work", "is -1 at the dimensions' bounds m=1, n=1"),
]


@pytest.mark.parametrize(("case", "spec", "field", "words"), HOSTILE,
                         ids=[c[0] for c in HOSTILE])
def test_each_hostile_spec_is_refused_naming_the_field_in_under_a_second(
        case: str, spec: dict[str, Any], field: str, words: str) -> None:
    start = time.process_time()
    with pytest.raises(SpecError) as info:
        validate_spec(spec)
    cpu = time.process_time() - start
    assert info.value.field == field, (case, str(info.value))
    assert words in info.value.problem, (case, str(info.value))
    str(info.value).encode("utf-8")  # the message itself can be sent
    assert cpu < 1.0, f"{case} cost {cpu:.2f} CPU s to refuse"


def test_a_template_near_every_limit_is_registered_from_a_few_renders(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Each point renders 1.8 MB within the budget: registration checks the baseline and
    stops at MAX_CHECKED_BYTES (three points) instead of rendering each of the 130 points
    that give every tunable's every value. Counted, not timed: the three take about 0.8 CPU
    seconds on an idle 2-core machine and twice that under load; all 130, about a minute."""
    from kernels.userspec import source
    from kernels.userspec.validate import MAX_CHECKED_BYTES

    spec = jinja("{% for i in range(19000) %}#define QQQQQQQQQQQQ{{ i }}_{{ unroll }} 1 // "
                 + "p" * 60 + "\n{% endfor %}\n" + _KERNEL_SIG + "{ int i = blockIdx.x * "
                 "{{ block }} + threadIdx.x; if (i < n) y[i] = x[i]; }\n")
    spec["tunables"] = {"block": [64, 128, 256, 512], "unroll": list(range(1, 65)),
                        "z": list(range(64))}
    rendered: list[int] = []
    render = source.render_point

    def counted(spec: dict[str, Any], point: dict[str, Any]) -> str:
        text = render(spec, point)
        rendered.append(len(text))
        return text

    monkeypatch.setattr(source, "render_point", counted)
    start = time.process_time()
    validate_spec(spec)
    cpu = time.process_time() - start
    assert all(1_700_000 < n <= source.MAX_RENDERED_BYTES for n in rendered), rendered
    assert len(rendered) == 3
    assert sum(rendered[:-1]) < MAX_CHECKED_BYTES <= sum(rendered)
    assert cpu < 10.0, f"{cpu:.1f} CPU s for {len(rendered)} renders"


def test_a_render_past_its_cpu_time_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """The render's clock is its thread's CPU time, so that a busy host (other processes, other
    threads holding the GIL) does not refuse a good template; past it, the field is named."""
    from kernels.userspec import source

    spec = jinja(_KERNEL_SIG + "{ {% for i in range(2000) %}{{ i }}{% endfor %} }\n")
    build_family(spec)
    monkeypatch.setattr(source, "RENDER_SECONDS", 0.0)
    with pytest.raises(SpecError, match="more than 0 s of CPU to render") as refused:
        build_family(spec)
    assert refused.value.field == "kernel.source"


def test_the_rendered_source_cache_is_bounded_in_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    from kernels.userspec import family as fam

    monkeypatch.setattr(fam, "RENDER_CACHE_BYTES", 200_000)
    family = build_family(BASE)
    for point in family.space()[:200]:
        family.render(point)
    assert 0 < fam.rendered_cache_bytes() <= 200_000


def test_a_spec_at_the_bounds_of_its_dims_is_accepted() -> None:
    """Counts and grids that hold at every corner: the checks refuse nothing good."""
    spec = _with_edges(edit(BASE, buffer(0, count="m * n")), _NO_MIN_EDGE)
    spec["dims"][0]["max"] = (1 << 31) - 1  # m * n past 2**64 at the top corner: fine
    spec["dims"][1]["max"] = (1 << 31) - 1
    validate_spec(spec)


def test_in_as_a_buffer_name_says_why_and_what_to_do() -> None:
    with pytest.raises(SpecError) as info:
        validate_spec(edit(BASE, buffer(0, name="in")))
    assert "rename it, e.g. in_buf" in info.value.problem
    assert "need not match the CUDA parameter names" in info.value.problem


def test_a_five_thousand_digit_number_in_family_json_names_line_and_field(
        tmp_path: Path) -> None:
    spec, files = dir_spec()
    root = write_dir(tmp_path / "fam", spec, files)
    text = (root / "family.json").read_text().replace('"min": 1', '"min": ' + "9" * 5000, 1)
    (root / "family.json").write_text(text)
    start = time.process_time()
    with pytest.raises(SpecError) as info:
        load_spec_dir(root)
    assert time.process_time() - start < 1.0
    assert info.value.field == "family.json"
    assert "an integer of 5000 characters at line 1 column" in info.value.problem
    assert "(field 'min')" in info.value.problem
    assert "set_int_max_str_digits" not in str(info.value)


def test_upper_case_dimension_names_take_the_named_shape_form() -> None:
    spec = copy.deepcopy(BASE)
    text = json.dumps({k: v for k, v in spec.items() if k != "files"})
    for old, new in (('"m"', '"R"'), ('"n"', '"C"'), ("m * n", "R * C"), ("(n,", "(C,"),
                     ("(m,", "(R,"), ("8 * m * n", "8 * R * C")):
        text = text.replace(old, new)
    upper = {**json.loads(text), "files": spec["files"]}
    upper["signature"]["scalars"] = [{"name": "rows", "value": "R"},
                                     {"name": "cols", "value": "C"}]
    family = build_family(upper)
    assert family.parse_dims("R=8192,C=4096").as_dict() == {"R": 8192, "C": 4096}
    assert family.parse_dims("r=64, c=32").as_dict() == {"R": 64, "C": 32}
    assert family.parse_dims("8192x4096").as_dict() == {"R": 8192, "C": 4096}
    with pytest.raises(ValueError, match="unknown dimension"):
        family.parse_dims("R=8,K=4")


@pytest.mark.parametrize(("name", "raw", "field", "words"), [
    ("transpose.cu", b"\xff\xfe// latin-1 \xe9\n", "kernel.source", "is not UTF-8 text"),
    ("transpose.cu", "// utf-16\n".encode("utf-16"), "kernel.source", "is not UTF-8 text"),
    ("transpose.cu", b"// a CESU-8 surrogate \xed\xa0\x80\n", "kernel.source",
     "is not UTF-8 text"),
    ("reference.cu", b"// overlong \xc0\xaf\n", "reference.source", "is not UTF-8 text"),
    ("vec_access.cuh", b"// truncated \xe2\x82\n", "includes[0]", "is not UTF-8 text"),
    ("family.json", b'{"name": "transpose\xff"}', "family.json", "is not UTF-8 text"),
])
def test_files_that_are_not_utf8_are_refused_naming_them(
        tmp_path: Path, name: str, raw: bytes, field: str, words: str) -> None:
    spec, files = dir_spec()
    root = write_dir(tmp_path / "fam", spec, files)
    (root / name).write_bytes(raw)
    with pytest.raises(SpecError) as info:
        load_spec_dir(root)
    assert info.value.field == field, str(info.value)
    assert words in info.value.problem
