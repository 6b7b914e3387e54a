"""Measure the replay sub-space of ``gemm_bias_relu`` on a GPU and write the replay dataset.

    python bench/measure_space.py --shape 4096x4096x4096 --budget-s 480 --out data.jsonl.gz

Compiles every point of ``REPLAY_DOMAINS`` in parallel on the host's cores, measures them one by
one in the isolated GPU child (correctness on fresh inputs + edge shapes, then the benchmark) in
a seeded random order, and stops at the time budget: the points measured are then a uniform
random sample of the sub-space (the meta line says how many of how many). Prints a table last.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import git_commit  # noqa: E402
from core.evaluation import EvalOptions  # noqa: E402
from kernels.gemm_bias_relu import FAMILY  # noqa: E402
from kernels.gemm_bias_relu.shape import Shape  # noqa: E402
from kernels.gemm_bias_relu.space import REPLAY_DOMAINS, enumerate_space  # noqa: E402
from worker.compile import Compiler  # noqa: E402
from worker.evaluate import GpuEvaluator  # noqa: E402


def main() -> int:
    """Measure, write, print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="4096x4096x4096")
    ap.add_argument("--budget-s", type=float, default=480.0)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--limit", type=int, default=0, help="measure at most N points (0 = all)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--cache", type=Path, default=Path("/tmp/tf-cache"))
    ap.add_argument("--commit", default=os.environ.get("TUNEFORGE_COMMIT") or git_commit())
    args = ap.parse_args()

    t_start = time.perf_counter()
    shape = Shape.parse(args.shape)
    compiler = Compiler(args.cache, arch="sm_90", workers=os.cpu_count() or 4)
    evaluator = GpuEvaluator(FAMILY, compiler, options=EvalOptions(timeout_s=30.0),
                             vendor_cache=args.cache / "vendor.json")
    vendor_us = evaluator.vendor_us(shape)
    points = list(enumerate_space("sm_90", REPLAY_DOMAINS))
    rng = random.Random(args.seed)
    rng.shuffle(points)
    baseline = FAMILY.baseline
    points.remove(baseline)
    points.insert(0, baseline)  # always measured
    if args.limit:
        points = points[: args.limit]
    futures = [evaluator.compile(p) for p in points]
    t_measure = time.perf_counter()
    meta = {
        "kind": "meta", "family": FAMILY.name, "shape": str(shape),
        "gpu": evaluator.device.get("name"), "device": evaluator.device,
        "driver": evaluator.device.get("driver_version"),
        "date": dt.date.today().isoformat(), "commit": args.commit,
        "vendor_us": {str(shape): vendor_us}, "domains": {k: list(v) for k, v in
                                                         REPLAY_DOMAINS.items()},
        "space_size": len(points), "seed": args.seed,
        "method": "correctness on fresh seeded inputs (1 distribution at the shape, rotating, "
                  "plus 4 edge shapes), then 3 runs of adaptive repetitions, L2 flushed, "
                  "CUDA events, median of run medians",
    }
    rows: list[dict[str, Any]] = []
    counts: dict[str, int] = {}
    gpu_busy = 0.0
    for i, (params, future) in enumerate(zip(points, futures, strict=True)):
        if time.perf_counter() - t_start > args.budget_s:
            break
        compiled = future.result()
        row: dict[str, Any] = {"params": params.to_dict(), "shape": str(shape),
               "compile": compiled.summary(FAMILY.max_smem_limit("sm_90"))}
        if compiled.status != "ok":
            row.update(status=compiled.failure_status, error=compiled.error)
        else:
            m = evaluator.measure(params, compiled, shape=shape, iteration=i, seed=args.seed)
            gpu_busy += m.gpu_seconds
            row.update(status=m.status, correctness=m.correctness, perf=m.perf,
                       profile=m.profile, error=m.error, gpu_seconds=round(m.gpu_seconds, 4))
        counts[row["status"]] = counts.get(row["status"], 0) + 1
        rows.append(row)
    elapsed = time.perf_counter() - t_measure
    meta["measured"] = len(rows)
    meta["measure_seconds"] = round(elapsed, 1)
    meta["gpu_busy_seconds"] = round(gpu_busy, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(args.out, "wt") as fh:
        fh.write(json.dumps(meta) + "\n")
        for row in rows:
            fh.write(json.dumps(row) + "\n")
    evaluator.close()

    ok = [r for r in rows if r["status"] == "ok"]
    best = min(ok, key=lambda r: r["perf"]["avg_us"]) if ok else None
    print(f"\nreplay dataset: {args.out}")
    print(f"{'points measured':34s} {len(rows)} of {len(points)} in the sub-space")
    print(f"{'statuses':34s} {json.dumps(counts)}")
    print(f"{'wall seconds (after compile start)':34s} {elapsed:.1f}")
    print(f"{'evaluations per wall minute':34s} {60 * len(rows) / max(elapsed, 1e-9):.1f}")
    print(f"{'cuBLAS fp32 us':34s} {vendor_us}")
    if best:
        p = best["perf"]
        print(f"{'best point us / TFLOP/s':34s} {p['avg_us']:.1f} / {p['throughput_tflops']:.2f}")
        print(f"{'best point % of cuBLAS':34s} {p['pct_of_vendor']}")
        print(f"{'best params':34s} {json.dumps(best['params'], sort_keys=True)}")
    base = rows[0]
    if base.get("perf"):
        print(f"{'baseline us / TFLOP/s':34s} {base['perf']['avg_us']:.1f} / "
              f"{base['perf']['throughput_tflops']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
