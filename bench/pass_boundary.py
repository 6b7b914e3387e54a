"""What the kernel boundary between a launch's prologue and its kernel costs.

    python bench/pass_boundary.py --points bench/sustained_clock_points.json \\
        --shapes 4096x4096x4096,2048x2048x8192 [--reps 30] [--out DIR]

For each point whose launch has a prologue (the GEMM's split pass): compile it, then time with
CUDA events, L2 flushed before each (a memset of twice the L2 outside the events), the median
of ``--reps``:

- the prologue alone, the kernel alone (after one prologue, so its workspace holds the split
  values), and the pair as a launch enqueues it (prologue, then kernel, one stream);
- the pair with an event between the two, which splits its time into the prologue's and the
  kernel's share;
- a device-to-device copy of the bytes the prologue reads (the input buffers it takes): what a
  pass that reads each byte once and writes as many moves, at the copy engine's rate.

``pair - prologue - kernel`` is what the boundary costs: the launch gap, the kernel's ramp
before its first load, the prologue's drain. Programmatic dependent launch
(``cuLaunchKernelEx`` with programmatic stream serialization, ``griddepcontrol``) can hide no
more than the boundary and the kernel's own setup; this gives the figure to hold a build of it
against. numpy + pycuda + the project's launch contract; prints a table, writes
``boundary.json`` under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kernels import get_family  # noqa: E402
from kernels.base import Rejection  # noqa: E402
from worker import launch_contract as lc  # noqa: E402
from worker.compile import Compiler, compile_candidate  # noqa: E402


def time_point(cuda: Any, point: dict[str, Any], compiler: Compiler, reps: int,
               flush: Any, flush_bytes: int) -> dict[str, Any]:
    """The four timings of one point (µs, medians), or why there are none."""
    family = get_family(point["kernel"])
    params = family.params_from_dict(point["params"])
    dims = family.parse_dims(point["shape"])
    row: dict[str, Any] = {"label": point["label"], "shape": point["shape"]}
    launch = family.launch(params, dims)
    if isinstance(launch, Rejection):
        return {**row, "error": launch.message}
    spec = launch.to_dict()
    if not spec.get("prologue"):
        return {**row, "error": "the launch has no prologue"}
    compiled = compile_candidate(compiler, family, params)
    if compiled.status != "ok" or compiled.cubin_path is None:
        return {**row, "error": f"compile {compiled.status}: {compiled.error}"}
    signature = family.signature.resolve(dims)
    bufs = lc.allocate(cuda, signature, reference=False)
    lc.upload_inputs(cuda, signature, bufs, np.random.default_rng(0))
    ws_bytes = int(spec.get("workspace_bytes") or 0)
    workspace = cuda.mem_alloc(ws_bytes) if ws_bytes else None
    cubin = Path(compiled.cubin_path).read_bytes()
    module = cuda.module_from_buffer(cubin)
    fn = module.get_function(spec["kernel_name"])
    fn.prepare(lc.kernel_format(signature, workspace is not None))
    lc.configure(cuda, fn, spec, cubin)
    aux = lc.module_aux(module)
    stream = cuda.Stream()
    events = [cuda.Event() for _ in range(3)]

    def prologue() -> None:
        lc.enqueue_aux(aux, spec["prologue"], signature, bufs, workspace, stream)

    def kernel() -> None:
        fn.prepared_async_call(lc.grid(fn, spec), tuple(spec["block"]), stream,
                               *lc.kernel_args(signature, bufs, workspace),
                               shared_size=int(spec["dynamic_smem_bytes"]))

    def timed(parts: list[Any]) -> list[float]:
        """Flush, then each part between two events: the parts' µs."""
        cuda.memset_d32_async(flush, 0, flush_bytes // 4, stream)
        events[0].record(stream)
        for i, part in enumerate(parts):
            part()
            events[i + 1].record(stream)
        events[len(parts)].synchronize()
        return [1e3 * events[i + 1].time_since(events[i]) for i in range(len(parts))]

    def both() -> None:
        lc.enqueue(fn, aux, spec, signature, bufs, workspace, stream)

    taken = {str(arg) for arg in spec["prologue"]["args"]}
    copy_bytes = sum(int(b["count"]) * lc.DTYPES[b["dtype"]][0] for b in lc.inputs(signature)
                     if b["name"] in taken)
    source, target = cuda.mem_alloc(copy_bytes), cuda.mem_alloc(copy_bytes)

    def copy() -> None:
        cuda.memcpy_dtod_async(target, source, copy_bytes, stream)

    for _ in range(3):  # warm-up, and a workspace the kernel alone can read
        timed([both])
    runs: dict[str, list[float]] = {"prologue": [], "kernel": [], "pair": [], "split_pro": [],
                                    "split_ker": [], "copy": []}
    for _ in range(reps):
        runs["copy"].append(timed([copy])[0])
        runs["prologue"].append(timed([prologue])[0])
        runs["kernel"].append(timed([kernel])[0])
        runs["pair"].append(timed([both])[0])
        pro, ker = timed([prologue, kernel])
        runs["split_pro"].append(pro)
        runs["split_ker"].append(ker)
    med = {k: statistics.median(v) for k, v in runs.items()}
    lc.free(bufs)
    source.free()
    target.free()
    return {**row, "us": med, "boundary_us": med["pair"] - med["prologue"] - med["kernel"],
            "copy_bytes": copy_bytes, "prologue_pct_of_copy": 100 * med["copy"] / med["prologue"],
            "spread_pct": {k: 100 * (max(v) - min(v)) / statistics.median(v)
                           for k, v in runs.items()}}


def main(argv: list[str] | None = None) -> int:
    """Time every point with a prologue at every shape, print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=Path, required=True,
                    help="JSON list of {kernel, label, shape, params}")
    ap.add_argument("--shapes", default="", help="comma-separated shapes to keep (default all)")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--out", type=Path, default=Path("pass-boundary"))
    ap.add_argument("--cache", type=Path, default=Path("/tmp/tf-cache"))
    args = ap.parse_args(argv)
    import pycuda.autoinit  # noqa: F401  (creates the context)
    import pycuda.driver as cuda

    keep = {s for s in args.shapes.split(",") if s}
    points = [p for p in json.loads(args.points.read_text()) if not keep or p["shape"] in keep]
    flush_bytes = 2 * int(cuda.Context.get_device().get_attribute(
        cuda.device_attribute.L2_CACHE_SIZE))
    flush = cuda.mem_alloc(flush_bytes)
    compiler = Compiler(args.cache, arch="sm_90")
    rows = [time_point(cuda, p, compiler, args.reps, flush, flush_bytes) for p in points]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "boundary.json").write_text(json.dumps(rows, indent=1) + "\n")
    print("µs, medians, L2 flushed before each; boundary = pair - prologue - kernel; copy: the")
    print("prologue's input bytes copied device to device (% = the copy's time over the pass's)")
    print(f"{'shape':>15} {'point':<8} {'prologue':>8} {'copy':>6} {'%':>3} {'kernel':>7} "
          f"{'pair':>7} {'bound':>5} {'in pair':>13}")
    for r in rows:
        if "error" in r:
            print(f"{r['shape']:>15} {r['label']:<8.8} {r['error']}")
            continue
        u = r["us"]
        print(f"{r['shape']:>15} {r['label']:<8.8} {u['prologue']:8.1f} {u['copy']:6.1f} "
              f"{r['prologue_pct_of_copy']:3.0f} {u['kernel']:7.1f} {u['pair']:7.1f} "
              f"{r['boundary_us']:5.1f} {u['split_pro']:6.1f}+{u['split_ker']:6.1f}")
    return 0 if all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
