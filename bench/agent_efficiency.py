"""Tuner efficiency on the replay dataset: tuneforge's policies against Kernel Tuner's strategies.

Every run replays the same 2496 real H200 measurements (``gemm_bias_relu`` at 4096³). For each
policy (or Kernel Tuner strategy) and seed it records when the best kernel found so far first
reaches 90, 95 and 99% of the dataset's optimum (the best throughput of any 'ok' point):
evaluations (the baseline counts: the expert policy always starts there), wall seconds on this
machine, and the GPU seconds the replayed measurements took on the H200.

tuneforge runs go through the real loop: ``EmbeddedRunner`` over an SQLite file upgraded by
Alembic, ``ReplayEvaluator``, the engine's decisions. "Best so far" is the campaign's best, i.e.
the best *accepted* candidate (what a user gets). A run stops at its budget or as soon as it
holds the optimum (nothing after that changes its figures). Kernel Tuner runs in simulation mode
on the same measurements exported as its cache file (:mod:`bench.kt_cache`), with
``max_fevals`` = the same budget; its "best so far" is the best configuration it evaluated.

A target not reached within the budget counts as infinitely many evaluations for the median, so a
median shown as ``>B`` means that fewer than half of the seeds got there within B.

Each run also keeps its whole best-so-far trace as a fraction of the optimum, compactly: the
``[evaluation, fraction]`` pairs at which it changed (:func:`best_so_far` expands it to one value
per evaluation, the last value carried to the budget: a tuneforge run that stopped early holding
the optimum, or a Kernel Tuner run that ended before the budget, stays where it ended).
``--plot`` draws the median over seeds of that trace per tuner, with the 25-75th percentile band.

Usage::

    python -m bench.agent_efficiency                       # 20 seeds, budget 300, everything
    python -m bench.agent_efficiency --seeds 3 --policies expert --kt ''
    python -m bench.agent_efficiency --write-docs          # also docs/BENCHMARKS.md
    python -m bench.agent_efficiency --load runs.json --policies '' --kt '' --plot conv.png
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from bench.kt_cache import KT_STRATEGIES, export_kt_cache, run_kt

TARGETS = (0.90, 0.95, 0.99)
ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "BENCHMARKS.md"
SECTION = "## Tuner efficiency (replay)"
MACHINE = "2-core dev box, replay of H200 measurements"

_STATE: dict[str, Any] = {}


def _load() -> dict[str, Any]:
    """Dataset, family and search space, once per process."""
    if not _STATE:
        from agent.spaces import ReplaySpace
        from core.replay import ReplayDataset
        from kernels import get_family

        family = get_family("gemm_bias_relu")
        dataset = ReplayDataset(family.replay_datasets()[0]).complete_space()
        shape = dataset.shapes()[0]
        ok = [r for (_k, s), r in dataset.points.items()
              if s == shape and r["status"] == "ok" and r.get("perf")]
        _STATE.update(family=family, dataset=dataset, shape=shape,
                      optimum=max(r["perf"]["throughput_tflops"] for r in ok),
                      optimum_us=min(r["perf"]["avg_us"] for r in ok))
        _STATE["space"] = ReplaySpace(family, dataset, shape)
    return _STATE


def _reached(trace: list[tuple[int, float, float, float]], optimum: float
             ) -> dict[str, dict[str, float] | None]:
    """First (evaluations, wall s, GPU s) at which the best so far reaches each target."""
    out: dict[str, dict[str, float] | None] = {}
    for target in TARGETS:
        hit = next(((e, w, g) for e, best, w, g in trace if best >= target * optimum - 1e-9),
                   None)
        out[f"{round(100 * target)}"] = (
            None if hit is None else {"evaluations": hit[0], "wall_s": round(hit[1], 3),
                                      "gpu_s": round(hit[2], 2)})
    return out


def _steps(trace: list[tuple[int, float, float, float]], optimum: float) -> list[list[float]]:
    """The best so far as a fraction of the optimum, only where it changed:
    ``[[evaluation, fraction], ...]`` (fractions rounded to 6 digits)."""
    out: list[list[float]] = []
    prev = 0.0
    for e, best, _w, _g in trace:
        frac = round(best / optimum, 6)
        if frac != prev:
            out.append([e, frac])
            prev = frac
    return out


def best_so_far(steps: list[list[float]], budget: int) -> list[float]:
    """One value per evaluation 1..budget from a run's ``trace`` (see :func:`_steps`): 0 before
    its first step, each step's fraction carried until the next and past the run's end."""
    out = [0.0] * budget
    for i, (e, frac) in enumerate(steps):
        end = int(steps[i + 1][0]) if i + 1 < len(steps) else budget + 1
        for j in range(max(int(e), 1), min(end, budget + 1)):
            out[j - 1] = frac
    return out


def run_tuneforge(policy: str, seed: int, budget: int) -> dict[str, Any]:
    """One embedded campaign on the replay; its trace of best-so-far against cost."""
    from agent.embedded import EmbeddedRunner
    from agent.engine import lifecycle
    from agent.policies import make_policy
    from core.db import session_factory, upgrade_database
    from worker.evaluate import ReplayEvaluator

    st = _load()
    family, dataset = st["family"], st["dataset"]
    m, n, k = (int(x) for x in st["shape"].split("x"))
    flops = 2 * m * n * k
    with tempfile.TemporaryDirectory(prefix="tf-bench-") as tmp:
        url = f"sqlite:///{tmp}/bench.db"
        upgrade_database(url)
        sessions = session_factory(url)
        evaluator = ReplayEvaluator(family, dataset)
        with sessions.begin() as s:
            campaign = lifecycle.create_campaign(
                s, lifecycle.CampaignSpec(
                    parallel=2, dims={"m": m, "n": n, "k": k}, policy=policy, seed=seed,
                    budget_iterations=budget),
                backend="replay", device=evaluator.device)
            cid = campaign.id
        trace: list[tuple[int, float, float, float]] = []
        runner: EmbeddedRunner

        def on_progress(camp: Any) -> None:
            best = flops / (camp.best_us * 1e-6) / 1e12 if camp.best_us else 0.0
            trace.append((camp.evaluations, best, time.perf_counter() - start, camp.gpu_seconds))
            if camp.best_us is not None and camp.best_us <= st["optimum_us"] and \
                    camp.status == "running":
                with runner.lock, sessions.begin() as s2:
                    lifecycle.cancel_campaign(s2, cid)

        runner = EmbeddedRunner(sessions, [evaluator], policy=make_policy(policy),
                                space=st["space"], on_progress=on_progress)
        start = time.perf_counter()
        final = runner.run(cid)
        wall = time.perf_counter() - start
        if runner.errors:
            raise RuntimeError(f"{policy} seed {seed}: {runner.errors[0]!r}")
        status, reason, evaluations = final.status, final.status_reason, final.evaluations
        sessions.kw["bind"].dispose()
    return {"tuner": f"tuneforge {policy}", "seed": seed, "evaluations": evaluations,
            "wall_s": round(wall, 3), "status": status, "reason": reason,
            "reached": _reached(trace, st["optimum"]), "trace": _steps(trace, st["optimum"])}


def run_kernel_tuner(strategy: str, seed: int, budget: int, cache: str) -> dict[str, Any]:
    """One Kernel Tuner strategy in simulation mode on the exported cache."""
    st = _load()
    m, n, k = (int(x) for x in st["shape"].split("x"))
    flops = 2 * m * n * k
    result = run_kt(Path(cache), strategy, seed, budget)
    trace: list[tuple[int, float, float, float]] = []
    best, gpu = 0.0, 0.0
    evals = result["evaluations"]
    for i, e in enumerate(evals, start=1):
        gpu += e["benchmark_ms"] / 1000.0
        if e["time_ms"]:
            best = max(best, flops / (e["time_ms"] * 1e-3) / 1e12)
        # simulation mode does not time each evaluation: spread the run's wall time evenly
        trace.append((i, best, result["wall_s"] * i / max(len(evals), 1), gpu))
    return {"tuner": f"Kernel Tuner {strategy}", "seed": seed, "evaluations": len(evals),
            "wall_s": round(result["wall_s"], 3), "status": "done", "reason": None,
            "reached": _reached(trace, st["optimum"]), "trace": _steps(trace, st["optimum"])}


def _job(args: tuple[str, str, int, int, str]) -> dict[str, Any]:
    kind, name, seed, budget, cache = args
    if kind == "tuneforge":
        return run_tuneforge(name, seed, budget)
    return run_kernel_tuner(name, seed, budget, cache)


# ---- summary ------------------------------------------------------------------------------------
def _median(values: list[float]) -> float:
    return statistics.median(values) if values else math.inf


def summarize(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per tuner: median evaluations / wall / GPU seconds to each target, seeds that reached."""
    rows = []
    for tuner in dict.fromkeys(r["tuner"] for r in runs):
        mine = [r for r in runs if r["tuner"] == tuner]
        row: dict[str, Any] = {"tuner": tuner, "seeds": len(mine),
                               "median_run_wall_s": round(_median([r["wall_s"] for r in mine]),
                                                          3),
                               "median_run_evaluations": _median([r["evaluations"]
                                                                  for r in mine])}
        for t in (f"{round(100 * x)}" for x in TARGETS):
            hits = [r["reached"][t] for r in mine]
            row[f"reached_{t}"] = sum(h is not None for h in hits)
            for what in ("evaluations", "wall_s", "gpu_s"):
                row[f"median_{what}_{t}"] = _median(
                    [h[what] if h is not None else math.inf for h in hits])
        rows.append(row)
    return rows


