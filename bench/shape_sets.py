"""A shape set against one campaign a shape: what each reaches at every shape, and what it costs.

    python bench/shape_sets.py --kernel softmax --budget 80 --set-budget 440 --out runs/x/
    python bench/shape_sets.py --kernel gemm_bias_relu --backend gpu --budget 32 \\
        --set-budget 120 --shapes 4096x4096x4096:3,8192x8192x8192,... --keep /tmp/gemm-set

Each run is ``tuneforge tune`` in a child process, as a user runs it (the console script, else
``python -m cli.main``), each on a fresh database: one campaign of ``--budget`` evaluations at
every shape, then the set of all of them under ``--set-budget`` (a shape's ``:weight`` is the
set's; a separate campaign takes the shape alone), then the same set submitted again on the
same database. Prints a line as each run ends, then a table (per shape: the best time of each,
the set's speed over the separate campaign's, the GPU-seconds of each), the totals
(evaluations, GPU-seconds, wall seconds; on the replay the GPU-seconds are those the replayed
measurements took when they were recorded) and the targets: at every shape the set reaches at
least ``REACH`` of the separate campaign's speed, with at most ``GPU_SHARE`` of their
GPU-seconds, and submitted again it ends within ``AGAIN_WALL_S`` at 0 GPU-seconds.

``--separate-only`` stops after the separate campaigns; ``--separate-from FILE`` takes them
from an earlier run's ``shape-sets.json`` (the same kernel, backend and budget) and runs only
the shapes it lacks, then the set: the two halves of a comparison too long for one sitting.

``--again-runs N`` submits the set again N times, each on the database as the first
submission left it (the first on ``set.db`` itself, the others on copies of it taken before),
and records each one's wall seconds and the set's own (``wall_seconds`` of its result: from
its start to its end, without the process's start-up), with their medians: the target holds
the median. A served evaluation's host time is the set's own seconds over its evaluations.

``shape-sets.json`` under ``--out`` is written after every run (``"complete": false`` until
the last), so a run cut short keeps what it measured. ``--keep DIR`` runs in ``DIR`` (the
``TUNEFORGE_HOME`` of every run: the compile cache, the databases) and keeps it: the set's
database is ``DIR/set.db``, which ``tuneforge library export --db DIR/set.db`` (or
``bench/library_held_out.py --db DIR/set.db --home DIR``) exports.
"""

from __future__ import annotations

import argparse
import json
import math
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import tuneforge_json  # noqa: E402

#: the set reaches at least this share of each separate campaign's speed at its shape
REACH = 0.98
#: the set's GPU-seconds over the separate campaigns' at most
GPU_SHARE = 0.5
#: the set submitted again ends within (wall seconds, the command as a user runs it)
AGAIN_WALL_S = 10.0


def tune(home: Path, *args: str, timeout: float = 3600) -> tuple[dict[str, Any], float]:
    """One ``tuneforge tune --json``; its result and its wall seconds."""
    started = time.perf_counter()
    result = tuneforge_json(home, "tune", *args, timeout=timeout)
    return result, time.perf_counter() - started


def replay_shapes(kernel: str) -> list[str]:
    """Every shape the family's replay dataset measured."""
    from core.replay import ReplayDataset
    from kernels import get_family

    return ReplayDataset(get_family(kernel).replay_datasets()[0]).shapes()


def bare(shape: str) -> str:
    """A set's shape without its ``:weight``."""
    return shape.split(":", 1)[0].strip()


def x_vendor(result: dict[str, Any]) -> float | None:
    """A campaign's vendor time over its best (None without either)."""
    best = result.get("best") or {}
    return result["vendor_us"] / best["avg_us"] \
        if result.get("vendor_us") and best.get("avg_us") else None


def copy_database(src: Path, dst: Path) -> None:
    """A copy of an SQLite database (its write-ahead log included) through SQLite's backup."""
    a, b = sqlite3.connect(src), sqlite3.connect(dst)
    try:
        a.backup(b)
    finally:
        a.close()
        b.close()


