"""Does the orchestration keep GPUs busy? Replay GPU workers that take the recorded time.

Issue #10, the part that needs no GPU: for 1, 2, 4 and 8 GPU workers, a private stack (as in
``bench.service_overhead``: its own Postgres database and Redis database number, ``tuneforge
serve``, an agent, a compile worker) whose GPU workers use the replay backend with
``--replay-speed 1``: each evaluation sleeps the GPU seconds recorded on the H200 for that
candidate (0.125-1.9 s, median 0.165 s), so a worker is as busy as a GPU would be while the
agent, the queues and the database do their real work. Several campaigns run at once with
``parallel`` equal to the number of workers (the fairness rule keeps each at that many in
flight), so more candidates are in flight than there are GPUs and a GPU that frees up finds
work waiting, unless the orchestration falls behind.

After a warm-up, over a fixed window:

- evaluations per minute (results recorded by the agent in the window);
- scaling efficiency vs 1 worker: the GPUs' busy fraction at N workers over that at 1
  (throughput per worker compared alike, but the points drawn, and so the recorded GPU
  seconds per evaluation, differ from run to run; the raw throughput ratio is shown too);
- each GPU worker's idle fraction (1 - busy / wall, from the seconds its heartbeats report);
- the agent: its utilization (busy / wall of its processes), the time one step takes (record a
  result and decide, or a failed compile), the agent queue's length (sampled every 20 ms) and
  the wait it implies (Little's law: mean length / arrival rate).

    .venv/bin/python -m bench.replay_scaling [--runs "random:1,2,4,8 expert:1,8"]
        [--window 60] [--write-docs]

Prints a table last; ``--write-docs`` writes it under "Service: replay scaling" in
docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import re
import statistics
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import redis
from sqlalchemy import create_engine, func, select

from bench.service_overhead import ROOT, SHAPE, BenchStack, commit, cpu_seconds, pct

GPU_QUEUE = "gpu.sm_90"


@dataclass
class Beat:
    """A worker's heartbeat row at one moment."""

    role: str
    evaluations: int
    busy_seconds: float
    last_seen: dt.datetime


def beats(db_url: str) -> dict[str, Beat]:
    """Every worker's row, by name."""
    from core.models import WorkerHeartbeat

    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            return {r.name: Beat(r.role, r.evaluations, r.busy_seconds, r.last_seen)
                    for r in conn.execute(select(WorkerHeartbeat))}
    finally:
        engine.dispose()


def wait_for_beats(db_url: str, after: dt.datetime, timeout: float = 10.0) -> dict[str, Beat]:
    """The rows once every worker has beaten after ``after`` (its figures then cover every
    task it ended before ``after``, give or take the one running)."""
    deadline = time.monotonic() + timeout
    while True:
        rows = beats(db_url)
        if all(b.last_seen > after for b in rows.values()) or time.monotonic() > deadline:
            return rows
        time.sleep(0.1)


class QueueSampler(threading.Thread):
    """Lengths of the agent and GPU queues every ``period`` seconds."""

    def __init__(self, redis_url: str, period: float = 0.02) -> None:
        super().__init__(daemon=True)
        self.client = redis.Redis.from_url(redis_url)
        self.period = period
        self.agent: list[int] = []
        self.gpu: list[int] = []
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.wait(self.period):
            pipe = self.client.pipeline()
            pipe.llen("agent")
            pipe.llen(GPU_QUEUE)
            agent, gpu = pipe.execute()
            self.agent.append(int(agent))
            self.gpu.append(int(gpu))


def results_in(db_url: str, start: dt.datetime, end: dt.datetime) -> tuple[int, float]:
    """Candidates whose result the agent recorded in [start, end), and their recorded GPU
    seconds."""
    from core.models import Candidate

    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            count, gpu = conn.execute(
                select(func.count(), func.coalesce(func.sum(Candidate.gpu_seconds), 0.0))
                .where(Candidate.finished_at >= start, Candidate.finished_at < end)).one()
        return int(count), float(gpu)
    finally:
        engine.dispose()


