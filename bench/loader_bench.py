"""The exported library's Python loader at random shapes, beside the vendor, on a GPU with torch
and cuda-bindings.

It builds its own bundles (no database): per family, the replay dataset's best point at each of
its shapes (``tuned``, with the library's figure) plus, up to half the shapes, random shapes
given the best point of the nearest replay shape where it launches (``nearest``: an entry, no
figure of its own); the other half are random shapes with no entry (the fallback runs). Shapes
are log-uniform: GEMM 1..8192 per dimension, softmax 1..65536 rows and 1..262144 columns (at
most 2^28 elements). For every shape:

- the loader's output is checked by the family's rule (``scaled``, tolerance 1e-4) against a
  float64 reference;
- the loader, the vendor, the strongest peer (``bench/loader_timing.py``'s ``peer``:
  softmax's ``torch.compile``, one compiled function for every shape; the GEMM's three
  cuBLAS bf16 GEMMs composed, splitting the fp32 operands in each call as the loader's
  kernel does; its output checked by the same rule) and (at shapes with an
  entry) the cubin launched directly are timed: L2 flushed (a 256 MiB write) before each
  call, then a GPU sleep that hides the call's host time, CUDA events around the GPU's
  work, median; then the loader, the vendor and the peer back to back (wall time a call
  over a run of at least 200 ms each), where a small shape's call costs its host time and
  the fallback's dispatch shows;
- the dispatch overhead: back-to-back calls at a small shape with an entry, wall time a call,
  the loader against the direct launch of the same cubin (bare, and with its outputs
  allocated), in nine rounds that time each in turn: the median over the rounds of the
  difference within a round.

Prints a table and writes ``loader_bench.json`` under ``--out`` (default ``$OUT`` or ``.``)::

    python bench/loader_bench.py --out $OUT [--work DIR]
"""

from __future__ import annotations

import argparse
import ctypes
import itertools
import json
import math
import os
import random
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from agent.bundle import BundleEntry, replay_entries, write_bundle  # noqa: E402
from bench.loader_timing import (  # noqa: E402
    PEER_NAMES,
    TOLERANCE,
    back_to_back_us,
    flushed_us,
    inputs,
    interleaved_us,
    peer,
    per_call_us,  # noqa: F401 (runs/2026-12-04-8e26d46-library imports it from here)
    reps_for,
    scaled_error,
    vendor,
)
from bench.peer_table import geomean  # noqa: E402
from kernels import get_family  # noqa: E402
from kernels.base import Dims, Rejection  # noqa: E402
from worker.compile import Compiler  # noqa: E402

#: the ranges the loader is held to
RANGES = {"gemm_bias_relu": {"m": 8192, "n": 8192, "k": 8192},
          "softmax": {"rows": 65536, "cols": 262144}}
MAX_SOFTMAX_ELEMENTS = 1 << 28
#: each back-to-back run lasts at least this long (seconds of wall time)
SUSTAINED_S = 0.2
#: the small shape the dispatch overhead is measured at, per family (an entry is made there)
SMALL = {"softmax": {"rows": 64, "cols": 1024}, "gemm_bias_relu": {"m": 64, "n": 64, "k": 64}}


def log_uniform(rng: random.Random, hi: int) -> int:
    """An integer in [1, hi], uniform in its logarithm."""
    return max(1, min(hi, int(round(math.exp(rng.uniform(0.0, math.log(hi)))))))


def random_shape(rng: random.Random, family: str) -> dict[str, int]:
    """A shape in the loader's ranges (softmax: at most 2^28 elements)."""
    while True:
        shape = {name: log_uniform(rng, hi) for name, hi in RANGES[family].items()}
        if family != "softmax" or shape["rows"] * shape["cols"] <= MAX_SOFTMAX_ELEMENTS:
            return shape


def nearest(entries: Sequence[BundleEntry], shape: Dims) -> BundleEntry:
    """The entry whose shape is nearest ``shape`` by the library's distance (the sum of
    ``|ln(a / b)|`` over the dims, ``agent.shapesets.shape_distance``, which this module does
    not import: it needs the database's packages)."""
    return min(entries, key=lambda e: sum(abs(math.log(e.shape[n] / shape[n])) for n in shape))