def _fmt(value: float, budget: int, digits: int = 0) -> str:
    if math.isinf(value):
        return f">{budget}" if digits == 0 else "–"
    return f"{value:.{digits}f}"


def table(rows: list[dict[str, Any]], budget: int) -> str:
    """A Markdown table of the summary."""
    head = ("| tuner | evals to 90% (seeds) | evals to 95% (seeds) | evals to 99% (seeds) "
            "| wall s to 95% | replayed GPU s to 95% | wall s per run |")
    lines = [head, "|" + "---|" * 7]
    for r in rows:
        cells = [r["tuner"]]
        for t in ("90", "95", "99"):
            cells.append(f"{_fmt(r[f'median_evaluations_{t}'], budget)} "
                         f"({r[f'reached_{t}']}/{r['seeds']})")
        cells += [_fmt(r["median_wall_s_95"], budget, 2), _fmt(r["median_gpu_s_95"], budget, 1),
                  f"{r['median_run_wall_s']:.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def verdict(rows: list[dict[str, Any]], seeds: int) -> list[str]:
    """The benchmark's targets, each with its figures and PASS/FAIL."""
    by = {r["tuner"]: r for r in rows}
    out: list[str] = []
    expert = by.get("tuneforge expert")
    if expert is None:
        return out
    within = expert["reached_95"]
    hits = sum(1 for r in _RUNS if r["tuner"] == "tuneforge expert"
               and r["reached"]["95"] is not None and r["reached"]["95"]["evaluations"] <= 100)
    need = math.ceil(0.8 * seeds)
    out.append(f"- expert reaches 95% of the optimum within 100 evaluations in {hits}/{seeds} "
               f"seeds (target ≥ {need}): {'PASS' if hits >= need else 'FAIL'}"
               f" (within the budget: {within}/{seeds})")
    rnd = by.get("tuneforge random")
    if rnd is not None:
        e, r = expert["median_evaluations_95"], rnd["median_evaluations_95"]
        ok = r >= 3 * e
        out.append(f"- random needs ≥ 3x the expert's evaluations to 95% (medians): random "
                   f"{_fmt(r, _BUDGET[0])} vs expert {_fmt(e, _BUDGET[0])}: "
                   f"{'PASS' if ok else 'FAIL'}")
    kts = [r for r in rows if r["tuner"].startswith("Kernel Tuner")]
    if kts:
        best = min(kts, key=lambda r: (r["median_evaluations_95"], -r["reached_95"]))
        e = expert["median_evaluations_95"]
        ok = e <= best["median_evaluations_95"]
        out.append(f"- expert needs no more evaluations to 95% than Kernel Tuner's best strategy "
                   f"({best['tuner'].removeprefix('Kernel Tuner ')}, median "
                   f"{_fmt(best['median_evaluations_95'], _BUDGET[0])}): expert "
                   f"{_fmt(e, _BUDGET[0])}: {'PASS' if ok else 'FAIL'}")
    return out


# ---- convergence plot ---------------------------------------------------------------------------
def curves(runs: list[dict[str, Any]], budget: int) -> dict[str, dict[str, list[float]]]:
    """Per tuner (runs with a trace only): the 25th percentile, median and 75th percentile over
    seeds of the best so far (fraction of the optimum) at each evaluation 1..budget.

    Each is a value some seed had, not an interpolation: the median is the lower one (of 20
    seeds the 11th best, so the curve reaches a target once 11 seeds have, never before the
    table's median of the crossings, and never where the table says ``>B``); the band runs from
    the lower 25th to the higher 75th percentile (of 20, the 5th worst to the 5th best)."""
    import numpy as np

    out: dict[str, dict[str, list[float]]] = {}
    for tuner in dict.fromkeys(r["tuner"] for r in runs if "trace" in r):
        grid = np.array([best_so_far(r["trace"], budget) for r in runs
                         if r["tuner"] == tuner and "trace" in r])
        p25 = np.percentile(grid, 25, axis=0, method="lower")
        p50 = np.percentile(grid, 50, axis=0, method="lower")
        p75 = np.percentile(grid, 75, axis=0, method="higher")
        out[tuner] = {"p25": p25.tolist(), "median": p50.tolist(), "p75": p75.tolist()}
    return out


def pick_tuners(rows: list[dict[str, Any]], kt_shown: int) -> tuple[list[str], list[str]]:
    """The tuners to draw (every tuneforge policy, then the ``kt_shown`` Kernel Tuner strategies
    with the fewest median evaluations to 95%, ties broken by seeds that got there, then by the
    median to 99%) and the Kernel Tuner strategies left out."""
    tf = [r["tuner"] for r in rows if not r["tuner"].startswith("Kernel Tuner")]
    kts = sorted((r for r in rows if r["tuner"].startswith("Kernel Tuner")),
                 key=lambda r: (r["median_evaluations_95"], -r["reached_95"],
                                r["median_evaluations_99"]))
    return (tf + [r["tuner"] for r in kts[:kt_shown]],
            [r["tuner"] for r in kts[kt_shown:]])


def plot(runs: list[dict[str, Any]], rows: list[dict[str, Any]], budget: int, path: Path, *,
         kt_shown: int = 4, title: str = "") -> tuple[list[str], list[str]]:
    """Draw the convergence plot (PNG); returns the tuners drawn and the ones left out (Kernel
    Tuner strategies beyond the best ``kt_shown``, and tuners whose runs carry no trace)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = curves(runs, budget)
    shown, omitted = pick_tuners(rows, kt_shown)
    omitted += [t for t in shown if t not in data]
    shown = [t for t in shown if t in data]
    x = list(range(1, budget + 1))
    # top: the whole climb; bottom: the same curves from 85 % up, where the targets are
    fig, (full, zoom) = plt.subplots(2, 1, figsize=(10, 8.4), sharex=True,
                                     gridspec_kw={"height_ratios": [1, 1.25]})
    # tuneforge: solid, warm colours; Kernel Tuner: dashed/dotted, cold colours and black
    tf_styles = iter([("tab:red", "-"), ("tab:orange", "-"), ("tab:brown", "-")])
    kt_styles = iter([("tab:blue", (0, (5, 1.5))), ("tab:green", (0, (6, 1.5, 1.5, 1.5))),
                      ("tab:purple", (0, (2.5, 1.5))), ("black", (0, (1, 1.2))),
                      ("tab:cyan", (0, (5, 1.5))), ("tab:olive", (0, (6, 1.5, 1.5, 1.5))),
                      ("tab:gray", (0, (2.5, 1.5)))])
    styles = {t: next(tf_styles if t.startswith("tuneforge") else kt_styles,
                      ("0.5", (0, (1, 1)))) for t in shown}
    for ax, low in ((full, 0.0), (zoom, 0.85)):
        for target in TARGETS:
            ax.axhline(target, color="0.45", linestyle="--", linewidth=0.8, zorder=1)
            ax.text(1.005, target, f"{round(100 * target)}%", color="0.3", fontsize=8,
                    va="center", transform=ax.get_yaxis_transform())
        for tuner in shown:
            own = tuner.startswith("tuneforge")
            c = data[tuner]
            color, linestyle = styles[tuner]
            ax.fill_between(x, c["p25"], c["p75"], color=color, alpha=0.10,
                            linewidth=0, step="post", zorder=2)
            ax.step(x, c["median"], where="post", color=color, linewidth=2.2 if own else 1.6,
                    linestyle=linestyle, label=tuner, zorder=4 if own else 3)
        ax.set_ylim(low, 1.012)
        ax.grid(True, which="major", alpha=0.25)
        ax.set_ylabel("best so far / dataset optimum")
    full.set_yticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    zoom.set_yticks([0.85, 0.9, 0.95, 0.99, 1.0])
    zoom.set_xscale("log")
    zoom.set_xlim(1, budget)
    ticks = [t for t in (1, 2, 5, 10, 20, 50, 100, 200, 300, 500, 1000) if t <= budget]
    zoom.set_xticks(ticks, [str(t) for t in ticks])
    zoom.set_xlabel("evaluations (log scale)")
    zoom.set_title("the same, from 85 % of the optimum up", fontsize=9)
    full.legend(fontsize=8, loc="lower right", title="median over seeds; band: 25th-75th pct",
                title_fontsize=8)
    if title:
        full.set_title(title, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return shown, omitted


_RUNS: list[dict[str, Any]] = []
_BUDGET = [300]


def _today() -> str:
    return datetime.datetime.now(datetime.UTC).date().isoformat()


def _commit() -> str:
    """HEAD's short hash, with ``+changes`` when tracked files differ from it (what ran was
    not that commit alone: run in a clean checkout, e.g. ``git worktree add``)."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                              capture_output=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=ROOT, text=True, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+changes" if dirty.strip() else "")