def again_figures(runs: list[tuple[dict[str, Any], float]]) -> dict[str, Any]:
    """What the set's submissions after the first took: each one's wall seconds (the command),
    the set's own seconds (its result's ``wall_seconds``: start to end, no process start-up)
    and the milliseconds of host time a served evaluation, with their medians."""
    rows = [{"wall_s": round(wall, 2), "set_s": r.get("wall_seconds"),
             "evaluations": r["evaluations"], "served": r["served_from_history"],
             "gpu_seconds": r["gpu_seconds"],
             "ms_per_evaluation": round(1000 * r["wall_seconds"] / r["evaluations"], 2)
             if r.get("wall_seconds") and r["evaluations"] else None} for r, wall in runs]

    def median(name: str) -> float | None:
        values = [row[name] for row in rows if row[name] is not None]
        return round(statistics.median(values), 2) if values else None

    return {"runs": rows, "median_wall_s": median("wall_s"), "median_set_s": median("set_s"),
            "median_ms_per_evaluation": median("ms_per_evaluation")}


def summary(kernel: str, backend: str, budget: int, set_budget: int, shapes: list[str],
            separate: dict[str, Any], first: dict[str, Any] | None, first_wall: float,
            again_runs: list[tuple[dict[str, Any], float]]) -> dict[str, Any]:
    """The record of what has run so far: the rows, the totals and the targets
    (``again_runs``: the result and wall seconds of every submission after the first; the
    target holds their median)."""
    again, again_wall = again_runs[0] if again_runs else (None, 0.0)
    rows = []
    for row in (first or {}).get("shapes", []):
        sep = separate.get(row["shape"], {})
        best = (row["best"] or {}).get("avg_us")
        rows.append({"shape": row["shape"], "weight": row.get("weight"),
                     "separate_us": sep.get("best_us"), "set_us": best,
                     "set_over_separate": round(sep["best_us"] / best, 4)
                     if best and sep.get("best_us") else None,
                     "separate_x_vendor": sep.get("x_vendor"), "set_x_vendor": row["x_vendor"],
                     "separate_evaluations": sep.get("evaluations"),
                     "set_evaluations": row["evaluations"],
                     "separate_gpu_seconds": sep.get("gpu_seconds"),
                     "set_gpu_seconds": row["gpu_seconds"]})
    totals: dict[str, Any] = {
        "separate": {"campaigns": len(separate),
                     "evaluations": sum(s["evaluations"] for s in separate.values()),
                     "gpu_seconds": round(sum(s["gpu_seconds"] for s in separate.values()), 3),
                     "wall_s": round(sum(s["wall_s"] for s in separate.values()), 2)}}
    if first is not None:
        totals["set"] = {"evaluations": first["evaluations"], "gpu_seconds": first["gpu_seconds"],
                         "wall_s": round(first_wall, 2)}
    if again is not None:
        totals["set_again"] = {"evaluations": again["evaluations"],
                               "gpu_seconds": again["gpu_seconds"],
                               "served_from_history": again["served_from_history"],
                               "wall_s": round(again_wall, 2),
                               "same_bests": [(r["shape"], (r["best"] or {}).get("avg_us"))
                                              for r in again["shapes"]]
                               == [(r["shape"], (r["best"] or {}).get("avg_us"))
                                   for r in (first or {}).get("shapes", [])]}
        if len(again_runs) > 1:
            totals["set_again"]["repeats"] = again_figures(again_runs)
    reach = [r["set_over_separate"] for r in rows]
    worst = min((v for v in reach if v is not None), default=math.nan)
    ratio = round(totals["set"]["gpu_seconds"] / totals["separate"]["gpu_seconds"], 3) \
        if first is not None and totals["separate"]["gpu_seconds"] else None
    targets: dict[str, Any] = {}
    if first is not None and len(separate) == len(shapes):
        targets["reach"] = bool(rows) and all(v is not None and v >= REACH for v in reach)
        targets["gpu_share"] = ratio is not None and ratio <= GPU_SHARE
    if again is not None:
        targets["again"] = (all(r["gpu_seconds"] == 0.0 for r, _w in again_runs)
                            and statistics.median(w for _r, w in again_runs) < AGAIN_WALL_S)
    return {"kernel": kernel, "backend": backend, "budget": budget, "set_budget": set_budget,
            "set_shapes": shapes, "complete": again is not None, "shapes": rows,
            "separate": separate, "totals": totals, "worst_set_over_separate": worst,
            "gpu_seconds_ratio": ratio, "targets": targets,
            "target_values": {"reach": REACH, "gpu_share": GPU_SHARE,
                              "again_wall_s": AGAIN_WALL_S}}


