"""Checking a family spec and putting it in its one normal form (the form that is hashed,
stored, and built into a family).

:func:`validate_spec` refuses the first problem it finds with a :class:`SpecError` naming the
field; what it returns is the normalized spec: every optional field filled in, Kernel
Tuner-style launch fields turned into grid and block expressions, expressions as text.
``validate_spec(validate_spec(s)) == validate_spec(s)``, so the hash of a stored spec is the
hash of what was submitted.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import keyword
import math
import re
from collections.abc import Mapping
from typing import Any

from kernels import BUILTIN
from kernels.arch import MAX_SMEM_BY_ARCH
from kernels.expr import FUNCTIONS, ExpressionError, evaluate, evaluate_int, names, parse
from kernels.family import (
    DEFAULT_TOLERANCE,
    DTYPES,
    FILL_KINDS,
    METRIC_KINDS,
    PEAK_KINDS,
    SCALAR_RANGES,
    Dim,
    Scalar,
    make_dims,
)
from kernels.userspec import source as src
from kernels.userspec.errors import SpecError
from kernels.userspec.files import (
    MAX_FILES,
    MAX_TOTAL_BYTES,
    check_file_name,
    check_file_text,
    named_files,
)

#: Most points a family's space may hold (the product of its tunables' domains).
MAX_POINTS = 1_000_000
MAX_DIMS = 8
MAX_TUNABLES = 32
MAX_DOMAIN = 4096
MAX_RESTRICTIONS = 64
MAX_BUFFERS = 16
MAX_SCALARS = 16
MAX_DISTRIBUTIONS = 8
MAX_EDGE_SHAPES = 16
MAX_TRANSFORMS = 64
#: Most argument combinations a macro-transform may have.
MAX_TRANSFORM_ACTIONS = 4096
#: Rule kinds a user family may declare (``kernels.family.RULES`` less ``scaled``, whose
#: per-element scale only a contract-style reference writes).
USER_RULES = ("norm", "abs_rel", "exact")
TEMPLATES = ("macros", "jinja")
#: The evaluation child fills and checks float32 buffers.
BUFFER_DTYPES = ("float32",)
#: Scalars: every type of :data:`kernels.family.SCALAR_RANGES` (an epsilon, a scale, a size).
SCALAR_DTYPES = tuple(SCALAR_RANGES)
OUTPUT_DTYPES = ("float64", "float32")
#: A CUDA block's limits: threads, and each dimension.
MAX_THREADS = 1024
MAX_BLOCK = (1024, 1024, 64)
MAX_GRID = ((1 << 31) - 1, 65535, 65535)
#: Per-block dynamic shared memory of sm_90 (the largest arch the service targets).
MAX_SMEM = MAX_SMEM_BY_ARCH["sm_90"]
MAX_TOLERANCE = 0.1
#: Bytes a family's buffers (with the float64 reference of each output) may take at its default
#: and edge shapes: the service's default ``gpu_memory_gib``.
MAX_SHAPE_BYTES = 80 * 2**30
#: Rendered bytes a registration checks at most: the baseline always, then each tunable's
#: values until this much was rendered (a point past it is checked when it is rendered).
MAX_CHECKED_BYTES = 2 * src.MAX_RENDERED_BYTES
#: Deepest nesting of objects and lists a spec may have.
MAX_NESTING = 32

_NAME = re.compile(r"^[a-z][a-z0-9_]{1,47}$")
_IDENT = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,47}$")
_RESERVED = {*FUNCTIONS, "True", "False", "None"}

TOP_KEYS = ("name", "description", "dims", "default_dims", "kernel", "includes", "tunables",
            "baseline", "restrictions", "signature", "launch", "reference", "correctness",
            "distributions", "metric", "edge_shapes", "transforms", "files")
REQUIRED = ("name", "dims", "default_dims", "kernel", "tunables", "signature", "launch",
            "reference", "files")


# ---- small checks ------------------------------------------------------------------------
def _shown(key: Any) -> str:
    """A key as a field name can show it (a lone surrogate escaped, never sent raw)."""
    return str(key).encode("utf-8", "backslashreplace").decode("utf-8")


def _utf8(text: str, field: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise SpecError(field, f"is not valid UTF-8 text: {text[exc.start]!r} at character "
                               f"{exc.start} is a lone surrogate (send text as UTF-8; a "
                               "surrogate is half of a pair, not a character)") from None


def check_text(spec: Any) -> None:
    """Every string of ``spec`` (keys, names, descriptions, expressions, file texts) is text
    UTF-8 can hold, and the spec nests at most :data:`MAX_NESTING` levels: a
    :class:`SpecError` names the first field that is not."""
    stack: list[tuple[str, Any, int]] = [("", spec, 0)]
    while stack:
        path, value, depth = stack.pop()
        if depth > MAX_NESTING:
            raise SpecError(path, f"nests deeper than {MAX_NESTING} levels")
        if isinstance(value, str):
            _utf8(value, path or "spec")
        elif isinstance(value, dict):
            for key, item in reversed(value.items()):
                field = f"{path}.{_shown(key)}" if path else _shown(key)
                if isinstance(key, str):
                    _utf8(key, field)
                stack.append((field, item, depth + 1))
        elif isinstance(value, list):
            stack += [(f"{path}[{i}]", item, depth + 1)
                      for i, item in reversed(list(enumerate(value)))]


def _obj(value: Any, field: str, keys: tuple[str, ...], required: tuple[str, ...] = ()
         ) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise SpecError(field, f"must be an object, got {type(value).__name__}")
    for key in value:
        if key not in keys:
            raise SpecError(f"{field}.{key}" if field else str(key),
                            f"unknown field (known: {', '.join(keys)})")
    for key in required:
        if key not in value:
            raise SpecError(f"{field}.{key}" if field else key, "is required")
    return value


def _list(value: Any, field: str, lo: int, hi: int) -> list[Any]:
    if not isinstance(value, list):
        raise SpecError(field, f"must be a list, got {type(value).__name__}")
    if not lo <= len(value) <= hi:
        raise SpecError(field, f"must hold {lo} to {hi} entries, got {len(value)}")
    return value


def _text(value: Any, field: str, limit: int = 500) -> str:
    if not isinstance(value, str):
        raise SpecError(field, f"must be text, got {type(value).__name__}")
    if len(value) > limit:
        raise SpecError(field, f"is {len(value)} characters long (at most {limit})")
    return value


_SUFFIX = {"buffer": "buf", "scalar": "val", "dimension": "dim", "tunable": "t"}


def _ident(value: Any, field: str, what: str = "name") -> str:
    if not isinstance(value, str) or not _IDENT.match(value):
        raise SpecError(field, f"{what} {value!r} must be a C identifier: a letter, then "
                               "letters, digits or '_', at most 48 characters")
    if keyword.iskeyword(value):
        raise SpecError(field, f"{what} {value!r} is a keyword of the spec's Python-like "
                               "expressions (counts, grids and restrictions read names, and "
                               f"{value!r} cannot be one): rename it, e.g. {value}_"
                               f"{_SUFFIX.get(what, 'x')}"
                               "; buffer and scalar names need not match the CUDA "
                               "parameter names, arguments are passed by position")
    if value in _RESERVED:
        raise SpecError(field, f"{what} {value!r} is reserved: the expressions use it as "
                               f"{'a function' if value in FUNCTIONS else 'a constant'}")
    return value


def _int(value: Any, field: str, lo: int, hi: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise SpecError(field, f"must be an integer, got {value!r}")
    if not lo <= value <= hi:
        raise SpecError(field, f"must be in [{lo}, {hi}], got {value}")
    return value


def _float(value: Any, field: str) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise SpecError(field, f"must be a number, got {value!r}")
    if not math.isfinite(value):
        raise SpecError(field, f"must be finite, got {value!r}")
    return float(value)


def _expr(value: Any, field: str, allowed: set[str], what: str) -> str:
    """An expression's text, parsed and reading only ``allowed`` names."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        raise SpecError(field, f"must be an expression (text or an integer), got {value!r}")
    try:
        parse(value)
        used = names(value)
    except ExpressionError as exc:
        raise SpecError(field, str(exc)) from None
    unknown = sorted(used - allowed)
    if unknown:
        raise SpecError(field, f"unknown name(s) {', '.join(map(repr, unknown))} in {value!r}; "
                               f"{what} may read {', '.join(sorted(allowed)) or 'no names'}")
    return value.strip()


