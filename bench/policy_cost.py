"""What a policy's decision costs as a campaign's history grows (the expert policy by default).

Replays campaigns on the shipped H200 dataset (4096³) through the real embedded loop
(``EmbeddedRunner``, SQLite upgraded by Alembic, ``ReplayEvaluator``, the engine with its
``HistoryCache``) with the budget as the only stop, and times every call of the policy's
``propose`` in this process: wall time (``perf_counter``) and this thread's CPU time. The
history is already decoded when ``propose`` is called, so the figure is the policy's own work.

For each checkpoint N (default 100, 300, 600, 1000) it reports the decisions taken with a
history of N - window < length <= N candidates: their count, median, p90, p99 and largest
wall milliseconds, and the median CPU milliseconds; and, once per seed at the window's first
decision, the time a fresh policy object takes for the same decision (a policy that keeps a
memory between decisions pays it once after its process starts). ``--profile N`` runs cProfile
over the decisions of the window ending at N and prints where the time goes (that window's
figures then include the profiler's cost).

    .venv/bin/python -m bench.policy_cost [--policy expert] [--seeds 0,1,2] [--budget 1000]
        [--checkpoints 100,300,600,1000] [--window 50] [--profile 600] [--json out.json]

Prints a table last (with the load average before and after and the commit).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import platform
import pstats
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def pct(values: list[float], q: float) -> float:
    """The ``q`` quantile (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


@dataclass
class TimedPolicy:
    """Wraps a policy: times each ``propose`` and profiles those whose history length lies in
    ``profile_range``."""

    inner: Any
    profile_range: tuple[int, int] | None = None
    #: (history length, proposals asked, wall s, CPU s) per decision
    samples: list[tuple[int, int, float, float]] = field(default_factory=list)
    profiler: cProfile.Profile = field(default_factory=cProfile.Profile)
    #: history lengths at which a fresh policy object decides once more (timed apart): what a
    #: restarted agent process pays, with nothing remembered
    cold_at: list[int] = field(default_factory=list)
    #: (history length, wall s) of those cold decisions
    cold: list[tuple[int, float]] = field(default_factory=list)
    name: str = ""

    def __post_init__(self) -> None:
        self.name = str(self.inner.name)

    def propose(self, ctx: Any, n: int) -> list[Any]:
        """The wrapped policy's proposals, timed."""
        size = len(ctx.history)
        profiled = self.profile_range is not None and \
            self.profile_range[0] < size <= self.profile_range[1]
        if profiled:
            self.profiler.enable()
        cpu, wall = time.thread_time(), time.perf_counter()
        try:
            return list(self.inner.propose(ctx, n))
        finally:
            wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
            if profiled:
                self.profiler.disable()
            self.samples.append((size, n, wall, cpu))
            if self.cold_at and size >= self.cold_at[0]:
                self.cold_at.pop(0)
                fresh = type(self.inner)()
                wall = time.perf_counter()
                fresh.propose(ctx, n)
                self.cold.append((size, time.perf_counter() - wall))


def replay_campaign(policy: TimedPolicy, seed: int, budget: int) -> dict[str, Any]:
    """One embedded campaign on the replay, to its budget (or until the policy runs dry)."""
    from agent.embedded import EmbeddedRunner
    from agent.engine import lifecycle
    from agent.spaces import ReplaySpace
    from core.db import session_factory, upgrade_database
    from core.replay import ReplayDataset
    from kernels import get_family
    from worker.evaluate import ReplayEvaluator

    family = get_family("gemm_bias_relu")
    dataset = ReplayDataset(family.replay_datasets()[0]).complete_space()
    shape = dataset.shapes()[0]
    m, n, k = (int(x) for x in shape.split("x"))
    evaluator = ReplayEvaluator(family, dataset)
    space = ReplaySpace(family, dataset, shape)
    with tempfile.TemporaryDirectory(prefix="tf-policy-cost-") as tmp:
        url = f"sqlite:///{tmp}/bench.db"
        upgrade_database(url)
        sessions = session_factory(url)
        with sessions.begin() as s:
            cid = lifecycle.create_campaign(
                s, lifecycle.CampaignSpec(
                    parallel=2, dims={"m": m, "n": n, "k": k}, policy=policy.name,
                    seed=seed, budget_iterations=budget),
                backend="replay", device=evaluator.device).id
        runner = EmbeddedRunner(sessions, [evaluator], policy=policy, space=space)
        start = time.perf_counter()
        final = runner.run(cid)
        wall = time.perf_counter() - start
        if runner.errors:
            raise RuntimeError(f"seed {seed}: {runner.errors[0]!r}")
        out = {"seed": seed, "evaluations": final.evaluations, "status": final.status,
               "reason": final.status_reason, "wall_s": round(wall, 2)}
        sessions.kw["bind"].dispose()
    return out


def window_figures(samples: list[tuple[int, int, float, float]], cold: list[tuple[int, float]],
                   checkpoints: list[int], window: int) -> list[dict[str, Any]]:
    """Per checkpoint: the decisions with a history in (N - window, N], and the cold decisions
    taken at the first history of at least N - window + 1."""
    rows = []
    for n in checkpoints:
        wall = [w * 1e3 for size, _n, w, _c in samples if n - window < size <= n]
        cpu = [c * 1e3 for size, _n, _w, c in samples if n - window < size <= n]
        cold_ms = [w * 1e3 for size, w in cold if n - window < size <= n]
        rows.append({"candidates": n, "decisions": len(wall),
                     **({"median_ms": statistics.median(wall), "p90_ms": pct(wall, 0.9),
                         "p99_ms": pct(wall, 0.99), "max_ms": max(wall),
                         "cpu_median_ms": statistics.median(cpu)} if wall else {}),
                     "cold_ms": cold_ms})
    return rows


def commit() -> str:
    """The checked-out commit (with ``+dirty`` when the tree has changes)."""
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                          capture_output=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                           text=True, capture_output=True).stdout.strip()
    return head + ("+dirty" if dirty else "")


