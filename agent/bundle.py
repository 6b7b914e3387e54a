"""The export bundle of a team's library: a self-contained folder that runs a family's tuned
kernels from PyTorch and from C++ without tuneforge.

:func:`write_bundle` takes a family and a list of :class:`BundleEntry` (shape -> point, with its
figures and provenance) and writes:

- ``cubins/<point-id>.cubin``: one per distinct point, built by the compile path
  (``worker.compile.compile_candidate``: its on-disk cache makes a repeat free), and
  ``cubins/reference.cubin``, the family's reference kernel;
- ``dispatch.json``: the family's dimensions and signature, its fallback, the GPU the cubins
  are for, the points and the entries with the exact launch at each shape (``docs/LIBRARY.md``
  documents every field);
- ``tuneforge_loader.py``: the standalone Python loader (``agent/bundle_files``);
- ``tuneforge_dispatch.h``: the C++ dispatch table and launcher (:mod:`agent.bundle_header`);
- ``README.md``: how to call it.
"""

from __future__ import annotations

import ast
import json
import shutil
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, NamedTuple

from agent.bundle_header import render_header, render_readme
from kernels.base import Dims, Rejection, params_key
from kernels.expr import parse
from kernels.family import reference_setup
from worker.compile import Compiler, compile_candidate

#: ``dispatch.json``'s ``format`` and ``version`` (the loader refuses any other)
FORMAT = "tuneforge-bundle"
VERSION = 1
LOADER_FILE = "tuneforge_loader.py"
HEADER_FILE = "tuneforge_dispatch.h"
REFERENCE_CUBIN = "cubins/reference.cubin"
#: ``source`` values of the library's entries (``tuned``: the best measured at the shape;
#: ``fallback``: the library's dispatch rule's pick for a shape nobody tuned)
SOURCES = ("tuned", "fallback", "nearest", "rule_book")


class BundleError(ValueError):
    """An entry or a point that cannot go into a bundle; the message names it."""


@dataclass(frozen=True)
class BundleEntry:
    """One shape of the library and the point that runs there."""

    shape: Dims
    params: Any
    measured_us: float | None = None
    vendor_us: float | None = None
    #: whether ``measured_us`` was measured at ``shape`` itself
    measured_at_shape: bool = False
    #: ``tuned``, ``fallback``, … (:data:`SOURCES`)
    source: str = "tuned"
    #: campaign, iteration, time, date, commit of the measurement
    provenance: Mapping[str, Any] = field(default_factory=dict)
    #: the shape's near-ties (``agent.library.TIE``), fastest first: each one's params,
    #: measured time and provenance; the loader times them on a GPU other than the one that
    #: measured them
    alternates: Sequence[tuple[Any, float | None, Mapping[str, Any]]] = ()


def point_id(family: Any, params: Any) -> str:
    """The point's identity in a bundle: the hash of its canonical parameters."""
    canonical = params.canonical() if hasattr(params, "canonical") else params
    return params_key(canonical.to_dict())


def tensor_shape(count: str, dim_names: Sequence[str]) -> list[str] | None:
    """The tensor shape a buffer of ``count`` elements takes (``"m * k"`` -> ``["m", "k"]``):
    the dimensions whose product the count is, each once; None for any other expression (the
    buffer is then flat)."""
    factors: list[str] = []

    def walk(node: ast.expr) -> bool:
        if isinstance(node, ast.Name) and node.id in dim_names and node.id not in factors:
            factors.append(node.id)
            return True
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            return walk(node.left) and walk(node.right)
        return False

    return factors if walk(parse(count)) else None


def reference_launch_expressions(family: Any) -> dict[str, Any] | None:
    """The reference kernel's launch as expressions of the dimensions, where the family
    declares it so (a family from a spec: its ``reference`` grid, block and dynamic shared
    memory), else None (the loader then cannot run the reference at a shape of its own)."""
    spec = getattr(family, "spec", None)
    ref = spec.get("reference") if isinstance(spec, Mapping) else None
    if not isinstance(ref, Mapping) or "grid" not in ref or "block" not in ref:
        return None
    grid = [str(e) for e in ref["grid"]] + ["1"] * (3 - len(ref["grid"]))
    block = [str(e) for e in ref["block"]] + ["1"] * (3 - len(ref["block"]))
    return {"grid": grid, "block": block, "dynamic_smem": str(ref.get("dynamic_smem") or "0")}


def family_section(family: Any) -> dict[str, Any]:
    """``dispatch.json``'s ``family``: name, dimensions with bounds, signature (each buffer's
    tensor shape where its count is a product of dimensions)."""
    names = [d.name for d in family.dims]
    return {
        "name": family.name,
        "display_name": str(getattr(family, "display_name", family.name)),
        "description": family.description,
        "dims": [d.to_dict() for d in family.dims],
        "signature": {
            "buffers": [{"name": b.name, "dtype": b.dtype, "role": b.role, "count": b.count,
                         "shape": tensor_shape(b.count, names), "doc": b.doc}
                        for b in family.signature.buffers],
            "scalars": [{"name": s.name, "dtype": s.dtype, "value": s.value}
                        for s in family.signature.scalars],
        },
    }