def _at(text: str, env: Mapping[str, Any], field: str, where: str) -> Any:
    try:
        return evaluate(text, env)
    except ExpressionError as exc:
        raise SpecError(field, f"{where}: {exc}") from None


def _at_int(text: str, env: Mapping[str, Any], field: str, where: str) -> int:
    try:
        return evaluate_int(text, env)
    except ExpressionError as exc:
        raise SpecError(field, f"{where}: {exc}") from None


def _source_error(field: str, exc: src.SourceError) -> SpecError:
    return SpecError(field, str(exc))


# ---- sections ----------------------------------------------------------------------------
def _files(spec: dict[str, Any]) -> dict[str, str]:
    files = spec["files"]
    if not isinstance(files, dict):
        raise SpecError("files", "must be an object of file name -> text")
    if len(files) > MAX_FILES:
        raise SpecError("files", f"{len(files)} files (at most {MAX_FILES})")
    total = 0
    for name, text in files.items():
        check_file_name(name, f"files.{name}")
        check_file_text(name, text, f"files.{name}")
        total += len(text.encode("utf-8", "surrogatepass"))
    if total > MAX_TOTAL_BYTES:
        raise SpecError("files", f"{total} bytes in all (at most {MAX_TOTAL_BYTES})")
    return dict(sorted(files.items()))


def _dims(value: Any) -> list[dict[str, Any]]:
    out = []
    seen: set[str] = set()
    for i, raw in enumerate(_list(value, "dims", 1, MAX_DIMS)):
        field = f"dims[{i}]"
        d = _obj(raw, field, ("name", "doc", "min", "max"), ("name",))
        name = _ident(d["name"], f"{field}.name", "dimension")
        if name in seen:
            raise SpecError(f"{field}.name", f"dimension {name!r} is declared twice")
        seen.add(name)
        lo = _int(d.get("min", 1), f"{field}.min", 1, (1 << 31) - 1)
        hi = _int(d.get("max", (1 << 31) - 1), f"{field}.max", lo, (1 << 31) - 1)
        out.append({"name": name, "doc": _text(d.get("doc", ""), f"{field}.doc"),
                    "min": lo, "max": hi})
    return out