def print_table(record: dict[str, Any]) -> None:
    """The per-shape table, the totals and the targets."""
    print(f"{record['kernel']} on {record['backend']}: {len(record['set_shapes'])} shapes, "
          f"separate campaigns of {record['budget']}, the set {record['set_budget']}")
    print(f"{'shape':>16} {'separate µs':>12} {'set µs':>9} {'set/sep':>8} {'sep x':>6} "
          f"{'set x':>6} {'sep GPU-s':>9} {'set GPU-s':>9}")
    for r in record["shapes"]:
        print(f"{r['shape']:>16} {r['separate_us'] or math.nan:>12.1f} "
              f"{r['set_us'] or math.nan:>9.1f} {r['set_over_separate'] or math.nan:>8.3f} "
              f"{r['separate_x_vendor'] or math.nan:>6.2f} {r['set_x_vendor'] or math.nan:>6.2f} "
              f"{r['separate_gpu_seconds'] or math.nan:>9.2f} {r['set_gpu_seconds']:>9.2f}")
    for name, t in record["totals"].items():
        served = f", {t['served_from_history']} served" if "served_from_history" in t else ""
        print(f"{name:>10}: {t['evaluations']} evaluations, {t['gpu_seconds']:.2f} GPU-s, "
              f"{t['wall_s']:.1f} s wall{served}")
        if "repeats" in t:
            rep = t["repeats"]
            print(f"{'':>10}  {len(rep['runs'])} submissions: median {rep['median_wall_s']} s "
                  f"wall ({', '.join(str(r['wall_s']) for r in rep['runs'])}), the set's own "
                  f"{rep['median_set_s']} s, {rep['median_ms_per_evaluation']} ms a served "
                  "evaluation")
    ratio = record["gpu_seconds_ratio"]
    print(f"worst set/separate {record['worst_set_over_separate']:.3f}; set GPU-seconds / "
          f"separate {ratio if ratio is not None else math.nan:.3f}")
    names = {"reach": f"every shape >= {REACH:.0%} of its campaign",
             "gpu_share": f"GPU-seconds <= {GPU_SHARE:g}x",
             "again": f"again: 0 GPU-s, < {AGAIN_WALL_S:g} s"}
    print("targets: " + "; ".join(f"{names[k]}: {'met' if v else 'MISSED'}"
                                  for k, v in record["targets"].items()))


