"""Kernel quality against cuBLAS on a GPU: given points, each at several shapes, same run.

    python bench/kernel_quality.py --params '{"smem": true, ...}' --label best \\
        --shapes 4096x4096x4096,8192x8192x8192,2048x2048x2048,8192x1024x4096 --out out/

For every (point, shape): correctness on all three input distributions (verify mode), the
protocol's flushed median (L2 flushed before each timed launch, median of run medians) and the
sustained rate (back-to-back launches for at least ``--min-ms``, 250 by default) in the isolated
child. Beside them at each shape, each in a process of its own on the same GPU during the same
run, both figures of cuBLAS fp32 (TF32 off, ``addmm`` + ``relu_``) and of three cuBLAS bf16
GEMMs composed (``bench/gemm_speed.py``). Prints a table last and one JSON line; writes
``kernel_quality.json`` under ``--out`` when given.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.gemm_speed import baselines as measure_baselines  # noqa: E402
from bench.gemm_speed import print_table, ratio, speed_row  # noqa: E402
from core.evaluation import EvalOptions  # noqa: E402
from kernels.gemm_bias_relu import FAMILY  # noqa: E402
from kernels.gemm_bias_relu.shape import Shape  # noqa: E402
from worker.compile import Compiler  # noqa: E402
from worker.evaluate import GpuEvaluator  # noqa: E402

#: a sustained run shorter than this does not see the clock the GPU holds under its power limit
MIN_SUSTAINED_MS = 200.0


def summarize(row: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    """The row's figures against the baselines at its shape: ``x_cublas`` and
    ``x_composition`` (their time over ours), flushed and ``_sustained``."""
    perf, sus = row.get("perf") or {}, row.get("sustained") or {}
    us, sus_us = perf.get("avg_us"), sus.get("us_per_launch")
    cb, co = base.get("cublas") or {}, base.get("composition") or {}
    corr = row.get("correctness") or {}
    return {
        "avg_us": us, "sustained_us": sus_us, "tflops": perf.get("throughput_tflops"),
        "x_cublas": ratio(cb.get("avg_us"), us),
        "x_cublas_sustained": ratio(cb.get("sustained_us"), sus_us),
        "x_composition": ratio(co.get("avg_us"), us),
        "x_composition_sustained": ratio(co.get("sustained_us"), sus_us),
        "rel_err": corr.get("rel_err"), "max_scaled_err": corr.get("max_scaled_err"),
    }


def main() -> int:
    """Measure and print."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--params", action="append", default=[], help="JSON of a point (repeatable)")
    ap.add_argument("--label", action="append", default=[], help="label per --params")
    ap.add_argument("--shapes", default="4096x4096x4096,8192x8192x8192,2048x2048x2048,"
                                        "8192x1024x4096")
    ap.add_argument("--cache", type=Path, default=Path("/tmp/tf-cache"))
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--no-baseline", action="store_true",
                    help="leave out the seed's baseline (141 ms a launch at 4096³)")
    ap.add_argument("--runs", type=int, default=EvalOptions.bench_runs,
                    help="timed runs per point (the median is reported)")
    ap.add_argument("--target-run-ms", type=float, default=EvalOptions.target_run_ms,
                    help="length of a flushed timed run")
    ap.add_argument("--max-reps", type=int, default=EvalOptions.max_reps,
                    help="launches per timed run at most")
    ap.add_argument("--min-ms", type=float, default=250.0,
                    help=f"sustained run length (at least {MIN_SUSTAINED_MS:g}: an 8192³ "
                         "tensor-core kernel draws ~650 W and runs at the clock its power "
                         "limit allows)")
    args = ap.parse_args()
    if args.min_ms < MIN_SUSTAINED_MS:
        ap.error(f"--min-ms must be at least {MIN_SUSTAINED_MS:g}")
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
    rows: list[dict[str, Any]] = []
    baselines: dict[str, dict[str, Any]] = {}
    for shape_text in args.shapes.split(","):
        shape = Shape.parse(shape_text)
        for label, params in points:
            if label == "baseline" and shape.flops > 2 * 4096 ** 3:
                continue  # the baseline at 8192³ takes seconds per launch: not informative
            rows.append(speed_row(ev, label, params, futures[label].result(), shape,
                                  min_ms=args.min_ms, verify=True, seed=17))
            print(f"{shape} {label}: {rows[-1].get('status')}", file=sys.stderr, flush=True)
        baselines[str(shape)] = measure_baselines(shape, args.min_ms)
    ev.close()
    for row in rows:
        row.update(summarize(row, baselines[row["shape"]]))
    report = {"device": ev.device, "min_ms": args.min_ms, "rows": rows, "baselines": baselines}
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "kernel_quality.json").write_text(json.dumps(report, indent=1, default=str))
    print_table(rows, baselines, ev.device, args.min_ms)
    print(json.dumps(report, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
