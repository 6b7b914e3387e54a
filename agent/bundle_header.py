"""The C++ header and the README of an export bundle, rendered from its ``dispatch.json`` data.

The header (``agent/bundle_files/tuneforge_dispatch.h.j2``) holds the dispatch table as static
arrays (each entry's launches with their arguments, its scalars computed at its shape) and a
launcher on the CUDA driver API; one bundle's header per family, several includable in one
program (the launcher is defined once).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

import jinja2

from kernels.expr import evaluate
from kernels.templates import package_environment

#: limits of the header's fixed-size tables (``tuneforge::kMax…``)
MAX_DIMS, MAX_ARGS, MAX_SCALARS = 8, 32, 16
WORKSPACE = "workspace"
SCALAR_TYPES = {"int32": "Int32", "int64": "Int64", "uint32": "UInt32", "uint64": "UInt64",
                "float32": "Float32", "float64": "Float64"}


class HeaderError(ValueError):
    """A bundle the header's tables cannot hold (too many dimensions, arguments, scalars)."""


@lru_cache(maxsize=1)
def _template() -> jinja2.Template:
    return package_environment("agent.bundle_files").get_template("tuneforge_dispatch.h.j2")


def c_identifier(name: str) -> str:
    """``name`` as a C++ identifier (``transpose@1a2b`` -> ``transpose_1a2b``)."""
    ident = re.sub(r"[^A-Za-z0-9_]", "_", name)
    return ident if re.match(r"[A-Za-z_]", ident) else f"f_{ident}"


def c_string(text: str) -> str:
    """A C++ string literal of ``text``."""
    return json.dumps(str(text))


def _arg(kind: str, index: int = 0, literal: int = 0) -> str:
    return f"{{tuneforge::ArgKind::{kind}, {index}, {literal}}}"


def _step(step: Mapping[str, Any] | None, args: Sequence[str], smem: int) -> str:
    if not step:
        return "{nullptr, {0, 0, 0}, {0, 0, 0}, 0, 0, {}}"
    if len(args) > MAX_ARGS:
        raise HeaderError(f"{step['kernel_name']} takes {len(args)} arguments; the header "
                          f"holds {MAX_ARGS}")
    grid = ", ".join(str(int(v)) for v in step["grid"])
    block = ", ".join(str(int(v)) for v in step["block"])
    return (f"{{{c_string(step['kernel_name'])}, {{{grid}}}, {{{block}}}, {smem}, {len(args)}, "
            f"{{{', '.join(args)}}}}}")


def _aux_args(step: Mapping[str, Any], buffers: list[str], scalars: list[str]) -> list[str]:
    out = []
    for arg in step["args"]:
        if isinstance(arg, int) and not isinstance(arg, bool):
            out.append(_arg("Literal", 0, arg))
        elif arg == WORKSPACE:
            out.append(_arg("Workspace"))
        elif arg in buffers:
            out.append(_arg("Buffer", buffers.index(arg)))
        elif arg in scalars:
            out.append(_arg("Scalar", scalars.index(arg)))
        else:
            raise HeaderError(f"{step['kernel_name']}: argument {arg!r} is not a buffer, a "
                              f"scalar, {WORKSPACE!r} or an integer")
    return out


def _number(value: float | None) -> str:
    return "-1.0" if value is None else repr(float(value))


def entry_row(data: Mapping[str, Any], entry: Mapping[str, Any], point_index: int) -> str:
    """One ``tuneforge::Entry`` initializer of the table."""
    family = data["family"]
    dim_names = [d["name"] for d in family["dims"]]
    buffers = [b["name"] for b in family["signature"]["buffers"]]
    scalar_decl = family["signature"]["scalars"]
    scalars = [s["name"] for s in scalar_decl]
    launch = entry["launch"]
    workspace = int(launch.get("workspace_bytes") or 0)
    main_args = [_arg("Buffer", i) for i in range(len(buffers))]
    main_args += [_arg("Scalar", i) for i in range(len(scalars))]
    if workspace:
        main_args.append(_arg("Workspace"))
    values = []
    for s in scalar_decl:
        value = evaluate(s["value"], entry["shape"])
        values.append(f"{{0, {float(value)!r}}}" if s["dtype"].startswith("float")
                      else f"{{{int(value)}LL, 0.0}}")
    dims = ", ".join(f"{int(entry['shape'][n])}LL" for n in dim_names)
    parts = [
        f"{{{dims}}}", str(point_index),
        _step(launch.get("prologue"), _aux_args(launch["prologue"], buffers, scalars)
              if launch.get("prologue") else [], 0),
        _step(launch, main_args, int(launch.get("dynamic_smem_bytes") or 0)),
        _step(launch.get("epilogue"), _aux_args(launch["epilogue"], buffers, scalars)
              if launch.get("epilogue") else [], 0),
        f"{workspace}ULL", str(int(launch.get("cluster_size") or 1)),
        "true" if launch.get("persistent") else "false", str(int(launch.get("group") or 1)),
        f"{{{', '.join(values)}}}", _number(entry.get("measured_us")),
        _number(entry.get("vendor_us")), "true" if entry.get("measured_at_shape") else "false",
        c_string(entry.get("source") or ""),
    ]
    return "{" + ", ".join(parts) + "}"