def _tunables(value: Any, dims: set[str]) -> list[dict[str, Any]]:
    if isinstance(value, dict):  # Kernel Tuner's tune_params: name -> values
        items = [(f"tunables.{k}", k, v) for k, v in value.items()]
    elif isinstance(value, list):
        items = []
        for i, raw in enumerate(value):
            t = _obj(raw, f"tunables[{i}]", ("name", "values"), ("name", "values"))
            items.append((f"tunables[{i}]", t["name"], t["values"]))
    else:
        raise SpecError("tunables", "must be an object of name -> list of values (Kernel "
                                    "Tuner's tune_params) or a list of {name, values}")
    if not 1 <= len(items) <= MAX_TUNABLES:
        raise SpecError("tunables", f"must declare 1 to {MAX_TUNABLES} tunables, got "
                                    f"{len(items)}")
    out = []
    seen: set[str] = set()
    points = 1
    for field, name, values in items:
        _ident(name, field, "tunable")
        if name in dims:
            raise SpecError(field, f"tunable {name!r} has the name of a dimension")
        if name in seen:
            raise SpecError(field, f"tunable {name!r} is declared twice")
        seen.add(name)
        if not isinstance(values, list) or not values:
            raise SpecError(field, "must be a non-empty list of values (an empty domain "
                                   "leaves no point to tune)")
        if len(values) > MAX_DOMAIN:
            raise SpecError(field, f"{len(values)} values (at most {MAX_DOMAIN})")
        bools = all(isinstance(v, bool) for v in values)
        for v in values:
            if not (bools or (isinstance(v, int) and not isinstance(v, bool))):
                raise SpecError(field, f"value {v!r}: a domain holds integers or booleans, "
                                       "not mixed")
            if not bools and abs(v) > (1 << 62):
                raise SpecError(field, f"value {v} is too large")
        if len(set(values)) != len(values):
            raise SpecError(field, "a value is listed twice")
        points *= len(values)
        if points > MAX_POINTS:
            raise SpecError("tunables", f"the space holds more than {MAX_POINTS} points "
                                        "(the product of the domains' sizes)")
        out.append({"name": name, "values": list(values)})
    return out


def _exprs3(value: Any, field: str, allowed: set[str], what: str) -> list[str]:
    items = _list(value, field, 1, 3)
    out = [_expr(v, f"{field}[{i}]", allowed, what) for i, v in enumerate(items)]
    return out + ["1"] * (3 - len(out))


def _launch(value: Any, tunables: set[str], dims: set[str]) -> dict[str, Any]:
    keys = ("grid", "block", "dynamic_smem", "problem_size", "grid_div_x", "grid_div_y",
            "grid_div_z", "block_size_names")
    d = _obj(value, "launch", keys)
    kt_grid = [k for k in ("problem_size", "grid_div_x", "grid_div_y", "grid_div_z") if k in d]
    if "grid" in d and kt_grid:
        raise SpecError(f"launch.{kt_grid[0]}", "give either grid or Kernel Tuner's "
                                                 "problem_size and grid divisors, not both")
    if "block" in d and "block_size_names" in d:
        raise SpecError("launch.block_size_names", "give either block or block_size_names, "
                                                   "not both")
    if "block" in d:
        block = _exprs3(d["block"], "launch.block", tunables, "a block dimension")
    elif "block_size_names" in d:
        bnames = _list(d["block_size_names"], "launch.block_size_names", 1, 3)
        for i, n in enumerate(bnames):
            if n not in tunables:
                raise SpecError(f"launch.block_size_names[{i}]", f"{n!r} is not a tunable")
        block = [*bnames, *["1"] * (3 - len(bnames))]
    else:
        raise SpecError("launch.block", "is required (or Kernel Tuner's block_size_names)")
    if "grid" in d:
        grid = _exprs3(d["grid"], "launch.grid", tunables | dims, "a grid dimension")
    elif "problem_size" in d:
        sizes = _list(d["problem_size"], "launch.problem_size", 1, 3)
        grid = []
        for i, axis in enumerate("xyz"):
            if i >= len(sizes):
                grid.append("1")
                continue
            size = _expr(sizes[i], f"launch.problem_size[{i}]", dims | tunables,
                         "a problem size")
            key = f"grid_div_{axis}"
            divs = d.get(key, [block[i]] if block[i] != "1" else [])
            divs = _list(divs, f"launch.{key}", 0, 8)
            parts = [_expr(v, f"launch.{key}[{j}]", tunables, "a grid divisor")
                     for j, v in enumerate(divs)]
            grid.append(f"ceil_div({size}, {' * '.join(f'({p})' for p in parts)})"
                        if parts else size)
    else:
        raise SpecError("launch.grid", "is required (or Kernel Tuner's problem_size)")
    smem = _expr(d.get("dynamic_smem", "0"), "launch.dynamic_smem", tunables,
                 "the dynamic shared memory")
    return {"grid": grid, "block": block, "dynamic_smem": smem}


def _argument(d: dict[str, Any], field: str, seen: set[str], kind: str, default: str,
              allowed: Any, why: str) -> tuple[str, str]:
    """A buffer's or scalar's name (unique among the arguments, added to ``seen``) and dtype
    (known, and one of ``allowed``; ``why`` says what the others are refused for)."""
    name = _ident(d["name"], f"{field}.name", kind)
    if name in seen:
        raise SpecError(f"{field}.name", f"argument {name!r} is declared twice")
    seen.add(name)
    dtype = d.get("dtype", default)
    if dtype not in DTYPES:
        raise SpecError(f"{field}.dtype", f"unknown dtype {dtype!r} (known: "
                                          f"{', '.join(DTYPES)})")
    if dtype not in allowed:
        raise SpecError(f"{field}.dtype", f"{dtype}: {why}")
    return name, dtype