def run_one(workers: int, policy: str, args: argparse.Namespace) -> dict[str, Any]:
    """One stack with ``workers`` replay GPU workers, campaigns of ``policy``; the figures of
    its window."""
    with BenchStack(args.agent_concurrency, 1, gpus=workers, replay_speed=args.replay_speed,
                    compile_concurrency=args.compile_concurrency,
                    heartbeat_s=1.0) as stack:  # busy seconds at 1 s resolution
        key = stack.team_key()
        with httpx.Client(base_url=f"{stack.api}/api/v1", headers={"X-API-Key": key},
                          timeout=30) as client:
            ids = [client.post("/campaigns", json={
                "shape": SHAPE, "budget": {"iterations": 100_000}, "parallel": workers,
                "seed": seed, "policy": policy}).json()["id"]
                for seed in range(args.campaigns)]
            time.sleep(args.warmup)
            sampler = QueueSampler(stack.redis_url)
            load_before = os.getloadavg()
            start = dt.datetime.now(dt.UTC)
            first = wait_for_beats(stack.db_url, start)
            agent_roots = [stack.procs[1].pid]
            agent_cpu0 = cpu_seconds(agent_roots)
            sampler.start()
            time.sleep(args.window)
            end = dt.datetime.now(dt.UTC)
            sampler.halt.set()
            agent_cpu = cpu_seconds(agent_roots) - agent_cpu0
            last = wait_for_beats(stack.db_url, end)
            load_after = os.getloadavg()
            for cid in ids:
                client.post(f"/campaigns/{cid}/cancel")
            statuses = [client.get(f"/campaigns/{cid}").json()["status"] for cid in ids]
        sampler.join(5)
        done, gpu_seconds = results_in(stack.db_url, start, end)

    def delta(role: str) -> list[tuple[float, int, float]]:
        """(busy seconds, steps, wall seconds) of each worker of ``role`` over the window."""
        out = []
        for name, b in last.items():
            a = first.get(name)
            if b.role != role or a is None:
                continue
            wall = (b.last_seen - a.last_seen).total_seconds()
            out.append((b.busy_seconds - a.busy_seconds, b.evaluations - a.evaluations, wall))
        return out

    gpus, agents = delta("gpu"), delta("agent")
    busy = [min(1.0, d[0] / d[2]) for d in gpus if d[2] > 0]
    agent_busy = sum(d[0] for d in agents)
    agent_steps = sum(d[1] for d in agents)
    agent_wall = statistics.mean(d[2] for d in agents) if agents else args.window
    arrivals = agent_steps / agent_wall if agent_wall else 0.0
    return {
        "workers": workers, "policy": policy, "window_s": (end - start).total_seconds(),
        "evaluations": done, "per_minute": 60.0 * done / (end - start).total_seconds(),
        "gpu_s_per_eval": gpu_seconds / done if done else 0.0,
        "gpu_busy": statistics.mean(busy) if busy else 0.0,
        "idle_mean": 1 - statistics.mean(busy) if busy else 1.0,
        "idle_max": 1 - min(busy) if busy else 1.0,
        "gpu_workers_seen": len(busy),
        "agent_utilization": agent_busy / (agent_wall * args.agent_concurrency),
        "agent_cpu_per_step_ms": 1000 * agent_cpu / agent_steps if agent_steps else 0.0,
        "agent_step_ms": 1000 * agent_busy / agent_steps if agent_steps else 0.0,
        "agent_queue_mean": statistics.mean(sampler.agent) if sampler.agent else 0.0,
        "agent_queue_p99": pct([float(x) for x in sampler.agent], 0.99) if sampler.agent
        else 0.0,
        "agent_wait_ms": (1000 * statistics.mean(sampler.agent) / arrivals
                          if sampler.agent and arrivals else 0.0),
        "gpu_queue_mean": statistics.mean(sampler.gpu) if sampler.gpu else 0.0,
        "gpu_queue_empty": (sum(1 for x in sampler.gpu if x == 0) / len(sampler.gpu)
                            if sampler.gpu else 1.0),
        "load": "/".join(f"{x:.1f}" for x in load_before) + " → "
                + "/".join(f"{x:.1f}" for x in load_after),
        "campaigns": statuses,
    }