def plan(family_name: str, rng: random.Random, shapes: int, sm_count: int
         ) -> tuple[list[BundleEntry], list[Dims]]:
    """The bundle's entries (the replay bests, the small shape, then random ``nearest``
    entries up to half of ``shapes``) and ``shapes // 2`` random shapes without an entry."""
    family = get_family(family_name)
    tuned = replay_entries(family)
    entries = list(tuned)
    taken = {e.shape for e in entries}

    def add_nearest(shape: Dims) -> bool:
        base = nearest(tuned, shape)
        if shape in taken or isinstance(family.launch(base.params, shape, sm_count=sm_count),
                                        Rejection):
            return False
        entries.append(BundleEntry(shape, base.params, source="nearest",
                                   provenance={**base.provenance, "from": str(base.shape)}))
        taken.add(shape)
        return True

    add_nearest(family.make_dims(SMALL[family_name]))
    while len(entries) < shapes - shapes // 2:
        add_nearest(family.make_dims(random_shape(rng, family_name)))
    untuned: list[Dims] = []
    while len(untuned) < shapes // 2:
        shape = family.make_dims(random_shape(rng, family_name))
        if shape not in taken:
            untuned.append(shape)
            taken.add(shape)
    return entries, untuned


def build(work: Path, family_name: str, entries: list[BundleEntry], arch: str, sm_count: int,
          gpu_name: str, compiler: Compiler) -> Path:
    """The bundle of ``entries`` under ``work``."""
    return write_bundle(work / family_name, get_family(family_name), entries,
                        compiler=compiler, arch=arch, sm_count=sm_count, gpu_name=gpu_name,
                        provenance={"built_by": "bench/loader_bench.py",
                                    "date": time.strftime("%Y-%m-%d")})


# ---- the cubin launched directly ---------------------------------------------------------
class DirectLaunch:
    """An entry's cubin launched with the CUDA driver bindings and nothing else: its module,
    functions, arguments and output packed once; a call is its launches on torch's current
    stream (the baseline of the dispatch overhead)."""

    def __init__(self, torch: Any, bundle: Path, entry: dict[str, Any], args: Sequence[Any],
                 loader: Any) -> None:
        from cuda.bindings import driver as cu

        self.cu = cu
        data = json.loads((bundle / "dispatch.json").read_text())
        sig = data["family"]["signature"]
        point = data["points"][entry["point"]]
        torch.cuda.synchronize()
        ok = cu.cuModuleLoadData((bundle / point["cubin"]).read_bytes())
        assert ok[0] == cu.CUresult.CUDA_SUCCESS, ok
        self.module = ok[1]
        launch = entry["launch"]
        shape = entry["shape"]
        ins = iter(args)
        self.keep: list[Any] = []
        #: the output buffers the launches write, and the workspace (None without one)
        self.outputs: list[Any] = []
        self.workspace: Any = None
        pointers: dict[str, int] = {}
        for buf in sig["buffers"]:
            t = next(ins) if buf["role"] == "in" else torch.empty(
                eval_count(buf["count"], shape), device="cuda")
            self.keep.append(t)
            if buf["role"] != "in":
                self.outputs.append(t)
            pointers[buf["name"]] = t.data_ptr()
        if launch.get("workspace_bytes"):
            ws = torch.empty(launch["workspace_bytes"], dtype=torch.uint8, device="cuda")
            self.keep.append(ws)
            self.workspace = ws
            pointers["workspace"] = ws.data_ptr()
        scalars = {s["name"]: shape[s["value"]] for s in sig["scalars"]}
        self.steps = []
        for step, main in ((launch.get("prologue"), False), (launch, True),
                           (launch.get("epilogue"), False)):
            if not step:
                continue
            names = ([b["name"] for b in sig["buffers"]] + [s["name"] for s in sig["scalars"]]
                     + (["workspace"] if launch.get("workspace_bytes") else [])
                     ) if main else step["args"]
            cells = [ctypes.c_int32(a) if isinstance(a, int) else
                     ctypes.c_int32(scalars[a]) if a in scalars else ctypes.c_void_p(pointers[a])
                     for a in names]
            array = (ctypes.c_void_p * len(cells))(*[ctypes.addressof(c) for c in cells])
            self.keep += [cells, array]
            fn = cu.cuModuleGetFunction(self.module, step["kernel_name"].encode())[1]
            smem = int(step.get("dynamic_smem_bytes") or 0)
            if smem > 48 * 1024:
                cu.cuFuncSetAttribute(
                    fn, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    smem)
            if main and int(launch.get("cluster_size") or 1) > 1:
                cu.cuFuncSetAttribute(
                    fn, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED,
                    1)
            grid = list(step["grid"])
            if main and launch.get("persistent"):
                # grid x cut to the CTAs resident at once, as the loader cuts it
                grid[0] = int(loader._persistent_x(cu, fn, 0, launch))
            self.steps.append((fn, *grid, *step["block"], smem, ctypes.addressof(array)))
        self.stream = torch.cuda.current_stream().cuda_stream
        self.torch = torch
        self.out_counts = [eval_count(b["count"], shape) for b in sig["buffers"]
                           if b["role"] != "in"]

    def __call__(self) -> None:
        launch = self.cu.cuLaunchKernel
        for fn, gx, gy, gz, bx, by, bz, smem, params in self.steps:
            launch(fn, gx, gy, gz, bx, by, bz, smem, self.stream, params, 0)

    def allocating(self) -> None:
        """The launches after allocating a fresh output of each output buffer, as any
        operator returning new tensors does (they are not written)."""
        empty, torch = self.torch.empty, self.torch
        outs = [empty(count, dtype=torch.float32, device="cuda") for count in self.out_counts]
        self()
        del outs