def _signature(value: Any, dims: set[str]) -> dict[str, Any]:
    d = _obj(value, "signature", ("buffers", "scalars"), ("buffers",))
    seen: set[str] = set()
    buffers = []
    for i, raw in enumerate(_list(d["buffers"], "signature.buffers", 1, MAX_BUFFERS)):
        field = f"signature.buffers[{i}]"
        b = _obj(raw, field, ("name", "dtype", "role", "count", "doc"), ("name", "count"))
        name, dtype = _argument(b, field, seen, "buffer", "float32", BUFFER_DTYPES,
                                "the evaluation child fills and checks float32 buffers only")
        role = b.get("role", "in")
        if role == "inout":
            raise SpecError(f"{field}.role", "inout buffers are not supported in a user "
                                             "family: declare an in and an out buffer")
        if role not in ("in", "out"):
            raise SpecError(f"{field}.role", f"role {role!r}; known: in, out")
        buffers.append({"name": name, "dtype": dtype, "role": role,
                        "count": _expr(b["count"], f"{field}.count", dims, "a buffer count"),
                        "doc": _text(b.get("doc", ""), f"{field}.doc")})
    if not any(b["role"] == "out" for b in buffers):
        raise SpecError("signature.buffers", "no output buffer: at least one buffer must "
                                             "have role 'out'")
    if not any(b["role"] == "in" for b in buffers):
        raise SpecError("signature.buffers", "no input buffer: at least one buffer must "
                                             "have role 'in'")
    scalars = []
    for i, raw in enumerate(_list(d.get("scalars", []), "signature.scalars", 0, MAX_SCALARS)):
        field = f"signature.scalars[{i}]"
        s = _obj(raw, field, ("name", "dtype", "value"), ("name", "value"))
        name, dtype = _argument(s, field, seen, "scalar", "int32", SCALAR_DTYPES,
                                f"scalars are numbers ({', '.join(SCALAR_DTYPES)})")
        scalars.append({"name": name, "dtype": dtype,
                        "value": _expr(s["value"], f"{field}.value", dims, "a scalar value")})
    return {"buffers": buffers, "scalars": scalars}


def _reference(value: Any, dims: set[str], files: dict[str, str]) -> dict[str, Any]:
    d = _obj(value, "reference", ("source", "kernel", "outputs_dtype", "grid", "block",
                                  "dynamic_smem"), ("source", "kernel", "grid", "block"))
    if d["source"] not in files:
        raise SpecError("reference.source", f"{d['source']!r} is not among the files")
    dtype = d.get("outputs_dtype", "float64")
    if dtype not in OUTPUT_DTYPES:
        raise SpecError("reference.outputs_dtype", f"{dtype!r}; known: "
                                                   f"{', '.join(OUTPUT_DTYPES)}")
    return {"source": d["source"], "kernel": _ident(d["kernel"], "reference.kernel", "kernel"),
            "outputs_dtype": dtype,
            "grid": _exprs3(d["grid"], "reference.grid", dims, "the reference's grid"),
            "block": _exprs3(d["block"], "reference.block", set(), "the reference's block"),
            "dynamic_smem": _expr(d.get("dynamic_smem", "0"), "reference.dynamic_smem", dims,
                                  "the reference's dynamic shared memory")}


def _correctness(value: Any) -> dict[str, Any]:
    d = _obj(value, "correctness", ("rule", "tolerance", "atol"), ("rule",))
    rule = d["rule"]
    if rule not in USER_RULES:
        raise SpecError("correctness.rule", f"unknown rule {rule!r}; known: "
                                            f"{', '.join(USER_RULES)}")
    tol = _float(d.get("tolerance", DEFAULT_TOLERANCE), "correctness.tolerance")
    if not 0 < tol <= MAX_TOLERANCE:
        raise SpecError("correctness.tolerance", f"must be in (0, {MAX_TOLERANCE}], got {tol}")
    atol = _float(d.get("atol", 0.0), "correctness.atol")
    if atol < 0:
        raise SpecError("correctness.atol", f"must be >= 0, got {atol}")
    if atol and rule != "abs_rel":
        raise SpecError("correctness.atol", f"only the abs_rel rule reads atol, not {rule}")
    return {"rule": rule, "tolerance": tol, "atol": atol}


def _fill(value: Any, field: str) -> dict[str, Any]:
    if isinstance(value, str):
        value = {"kind": value}
    f = _obj(value, field, ("kind", "scale"), ("kind",))
    if f["kind"] not in FILL_KINDS:
        raise SpecError(f"{field}.kind", f"unknown fill kind {f['kind']!r}; known: "
                                         f"{', '.join(FILL_KINDS)}")
    scale = _float(f.get("scale", 1.0), f"{field}.scale")
    if scale == 0 or abs(scale) > 1e30:
        raise SpecError(f"{field}.scale", f"must be non-zero and at most 1e30, got {scale}")
    return {"kind": f["kind"], "scale": scale}


def _distributions(value: Any, inputs: set[str], buffers: set[str]) -> list[dict[str, Any]]:
    out = []
    seen: set[str] = set()
    for i, raw in enumerate(_list(value, "distributions", 1, MAX_DISTRIBUTIONS)):
        field = f"distributions[{i}]"
        d = _obj(raw, field, ("name", "doc", "default", "fills"), ("name",))
        name = _ident(d["name"], f"{field}.name", "distribution")
        if name in seen:
            raise SpecError(f"{field}.name", f"distribution {name!r} is declared twice")
        seen.add(name)
        fills_raw = d.get("fills", {})
        if not isinstance(fills_raw, dict):
            raise SpecError(f"{field}.fills", "must be an object of input buffer -> fill")
        fills = {}
        for buf, fill in fills_raw.items():
            if buf not in buffers:
                raise SpecError(f"{field}.fills.{buf}", f"no buffer {buf!r} in the signature")
            if buf not in inputs:
                raise SpecError(f"{field}.fills.{buf}", f"{buf!r} is an output: only inputs "
                                                        "are filled")
            fills[buf] = _fill(fill, f"{field}.fills.{buf}")
        out.append({"name": name, "doc": _text(d.get("doc", ""), f"{field}.doc"),
                    "default": _fill(d.get("default", {"kind": d["name"]}
                                           if d["name"] in FILL_KINDS else {"kind": "normal"}),
                                     f"{field}.default"),
                    "fills": dict(sorted(fills.items()))})
    return out