def rows(results: list[dict[str, Any]]) -> list[list[str]]:
    """The table's rows (one per run; efficiency against the same policy's 1-worker run)."""
    out = []
    for r in results:
        n = r["workers"]
        base = next(b for b in results if b["policy"] == r["policy"])
        eff = r["gpu_busy"] / base["gpu_busy"] if base["gpu_busy"] else 0.0
        raw = r["per_minute"] / (n * base["per_minute"] / base["workers"]) \
            if base["per_minute"] else 0.0
        out.append([
            r["policy"], str(n), f"{r['per_minute']:.0f}", f"{r['gpu_s_per_eval']:.3f}",
            f"{100 * eff:.1f} % ({100 * raw:.0f} %)",
            f"{100 * r['idle_mean']:.1f} / {100 * r['idle_max']:.1f} %",
            f"{100 * r['agent_utilization']:.0f} %",
            f"{r['agent_step_ms']:.1f} ms ({r['agent_cpu_per_step_ms']:.1f} CPU)",
            f"{r['agent_queue_mean']:.2f} / {r['agent_queue_p99']:.0f} "
            f"({r['agent_wait_ms']:.1f} ms)",
            f"{r['gpu_queue_mean']:.1f} ({100 * r['gpu_queue_empty']:.0f} % empty)",
            r["load"],
        ])
    return out


def efficiency(results: list[dict[str, Any]], policy: str) -> tuple[int, float, float]:
    """(workers, GPU busy fraction, efficiency vs 1 worker) of ``policy``'s largest run."""
    runs = [r for r in results if r["policy"] == policy]
    last = runs[-1]
    eff = last["gpu_busy"] / runs[0]["gpu_busy"] if runs[0]["gpu_busy"] else 0.0
    return last["workers"], last["gpu_busy"], eff


HEADER = ["policy", "GPU workers", "evaluations / min", "recorded GPU s / eval",
          "efficiency vs 1 (throughput)", "GPU idle: mean / worst", "agent busy",
          "agent step (CPU)", "agent queue: mean / p99 (wait)", "GPU queue: mean (empty)",
          "load average before → after"]


