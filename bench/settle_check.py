"""Does stopping a settled campaign lose anything? Each replay campaign twice, through the
``tuneforge tune`` a user runs: once with ``--settle-after 0`` (the budget the only stop), once
with the default ``settle_after`` (``agent.engine.lifecycle.SETTLE_AFTER``), and their bests side
by side, with the evaluations each took and, of the full run, the longest stretch of evaluations
between two accepted improvements (what a settle window must exceed).

    .venv/bin/python -m bench.settle_check [--budget 600] [--seeds 0,1,2]
        [--tolerances 1e-4,1e-5] [--parallel 1,2] [--softmax-shapes all]
        [--json runs/settle-check.json]

Prints a table last (with the commit); a run whose settled best differs from its full one is
marked and makes the exit status 1.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
#: the CLI of the tree this script is in (run from ROOT), whatever tree the venv installed
TUNEFORGE = [sys.executable, "-m", "cli.main"]


def tune(folder: Path, args: list[str]) -> dict[str, Any]:
    """One ``tuneforge tune --json`` on the replay, in a database of its own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUNEFORGE_")}
    env["TUNEFORGE_HOME"] = str(folder / "home")
    db = folder / f"{len(list(folder.glob('*.db')))}.db"
    done = subprocess.run([*TUNEFORGE, "tune", "--backend", "replay", "--json", "--db", str(db),
                           "--out", str(folder / "out"), *args],
                          capture_output=True, text=True, env=env, timeout=1800, cwd=ROOT)
    if done.returncode not in (0, 1) or not done.stdout.strip():
        raise RuntimeError(f"tune {' '.join(args)}: {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def longest_gap(steps: list[dict[str, Any]]) -> int:
    """The most iterations between two accepted steps: how long the search went without an
    improvement before it found one (0 with fewer than two)."""
    accepted = sorted(step["iteration"] for step in steps)
    return max((b - a for a, b in zip(accepted, accepted[1:], strict=False)), default=0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=600)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--tolerances", default="1e-4,1e-5",
                        help="the GEMM's campaigns at each of these tolerances")
    parser.add_argument("--parallel", default="",
                        help="candidates in flight, a comma list ('' for tune's default)")
    parser.add_argument("--softmax-shapes", default="all",
                        help="'all' (the shipped dataset's eleven) or a comma list, '' for none")
    parser.add_argument("--json", type=Path, default=None)
    opts = parser.parse_args()
    seeds = [int(s) for s in opts.seeds.split(",") if s.strip()]
    runs: list[tuple[str, list[str]]] = []
    parallels = [p for p in opts.parallel.split(",") if p.strip()] or [""]
    for seed in seeds:
        for tol in opts.tolerances.split(","):
            for par in parallels:
                runs.append((f"gemm 4096³ expert tol {tol} seed {seed}"
                             + (f" parallel {par}" if par else ""),
                             ["--seed", str(seed), "--tolerance", tol,
                              *(["--parallel", par] if par else [])]))
    runs.append(("gemm 4096³ random seed 0", ["--policy", "random"]))
    if opts.softmax_shapes:
        from core.replay import ReplayDataset
        from kernels import get_family

        family = get_family("softmax")
        shapes = (ReplayDataset(family.replay_datasets()[0]).shapes()
                  if opts.softmax_shapes == "all" else opts.softmax_shapes.split(","))
        for shape in shapes:
            runs.append((f"softmax {shape} expert", ["--kernel", "softmax", "--shape", shape]))
    rows = []
    with tempfile.TemporaryDirectory(prefix="settle-check-") as tmp:
        for i, (name, args) in enumerate(runs):
            folder = Path(tmp) / str(i)
            folder.mkdir()
            full = tune(folder, [*args, "--budget", str(opts.budget), "--settle-after", "0"])
            settled = tune(folder, [*args, "--budget", str(opts.budget)])
            best = [(r.get("best") or {}).get("avg_us") for r in (full, settled)]
            row = {"campaign": name, "full_best_us": best[0], "settled_best_us": best[1],
                   "same_best": best[0] == best[1], "full_evaluations": full["evaluations"],
                   "settled_evaluations": settled["evaluations"],
                   "settled_reason": settled["reason"],
                   "last_improvement": max((s["iteration"] for s in full["steps"]), default=0),
                   "longest_gap": longest_gap(full["steps"])}
            rows.append(row)
            print(json.dumps(row), flush=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=ROOT).stdout.strip()
    if opts.json is not None:
        opts.json.parent.mkdir(parents=True, exist_ok=True)
        opts.json.write_text(json.dumps({"commit": commit, "budget": opts.budget,
                                         "runs": rows}, indent=1) + "\n")
    print(f"\nsettle check at {commit}, budget {opts.budget} (evaluations: full / settled)")
    print(f"{'campaign':<40} {'best µs full':>12} {'settled':>10} {'evals':>11} "
          f"{'last gain':>9} {'gap':>5}")
    for r in rows:
        mark = "" if r["same_best"] else "  << differs"
        print(f"{r['campaign']:<40} {r['full_best_us'] or 0:>12.3f} "
              f"{r['settled_best_us'] or 0:>10.3f} "
              f"{r['full_evaluations']:>5}/{r['settled_evaluations']:<5} "
              f"{r['last_improvement']:>9} {r['longest_gap']:>5}{mark}")
    return 0 if all(r["same_best"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
