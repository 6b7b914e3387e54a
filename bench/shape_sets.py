"""A shape set against one campaign a shape: what each reaches at every shape, and what it costs.

    python bench/shape_sets.py --kernel softmax --budget 80 --set-budget 440 --out runs/x/
    python bench/shape_sets.py --kernel softmax --shapes 8192x8192,4096x32768 --backend gpu

Each run is ``tuneforge tune`` in a child process, as a user runs it, each on a fresh database:
one campaign of ``--budget`` evaluations at every shape, then the set of all of them under
``--set-budget``, then the same set submitted again on the same database. Prints a table (per
shape: the best time of each, the set's speed over the separate campaign's) and the totals:
evaluations, GPU-seconds (on the replay, the GPU time the replayed measurements took when they
were recorded), wall seconds; writes ``shape-sets.json`` under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
_SCRIPT = Path(sys.executable).with_name("tuneforge")
COMMAND = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "cli.main"]


def tune(home: Path, *args: str) -> tuple[dict[str, Any], float]:
    """One ``tuneforge tune --json``; its result and its wall seconds."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUNEFORGE_")}
    env.update({"TUNEFORGE_HOME": str(home), "COLUMNS": "80"})
    started = time.perf_counter()
    done = subprocess.run([*COMMAND, "tune", "--json", *args], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=3600)
    if done.returncode != 0:
        raise SystemExit(f"tuneforge tune {' '.join(args)}:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.splitlines()[-1]), time.perf_counter() - started


def replay_shapes(kernel: str) -> list[str]:
    """Every shape the family's replay dataset measured."""
    from core.replay import ReplayDataset
    from kernels import get_family

    return ReplayDataset(get_family(kernel).replay_datasets()[0]).shapes()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", default="softmax")
    parser.add_argument("--shapes", help="comma-separated (default: the replay's shapes)")
    parser.add_argument("--budget", type=int, default=80, help="a separate campaign's budget")
    parser.add_argument("--set-budget", type=int, help="the set's (default: 5 x --budget)")
    parser.add_argument("--backend", default="replay")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    shapes = args.shapes.split(",") if args.shapes else replay_shapes(args.kernel)
    set_budget = args.set_budget or 5 * args.budget
    common = ["--kernel", args.kernel, "--backend", args.backend]
    separate: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        for i, shape in enumerate(shapes):
            result, wall = tune(home, *common, "--shape", shape, "--budget", str(args.budget),
                                "--db", str(home / f"sep{i}.db"), "--out", str(home / "o"))
            separate[shape] = {"best_us": (result["best"] or {}).get("avg_us"),
                               "evaluations": result["evaluations"],
                               "gpu_seconds": result["gpu_seconds"], "wall_s": wall,
                               "x_vendor": result["vendor_us"] / result["best"]["avg_us"]
                               if result.get("vendor_us") and result["best"] else None}
        db = str(home / "set.db")
        first, first_wall = tune(home, *common, "--shapes", ",".join(shapes), "--budget",
                                 str(set_budget), "--db", db, "--out", str(home / "o"))
        again, again_wall = tune(home, *common, "--shapes", ",".join(shapes), "--budget",
                                 str(set_budget), "--db", db, "--out", str(home / "o"))
    rows = []
    for row in first["shapes"]:
        sep = separate[row["shape"]]
        best = (row["best"] or {}).get("avg_us")
        rows.append({"shape": row["shape"], "separate_us": sep["best_us"], "set_us": best,
                     "set_over_separate": round(sep["best_us"] / best, 4)
                     if best and sep["best_us"] else None,
                     "separate_x_vendor": sep["x_vendor"], "set_x_vendor": row["x_vendor"],
                     "separate_evaluations": sep["evaluations"],
                     "set_evaluations": row["evaluations"]})
    totals = {
        "separate": {"evaluations": sum(s["evaluations"] for s in separate.values()),
                     "gpu_seconds": round(sum(s["gpu_seconds"] for s in separate.values()), 3),
                     "wall_s": round(sum(s["wall_s"] for s in separate.values()), 2)},
        "set": {"evaluations": first["evaluations"], "gpu_seconds": first["gpu_seconds"],
                "wall_s": round(first_wall, 2)},
        "set_again": {"evaluations": again["evaluations"], "gpu_seconds": again["gpu_seconds"],
                      "served_from_history": again["served_from_history"],
                      "wall_s": round(again_wall, 2)},
    }
    worst = min((r["set_over_separate"] for r in rows if r["set_over_separate"]),
                default=math.nan)
    record = {"kernel": args.kernel, "backend": args.backend, "budget": args.budget,
              "set_budget": set_budget, "shapes": rows, "totals": totals,
              "worst_set_over_separate": worst,
              "gpu_seconds_ratio": round(totals["set"]["gpu_seconds"]
                                         / totals["separate"]["gpu_seconds"], 3)}
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "shape-sets.json").write_text(json.dumps(record, indent=1) + "\n")
    print(f"{'shape':>12} {'separate µs':>12} {'set µs':>9} {'set/sep':>8} {'sep x':>6} "
          f"{'set x':>6}")
    for r in rows:
        print(f"{r['shape']:>12} {r['separate_us']:>12.1f} {r['set_us']:>9.1f} "
              f"{r['set_over_separate']:>8.3f} {r['separate_x_vendor'] or 0:>6.2f} "
              f"{r['set_x_vendor'] or 0:>6.2f}")
    for name, t in totals.items():
        print(f"{name:>10}: {t['evaluations']} evaluations, {t['gpu_seconds']:.2f} GPU-s, "
              f"{t['wall_s']:.1f} s wall")
    print(f"worst set/separate {worst:.3f}; set GPU-seconds / separate "
          f"{record['gpu_seconds_ratio']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