def write_markdown(results: list[dict[str, Any]], args: argparse.Namespace, path: Path) -> None:
    """Replace (or add) the "Service: replay scaling" section of docs/BENCHMARKS.md."""
    table = "\n".join("| " + " | ".join(r) + " |" for r in rows(results))
    verdicts = []
    for policy in dict.fromkeys(r["policy"] for r in results):
        n, busy, eff = efficiency(results, policy)
        agent = [r for r in results if r["policy"] == policy][-1]
        verdicts.append(
            f"`{policy}`: at {n} workers the GPUs are busy {100 * busy:.1f} % of the time, "
            f"{100 * eff:.1f} % of the 1-worker figure (target ≥ 90 %: "
            f"{'met' if eff >= 0.9 else 'missed'}); the agent was busy "
            f"{100 * agent['agent_utilization']:.0f} % of its time, "
            f"{agent['agent_step_ms']:.0f} ms a step.")
    verdict = "\n\n".join(verdicts)
    section = f"""## Service: replay scaling

`python -m bench.replay_scaling {' '.join(sys.argv[1:])}` · {dt.date.today().isoformat()} ·
2-core dev box ({os.cpu_count()} CPUs, {platform.machine()}, Python
{platform.python_version()}), no GPU · commit {commit()}.

Issue #10 without GPUs: replay GPU workers (`tuneforge worker --role gpu --backend replay
--replay-speed {args.replay_speed:g}`) sleep the GPU seconds recorded on the H200 for each
candidate, so each is as busy as a GPU would be while the agent, the queues and Postgres do
their real work. {args.campaigns} campaigns at once, each with `parallel` =
the number of workers; {args.agent_concurrency} agent processes, {args.compile_concurrency}
compile process(es), `tuneforge serve`, Postgres and Redis on the same 2 cores. Figures over
a {args.window:g} s window after {args.warmup:g} s of warm-up. Efficiency is the GPUs' busy
fraction relative to 1 worker (the points drawn, and so the recorded seconds per
evaluation, differ between runs; the raw throughput ratio in parentheses). Idle fractions
come from the seconds each worker's heartbeats report; the agent's from its own (a step:
record a result and decide); its queue was sampled every 20 ms, the wait is Little's law.

| {' | '.join(HEADER)} |
|{'---|' * len(HEADER)}
{table}

{verdict}
{ANALYSIS}"""
    old = path.read_text() if path.exists() else "# Benchmarks\n"
    pattern = re.compile(r"^## Service: replay scaling\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(old):
        new = pattern.sub(lambda _m: section + "\n", old)
    else:
        new = old.rstrip("\n") + "\n\n" + section
    path.write_text(new.rstrip("\n") + "\n")


#: What the table says, measured with it (kept with the section when it is rewritten).
ANALYSIS = """
The orchestration is not the bottleneck: with the `random` policy (a decision costs almost
nothing) 8 workers run at the throughput of 8 single workers, each GPU idle 2-3 % of the time
(the gap between two tasks: the result sent, the acknowledgement, the next message handed to
the worker process), the agent's queue empty nearly always and the GPU queue never empty: work
waits for the GPUs, not the other way round. The agent's processes are 28-42 % busy at 8
workers (11-12 ms of CPU per step: record the result, decide, commit, send, Celery's own work
included), so the same two cores would feed roughly 20 such GPUs.

The default `expert` policy keeps up as well since it keeps what it derives from a campaign's
history between decisions (`agent/policies/expert.py`, one memory per campaign in each agent
process, checked against the history at every decision): its decision (`propose`, in process,
history cached) takes 1.1-1.8 ms at 100 to 1000 candidates (p99 under 10 ms, `python -m
bench.policy_cost`, section "Expert policy: decision cost"). Its step costs about as much CPU as
the random policy's (13.8 against 11.7 ms at 8 workers, 14.3 against 14.6 at 1); the agent is
busier than with `random` because the expert's candidates are faster to measure (0.16 against
0.21 recorded GPU seconds each), so more results arrive per second. An agent process that has
not decided for a campaign yet (a restart, or a campaign it has not seen) pays a full pass once,
at its first decision for it (about 300 ms at 1000 candidates).
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default="random:1,2,4,8 expert:1,8",
                        help="POLICY:WORKERS,... runs, space-separated")
    parser.add_argument("--window", type=float, default=60.0, help="seconds measured")
    parser.add_argument("--warmup", type=float, default=10.0)
    parser.add_argument("--campaigns", type=int, default=2)
    parser.add_argument("--replay-speed", type=float, default=1.0)
    parser.add_argument("--agent-concurrency", type=int, default=2)
    parser.add_argument("--compile-concurrency", type=int, default=1)
    parser.add_argument("--markdown", type=Path, default=ROOT / "docs" / "BENCHMARKS.md")
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()

    results = []
    for run in args.runs.split():
        policy, counts = run.split(":")
        for n in (int(x) for x in counts.split(",")):
            results.append(run_one(n, policy, args))
            r = results[-1]
            print(f"{policy}, {n} workers: {r['per_minute']:.0f} evaluations/min, GPU busy "
                  f"{100 * r['gpu_busy']:.1f} %, agent busy "
                  f"{100 * r['agent_utilization']:.0f} %, load {r['load']}", flush=True)
    if args.write_docs:
        write_markdown(results, args, args.markdown)
    from rich.console import Console
    from rich.table import Table

    table = Table(title="replay scaling (GPU workers sleep the recorded GPU time)")
    for col in HEADER:
        table.add_column(col, justify="right")
    for row in rows(results):
        table.add_row(*row)
    Console(width=220).print(table)


if __name__ == "__main__":
    main()