def eval_count(count: str, shape: dict[str, int]) -> int:
    """A buffer's element count (a product of dimensions)."""
    return math.prod(shape[name.strip()] for name in count.split("*"))


# ---- timing ------------------------------------------------------------------------------
def profile_calls(fn: Callable[[], Any], calls: int) -> list[dict[str, Any]]:
    """Where a call's host time goes: ``calls`` calls under cProfile, the 15 functions with the
    most time of their own (cProfile's own cost inflates every figure alike)."""
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        fn()
    profiler.disable()
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    rows = [{"function": f"{Path(file).name}:{line}:{name}", "calls": count,
             "own_us_a_call": own / calls * 1e6, "total_us_a_call": total / calls * 1e6}
            for (file, line, name), (_prim, count, own, total, _callers) in stats.items()]
    return sorted(rows, key=lambda r: -r["own_us_a_call"])[:15]


def bench_family(torch: Any, loader: Any, bundle: Path, family: str, untuned: list[Dims],
                 flush: Any, seed: int, deadline: float = math.inf) -> dict[str, Any]:
    """Every shape of one family: correctness, times, ratios; and the dispatch overhead.
    Shapes with and without an entry alternate; past ``deadline`` (``time.monotonic()``) the
    shapes not yet measured are left out."""
    lib = loader.load(bundle)
    kernel = lib.kernels[next(iter(lib.kernels))]
    data = json.loads((bundle / "dispatch.json").read_text())
    ven = vendor(torch, family)
    peer_of = peer(torch, family, {})
    rows = []
    with_entry = [(e["shape"], e) for e in data["entries"]]
    without = [(s.as_dict(), None) for s in untuned]
    cases = alternate(with_entry, without)
    for number, (shape, entry) in enumerate(cases):
        dims = get_family(family).make_dims(shape)
        args = inputs(torch, family, dims, seed + number)
        # the peer first: a torch.compile recompile at this shape (its compile workers, its
        # autotuning) done before anything here is timed
        peer_call: Any = None
        peer_error = ""
        try:
            peer_call = peer_of(*args)
            peer_check = scaled_error(torch, family, peer_call(), args)
            torch.cuda.synchronize()
        except Exception as exc:  # a peer that cannot build or run here is this row's note
            peer_call, peer_error = None, f"{type(exc).__name__}: {exc}"[:300]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", loader.FallbackWarning)
            out = kernel(*args)
            check = scaled_error(torch, family, out, args)
            vendor_us = flushed_us(torch, partial(ven, *args), flush, 5)
            reps = reps_for(vendor_us)
            vendor_us = flushed_us(torch, partial(ven, *args), flush, reps)
            loader_us = flushed_us(torch, partial(kernel, *args), flush, reps)
        peer_us = flushed_us(torch, peer_call, flush, reps) if peer_call else None
        row: dict[str, Any] = {
            "shape": str(dims), "entry": entry["source"] if entry else None,
            "passed": check["rel_err"] <= TOLERANCE and check["max_scaled_err"] <= TOLERANCE,
            **check, "loader_us": loader_us, "vendor_us": vendor_us,
            "x_vendor": vendor_us / loader_us, "peer_us": peer_us,
            "x_peer": peer_us / loader_us if peer_us else None,
            "peer_passed": peer_call is not None and (
                peer_check["rel_err"] <= TOLERANCE and peer_check["max_scaled_err"] <= TOLERANCE)}
        if peer_call is None:
            row["peer_error"] = peer_error
        # back to back, each for at least 200 ms of wall time: where a small shape's call is
        # its host time and the fallback's dispatch shows
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", loader.FallbackWarning)
            row["loader_call_us"] = back_to_back_us(torch, partial(kernel, *args), SUSTAINED_S)
        row["vendor_call_us"] = back_to_back_us(torch, partial(ven, *args), SUSTAINED_S)
        row["peer_call_us"] = (back_to_back_us(torch, peer_call, SUSTAINED_S) if peer_call
                               else None)
        row["x_vendor_sustained"] = row["vendor_call_us"] / row["loader_call_us"]
        row["x_peer_sustained"] = (row["peer_call_us"] / row["loader_call_us"] if peer_call
                                   else None)
        if entry is not None:
            direct = DirectLaunch(torch, bundle, entry, args, loader)
            row["direct_us"] = flushed_us(torch, direct, flush, reps)
            row["x_direct"] = row["direct_us"] / loader_us
            if entry.get("measured_us"):
                row["library_us"] = entry["measured_us"]
                row["vs_library"] = loader_us / entry["measured_us"]
        rows.append(row)
        del args, out, peer_call
        print(f"{family} {number + 1}/{len(cases)} {dims} {row['entry'] or 'fallback'}: "
              f"{'ok' if row['passed'] else 'WRONG'}, loader {loader_us:.1f} µs, x vendor "
              f"{row['x_vendor']:.3f} / {row['x_vendor_sustained']:.3f}, x peer "
              + (f"- ({row['peer_error']})" if "peer_error" in row
                 else f"{row['x_peer']:.3f} / {row['x_peer_sustained']:.3f}"), flush=True)
        if time.monotonic() > deadline:
            print(f"{family}: past the deadline, {len(cases) - number - 1} shapes left out",
                  flush=True)
            break
    small = get_family(family).make_dims(SMALL[family])
    entry = next(e for e in data["entries"] if e["shape"] == small.as_dict())
    args = inputs(torch, family, small, seed)
    direct = DirectLaunch(torch, bundle, entry, args, loader)
    rounds = interleaved_us(torch, {"loader": partial(kernel, *args), "direct": direct,
                                    "direct_allocating": direct.allocating,
                                    "vendor": partial(ven, *args)})
    overhead: dict[str, Any] = {"shape": str(small), "rounds": rounds}
    for name, times in rounds.items():
        overhead[f"{name}_us"] = statistics.median(times)
    # the differences within a round, their median over the rounds
    overhead["added_us"] = statistics.median(
        a - b for a, b in zip(rounds["loader"], rounds["direct"], strict=True))
    overhead["dispatch_us"] = statistics.median(
        a - b for a, b in zip(rounds["loader"], rounds["direct_allocating"], strict=True))
    overhead["profile"] = profile_calls(partial(kernel, *args), 5000)
    return {"rows": rows, "overhead": overhead, "peer": PEER_NAMES[family],
            **summary(rows)}