def _metric(value: Any, dims: set[str], signature: dict[str, Any]) -> dict[str, Any]:
    if value is None:
        work = " + ".join(f"4 * ({b['count']})" for b in signature["buffers"])
        return {"kind": "bytes", "work": work, "peak": "copy_bandwidth",
                "doc": "each buffer read or written once (the default metric)"}
    d = _obj(value, "metric", ("kind", "work", "peak", "doc"), ("kind", "work"))
    if d["kind"] not in METRIC_KINDS:
        raise SpecError("metric.kind", f"unknown metric {d['kind']!r}; known: "
                                       f"{', '.join(METRIC_KINDS)}")
    peak = d.get("peak", "fp32_ffma" if d["kind"] == "flops" else "copy_bandwidth")
    if peak not in PEAK_KINDS:
        raise SpecError("metric.peak", f"unknown peak {peak!r}; known: {', '.join(PEAK_KINDS)}")
    return {"kind": d["kind"], "work": _expr(d["work"], "metric.work", dims, "the work"),
            "peak": peak, "doc": _text(d.get("doc", ""), "metric.doc")}


def _transforms(value: Any, tunables: dict[str, list[Any]], dims: set[str]
                ) -> list[dict[str, Any]]:
    out = []
    taken = {"revert_last", *(f"set_{t}" for t in tunables)}
    for i, raw in enumerate(_list(value, "transforms", 0, MAX_TRANSFORMS)):
        field = f"transforms[{i}]"
        t = _obj(raw, field, ("name", "args", "set", "doc"), ("name", "set"))
        name = _ident(t["name"], f"{field}.name", "transform")
        if name in taken:
            raise SpecError(f"{field}.name", f"{name!r} is taken (revert_last, a set_<tunable> "
                                             "action or an earlier transform)")
        taken.add(name)
        sets = t["set"]
        if not isinstance(sets, dict) or not sets:
            raise SpecError(f"{field}.set", "must be a non-empty object of tunable -> "
                                            "expression")
        args = []
        arg_names: set[str] = set()
        for j, a in enumerate(_list(t.get("args", []), f"{field}.args", 0, 4)):
            afield = f"{field}.args[{j}]"
            spec_a = _obj({"name": a} if isinstance(a, str) else a, afield,
                          ("name", "choices"), ("name",))
            aname = _ident(spec_a["name"], f"{afield}.name", "argument")
            if aname in tunables or aname in dims or aname in arg_names:
                raise SpecError(f"{afield}.name", f"argument {aname!r} has the name of a "
                                                  "tunable, a dimension or another argument")
            arg_names.add(aname)
            choices = spec_a.get("choices")
            if choices is None:
                direct = [k for k, v in sets.items() if isinstance(v, str) and v.strip() == aname
                          and k in tunables]
                if not direct:
                    raise SpecError(f"{afield}.choices", f"give the choices of {aname!r} (it "
                                                         "sets no tunable directly)")
                choices = list(tunables[direct[0]])
            _list(choices, f"{afield}.choices", 1, 64)
            if not all(isinstance(c, int) for c in choices):
                raise SpecError(f"{afield}.choices", "choices are integers or booleans")
            args.append({"name": aname, "choices": list(choices)})
        combos = math.prod(len(a["choices"]) for a in args)
        if combos > MAX_TRANSFORM_ACTIONS:
            raise SpecError(f"{field}.args", f"{combos} argument combinations (at most "
                                             f"{MAX_TRANSFORM_ACTIONS})")
        out_set = {}
        for k, v in sets.items():
            if k not in tunables:
                raise SpecError(f"{field}.set.{k}", f"{k!r} is not a tunable")
            out_set[k] = _expr(v, f"{field}.set.{k}", arg_names | set(tunables),
                               "a transform's setting")
        out.append({"name": name, "args": args, "set": out_set,
                    "doc": _text(t.get("doc", ""), f"{field}.doc")})
    return out