def write_docs(text: str) -> None:
    """Add or replace this benchmark's section of docs/BENCHMARKS.md, leaving the others."""
    DOC.parent.mkdir(parents=True, exist_ok=True)
    old = DOC.read_text() if DOC.exists() else "# Benchmarks\n"
    lines = old.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() == SECTION), None)
    if start is None:
        new = old.rstrip("\n") + "\n\n" + text.rstrip("\n") + "\n"
    else:
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")),
                   len(lines))
        new = "\n".join([*lines[:start], *text.rstrip("\n").splitlines(), "", *lines[end:]])
        new = new.rstrip("\n") + "\n"
    DOC.write_text(new)


def _dump(data: dict[str, Any]) -> str:
    """JSON with one run (and one summary row) per line: small, and still diffable."""
    head = {k: v for k, v in data.items() if k not in ("runs", "summary")}
    parts = [json.dumps(head, default=str)[:-1]]
    for key in ("runs", "summary"):
        items = ",\n  ".join(json.dumps(x, default=str) for x in data[key])
        parts.append(f', "{key}": [\n  {items}\n]')
    return "".join(parts) + "}\n"


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print the table last."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--budget", type=int, default=300)
    ap.add_argument("--policies", default="expert,optuna,random")
    ap.add_argument("--kt", default="all",
                    help="Kernel Tuner strategies (comma-separated), 'all', or '' for none")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--json", type=Path, help="write every run and the summary here")
    ap.add_argument("--load", type=Path, action="append", default=[],
                    help="add the runs of an earlier --json file (tuners not run again)")
    ap.add_argument("--write-docs", action="store_true", help="update docs/BENCHMARKS.md")
    ap.add_argument("--plot", type=Path,
                    help="draw the convergence plot (median best so far per tuner) to this PNG")
    ap.add_argument("--plot-kt", type=int, default=4,
                    help="Kernel Tuner strategies drawn in --plot: the best N to 95%% "
                         "(default 4)")
    args = ap.parse_args(argv)
    # the tree as it is when the runs start (a commit made while they run is not what ran)
    ran_at = _commit()
    _BUDGET[0] = args.budget
    st = _load()
    sources = []
    loaded_dates: list[str] = []
    loaded_commits: list[str] = []
    for path in args.load:
        data = json.loads(path.read_text())
        _RUNS.extend({**r, "loaded": True} for r in data["runs"])
        loaded_dates.append(data.get("date", "?"))
        loaded_commits.append(data.get("commit", "?"))
        sources.append(f"`{data.get('command', '?')}` (commit {data.get('commit', '?')}, "
                       f"{data.get('date', 'date not recorded')}: "
                       f"{', '.join(sorted({r['tuner'] for r in data['runs']}))})")
    loaded = {r["tuner"] for r in _RUNS}
    policies = [p for p in args.policies.split(",") if p and f"tuneforge {p}" not in loaded]
    strategies = [s for s in (KT_STRATEGIES if args.kt == "all" else args.kt.split(","))
                  if s and f"Kernel Tuner {s}" not in loaded]
    with tempfile.TemporaryDirectory(prefix="kt-cache-") as tmp:
        cache = str(Path(tmp) / "cache.json")
        if strategies:
            export_kt_cache(st["dataset"], st["shape"], Path(cache))
        jobs = [("tuneforge", p, s, args.budget, cache) for p in policies
                for s in range(args.seeds)]
        jobs += [("kt", k, s, args.budget, cache) for k in strategies for s in range(args.seeds)]
        started = time.perf_counter()
        with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            for run in pool.map(_job, jobs):
                _RUNS.append(run)
                r95 = run["reached"]["95"]
                print(f"{run['tuner']:<34} seed {run['seed']:>2}: {run['evaluations']:>4} evals, "
                      f"95% at {r95['evaluations'] if r95 else '-'}, {run['wall_s']:.2f} s",
                      file=sys.stderr, flush=True)
        elapsed = time.perf_counter() - started
    order = ["tuneforge " + p for p in args.policies.split(",") if p]
    _RUNS.sort(key=lambda r: (order.index(r["tuner"]) if r["tuner"] in order else len(order),
                              r["tuner"].startswith("Kernel Tuner"), r["seed"]))
    rows = summarize(_RUNS)
    command = ("python -m bench.agent_efficiency " + " ".join(argv if argv is not None
                                                            else sys.argv[1:])).strip()
    ran = sorted({r["tuner"] for r in _RUNS} - {r["tuner"] for r in _RUNS if r.get("loaded")})
    checks = verdict(rows, args.seeds)
    date = _today() if ran else ", ".join(dict.fromkeys(loaded_dates)) or _today()
    commits = ", ".join(dict.fromkeys(([ran_at] if ran else []) + loaded_commits))
    figure: list[str] = []
    if args.plot:
        shown, omitted = plot(_RUNS, rows, args.budget, args.plot, kt_shown=args.plot_kt,
                              title=f"Best so far on the replay, {args.seeds} seeds, budget "
                                    f"{args.budget} (commit {commits}, {date})")
        image = os.path.relpath(args.plot.resolve(), DOC.parent.resolve())
        n = args.seeds
        figure = [
            f"![best so far as a fraction of the optimum against evaluations]({image})", "",
            "Best so far as a fraction of the dataset's optimum against evaluations (log "
            "scale), top the whole climb, bottom from 85 % up: per tuner the median over seeds "
            f"(step line; the lower median, here the {n - (n - 1) // 2}th best of {n} seeds at "
            "each evaluation, so a line crosses a target once more than half the seeds have, as "
            "the table counts) and the 25th-75th percentile band "
            f"({(n - 1) // 4 + 1}th worst to {n - math.ceil(0.75 * (n - 1))}th best seed); "
            "dashed lines at 90, 95 and 99 %. A tuneforge run stops as soon as it holds the "
            "optimum, and its trace stays at its last value (1.0) up to the budget (so does a "
            "Kernel Tuner run that ended before the budget). Drawn: "
            + ", ".join(shown) + "."
            + (" Left out (Kernel Tuner strategies beyond the best "
               f"{args.plot_kt} by median evaluations to 95 %, or runs without a trace): "
               + ", ".join(t.removeprefix("Kernel Tuner ") for t in omitted) + "."
               if omitted else ""), ""]
    text = "\n".join([
        SECTION, "",
        f"Command: `{command}` · date {date} · machine: {MACHINE} · commit "
        f"{ran_at} · {args.seeds} seeds, budget {args.budget} evaluations"
        + (f", {args.jobs} parallel jobs, {elapsed:.0f} s in all" if ran else "")
        + (f" ({', '.join(ran)})." if sources and ran else ".")
        + ("".join(f"\n\nRuns loaded from {src}." for src in sources)),
        "",
        f"Dataset optimum: {st['optimum']:.2f} TFLOP/s ({st['optimum_us']:.1f} µs) at "
        f"{st['shape']}; {len(st['space'].points())} points. Medians over seeds; a target not "
        "reached within the budget counts as infinite (`>B`: fewer than half the seeds got "
        "there). Evaluations include the baseline. tuneforge's best is the best accepted "
        "candidate; Kernel Tuner's the best configuration evaluated (simulation mode on the "
        "same measurements). Wall seconds are this machine's (Kernel Tuner's spread evenly over "
        "its run); GPU seconds are what the replayed measurements took on the H200. A tuneforge "
        "run "
        "goes through the whole embedded loop (SQLite, engine, policy) and stops early once it "
        "holds the optimum, so 'wall s per run' is short for runs that found it.",
        "",
        table(rows, args.budget), "",
        *checks, "",
        *figure,
    ])
    if args.json:
        own = [r for r in _RUNS if not r.get("loaded")]
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(_dump({"command": command, "commit": ran_at, "date": date,
                                    "elapsed_s": round(elapsed, 1), "seeds": args.seeds,
                                    "budget": args.budget, "runs": own, "summary": rows}))
    if args.write_docs:
        write_docs(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