def earlier_separate(parser: argparse.ArgumentParser, path: Path, kernel: str, backend: str,
                     budget: int, shapes: list[str]) -> dict[str, Any]:
    """The separate campaigns of an earlier record at ``shapes`` (a parser error where the
    record is not one of this comparison: another kernel, backend or budget, or a shape
    outside the set)."""
    try:
        earlier = json.loads(path.read_text())
        found = {k: earlier[k] for k in ("kernel", "backend", "budget", "separate")}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        parser.error(f"--separate-from {path}: not a shape-sets.json ({exc})")
    for name, want in (("kernel", kernel), ("backend", backend), ("budget", budget)):
        if found[name] != want:
            parser.error(f"--separate-from {path}: its {name} is {found[name]!r}, not {want!r}")
    outside = sorted(set(found["separate"]) - set(shapes))
    if outside:
        parser.error(f"--separate-from {path}: shapes outside the set: {', '.join(outside)}")
    return dict(found["separate"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", default="softmax")
    parser.add_argument("--shapes", help="comma-separated, each with an optional :weight "
                        "(default: the replay's shapes)")
    parser.add_argument("--budget", type=int, default=80, help="a separate campaign's budget")
    parser.add_argument("--set-budget", type=int, help="the set's (default: 5 x --budget)")
    parser.add_argument("--backend", default="replay")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--keep", type=Path, help="run in this folder (new or empty) and keep "
                        "it: the set's database is KEEP/set.db")
    parser.add_argument("--run-timeout", type=float, default=3600,
                        help="seconds a run may take")
    parser.add_argument("--separate-only", action="store_true",
                        help="run the separate campaigns and stop")
    parser.add_argument("--separate-from", type=Path, metavar="FILE",
                        help="an earlier shape-sets.json whose separate campaigns to take")
    parser.add_argument("--again-runs", type=int, default=1, metavar="N",
                        help="submit the set again N times, each on the database as the "
                        "first submission left it (the target holds their median)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    shapes = [s.strip() for s in args.shapes.split(",")] if args.shapes \
        else replay_shapes(args.kernel)
    set_budget = args.set_budget or 5 * args.budget
    common = ["--kernel", args.kernel, "--backend", args.backend]
    if args.keep is not None:
        if args.keep.exists() and any(args.keep.iterdir()):
            parser.error(f"--keep {args.keep}: not an empty folder")
        args.keep.mkdir(parents=True, exist_ok=True)
        home, tmp = args.keep.resolve(), None
    else:
        tmp = tempfile.TemporaryDirectory()
        home = Path(tmp.name)
    separate: dict[str, Any] = {}
    if args.separate_from is not None:
        separate = earlier_separate(parser, args.separate_from, args.kernel, args.backend,
                                    args.budget, [bare(s) for s in shapes])
    first: dict[str, Any] | None = None
    first_wall = 0.0
    again_runs: list[tuple[dict[str, Any], float]] = []

    def record() -> dict[str, Any]:
        found = summary(args.kernel, args.backend, args.budget, set_budget, shapes, separate,
                        first, first_wall, again_runs)
        if args.keep is not None:
            found["kept"] = {"home": str(home), "set_db": str(home / "set.db")}
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / "shape-sets.json").write_text(json.dumps(found, indent=1) + "\n")
        return found

    def say(text: str) -> None:
        print(text, flush=True)

    try:
        for i, shape in enumerate(shapes):
            if bare(shape) in separate:
                continue
            result, wall = tune(home, *common, "--shape", bare(shape), "--budget",
                                str(args.budget), "--db", str(home / f"sep{i}.db"), "--out",
                                str(home / "o"), timeout=args.run_timeout)
            separate[result["shape"]] = {
                "best_us": (result["best"] or {}).get("avg_us"),
                "evaluations": result["evaluations"], "gpu_seconds": result["gpu_seconds"],
                "wall_s": round(wall, 2), "x_vendor": x_vendor(result),
                "reason": result.get("reason")}
            sep = separate[result["shape"]]
            say(f"separate {result['shape']}: {sep['evaluations']} evaluations, "
                f"{sep['gpu_seconds']:.2f} GPU-s, {wall:.1f} s, best {sep['best_us']} µs, "
                f"x vendor {sep['x_vendor'] or math.nan:.3f}")
            record()
        if args.separate_only:
            return 0

        def set_args(db: Path) -> list[str]:
            return [*common, "--shapes", ",".join(shapes), "--budget", str(set_budget),
                    "--db", str(db), "--out", str(home / "o")]

        first, first_wall = tune(home, *set_args(home / "set.db"), timeout=args.run_timeout)
        say(f"set: {first['evaluations']} evaluations, {first['gpu_seconds']:.2f} GPU-s, "
            f"{first_wall:.1f} s")
        record()
        if args.again_runs > 1:  # the history as the first submission left it
            copy_database(home / "set.db", home / "set-first.db")
        for i in range(max(1, args.again_runs)):
            if i:
                copy_database(home / "set-first.db", home / f"set-again{i}.db")
            db = home / ("set.db" if not i else f"set-again{i}.db")
            result, wall = tune(home, *set_args(db), timeout=args.run_timeout)
            again_runs.append((result, wall))
            say(f"set again: {result['evaluations']} evaluations, "
                f"{result['gpu_seconds']:.2f} GPU-s, {result['served_from_history']} served, "
                f"{wall:.1f} s (the set's own {result.get('wall_seconds')} s)")
            record()
        found = record()
    finally:
        if tmp is not None:
            tmp.cleanup()
    print_table(found)
    return 0


if __name__ == "__main__":
    sys.exit(main())
