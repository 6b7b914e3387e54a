"""Kernel quality against cuBLAS on a GPU: given points, each at several shapes, same run.

    python bench/kernel_quality.py --params '{"smem": true, ...}' --label best \\
        --shapes 4096x4096x4096,8192x8192x8192,2048x2048x2048,8192x1024x4096

For every (point, shape): correctness on all three input distributions (verify mode) and the
benchmark in the isolated child; cuBLAS fp32 (TF32 off, ``addmm`` + ``relu_``) timed in a
separate process on the same GPU during the same run. Prints a table last and one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kernels.gemm_bias_relu import FAMILY  # noqa: E402
from kernels.gemm_bias_relu.shape import Shape  # noqa: E402
from worker.compile import Compiler  # noqa: E402
from worker.evaluate import EvalOptions, GpuEvaluator  # noqa: E402


def main() -> int:
    """Measure and print."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--params", action="append", default=[], help="JSON of a point (repeatable)")
    ap.add_argument("--label", action="append", default=[], help="label per --params")
    ap.add_argument("--shapes", default="4096x4096x4096,8192x8192x8192,2048x2048x2048,"
                                        "8192x1024x4096")
    ap.add_argument("--cache", type=Path, default=Path("/tmp/tf-cache"))
    ap.add_argument("--no-baseline", action="store_true",
                    help="leave out the seed's baseline (141 ms a launch at 4096³)")
    ap.add_argument("--runs", type=int, default=EvalOptions.bench_runs,
                    help="timed runs per point (the median is reported)")
    ap.add_argument("--target-run-ms", type=float, default=EvalOptions.target_run_ms,
                    help="length of a timed run: longer runs see the clock the GPU sustains "
                         "under its power limit (an 8192³ tensor-core kernel draws ~650 W)")
    ap.add_argument("--max-reps", type=int, default=EvalOptions.max_reps,
                    help="launches per timed run at most")
    args = ap.parse_args()
    points = [] if args.no_baseline else [("baseline", FAMILY.baseline)]
    for i, text in enumerate(args.params):
        label = args.label[i] if i < len(args.label) else f"point{i}"
        points.append((label, FAMILY.params_from_dict(json.loads(text))))
    compiler = Compiler(args.cache, arch="sm_90", workers=os.cpu_count() or 4)
    ev = GpuEvaluator(FAMILY, compiler, options=EvalOptions(
                          timeout_s=120.0, bench_runs=args.runs,
                          target_run_ms=args.target_run_ms, max_reps=args.max_reps),
                      vendor_cache=args.cache / "vendor.json")
    # every point compiles in the pool at once (nvcc is the slow part on a fresh cache)
    futures = {label: ev.compile(params) for label, params in points}
    rows = []
    for shape_text in args.shapes.split(","):
        shape = Shape.parse(shape_text)
        vendor = ev.vendor_us(shape)
        for label, params in points:
            if label == "baseline" and shape.flops > 2 * 4096 ** 3:
                continue  # the baseline at 8192³ takes seconds per launch: not informative
            compiled = futures[label].result()
            m = ev.measure(params, compiled, shape=shape, iteration=0, seed=17, verify=True)
            perf = m.perf or {}
            rows.append({
                "label": label, "shape": str(shape), "status": m.status,
                "avg_us": perf.get("avg_us"), "tflops": perf.get("throughput_tflops"),
                "spread_pct": perf.get("spread_pct"), "vendor_us": vendor,
                "vs_cublas": round(vendor / perf["avg_us"], 3) if vendor and perf else None,
                "rel_err": (m.correctness or {}).get("rel_err"),
                "max_scaled_err": (m.correctness or {}).get("max_scaled_err"),
                "regs": compiled.regs_per_thread, "spill_bytes": compiled.spill_bytes,
                "params": params.to_dict(), "error": m.error,
            })
    ev.close()
    print(f"{'label':12s} {'shape':16s} {'status':8s} {'us':>10s} {'TFLOP/s':>8s} "
          f"{'cuBLAS us':>10s} {'x cuBLAS':>8s} {'rel err':>9s}")
    for r in rows:
        print(f"{r['label']:12s} {r['shape']:16s} {r['status']:8s} {r['avg_us'] or 0:10.1f} "
              f"{r['tflops'] or 0:8.2f} {r['vendor_us'] or 0:10.1f} {r['vs_cublas'] or 0:8.3f} "
              f"{r['rel_err'] or 0:9.2e}")
    print(json.dumps({"device": ev.device.get("name"), "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