def main(argv: list[str] | None = None) -> None:
    """Run the campaigns, print the per-checkpoint table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--policy", default="expert")
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated campaign seeds")
    parser.add_argument("--budget", type=int, default=1000)
    parser.add_argument("--checkpoints", default="100,300,600,1000")
    parser.add_argument("--window", type=int, default=50)
    parser.add_argument("--profile", type=int, default=None, metavar="N",
                        help="cProfile the decisions of the window ending at N candidates")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args(argv)

    from agent.policies import make_policy

    checkpoints = [int(x) for x in args.checkpoints.split(",") if x]
    seeds = [int(x) for x in args.seeds.split(",") if x]
    load_before = os.getloadavg()
    samples: list[tuple[int, int, float, float]] = []
    cold: list[tuple[int, float]] = []
    runs = []
    profiler = cProfile.Profile()
    for seed in seeds:
        timed = TimedPolicy(make_policy(args.policy), profile_range=(
            (args.profile - args.window, args.profile) if args.profile else None),
            profiler=profiler, cold_at=[n - args.window + 1 for n in checkpoints])
        runs.append(replay_campaign(timed, seed, args.budget))
        samples += timed.samples
        cold += timed.cold
        print(f"seed {seed}: {runs[-1]}", flush=True)
    load_after = os.getloadavg()
    rows = window_figures(samples, cold, checkpoints, args.window)
    figures = {"policy": args.policy, "seeds": seeds, "budget": args.budget,
               "window": args.window, "commit": commit(),
               "date": time.strftime("%Y-%m-%d"),
               "machine": f"{os.cpu_count()} CPUs, {platform.machine()}, Python "
                          f"{platform.python_version()}",
               "load_before": [round(x, 2) for x in load_before],
               "load_after": [round(x, 2) for x in load_after],
               "runs": runs, "checkpoints": rows}
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    if args.profile:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(30)
        print(f"\ncProfile of the decisions with {args.profile - args.window} < history <= "
              f"{args.profile} candidates (cumulative):")
        print(out.getvalue())
    fmt = "/".join(f"{x:.1f}" for x in load_before) + " → " + \
        "/".join(f"{x:.1f}" for x in load_after)
    print(f"\n{args.policy} policy, propose() per decision, seeds {args.seeds}, budget "
          f"{args.budget}, commit {figures['commit']}, {figures['machine']}, load {fmt}")
    print("| candidates in history | decisions | median ms | p90 ms | p99 ms | max ms "
          "| median CPU ms | cold decision ms (a fresh policy object) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        label = f"{r['candidates'] - args.window + 1}–{r['candidates']}"
        if args.profile == r["candidates"]:
            label += " (under cProfile)"
        cold_text = ", ".join(f"{c:.0f}" for c in r["cold_ms"]) or "–"
        if not r["decisions"]:
            print(f"| {label} | 0 | – | – | – | – | – | {cold_text} |")
            continue
        print(f"| {label} | {r['decisions']} | {r['median_ms']:.1f} | {r['p90_ms']:.1f} "
              f"| {r['p99_ms']:.1f} | {r['max_ms']:.1f} | {r['cpu_median_ms']:.1f} "
              f"| {cold_text} |")


if __name__ == "__main__":
    main()
