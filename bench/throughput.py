"""Candidates evaluated per minute on 1..G GPUs of one host: real campaigns, one GPU child each.

    python bench/throughput.py --gpus 1,2,4 --budget 200

Runs ``tuneforge tune --backend gpu --gpus 0..g-1`` (expert policy, 4096³) for each count and
reports evaluations per wall minute, per GPU-minute, scaling efficiency against one GPU and each
run's idle GPU fraction (1 - measured GPU seconds / (GPUs x wall seconds)). Prints a table last
and one JSON line.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    """Run one campaign per GPU count."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpus", default="1,2")
    ap.add_argument("--budget", type=int, default=200)
    ap.add_argument("--shape", default="4096x4096x4096")
    args = ap.parse_args()
    rows = []
    for count in (int(c) for c in args.gpus.split(",")):
        ids = ",".join(str(i) for i in range(count))
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "cli.main", "tune", "--backend", "gpu", "--gpus", ids,
             "--budget", str(args.budget), "--shape", args.shape, "--db",
             f"/tmp/throughput-{count}.db", "--out", f"/tmp/throughput-{count}", "--json"],
            capture_output=True, text=True, cwd=str(ROOT), timeout=900)
        wall = time.perf_counter() - start
        try:
            result = json.loads(done.stdout.strip().splitlines()[-1])
        except (IndexError, json.JSONDecodeError):
            print(done.stderr[-2000:], file=sys.stderr)
            return 1
        campaign_wall = result["wall_seconds"]
        rows.append({
            "gpus": count, "evaluations": result["evaluations"],
            "campaign_wall_s": campaign_wall, "process_wall_s": round(wall, 1),
            "gpu_busy_s": result["gpu_seconds"],
            "per_minute": round(60 * result["evaluations"] / campaign_wall, 1),
            "per_gpu_minute": round(60 * result["evaluations"] / campaign_wall / count, 1),
            "idle_fraction": round(1 - result["gpu_seconds"] / (count * campaign_wall), 3),
            "best_tflops": (result.get("best") or {}).get("throughput_tflops"),
            "pct_of_vendor": result.get("pct_of_vendor"),
        })
    base = rows[0]["per_minute"] / rows[0]["gpus"]
    for r in rows:
        r["scaling_efficiency"] = round(r["per_minute"] / (base * r["gpus"]), 3)
    print(f"{'GPUs':>4s} {'evals':>6s} {'wall s':>7s} {'per min':>8s} {'per GPU-min':>11s} "
          f"{'efficiency':>10s} {'idle':>6s} {'best TFLOP/s':>12s}")
    for r in rows:
        print(f"{r['gpus']:4d} {r['evaluations']:6d} {r['campaign_wall_s']:7.1f} "
              f"{r['per_minute']:8.1f} {r['per_gpu_minute']:11.1f} "
              f"{r['scaling_efficiency']:10.3f} {r['idle_fraction']:6.3f} "
              f"{r['best_tflops'] or 0:12.2f}")
    print(json.dumps({"rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
