"""A Kernel Tuner-style description turned into a family spec (``tuneforge family import-kt``).

The description is JSON with Kernel Tuner's names::

    {"kernel_name": "vector_add", "kernel_source": "<CUDA text>",
     "problem_size": ["n"], "dims": {"n": 1048576},
     "arguments": [{"name": "c", "type": "float32", "role": "out", "size": "n"},
                   {"name": "a", "type": "float32", "size": "n"},
                   {"name": "n", "type": "int32", "value": "n"}],
     "tune_params": {"block_size_x": [32, 64, 128, 256]},
     "restrictions": ["block_size_x >= 64"],
     "grid_div_x": ["block_size_x"], "block_size_names": ["block_size_x"]}

What is mapped:

- ``kernel_name``, ``kernel_source`` (the text; tunables reach it as ``#define`` lines, as in
  Kernel Tuner) → ``kernel`` and the file ``kernel.cu``;
- ``tune_params`` → ``tunables`` (integer or boolean values only);
- ``restrictions`` (a list of expression strings) → ``restrictions``;
- ``problem_size``, ``grid_div_x|y|z``, ``block_size_names`` → ``launch``, with Kernel Tuner's
  defaults (block dimensions ``block_size_x|y|z`` where they are tunables, each grid axis
  divided by its block dimension);
- ``smem_args`` ``{"size": expression of the tunables}`` → ``launch.dynamic_smem``;
- ``arguments`` (Kernel Tuner passes numpy arrays; here each is described) → ``signature``;
- ``dims`` (name → default value; our addition: Kernel Tuner tunes one fixed size) → the
  dimensions, bounded 1..2^31-1. Without ``dims``, integer ``problem_size`` entries become
  dimensions ``size_x``, ``size_y``, ``size_z`` with those defaults;
- ``name``, ``description``, ``correctness``, ``distributions``, ``metric``, ``edge_shapes``,
  ``transforms`` (ours) are copied as they are.

What is not mapped: ``answer`` and ``verify`` (Kernel Tuner compares with arrays computed on
the host; tuneforge needs a reference kernel run on the same fresh inputs). Without
``reference_source`` (CUDA text) and ``reference_name``, the reference is the kernel itself at
the first point of ``tune_params`` the restrictions allow (also the baseline), float32
outputs, judged by the ``norm`` rule: the tuned points are then checked against that one.
``lang`` other than CUDA, ``compiler_options``, ``defines``, ``cmem_args``, ``texmem_args``,
templated kernel names and restrictions given as code are refused with a :class:`SpecError`.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

from kernels.expr import ExpressionError, evaluate
from kernels.family import DEFAULT_TOLERANCE
from kernels.userspec.errors import SpecError

#: Points of tune_params searched for the first one the restrictions allow.
MAX_SEARCH = 100_000

KT_KEYS = ("kernel_name", "kernel_source", "problem_size", "arguments", "tune_params",
           "restrictions", "grid_div_x", "grid_div_y", "grid_div_z", "block_size_names",
           "smem_args", "dims", "lang", "reference_source", "reference_name", "name",
           "description", "correctness", "distributions", "metric", "edge_shapes",
           "transforms")
NOT_MAPPED = ("answer", "verify", "compiler_options", "defines", "cmem_args", "texmem_args",
              "atol", "iterations", "strategy", "observers", "objective")
_COPIED = ("description", "correctness", "distributions", "metric", "edge_shapes", "transforms")
_SIZE_DIMS = ("size_x", "size_y", "size_z")


def from_kernel_tuner(kt: dict[str, Any]) -> dict[str, Any]:
    """The spec (not yet validated: :func:`kernels.userspec.validate_spec` checks it) of a
    Kernel Tuner-style description; :class:`SpecError` names a field that cannot be mapped
    (the module doc lists what is and is not)."""
    if not isinstance(kt, dict):
        raise SpecError("kt", "a Kernel Tuner description must be a JSON object")
    for key in kt:
        if key in NOT_MAPPED:
            raise SpecError(key, f"Kernel Tuner's {key!r} is not mapped (see "
                                 "kernels/userspec/kt.py)")
        if key not in KT_KEYS:
            raise SpecError(key, f"unknown field (known: {', '.join(KT_KEYS)})")
    for key in ("kernel_name", "kernel_source", "problem_size", "arguments", "tune_params"):
        if key not in kt:
            raise SpecError(key, "is required")
    if str(kt.get("lang", "CUDA")).upper() != "CUDA":
        raise SpecError("lang", f"only CUDA kernels are tuned, not {kt['lang']!r}")
    name = kt["kernel_name"]
    if not isinstance(name, str) or "<" in name:
        raise SpecError("kernel_name", f"{name!r}: a templated or non-text kernel name is not "
                                       "mapped; declare the kernel extern \"C\"")
    source = kt["kernel_source"]
    if not isinstance(source, str):
        raise SpecError("kernel_source", "must be the kernel's CUDA text")
    tune = kt["tune_params"]
    if not isinstance(tune, dict):
        raise SpecError("tune_params", "must be an object of name -> list of values")
    for key, values in tune.items():
        if not isinstance(values, list) or not all(
                isinstance(v, int) for v in values):
            raise SpecError(f"tune_params.{key}", "only integer or boolean values are mapped")
    restrictions = kt.get("restrictions", [])
    if not isinstance(restrictions, list) or not all(isinstance(r, str) for r in restrictions):
        raise SpecError("restrictions", "only a list of expression strings is mapped")
    sizes = kt["problem_size"]
    if not isinstance(sizes, list):
        sizes = [sizes]
    dims_in = kt.get("dims")
    if dims_in is None:
        if not all(isinstance(s, int) and not isinstance(s, bool) for s in sizes):
            raise SpecError("dims", "give dims (name -> default value) when problem_size "
                                    "names dimensions")
        dims_in = dict(zip(_SIZE_DIMS, sizes, strict=False))
        sizes = list(_SIZE_DIMS[:len(sizes)])
    if not isinstance(dims_in, dict) or not dims_in:
        raise SpecError("dims", "must be an object of dimension name -> default value")
    launch: dict[str, Any] = {"problem_size": sizes}
    names = kt.get("block_size_names") or [
        n for n in ("block_size_x", "block_size_y", "block_size_z") if n in tune]
    if not names:
        raise SpecError("block_size_names", "no tunable gives the block size (Kernel Tuner's "
                                            "default names are block_size_x, _y, _z)")
    launch["block_size_names"] = list(names)
    for axis in "xyz":
        key = f"grid_div_{axis}"
        if key in kt:
            launch[key] = kt[key]
    smem = kt.get("smem_args")
    if smem is not None:
        if not isinstance(smem, dict) or set(smem) != {"size"}:
            raise SpecError("smem_args", "only {\"size\": expression} is mapped")
        launch["dynamic_smem"] = smem["size"]
    buffers, scalars = [], []
    if not isinstance(kt["arguments"], list):
        raise SpecError("arguments", "must be a list of argument descriptions")
    for i, arg in enumerate(kt["arguments"]):
        field = f"arguments[{i}]"
        if not isinstance(arg, dict) or "name" not in arg:
            raise SpecError(field, "must be an object with a name")
        extra = set(arg) - {"name", "type", "role", "size", "value"}
        if extra:
            raise SpecError(f"{field}.{sorted(extra)[0]}", "unknown field (known: name, type, "
                                                           "role, size, value)")
        if "size" in arg:
            buffers.append({"name": arg["name"], "dtype": arg.get("type", "float32"),
                            "role": arg.get("role", "in"), "count": arg["size"]})
        elif "value" in arg:
            scalars.append({"name": arg["name"], "dtype": arg.get("type", "int32"),
                            "value": arg["value"]})
        else:
            raise SpecError(field, "give size (an array) or value (a scalar)")
    first_point = _first_point(tune, restrictions, dims_in)
    files = {"kernel.cu": source}
    if "reference_source" in kt:
        files["reference.cu"] = kt["reference_source"]
        reference = {"source": "reference.cu", "kernel": kt.get("reference_name", ""),
                     "outputs_dtype": "float64"}
        includes: list[str] = []
    else:
        first = "".join(f"#define {k} {int(v)}\n" for k, v in first_point.items())
        files["reference.cu"] = (f"// the kernel at the first valid point of tune_params\n"
                                 f'{first}#include "kernel.cu"\n')
        reference = {"source": "reference.cu", "kernel": name, "outputs_dtype": "float32"}
        includes = ["kernel.cu"]
    reference["grid"] = _first_grid(launch, first_point)
    reference["block"] = [str(first_point.get(n, n)) for n in names]
    spec: dict[str, Any] = {
        "name": kt.get("name", name.lower()),
        "dims": [{"name": k, "doc": "from the Kernel Tuner problem size"} for k in dims_in],
        "default_dims": dims_in,
        "kernel": {"name": name, "source": "kernel.cu", "template": "macros"},
        "includes": includes,
        "tunables": tune, "baseline": first_point, "restrictions": restrictions,
        "signature": {"buffers": buffers, "scalars": scalars},
        "launch": launch, "reference": reference, "files": files,
    }
    if "correctness" not in kt and "reference_source" not in kt:
        spec["correctness"] = {"rule": "norm", "tolerance": DEFAULT_TOLERANCE}
    for key in _COPIED:
        if key in kt:
            spec[key] = kt[key]
    return spec


def _first_point(tune: dict[str, Any], restrictions: list[str], dims: dict[str, Any]
                 ) -> dict[str, Any]:
    """The first point of ``tune`` (in Kernel Tuner's order) that the restrictions allow at
    the default dimensions: the baseline, and the reference when the description has none."""
    if not tune or not all(tune.values()):
        raise SpecError("tune_params", "every tunable needs a non-empty list of values")
    for count, combo in enumerate(itertools.product(*tune.values())):
        if count >= MAX_SEARCH:
            break
        point = dict(zip(tune, combo, strict=True))
        env = {**{k: v for k, v in dims.items() if isinstance(v, int)}, **point}
        try:
            if all(evaluate(r, env) for r in restrictions):
                return point
        except ExpressionError as exc:
            raise SpecError("restrictions", str(exc)) from None
    raise SpecError("restrictions", f"no point among the first {MAX_SEARCH} of tune_params "
                                    "satisfies them")


def _first_grid(launch: dict[str, Any], first: dict[str, Any]) -> list[str]:
    """The reference's grid: Kernel Tuner's grid at the first point (tunables substituted)."""
    out = []
    block = launch["block_size_names"]
    for i, axis in enumerate("xyz"):
        sizes = launch["problem_size"]
        if i >= len(sizes):
            break
        divs = launch.get(f"grid_div_{axis}", [block[i]] if i < len(block) else [])
        divisor = " * ".join(f"({_subst(str(d), first)})" for d in divs) or "1"
        out.append(f"ceil_div({_subst(str(sizes[i]), first)}, {divisor})")
    return out


def _subst(text: str, values: dict[str, Any]) -> str:
    """``text`` with each tunable name replaced by its value (whole words only)."""
    return re.sub(r"\b[A-Za-z_]\w*\b",
                  lambda m: str(int(values[m.group(0)])) if m.group(0) in values else m.group(0),
                  text)