# ---- the whole spec ----------------------------------------------------------------------
def validate_spec(spec: Any) -> dict[str, Any]:
    """The normalized spec, or :class:`SpecError` naming the first bad field. Checks the
    shape of every field, every expression (safe evaluator, only the names it may read), the
    sources (kernels only, includes of the family's own files, the kernel name present; a
    Jinja template compiled in the sandbox and the baseline rendered), and the baseline
    launched at the default and the edge shapes."""
    check_text(spec)
    s = _obj(spec, "", TOP_KEYS, REQUIRED)
    name = s["name"]
    if not isinstance(name, str) or not _NAME.match(name):
        raise SpecError("name", f"{name!r} must be 2 to 48 characters of lower-case letters, "
                                "digits and '_', starting with a letter")
    if name in BUILTIN:
        raise SpecError("name", f"{name!r} is the name of a built-in family")
    description = _text(s.get("description", ""), "description")
    files = _files(s)
    dims = _dims(s["dims"])
    dim_names = {d["name"] for d in dims}
    decl = tuple(Dim(d["name"], d["doc"], d["min"], d["max"]) for d in dims)
    try:
        default_dims = make_dims(decl, s["default_dims"]).as_dict()
    except ValueError as exc:
        raise SpecError("default_dims", str(exc)) from None
    tunables = _tunables(s["tunables"], dim_names)
    domains = {t["name"]: t["values"] for t in tunables}
    tun_names = set(domains)
    baseline_raw = s.get("baseline", {})
    if not isinstance(baseline_raw, dict):
        raise SpecError("baseline", "must be an object of tunable -> value")
    for key, value in baseline_raw.items():
        if key not in domains:
            raise SpecError(f"baseline.{key}", f"{key!r} is not a tunable")
        if value not in domains[key] or isinstance(value, bool) != isinstance(
                domains[key][0], bool):
            raise SpecError(f"baseline.{key}", f"{value!r} is not in its domain "
                                               f"{domains[key]}")
    baseline = {t: baseline_raw.get(t, values[0]) for t, values in domains.items()}
    restrictions = [
        _expr(r, f"restrictions[{i}]", tun_names | dim_names, "a restriction")
        for i, r in enumerate(_list(s.get("restrictions", []), "restrictions", 0,
                                    MAX_RESTRICTIONS))]
    kernel = _obj(s["kernel"], "kernel", ("name", "source", "template"), ("name", "source"))
    template = kernel.get("template", "macros")
    if template not in TEMPLATES:
        raise SpecError("kernel.template", f"{template!r}; known: {', '.join(TEMPLATES)}")
    kernel_n = {"name": _ident(kernel["name"], "kernel.name", "kernel"),
                "source": kernel["source"], "template": template}
    includes = _list(s.get("includes", []), "includes", 0, MAX_FILES)
    for i, inc in enumerate(includes):
        check_file_name(inc, f"includes[{i}]")
        if inc not in files:
            raise SpecError(f"includes[{i}]", f"{inc!r} is not among the files")
        if includes.index(inc) != i:
            raise SpecError(f"includes[{i}]", f"{inc!r} is listed twice")
    for fname, field in named_files(s):
        check_file_name(fname, field)
        if fname not in files:
            raise SpecError(field, f"{fname!r} is not among the files")
    named = {n for n, _ in named_files(s)}
    for fname in files:
        if fname not in named:
            raise SpecError(f"files.{fname}", "is not named by kernel.source, reference.source "
                                              "or includes")
    signature = _signature(s["signature"], dim_names)
    launch = _launch(s["launch"], tun_names, dim_names)
    reference = _reference(s["reference"], dim_names, files)
    correctness = _correctness(s.get("correctness", {"rule": "norm"}))
    inputs = {b["name"] for b in signature["buffers"] if b["role"] == "in"}
    distributions = _distributions(s.get("distributions", [{"name": "normal"}]), inputs,
                                   {b["name"] for b in signature["buffers"]})
    metric = _metric(s.get("metric"), dim_names, signature)
    edges = []
    for i, raw in enumerate(_list(s.get("edge_shapes", [{d["name"]: d["min"] for d in dims}]),
                                  "edge_shapes", 1, MAX_EDGE_SHAPES)):
        try:
            edges.append(make_dims(decl, raw).as_dict())
        except ValueError as exc:
            raise SpecError(f"edge_shapes[{i}]", str(exc)) from None
    transforms = _transforms(s.get("transforms", []), domains, dim_names)
    normal = {
        "name": name, "description": description, "dims": dims, "default_dims": default_dims,
        "kernel": kernel_n, "includes": list(includes), "tunables": tunables,
        "baseline": baseline, "restrictions": restrictions, "signature": signature,
        "launch": launch, "reference": reference, "correctness": correctness,
        "distributions": distributions, "metric": metric, "edge_shapes": edges,
        "transforms": transforms, "files": files,
    }
    _check_sources(normal)
    _check_at_shapes(normal)
    return normal


def _check_sources(spec: dict[str, Any]) -> None:
    files = spec["files"]
    own = {n: files[n] for n in spec["includes"]}
    for inc in spec["includes"]:
        try:
            src.inline(files[inc], inc, own)
        except src.SourceError as exc:
            raise _source_error(f"files.{inc}", exc) from None
    ref = spec["reference"]
    try:
        ref_text = src.final_check(src.inline(files[ref["source"]], ref["source"], own))
    except src.SourceError as exc:
        raise _source_error("reference.source", exc) from None
    if not _defines_kernel(ref_text, ref["kernel"]):
        raise SpecError("reference.kernel", f"no extern \"C\" __global__ kernel "
                                            f"{ref['kernel']!r} in {ref['source']!r}")
    _check_reference_parameters(spec, ref_text)
    domains = {t["name"]: t["values"] for t in spec["tunables"]}
    points = [spec["baseline"]]
    if spec["kernel"]["template"] == "jinja":
        text = files[spec["kernel"]["source"]]
        try:  # checked and compiled once: every render below takes it from the cache
            src.compiled_template(text)
        except src.SourceError as exc:
            raise _source_error("kernel.source", exc) from None
        # each tunable's every value once, from the baseline: the template's branches
        for t, values in domains.items():
            points += [{**spec["baseline"], t: v} for v in values[:64] if v != spec["baseline"][t]]
    checked = 0
    for point in points[:512]:
        if checked >= MAX_CHECKED_BYTES:  # the rest are checked when a campaign renders them
            break
        try:
            rendered = src.render_point(spec, point)
        except src.SourceError as exc:
            raise _source_error("kernel.source", exc) from None
        checked += len(rendered)
        if not _defines_kernel(rendered, spec["kernel"]["name"]):
            raise SpecError("kernel.name", f"no extern \"C\" __global__ kernel "
                                           f"{spec['kernel']['name']!r} in "
                                           f"{spec['kernel']['source']!r}")