def render_header(data: Mapping[str, Any]) -> str:
    """``tuneforge_dispatch.h`` of a bundle's ``dispatch.json`` data."""
    family = data["family"]
    dims = family["dims"]
    scalars = family["signature"]["scalars"]
    if len(dims) > MAX_DIMS:
        raise HeaderError(f"{len(dims)} dimensions; the header holds {MAX_DIMS}")
    if len(scalars) > MAX_SCALARS:
        raise HeaderError(f"{len(scalars)} scalars; the header holds {MAX_SCALARS}")
    if not data["entries"]:
        raise HeaderError("a bundle needs at least one entry")
    point_ids = list(data["points"])
    rows = [entry_row(data, e, point_ids.index(e["point"])) for e in data["entries"]]
    return _template().render(
        family=family, gpu=data["gpu"], vendor=data.get("vendor"),
        ident=c_identifier(family["display_name"]),
        entries=data["entries"], points=data["points"],
        dim_names=[d["name"] for d in dims],
        dim_min=[f"{int(d['min'])}LL" for d in dims], dim_max=[f"{int(d['max'])}LL" for d in dims],
        buffers=family["signature"]["buffers"],
        buffer_names=[b["name"] for b in family["signature"]["buffers"]],
        scalar_types=[f"tuneforge::ScalarType::{SCALAR_TYPES[s['dtype']]}" for s in scalars],
        point_rows=[{"id": pid, "cubin": data["points"][pid]["cubin"]} for pid in point_ids],
        entry_rows=rows,
    )


def render_readme(data: Mapping[str, Any]) -> str:
    """The bundle's ``README.md``: what it holds and how to call it from Python and C++."""
    family = data["family"]
    name = family["display_name"]
    sig = family["signature"]
    inputs = [b["name"] for b in sig["buffers"] if b["role"] in ("in", "inout")]
    outputs = [b["name"] for b in sig["buffers"] if b["role"] in ("out", "inout")]
    scalars = [s["name"] for s in sig["scalars"]]
    fallback = {"vendor": f"the vendor operator ({(data.get('vendor') or {}).get('doc') or ''})",
                "reference": "the family's reference kernel (cubins/reference.cubin)",
                "none": "nothing: the call raises NoFallback"}[data["fallback"]]
    shapes = ", ".join("x".join(str(v) for v in e["shape"].values()) for e in data["entries"])
    ident = c_identifier(name)
    lines = [
        f"# tuneforge library bundle: {name}",
        "",
        f"{family['description']}",
        "",
        f"Tuned kernels of `{family['name']}` for {data['gpu']['name']} ({data['gpu']['arch']}): "
        f"{len(data['points'])} cubins, {len(data['entries'])} shapes ({shapes}).",
        "",
        "## Python (torch and `cuda-bindings`; tuneforge is not needed)",
        "",
        "```python",
        "import sys; sys.path.insert(0, \"THIS_FOLDER\")",
        "import tuneforge_loader",
        "lib = tuneforge_loader.load(\"THIS_FOLDER\")",
        f"{', '.join(outputs)} = lib.{name}({', '.join(inputs)})"
        + (f"   # optional keyword scalars: {', '.join(scalars)}" if scalars else ""),
        "```",
        "",
        "Inputs are CUDA tensors of the signature's dtypes, contiguous, shaped by the family's "
        "dimensions; a bad input raises `tuneforge_loader.InputError` naming the argument. "
        "The kernels run on torch's current stream; `lib."
        f"{name}` is also the custom operator `torch.ops.tuneforge_<id>.{name}` and works "
        "under `torch.compile(fullgraph=True)`.",
        "",
        f"A shape with no entry runs {fallback}, and the loader says so once per shape "
        "(a `tuneforge_loader.FallbackWarning`, also logged at INFO on the `tuneforge_loader` "
        f"logger). `lib.{name}.lookup(...)` says what a call would run. On a GPU of the same "
        "compute capability but another name than the one these kernels were tuned on, the "
        "first call says so with a `tuneforge_loader.DeviceWarning`: the results are correct, "
        "but a library tuned on that GPU may be faster. There, the first call at a shape "
        "whose entry lists near-ties (points timed within 3 % of its own) times them all on "
        f"its inputs and runs the fastest from then on; `lib.{name}.ties()` says what it "
        "timed.",
        "",
        "## C++ (the CUDA driver API)",
        "",
        "```cpp",
        "#include \"tuneforge_dispatch.h\"   // nvcc -std=c++17 -I THIS_FOLDER app.cu -lcuda",
        f"tuneforge_{ident}::Library lib(\"THIS_FOLDER\");   // with a CUDA context current",
        "CUresult r = lib.launch(dims, buffers, stream);   // CUDA_ERROR_NOT_FOUND: no entry",
        "```",
        "",
        "`dims` holds " + ", ".join(d["name"] for d in family["dims"]) + "; `buffers` the "
        "device pointers of " + ", ".join(b["name"] for b in sig["buffers"]) + ", in that "
        "order. The launcher passes the scalars, the workspace and any prologue or epilogue "
        "kernel itself.",
        "",
        "`dispatch.json` holds the table (format: tuneforge's docs/LIBRARY.md).",
        "",
    ]
    return "\n".join(lines)