def alternate(first: Sequence[Any], second: Sequence[Any]) -> list[Any]:
    """``first`` and ``second`` taken in turn (what is left of the longer one last)."""
    return [item for pair in itertools.zip_longest(first, second) for item in pair
            if item is not None]


def summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The family's figures over its rows: the geometric means of each ratio (over the vendor
    and the peer, flushed and back to back) at the shapes with an entry (``tuned_…``) and
    those without (``untuned_…``), the fallback's worst ratios and the µs it adds back to
    back; NaN where a group has no rows (a run cut short). A peer that failed its check or
    could not run at a shape counts in none of the peer's means."""
    fallback = [r for r in rows if r["entry"] is None]
    groups = {"tuned": [r for r in rows if r["entry"] is not None], "untuned": fallback}
    found: dict[str, Any] = {}
    for which, group in groups.items():
        for over in ("vendor", "peer"):
            for kind, suffix in (("", ""), ("sustained_", "_sustained")):
                mean = geomean([r[f"x_{over}{suffix}"] for r in group
                                if over == "vendor" or r["peer_passed"]])
                found[f"{which}_{kind}geomean_x_{over}"] = math.nan if mean is None else mean
    found["untuned_worst_x_vendor"] = min((r["x_vendor"] for r in fallback), default=math.nan)
    found["untuned_sustained_worst_x_vendor"] = min(
        (r["x_vendor_sustained"] for r in fallback), default=math.nan)
    found["fallback_added_us_median"] = statistics.median(
        [r["loader_call_us"] - r["vendor_call_us"] for r in fallback] or [math.nan])
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    parser.add_argument("--shapes", type=int, default=50, help="shapes per family")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--budget-s", type=float, default=math.inf,
                        help="seconds for the shapes' timings, shared by the families; the "
                        "shapes left when a family's share has passed are not measured")
    parser.add_argument("--families", default="softmax,gemm_bias_relu")
    parser.add_argument("--work", help="folder for the bundles (kept; default a temporary "
                        "one): examples/library/softmax_demo.cu runs WORK/softmax")
    args = parser.parse_args(argv)
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    major, minor = torch.cuda.get_device_capability()
    props = torch.cuda.get_device_properties(0)
    arch, sm_count = f"sm_{major}{minor}", int(props.multi_processor_count)
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="tf-loader-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    compiler = Compiler(work / "nvcc-cache", arch=arch, workers=os.cpu_count() or 1)
    rng = random.Random(args.seed)
    flush = torch.empty(64 << 20, device="cuda")  # 256 MiB: four H200 L2s
    report: dict[str, Any] = {"date": time.strftime("%Y-%m-%d"), "gpu": props.name,
                              "torch": torch.__version__, "seed": args.seed, "families": {}}
    started = time.monotonic()
    families = args.families.split(",")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for number, family in enumerate(families):
        entries, untuned = plan(family, rng, args.shapes, sm_count)
        bundle = build(work, family, entries, arch, sm_count, props.name, compiler)
        if str(bundle) not in sys.path:
            sys.path.insert(0, str(bundle))
        import tuneforge_loader

        # each family measures until its share of --budget-s has passed
        deadline = started + args.budget_s * (number + 1) / len(families)
        report["families"][family] = bench_family(torch, tuneforge_loader, bundle, family,
                                                  untuned, flush, args.seed, deadline)
        report["seconds"] = time.monotonic() - started
        (out / "loader_bench.json").write_text(json.dumps(report, indent=1))
    compiler.close()
    print_table(report)
    return 0 if all(r["passed"] for f in report["families"].values() for r in f["rows"]) else 1