class _Point(NamedTuple):
    """A point that runs at a checked entry's shape: the entry's own or a near-tie."""

    params: Any
    pid: str
    launch: dict[str, Any]
    measured_us: float | None
    provenance: Mapping[str, Any]


class _Checked(NamedTuple):
    entry: BundleEntry
    shape: Dims
    #: the entry's point, then the near-ties that launch at the shape
    points: list[_Point]


def _checked_entries(family: Any, entries: Sequence[BundleEntry], sm_count: int
                     ) -> list[_Checked]:
    out: list[_Checked] = []
    seen: set[Dims] = set()
    for number, entry in enumerate(entries):
        where = f"entry {number} ({entry.shape})"
        try:
            shape = family.make_dims(dict(entry.shape))
        except ValueError as exc:
            raise BundleError(f"{where}: {exc}") from None
        if shape in seen:
            raise BundleError(f"{where}: shape {shape} has two entries")
        seen.add(shape)
        if entry.source not in SOURCES:
            raise BundleError(f"{where}: source {entry.source!r}; known: {', '.join(SOURCES)}")
        fixed = family.fixed_dims(entry.params)
        if fixed is not None and fixed != shape:
            raise BundleError(f"{where}: the point is compiled for {fixed} only")
        launch = family.launch(entry.params, shape, sm_count=sm_count)
        if isinstance(launch, Rejection):
            raise BundleError(f"{where}: the point cannot launch there: {launch.message}")
        points = [_Point(entry.params, point_id(family, entry.params), launch.to_dict(),
                         entry.measured_us, entry.provenance)]
        for params, us, origin in entry.alternates:
            pid = point_id(family, params)
            if any(pid == p.pid for p in points):
                continue
            fixed = family.fixed_dims(params)
            at = family.launch(params, shape, sm_count=sm_count)
            if (fixed is None or fixed == shape) and not isinstance(at, Rejection):
                points.append(_Point(params, pid, at.to_dict(), us, origin))
        out.append(_Checked(entry, shape, points))
    return out


def write_bundle(out_dir: Path | str, family: Any, entries: Sequence[BundleEntry], *,
                 compiler: Compiler, arch: str, sm_count: int, gpu_name: str,
                 provenance: Mapping[str, Any]) -> Path:
    """Write the bundle of ``entries`` into ``out_dir`` (new or empty); its path.

    Every point is compiled for ``arch`` (the GPU's; a point may ask for its ``a`` variant)
    and every launch computed for ``sm_count`` SMs. :class:`BundleError` names an entry whose
    shape is out of bounds or repeated, whose point is compiled for another shape, cannot
    launch there, or does not compile."""
    out = Path(out_dir)
    if out.exists() and any(out.iterdir()):
        raise BundleError(f"--out {out}: the folder is not empty")
    if compiler.arch != arch:
        raise BundleError(f"the compiler builds for {compiler.arch}, the bundle is for {arch}")
    checked = _checked_entries(family, entries, sm_count)
    unique: dict[str, Any] = {}
    for c in checked:
        for point in c.points:
            unique.setdefault(point.pid, point.params)
    ref_name = family.reference_launch(family.default_dims).kernel_name
    with ThreadPoolExecutor(max_workers=max(1, compiler.workers)) as pool:
        futures = {pid: pool.submit(compile_candidate, compiler, family, params)
                   for pid, params in unique.items()}
        ref_future = pool.submit(compiler.compile, family.reference_source(), entry=ref_name)
        results = {pid: f.result() for pid, f in futures.items()}
        ref_result = ref_future.result()
    for pid, result in results.items():
        if result.status != "ok" or result.cubin_path is None:
            why = result.error or (result.rejection or {}).get("message") or result.status
            raise BundleError(f"point {pid} ({unique[pid].to_dict()}) does not compile: {why}")
    if ref_result.status != "ok" or ref_result.cubin_path is None:
        raise BundleError(f"the reference kernel of {family.name} does not compile: "
                          f"{ref_result.error}")

    (out / "cubins").mkdir(parents=True, exist_ok=True)
    points: dict[str, dict[str, Any]] = {}
    for c in checked:
        for point in c.points:
            if point.pid not in points:
                result = results[point.pid]
                shutil.copyfile(str(result.cubin_path), out / "cubins" / f"{point.pid}.cubin")
                fixed = family.fixed_dims(point.params)
                points[point.pid] = {
                    "cubin": f"cubins/{point.pid}.cubin", "arch": result.arch,
                    "kernel_names": [], "params": unique[point.pid].to_dict(),
                    "fixed_shape": fixed.as_dict() if fixed is not None else None,
                    "source_hash": result.source_hash,
                    "regs_per_thread": result.regs_per_thread,
                    "provenance": dict(point.provenance),
                }
            names = points[point.pid]["kernel_names"]
            launch = point.launch
            for step in (launch.get("prologue"), launch, launch.get("epilogue")):
                if step and step["kernel_name"] not in names:
                    names.append(step["kernel_name"])
    shutil.copyfile(str(ref_result.cubin_path), out / REFERENCE_CUBIN)

    vendor = family.vendor
    ref_launch = reference_launch_expressions(family)
    fallback = ("vendor" if vendor is not None and vendor.op else
                "reference" if ref_launch is not None else "none")
    setup = reference_setup(family)
    data: dict[str, Any] = {
        "format": FORMAT, "version": VERSION,
        "family": family_section(family),
        "vendor": ({"name": vendor.name, "op": vendor.op, "doc": vendor.doc}
                   if vendor is not None else None),
        "reference": {"cubin": REFERENCE_CUBIN, "kernel_name": ref_name,
                      "style": setup["style"], "outputs_dtype": setup["outputs_dtype"],
                      "launch": ref_launch},
        "fallback": fallback,
        "gpu": {"name": gpu_name, "arch": arch, "sm_count": sm_count},
        "compiler": {"nvcc_version": ref_result.nvcc_version,
                     "flags": [f for f in ref_result.flags
                               if not f.startswith(("-arch", "-gencode"))]},
        "provenance": dict(provenance),
        "points": points,
        "entries": [
            {"shape": c.shape.as_dict(), "point": c.points[0].pid,
             "launch": c.points[0].launch, "measured_us": c.entry.measured_us,
             "vendor_us": c.entry.vendor_us, "measured_at_shape": c.entry.measured_at_shape,
             "source": c.entry.source, "provenance": dict(c.entry.provenance),
             "alternates": [{"point": p.pid, "launch": p.launch, "measured_us": p.measured_us}
                            for p in c.points[1:]]}
            for c in checked],
    }
    (out / "dispatch.json").write_text(json.dumps(data, indent=1) + "\n")
    loader = resources.files("agent.bundle_files").joinpath(LOADER_FILE).read_text()
    (out / LOADER_FILE).write_text(loader)
    (out / HEADER_FILE).write_text(render_header(data))
    (out / "README.md").write_text(render_readme(data))
    return out