def kernel_parameters(text: str, name: str) -> list[str] | None:
    """The parameter declarations of the ``__global__`` kernel ``name`` in ``text`` as
    written (``"const float* __restrict__ x"``), or None when no such definition is found."""
    bare = src.strip_comments(text, strings=True)
    for match in re.finditer(rf"__global__\b[^;{{}}()]*?\b{re.escape(name)}\s*\(", bare):
        depth, start = 1, match.end()
        for end in range(start, min(len(bare), start + 20_000)):
            depth += {"(": 1, ")": -1}.get(bare[end], 0)
            if depth == 0:
                params, level, part = [], 0, ""
                for ch in bare[start:end]:
                    level += {"(": 1, "<": 1, ")": -1, ">": -1}.get(ch, 0)
                    if ch == "," and level == 0:
                        params.append(part.strip())
                        part = ""
                    else:
                        part += ch
                params.append(part.strip())
                return [p for p in params if p and p != "void"]
    return None


def _pointee(param: str) -> str | None:
    """``float64``/``float32`` for a ``double*``/``float*`` parameter, ``""`` for another
    pointer, None for a parameter that is no pointer or a type the text does not spell out."""
    if "*" not in param:
        return None
    words = set(re.findall(r"[A-Za-z_]\w*", param.split("*")[0]))
    if "double" in words:
        return "float64"
    if "float" in words:
        return "float32"
    known = {"int", "unsigned", "char", "short", "long", "half", "__half", "__nv_bfloat16",
             "int32_t", "int64_t", "uint32_t", "uint64_t", "bool", "void"}
    return "" if words & known else None


def _check_reference_parameters(spec: dict[str, Any], ref_text: str) -> None:
    """The reference kernel's CUDA parameters against what the launch passes it, by position:
    the signature's buffers (each output in ``outputs_dtype``, each input float32), then its
    scalars. A mismatch the source spells out is refused; a type behind a macro or template
    is left to the compile check."""
    ref = spec["reference"]
    params = kernel_parameters(ref_text, ref["kernel"])
    if params is None:
        return
    buffers, scalars = spec["signature"]["buffers"], spec["signature"]["scalars"]
    if len(params) != len(buffers) + len(scalars):
        raise SpecError("reference.kernel", f"{ref['kernel']} takes {len(params)} parameters "
                        f"but is passed {len(buffers) + len(scalars)}: the signature's "
                        f"{len(buffers)} buffers, then its {len(scalars)} scalars, by position")
    for i, b in enumerate(buffers):
        wanted = ref["outputs_dtype"] if b["role"] == "out" else "float32"
        got = _pointee(params[i])
        if got is None or got == wanted:
            continue
        ctype = {"float64": "double*", "float32": "float*"}
        if b["role"] == "out":
            raise SpecError("reference.outputs_dtype", (
                f"is {wanted}, but {ref['kernel']} takes the output {b['name']!r} as "
                f"{params[i]!r} (parameter {i + 1}): declare \"outputs_dtype\": "
                f"\"{got}\"" if got else
                f"is {wanted}, but {ref['kernel']} takes the output {b['name']!r} as "
                f"{params[i]!r} (parameter {i + 1}): it must be {ctype[wanted]}"))
        raise SpecError(f"signature.buffers[{i}]", f"the input {b['name']!r} is float32, but "
                        f"{ref['kernel']} takes it as {params[i]!r} (parameter {i + 1}): "
                        "make it const float*")


def _defines_kernel(text: str, name: str) -> bool:
    bare = src.strip_comments(text, strings=False)
    return ('extern "C"' in bare and "__global__" in bare
            and re.search(rf"\b{re.escape(name)}\s*\(", bare) is not None)