def print_table(report: dict[str, Any]) -> None:
    """One line per family: correctness, tuned shapes against the direct launch and the
    library's figure, the dispatch overhead, the fallback against the vendor."""
    print(f"loader at random shapes, {report['gpu']}, torch {report['torch']}, "
          f"{report['date']}")
    print(f"{'family':16} {'shapes':>6} {'wrong':>5} {'tuned x direct (min/med)':>25} "
          f"{'vs library (max)':>16} {'overhead us':>12} {'untuned x vendor (gm/min)':>26}")
    print("  (overhead: a call's wall time over the cubin launched directly / over the direct "
          "launch with its outputs allocated; untuned: flushed, then back to back, and the "
          "median µs the fallback adds back to back)")
    for name, fam in report["families"].items():
        rows = fam["rows"]
        tuned = [r for r in rows if r["entry"] is not None]
        direct = sorted(r["x_direct"] for r in tuned)
        library = [r["vs_library"] for r in tuned if "vs_library" in r]
        print(f"{name:16} {len(rows):>6} {sum(not r['passed'] for r in rows):>5} "
              f"{direct[0]:>12.3f}/{statistics.median(direct):<12.3f} "
              f"{max(library) if library else math.nan:>16.3f} "
              f"{fam['overhead']['added_us']:>5.1f} / {fam['overhead']['dispatch_us']:<4.1f} "
              f"{fam['untuned_geomean_x_vendor']:>13.3f}/{fam['untuned_worst_x_vendor']:<12.3f}")
        print(f"{'':16} untuned back to back x vendor (gm/min) "
              f"{fam['untuned_sustained_geomean_x_vendor']:.3f}/"
              f"{fam['untuned_sustained_worst_x_vendor']:.3f}, the fallback adds "
              f"{fam['fallback_added_us_median']:.2f} us a call (median)")
        wrong_peer = sum(not r["peer_passed"] and "peer_error" not in r for r in rows)
        failed_peer = sum("peer_error" in r for r in rows)
        print(f"{'':16} x vendor / x {fam['peer']} (gm, flushed | back to back): "
              f"tuned {fam['tuned_geomean_x_vendor']:.3f} / {fam['tuned_geomean_x_peer']:.3f}"
              f" | {fam['tuned_sustained_geomean_x_vendor']:.3f} / "
              f"{fam['tuned_sustained_geomean_x_peer']:.3f}; untuned "
              f"{fam['untuned_geomean_x_vendor']:.3f} / {fam['untuned_geomean_x_peer']:.3f} | "
              f"{fam['untuned_sustained_geomean_x_vendor']:.3f} / "
              f"{fam['untuned_sustained_geomean_x_peer']:.3f}; the peer wrong at {wrong_peer}"
              + (f", failed to run at {failed_peer}" if failed_peer else ""))


if __name__ == "__main__":
    raise SystemExit(main())