def replay_entries(family: Any, dataset: Any = None) -> list[BundleEntry]:
    """One entry per shape of ``family``'s replay dataset (default: its first): the fastest
    correct point measured there, with its time, the vendor's and the dataset's provenance
    (what a bundle holds without a library: the benchmarks and tests build theirs so)."""
    from core.replay import ReplayDataset

    data = dataset if dataset is not None else ReplayDataset(family.replay_datasets()[0], family)
    date, commit = data.provenance()
    vendor = data.meta.get("vendor_us") or {}
    out = []
    for text in data.shapes():
        shape = family.parse_dims(text)
        best = data.best(shape)
        if best is None:
            continue
        out.append(BundleEntry(
            shape=shape, params=family.params_from_dict(best["params"]),
            measured_us=float(best["perf"]["avg_us"]), vendor_us=vendor.get(text),
            measured_at_shape=True, source="tuned",
            provenance={"replay": data.path.name, "gpu": data.meta.get("gpu"), "date": date,
                        "commit": commit}))
    return out


def library_entries(family: Any, entries: Sequence[Mapping[str, Any]],
                    picks: Sequence[Mapping[str, Any]] = (), *,
                    unmeasured: bool = False) -> list[BundleEntry]:
    """The bundle of a team's library (``GET /library/{family}``'s entries, with ``GET
    .../pick`` answers for shapes of the program nobody measured): one entry a shape whose
    pick is a point measured there (with ``unmeasured``, also a point never measured at the
    shape: rule 2's nearest best). A measured shape where the vendor ran faster is left out,
    as is a shape whose pick is the vendor or (without ``unmeasured``) unmeasured: the loader
    runs the vendor there."""
    out: list[BundleEntry] = []
    for e in entries:
        if e.get("vendor_us") is not None and e["vendor_us"] < e["avg_us"]:
            continue
        out.append(BundleEntry(
            shape=family.make_dims(e["dims"]), params=family.params_from_dict(e["params"]),
            measured_us=float(e["avg_us"]), vendor_us=e.get("vendor_us"),
            measured_at_shape=True, source="tuned",
            provenance={k: e.get(k) for k in ("campaign_id", "candidate_id", "iteration",
                                              "measured_at", "commit", "backend", "gpu")},
            alternates=[(family.params_from_dict(a["params"]), a.get("avg_us"),
                         {k: a.get(k) for k in ("campaign_id", "candidate_id")})
                        for a in e.get("alternates") or ()]))
    measured = {str(x.shape) for x in out}
    for p in picks:
        if p["kind"] != "point" or p["shape"] in measured:
            continue
        if not p["measured_at_shape"] and not unmeasured:
            continue
        out.append(BundleEntry(
            shape=family.parse_dims(p["shape"]), params=family.params_from_dict(p["params"]),
            measured_us=p.get("avg_us"), vendor_us=p.get("vendor_us"),
            measured_at_shape=bool(p["measured_at_shape"]),
            source="tuned" if p["measured_at_shape"] else "nearest",
            provenance={"from_shape": p.get("from_shape"), "rule": p.get("rule"),
                        "reason": p.get("reason")}))
    return out