def _check_at_shapes(spec: dict[str, Any]) -> None:
    """The baseline and the reference launched at the default shape and every edge shape."""
    base = spec["baseline"]
    launch = spec["launch"]
    threads = 1
    for i, text in enumerate(launch["block"]):
        value = _at_int(text, base, f"launch.block[{i}]", "at the baseline")
        if not 1 <= value <= MAX_BLOCK[i]:
            raise SpecError(f"launch.block[{i}]", f"is {value} at the baseline (1 to "
                                                  f"{MAX_BLOCK[i]})")
        threads *= value
    if threads > MAX_THREADS:
        raise SpecError("launch.block", f"{threads} threads a block at the baseline (at most "
                                        f"{MAX_THREADS})")
    smem = _at_int(launch["dynamic_smem"], base, "launch.dynamic_smem", "at the baseline")
    if not 0 <= smem <= MAX_SMEM:
        raise SpecError("launch.dynamic_smem", f"is {smem} bytes at the baseline (0 to "
                                               f"{MAX_SMEM})")
    ref = spec["reference"]
    ref_threads = 1
    for i, text in enumerate(ref["block"]):
        value = _at_int(text, {}, f"reference.block[{i}]", "")
        if not 1 <= value <= MAX_BLOCK[i]:
            raise SpecError(f"reference.block[{i}]", f"is {value} (1 to {MAX_BLOCK[i]})")
        ref_threads *= value
    if ref_threads > MAX_THREADS:
        raise SpecError("reference.block", f"{ref_threads} threads a block (at most "
                                           f"{MAX_THREADS})")
    shapes = [("default_dims", spec["default_dims"])] + [
        (f"edge_shapes[{i}]", e) for i, e in enumerate(spec["edge_shapes"])]
    for where_field, dims in shapes:
        where = f"at {where_field} {'x'.join(str(v) for v in dims.values())}"
        env = {**dims, **base}
        for i, r in enumerate(spec["restrictions"]):
            if not _at(r, env, f"restrictions[{i}]", where):
                raise SpecError("baseline", f"violates restrictions[{i}] ({r!r}) {where}")
        for i, text in enumerate(launch["grid"]):
            value = _at_int(text, env, f"launch.grid[{i}]", where)
            if not 1 <= value <= MAX_GRID[i]:
                raise SpecError(f"launch.grid[{i}]", f"is {value} {where} (1 to "
                                                     f"{MAX_GRID[i]})")
        for i, text in enumerate(ref["grid"]):
            value = _at_int(text, dims, f"reference.grid[{i}]", where)
            if not 1 <= value <= MAX_GRID[i]:
                raise SpecError(f"reference.grid[{i}]", f"is {value} {where} (1 to "
                                                        f"{MAX_GRID[i]})")
        ref_smem = _at_int(ref["dynamic_smem"], dims, "reference.dynamic_smem", where)
        if not 0 <= ref_smem <= MAX_SMEM:
            raise SpecError("reference.dynamic_smem", f"is {ref_smem} bytes {where}")
        for i, b in enumerate(spec["signature"]["buffers"]):
            count = _at_int(b["count"], dims, f"signature.buffers[{i}].count", where)
            if count < 1:
                raise SpecError(f"signature.buffers[{i}].count", f"is {count} {where} (at "
                                                                 "least 1)")
        for i, sc in enumerate(spec["signature"]["scalars"]):
            try:
                Scalar(sc["name"], sc["value"], sc["dtype"]).at(dims)
            except ExpressionError as exc:
                raise SpecError(f"signature.scalars[{i}].value", f"{where}: {exc}") from None
        work = _at_int(spec["metric"]["work"], dims, "metric.work", where)
        if work <= 0:
            raise SpecError("metric.work", f"is {work} {where} (must be positive)")
        need = sum(4 * _at_int(b["count"], dims, "signature.buffers", where)
                   + (16 * _at_int(b["count"], dims, "signature.buffers", where)
                      if b["role"] == "out" else 0)
                   for b in spec["signature"]["buffers"])
        if need > MAX_SHAPE_BYTES:
            big = max(range(len(spec["signature"]["buffers"])), key=lambda i: _at_int(
                spec["signature"]["buffers"][i]["count"], dims, "signature.buffers", where))
            raise SpecError(f"signature.buffers[{big}].count",
                            f"the buffers need {need / 2**30:.3g} GiB {where} (with the "
                            f"float64 reference; at most {MAX_SHAPE_BYTES / 2**30:g} GiB)")
    _check_at_bounds(spec)


def _check_at_bounds(spec: dict[str, Any]) -> None:
    """Every buffer count, grid dimension, the reference's dynamic shared memory and the work
    at each corner of the dimensions' bounds (each at its min or max) where the baseline's
    restrictions hold: a count or grid below 1, a negative size or an expression that cannot
    be evaluated there is refused (the upper limits of a grid are the launch's to refuse)."""
    base = spec["baseline"]
    bounds = [(d["name"], (d["min"], d["max"])) for d in spec["dims"]]
    for corner in itertools.product(*(sorted(set(b)) for _, b in bounds)):
        dims = dict(zip((n for n, _ in bounds), corner, strict=True))
        where = "at the dimensions' bounds " + ", ".join(f"{k}={v}" for k, v in dims.items())
        env = {**dims, **base}
        if not all(_truth(r, env) for r in spec["restrictions"]):
            continue  # the baseline is not launched at this shape
        for i, b in enumerate(spec["signature"]["buffers"]):
            field = f"signature.buffers[{i}].count"
            if (count := _at_bound(b["count"], dims, field, where)) < 1:
                raise SpecError(field, f"is {count} {where} (at least 1)")
        for key, env_of in (("launch.grid", env), ("reference.grid", dims)):
            section, part = key.split(".")
            for i, text in enumerate(spec[section][part]):
                if (value := _at_bound(text, env_of, f"{key}[{i}]", where)) < 1:
                    raise SpecError(f"{key}[{i}]", f"is {value} {where} (at least 1)")
        smem = _at_bound(spec["reference"]["dynamic_smem"], dims, "reference.dynamic_smem",
                         where)
        if smem < 0:
            raise SpecError("reference.dynamic_smem", f"is {smem} bytes {where}")
        work = _at_bound(spec["metric"]["work"], dims, "metric.work", where)
        if work <= 0:
            raise SpecError("metric.work", f"is {work} {where} (must be positive)")


def _at_bound(text: str, env: Mapping[str, Any], field: str, where: str) -> int:
    """``text`` at a corner; a value past 2**64 (a product of large maxima) reads as large,
    any other failure (a division by zero, say) is refused."""
    try:
        return evaluate_int(text, env)
    except ExpressionError as exc:
        if "exceeds 2**64" in str(exc):
            return 1 << 64
        raise SpecError(field, f"{where}: {exc}") from None


def _truth(text: str, env: Mapping[str, Any]) -> bool:
    try:
        return bool(evaluate(text, env))
    except ExpressionError:
        return False


# ---- identity ----------------------------------------------------------------------------
def canonical_json(spec: Mapping[str, Any]) -> str:
    """The canonical JSON text of a (normalized) spec: sorted keys, no spaces, ASCII."""
    return json.dumps(spec, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=False)


def spec_hash(spec: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the canonical JSON of the normalized spec: a changed file, domain or
    rule is a new version, a reordered JSON object is not."""
    return hashlib.sha256(canonical_json(validate_spec(dict(spec))).encode()).hexdigest()


def family_key(spec: Mapping[str, Any]) -> str:
    """``name@<first 12 hex digits of spec_hash>``: the registry key of the family built from
    ``spec`` (what a campaign stores, so a worker finds the exact version by content)."""
    normal = validate_spec(dict(spec))
    digest = hashlib.sha256(canonical_json(normal).encode()).hexdigest()
    return f"{normal['name']}@{digest[:12]}"

