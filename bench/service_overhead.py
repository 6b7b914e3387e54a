"""Orchestration overhead of the distributed service, and API latency under 100 clients.

Starts a private stack on this machine (a fresh Postgres database, an empty Redis database
number, ``tuneforge serve`` and ``tuneforge worker`` processes with the replay backend and no
replay sleep), then:

1. runs a campaign with ``parallel = 1`` on one GPU worker: every candidate goes agent →
   compile queue → GPU queue → agent, each hop a commit and an enqueue. The replay answers a
   compile and a measurement from memory, so the time from one candidate's proposal to the
   next one's is the service's own overhead per candidate (queues, workers, database, the
   agent's decision), compile and GPU time excluded. Median and p90 over the campaign, and
   the first and last 50 candidates (a cost that grows with the campaign shows there).
2. 100 concurrent clients (keep-alive connections of a raw asyncio HTTP/1.1 client, loopback
   only) read ``GET /campaigns/{id}``, each once a second, then back to back; latency p50/p99,
   throughput and the API's CPU per request.

    .venv/bin/python -m bench.service_overhead [--candidates 300] [--requests 3000]
        [--json figures.json] [--before earlier.json] [--write-docs]

Prints a table last; ``--write-docs`` also writes the figures under "Service overhead" in
docs/BENCHMARKS.md (``--before``: beside those of an earlier run, e.g. this file run at an
older commit). Without it nothing under docs/ changes.

``--campaigns 1,2,4,8`` measures instead how the same stack (one agent, one compile and one GPU
worker process) carries N concurrent campaigns: N campaigns with ``parallel = 1`` run side by
side for ``--window`` seconds after a warm-up while 100 clients read one of them once a second;
per N: each campaign's time from one proposal to its next (median, p90), candidates per second
for all together, the service's CPU per candidate and the API's latency; with ``--write-docs``
it writes "Service overhead against concurrent campaigns" in docs/BENCHMARKS.md and a plot
under runs/DATE-COMMIT-service-campaigns/.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import platform
import re
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import redis
from sqlalchemy import create_engine, select, text

ROOT = Path(__file__).resolve().parent.parent
PG = os.environ.get("TUNEFORGE_BENCH_PG", "postgresql+psycopg://postgres@127.0.0.1:5432")
REDIS = os.environ.get("TUNEFORGE_BENCH_REDIS", "redis://127.0.0.1:6379")
TUNEFORGE = [sys.executable, "-m", "cli.main"]
SHAPE = {"m": 4096, "n": 4096, "k": 4096}


def pct(values: list[float], q: float) -> float:
    """The ``q`` quantile (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def free_port() -> int:
    """A TCP port nobody listens on now (127.0.0.1)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def claim_redis() -> str:
    """The URL of an empty Redis database number, marked as this process's."""
    for number in range(15, 0, -1):
        client = redis.Redis.from_url(f"{REDIS}/{number}")
        if client.dbsize() == 0 and client.set("tuneforge:bench-claim", os.getpid(), nx=True):
            return f"{REDIS}/{number}"
    raise SystemExit("no empty Redis database number (1-15) for the benchmark")


class BenchStack:
    """A private service stack (database, Redis db, API, workers) torn down on exit."""

    def __init__(self, agent_concurrency: int, api_workers: int, *, gpus: int = 1,
                 replay_speed: float = 0.0, compile_concurrency: int = 1,
                 heartbeat_s: float = 5.0) -> None:
        self.db_name = f"tuneforge_bench_{secrets.token_hex(4)}"
        self.db_url = f"{PG}/{self.db_name}"
        self.redis_url = claim_redis()
        self.port = free_port()
        self.api = f"http://127.0.0.1:{self.port}"
        self.home = Path(tempfile.mkdtemp(prefix="tf-bench-"))
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("TUNEFORGE_")}
        self.env.update({"TUNEFORGE_DATABASE_URL": self.db_url,
                         "TUNEFORGE_REDIS_URL": self.redis_url,
                         "TUNEFORGE_BACKEND": "replay", "TUNEFORGE_HOME": str(self.home),
                         "TUNEFORGE_HEARTBEAT_S": f"{heartbeat_s:g}",
                         "PYTHONUNBUFFERED": "1"})
        self.heartbeat_s = heartbeat_s
        self.agent_concurrency = agent_concurrency
        self.api_workers = api_workers
        self.gpus = gpus  # replay GPU worker processes, sleeping gpu_seconds / replay_speed
        self.replay_speed = replay_speed
        self.compile_concurrency = compile_concurrency
        self.procs: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> BenchStack:
        admin = create_engine(f"{PG}/postgres", isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{self.db_name}"'))
        admin.dispose()
        from core.db import upgrade_database

        upgrade_database(self.db_url)
        for args in (["serve", "--port", str(self.port), "--workers", str(self.api_workers)],
                     ["worker", "--role", "agent", "--concurrency",
                      str(self.agent_concurrency)],
                     ["worker", "--role", "compile", "--concurrency",
                      str(self.compile_concurrency)],
                     ["worker", "--role", "gpu", "--backend", "replay", "--gpus",
                      ",".join(str(i) for i in range(self.gpus)),
                      "--replay-speed", f"{self.replay_speed:g}"]):
            log = (self.home / f"{args[0]}-{args[2] if len(args) > 2 else ''}.log").open("wb")
            self.procs.append(subprocess.Popen([*TUNEFORGE, *args], env=self.env, cwd=ROOT,
                                               stdout=log, stderr=subprocess.STDOUT))
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        engine = create_engine(self.db_url)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                up = httpx.get(f"{self.api}/api/v1/healthz", timeout=2).status_code == 200
            except httpx.TransportError:
                up = False
            with engine.connect() as conn:
                roles = [r for (r,) in conn.execute(text(
                    "SELECT role FROM worker_heartbeats WHERE last_seen > now() - "
                    "make_interval(secs => :s)"), {"s": 3 * self.heartbeat_s})]
            if up and {"agent", "compile"} <= set(roles) and roles.count("gpu") >= self.gpus:
                engine.dispose()
                return
            time.sleep(0.3)
        raise SystemExit(f"the stack did not start; logs in {self.home}")

    def __exit__(self, *_exc: Any) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
        from core.db import get_engine

        get_engine(self.db_url).dispose()
        admin = create_engine(f"{PG}/postgres", isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{self.db_name}" WITH (FORCE)'))
        admin.dispose()
        redis.Redis.from_url(self.redis_url).flushdb()

    def team_key(self) -> str:
        from api.security import create_team
        from core.db import session_scope

        with session_scope(self.db_url) as s:
            _team, key = create_team(s, name=f"bench-{secrets.token_hex(3)}")
        return key

    def run_campaign(self, client: httpx.Client, budget: int, seed: int, policy: str) -> str:
        cid = client.post("/campaigns", json={"shape": SHAPE, "budget": {"iterations": budget},
                                              "parallel": 1, "seed": seed, "policy": policy}
                          ).json()["id"]
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            if client.get(f"/campaigns/{cid}").json()["status"] in ("done", "failed"):
                return str(cid)
            time.sleep(1.0)  # an httpx request costs the box ~9 ms of CPU: poll seldom
        raise SystemExit(f"campaign {cid} did not finish")


def _proc_table() -> dict[int, tuple[int, float]]:
    """pid -> (parent pid, CPU seconds used) for every process."""
    tick = os.sysconf("SC_CLK_TCK")
    table = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        table[int(entry.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tick)
    return table


def cpu_seconds(roots: list[int]) -> float:
    """CPU seconds used so far by ``roots`` and all their descendants."""
    table = _proc_table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _cpu) in table.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0.0, list(roots)
    while todo:
        pid = todo.pop()
        if pid in table:
            total += table[pid][1]
            todo += children.get(pid, [])
    return total


def postgres_backends(db_url: str) -> list[int]:
    """Server processes of the connections to this database (same host)."""
    name = db_url.rsplit("/", 1)[-1]
    admin = create_engine(f"{PG}/postgres")
    with admin.connect() as conn:
        pids = [int(p) for (p,) in conn.execute(
            text("SELECT pid FROM pg_stat_activity WHERE datname = :d"), {"d": name})]
    admin.dispose()
    return pids


class CpuMeter:
    """CPU time of the stack's processes (and of its database's server processes) over a
    block: a figure the other load of the machine does not inflate much."""

    def __init__(self, stack: BenchStack, only: list[int] | None = None,
                 roots: list[int] | None = None) -> None:
        self.stack = stack
        self.only = only  # these processes alone (no Postgres)
        self.given_roots = roots  # these processes, and Postgres

    def __enter__(self) -> CpuMeter:
        self.roots = self.only or self.given_roots or [p.pid for p in self.stack.procs]
        self.service0 = cpu_seconds(self.roots)
        self.pg_pids = [] if self.only else postgres_backends(self.stack.db_url)
        self.pg0 = cpu_seconds(self.pg_pids)
        return self

    def __exit__(self, *_exc: Any) -> None:
        self.service = cpu_seconds(self.roots) - self.service0
        pg_now = postgres_backends(self.stack.db_url) if not self.only else []
        # backends that appeared during the block count whole
        self.postgres = cpu_seconds(pg_now) - self.pg0 if not self.only else 0.0


def cycle_times(db_url: str, campaign_id: str) -> list[float]:
    """Milliseconds from one candidate's proposal to the next one's (parallel = 1)."""
    from core.db import session_scope
    from core.models import Candidate

    with session_scope(db_url) as s:
        created = s.scalars(select(Candidate.created_at)
                            .where(Candidate.campaign_id == campaign_id)
                            .order_by(Candidate.iteration)).all()
    # the baseline's cycle includes starting the campaign: measure from the second candidate
    return [(b - a).total_seconds() * 1000 for a, b in zip(created[1:], created[2:],
                                                           strict=False)]


def decision_times(db_url: str, campaign_id: str, samples: int = 30, *,
                   cached: bool = True) -> list[float]:
    """Milliseconds the engine's decision alone takes (history + policy), in this process, on
    the finished campaign's history: the part of the overhead that is the agent thinking.
    ``cached``: with this process's history of the campaign read once before (as an agent
    process has it after its first decision); otherwise from a full read of the history."""
    from agent.engine import locking, proposing
    from agent.engine.history import HISTORY
    from agent.service import policy_for, space_for
    from core.db import session_factory
    from core.models import Campaign

    sessions = session_factory(db_url)
    options: dict[str, Any] = {"cache": HISTORY if cached else None}
    if cached:
        HISTORY.clear()
        with sessions() as s:  # a committed read, as after the agent's first decision
            HISTORY.read(s, locking.lock_campaign(s, campaign_id))
            s.commit()
    out = []
    for _ in range(samples):
        with sessions() as s:
            campaign = s.get(Campaign, campaign_id)
            assert campaign is not None
            campaign.status = "running"  # rolled back: only the decision is timed
            campaign.budget_iterations = 10**6
            start = time.perf_counter()
            proposing.propose_candidates(
                s, campaign_id, policy=policy_for(campaign.policy),
                space=space_for(campaign.kernel, campaign.arch, campaign.backend,
                                campaign.shape_text), slots=1, **options)
            out.append((time.perf_counter() - start) * 1000)
            s.rollback()
    return out


class _Connection:
    """One keep-alive HTTP/1.1 connection that sends GETs and reads the answers: a load
    generator that costs a few tens of microseconds per request (httpx's async client took
    6.5 ms of CPU per request on the 2-core box: the client, not the API, set the pace)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, api: str) -> _Connection:
        host, port = api.split("://", 1)[1].rsplit(":", 1)
        return cls(*await asyncio.open_connection(host, int(port)))

    async def get(self, request: bytes) -> int:
        """Send a prepared request; the answer's status (the body is read and dropped)."""
        self.writer.write(request)
        head = await self.reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
        await self.reader.readexactly(length)
        return int(head[9:12])

    def close(self) -> None:
        self.writer.close()


async def api_latency(api: str, key: str, campaign_id: str, clients: int, requests: int,
                      pace_s: float = 0.0) -> tuple[list[float], float, int]:
    """Latencies (ms) of ``requests`` reads of one campaign by ``clients`` concurrent clients
    (one keep-alive connection each), back to back (``pace_s`` = 0) or each client once
    every ``pace_s`` seconds; the throughput and the number of failed requests."""
    host = api.split("://", 1)[1]
    request = (f"GET /api/v1/campaigns/{campaign_id} HTTP/1.1\r\nHost: {host}\r\n"
               f"X-API-Key: {key}\r\nAccept: application/json\r\n\r\n").encode()
    latencies: list[float] = []
    failed = 0
    per_client = max(1, requests // clients)
    connections = [await _Connection.open(api) for _ in range(clients)]

    async def one(index: int, conn: _Connection) -> None:
        nonlocal failed
        if pace_s:
            await asyncio.sleep(pace_s * index / clients)  # spread the clients' phases
        for _ in range(per_client):
            start = time.perf_counter()
            try:
                code = await conn.get(request)
            except (OSError, asyncio.IncompleteReadError, ValueError):
                failed += 1
                return  # the connection is gone
            took = time.perf_counter() - start
            if code != 200:
                failed += 1
            else:
                latencies.append(took * 1000)
            if pace_s:
                await asyncio.sleep(max(0.0, pace_s - took))

    # one untimed read per connection first: the API's threads, sessions and pooled database
    # connections exist before the clock starts, as they do in a running service
    await asyncio.gather(*(c.get(request) for c in connections))
    start = time.perf_counter()
    try:
        await asyncio.gather(*(one(i, c) for i, c in enumerate(connections)))
    finally:
        for conn in connections:
            conn.close()
    elapsed = time.perf_counter() - start
    return latencies, len(latencies) / elapsed, failed


def commit() -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                         text=True, cwd=ROOT)
    return out.stdout.strip() or "unknown"


def result_rows(f: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(figure, value, target) rows of the results."""
    clients, pace = f["clients"], f["pace_s"]
    return [
        ("overhead per candidate, median", f"{f['cycle_median_ms']:.1f} ms", "≤ 20 ms"),
        ("overhead per candidate, p90", f"{f['cycle_p90_ms']:.1f} ms", ""),
        ("same, median of the first / last 50 candidates",
         f"{f['cycle_first_ms']:.1f} / {f['cycle_last_ms']:.1f} ms", "flat"),
        ("CPU per candidate: service processes + Postgres",
         f"{f['cpu_per_candidate_ms']:.1f} + {f['pg_cpu_per_candidate_ms']:.1f} ms", ""),
        ("expert policy's decision alone (history + propose), median",
         f"{f['decision_median_ms']:.1f} ms", "policy time, not overhead"),
        ("same, reading the whole history", f"{f['decision_full_ms']:.1f} ms", ""),
        (f"API GET /campaigns/{{id}}, {clients} clients each every {pace:g} s: p50 / p99",
         f"{f['paced_p50_ms']:.1f} / {f['paced_p99_ms']:.1f} ms", "p99 ≤ 100 ms"),
        (f"same, {clients} clients back to back (saturation): p50 / p99",
         f"{f['sat_p50_ms']:.1f} / {f['sat_p99_ms']:.1f} ms", ""),
        ("saturation throughput",
         f"{f['sat_rps']:.0f} req/s ({f['sat_requests']} answered, {f['sat_failed']} failed)",
         ""),
        ("API CPU per request (uvicorn processes)", f"{f['api_cpu_per_request_ms']:.1f} ms", ""),
    ]


def write_markdown(f: dict[str, Any], path: Path, before: dict[str, Any] | None) -> None:
    """Replace (or add) the "Service overhead" section of docs/BENCHMARKS.md."""
    rows = result_rows(f)
    if before is not None:
        old = {name: value for name, value, _ in result_rows(before)}
        table = "\n".join(f"| {a} | {old.get(a, '')} | {b} | {c} |" for a, b, c in rows)
        header = (f"| figure | before ({before['commit']}) | after ({f['commit']}) | target |\n"
                  "|---|---|---|---|")
        runs = (f"Before: the same command at commit {before['commit']}, {before['date']}, "
                f"{before['load']}. After: {f['load']}.")
    else:
        table = "\n".join(f"| {a} | {b} | {c} |" for a, b, c in rows)
        header = "| figure | value | target |\n|---|---|---|"
        runs = f"{f['load']}."
    overhead_met = f["cycle_median_ms"] <= 20.0
    api_met = f["paced_p99_ms"] <= 100.0
    verdict = (
        f"Overhead per candidate: target {'met' if overhead_met else 'missed'} "
        f"({f['cycle_median_ms']:.1f} ms median"
        + ("" if overhead_met else
           f"; CPU per candidate {f['cpu_per_candidate_ms']:.1f} ms ≈ the wall time: the "
           f"pipeline is CPU-bound on these 2 cores, and where that time goes is below")
        + "). API: the target as this benchmark has always "
        f"measured it (100 clients, each reading once a second) is "
        f"{'met' if api_met else 'missed'} (p99 {f['paced_p99_ms']:.1f} ms); 100 clients "
        f"reading back to back saturate the API at {f['sat_rps']:.0f} req/s, p99 "
        f"{f['sat_p99_ms']:.0f} ms: a 100 ms p99 there needs about 1000 req/s, which at "
        f"{f['api_cpu_per_request_ms']:.1f} ms of CPU per read two cores cannot serve.")
    section = f"""## Service overhead

`{f['command']}` · {f['date']} · {f['machine']} · commit {f['commit']}.

Replay backend without replay sleep (a compile and a measurement are lookups), one GPU worker,
one compile worker, {f['agent_concurrency']} agent process, `tuneforge serve --workers
{f['api_workers']}`, Postgres and Redis on the same host, heartbeats every 5 s (the default;
the run polls the campaign once a second). A campaign of {f['candidates'] + 2}
candidates with `parallel = 1` and the `random` policy (whose decision costs almost nothing):
the time from one candidate's proposal to the next one's is the service's own cost per
candidate (agent → compile queue → GPU queue → agent: three Celery hops; a successful compile
is recorded by the compile worker, which sends the evaluation itself). CPU figures are the
processes' own CPU time (`/proc`), which other load on the box inflates far less than wall
time. The API is read by 100 keep-alive connections of a raw asyncio HTTP/1.1 client (httpx's
async client cost 6.5 ms of CPU per request on this box: it, not the API, set the pace of the
earlier saturation figures).

{header}
{table}

{runs} {f['paced_failed']} paced requests failed.

{verdict}
"""
    old_text = path.read_text() if path.exists() else "# Benchmarks\n"
    pattern = re.compile(r"^## Service overhead\n.*?(?=^## |\Z)", re.S | re.M)
    extra = WHERE_THE_TIME_GOES if before is not None else ""
    if pattern.search(old_text):
        new = pattern.sub(lambda _m: section + extra + "\n", old_text)
    else:
        new = old_text.rstrip("\n") + "\n\n" + section + extra
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(new.rstrip("\n") + "\n")


#: Where the time goes (py-spy on the running service; kept with the section when it is
#: rewritten with --before).
WHERE_THE_TIME_GOES = """
Where the time goes (py-spy, 100 Hz, 20 s of a 3000-candidate campaign, every Celery main and
pool process, 2026-11-30): the three Celery main processes take about a third of the samples
(Redis's visibility bookkeeping per message: `BRPOP`, a `MULTI` of `ZADD`+`HSET` when it is
delivered, another of `ZREM`+`HDEL` when it is acknowledged, and the pipes to the pool: the
cost of `acks_late` on Redis with prefork pools), the agent's pool process a third (its ORM
flush about 30 % of that: the finished candidate, the campaign, the next candidate and two
events), the compile and GPU pool processes a sixth each. What is left to take: the agent's
flush as Core statements (about 1.5 ms of its step).
"""


def window_cycles(db_url: str, campaign_ids: list[str], start: dt.datetime,
                  end: dt.datetime) -> tuple[list[float], int]:
    """Milliseconds from one proposal to the campaign's next, for the proposals made within
    [start, end) by each campaign; and the number of those proposals."""
    from core.db import session_scope
    from core.models import Candidate

    cycles: list[float] = []
    proposed = 0
    with session_scope(db_url) as s:
        for cid in campaign_ids:
            created = [t for t in s.scalars(
                select(Candidate.created_at).where(Candidate.campaign_id == cid)
                .order_by(Candidate.iteration)) if start <= t < end]
            proposed += len(created)
            cycles += [(b - a).total_seconds() * 1000 for a, b in
                       zip(created, created[1:], strict=False)]
    return cycles, proposed


def campaigns_sweep(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Per number of concurrent campaigns: cycle time, throughput, CPU, API latency."""
    counts = [int(n) for n in args.campaigns.split(",")]
    rows: list[dict[str, Any]] = []
    with BenchStack(args.agent_concurrency, args.api_workers) as stack:
        key = stack.team_key()
        with httpx.Client(base_url=f"{stack.api}/api/v1", headers={"X-API-Key": key},
                          timeout=30) as client:
            stack.run_campaign(client, 5, seed=100, policy="random")  # warm every process up
            for n in counts:
                load_before = os.getloadavg()
                ids = [client.post("/campaigns", json={
                    "shape": SHAPE, "budget": {"iterations": 100000}, "parallel": 1,
                    "seed": 1000 * n + i, "policy": "random"}).json()["id"]
                    for i in range(n)]
                time.sleep(args.warmup)
                start = dt.datetime.now(dt.UTC)
                # the workers' CPU (the API's, which the clients' reads cost, left out) and
                # Postgres's (its reads in)
                with CpuMeter(stack, roots=[p.pid for p in stack.procs[1:]]) as cpu:
                    paced, _rps, paced_failed = asyncio.run(api_latency(
                        stack.api, key, ids[0], args.clients,
                        args.clients * int(args.window / args.pace), args.pace))
                end = dt.datetime.now(dt.UTC)
                for cid in ids:
                    client.post(f"/campaigns/{cid}/cancel")
                cycles, proposed = window_cycles(stack.db_url, ids, start, end)
                seconds = (end - start).total_seconds()
                rows.append({
                    "campaigns": n, "window_s": seconds, "proposed": proposed,
                    "cycle_median_ms": statistics.median(cycles),
                    "cycle_p90_ms": pct(cycles, 0.9),
                    "per_s": proposed / seconds,
                    "cpu_per_candidate_ms": 1000 * cpu.service / max(1, proposed),
                    "pg_cpu_per_candidate_ms": 1000 * cpu.postgres / max(1, proposed),
                    "api_p50_ms": pct(paced, 0.5), "api_p99_ms": pct(paced, 0.99),
                    "api_failed": paced_failed,
                    "load": "{} → {}".format(
                        "/".join(f"{x:.1f}" for x in load_before),
                        "/".join(f"{x:.1f}" for x in os.getloadavg())),
                })
                time.sleep(3.0)  # the cancelled campaigns' last candidates finish
                print(f"{n} campaigns: {rows[-1]}", flush=True)
    return rows


def plot_sweep(rows: list[dict[str, Any]], path: Path, title: str) -> None:
    """Cycle time, throughput and API p99 against the number of campaigns (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = [r["campaigns"] for r in rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.4))
    left.plot(n, [r["cycle_median_ms"] for r in rows], "o-", label="cycle, median")
    left.plot(n, [r["cycle_p90_ms"] for r in rows], "o--", label="cycle, p90")
    left.plot(n, [r["api_p99_ms"] for r in rows], "s:", label="API read p99")
    left.set_ylabel("ms")
    left.legend(fontsize=8)
    right.plot(n, [r["per_s"] for r in rows], "o-", color="tab:green")
    right.set_ylabel("candidates per second, all campaigns")
    right.set_ylim(bottom=0)
    for ax in (left, right):
        ax.set_xlabel("concurrent campaigns")
        ax.set_xscale("log", base=2)
        ax.set_xticks(n, [str(x) for x in n])
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


SWEEP_HEADER = (
    "| campaigns | cycle per campaign, median / p90 (ms) | candidates / s, all "
    "| wall per candidate (ms) | CPU per candidate (ms) | API read p50 / p99 (ms) | load |\n"
    "|---|---|---|---|---|---|---|")


def write_sweep_markdown(rows: list[dict[str, Any]], meta: dict[str, Any], path: Path,
                         plot: Path) -> None:
    """Replace (or add) the "Service overhead against concurrent campaigns" section."""
    table = "\n".join(
        f"| {r['campaigns']} | {r['cycle_median_ms']:.1f} / {r['cycle_p90_ms']:.1f} "
        f"| {r['per_s']:.1f} | {1000 / r['per_s']:.1f} "
        f"| {r['cpu_per_candidate_ms']:.1f} + {r['pg_cpu_per_candidate_ms']:.1f} "
        f"| {r['api_p50_ms']:.1f} / {r['api_p99_ms']:.1f} ({r['api_failed']} failed) "
        f"| {r['load']} |" for r in rows)
    image = Path(os.path.relpath(plot, path.parent)).as_posix()
    section = f"""## Service overhead against concurrent campaigns

`{meta['command']}` · {meta['date']} · {meta['machine']} · commit {meta['commit']}.

Issue #8, question 5. The stack of "Service overhead" (replay without sleep, one agent, one
compile and one GPU worker process, `tuneforge serve --workers {meta['api_workers']}`, Postgres
and Redis, all on these 2 cores); N campaigns with `parallel = 1` and the `random` policy run
side by side; after {meta['warmup']:g} s of warm-up, for {meta['window']:g} s, 100 clients read
the first campaign once a second. A campaign's cycle is the time from one of its proposals to
its next; "per candidate" is the window divided by the candidates proposed in it by all
campaigns. CPU per candidate: the worker processes (agent, compile, GPU; the API's left out) +
Postgres (the API's reads included). Load average (1/5/15 min) before → after each row.

{SWEEP_HEADER}
{table}

![cycle time, API p99 and throughput against concurrent campaigns]({image})
"""
    old_text = path.read_text()
    pattern = re.compile(r"^## Service overhead against concurrent campaigns\n.*?(?=^## |\Z)",
                         re.S | re.M)
    if pattern.search(old_text):
        new = pattern.sub(lambda _m: section + "\n", old_text)
    else:
        anchor = "## Service: event stream latency"
        new = (old_text.replace(anchor, section + "\n" + anchor, 1) if anchor in old_text
               else old_text.rstrip("\n") + "\n\n" + section)
    path.write_text(new.rstrip("\n") + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", type=int, default=300)
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--requests", type=int, default=3000, help="saturation requests")
    parser.add_argument("--pace", type=float, default=1.0, help="seconds between a paced "
                        "client's requests")
    parser.add_argument("--paced-rounds", type=int, default=10)
    parser.add_argument("--agent-concurrency", type=int, default=1)
    parser.add_argument("--api-workers", type=int, default=2)
    parser.add_argument("--markdown", type=Path, default=ROOT / "docs" / "BENCHMARKS.md")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--before", type=Path, help="figures of an earlier run (--json), shown "
                        "beside these")
    parser.add_argument("--write-docs", action="store_true",
                        help="write the figures (and the sweep's plot) into docs/")
    # the default; still accepted so that recorded command lines run
    parser.add_argument("--no-write", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--campaigns", help="comma-separated numbers of concurrent campaigns: "
                        "measure the sweep instead, e.g. 1,2,4,8")
    parser.add_argument("--window", type=float, default=15.0,
                        help="--campaigns: seconds measured per number of campaigns")
    parser.add_argument("--warmup", type=float, default=3.0,
                        help="--campaigns: seconds before the window opens")
    args = parser.parse_args()

    if args.campaigns:
        rows = campaigns_sweep(args)
        meta = {"command": " ".join(["python -m bench.service_overhead", *sys.argv[1:]]),
                "date": dt.date.today().isoformat(), "commit": commit(),
                "machine": f"2-core dev box ({os.cpu_count()} CPUs, {platform.machine()}, "
                           f"Python {platform.python_version()}), no GPU",
                "api_workers": args.api_workers, "window": args.window,
                "warmup": args.warmup}
        if args.json:
            args.json.write_text(json.dumps({**meta, "rows": rows}, indent=1) + "\n")
        plot = (ROOT / "runs" / f"{meta['date']}-{meta['commit']}-service-campaigns"
                / "service-overhead-campaigns.png")
        if args.write_docs:
            plot_sweep(rows, plot, f"replay, 2-core box, commit {meta['commit']}")
            write_sweep_markdown(rows, meta, args.markdown, plot)
        print("| campaigns | cycle median / p90 ms | candidates/s | CPU per candidate ms "
              "| API p50 / p99 ms |")
        for r in rows:
            print(f"| {r['campaigns']} | {r['cycle_median_ms']:.1f} / {r['cycle_p90_ms']:.1f} "
                  f"| {r['per_s']:.1f} | {r['cpu_per_candidate_ms']:.1f} "
                  f"+ {r['pg_cpu_per_candidate_ms']:.1f} "
                  f"| {r['api_p50_ms']:.1f} / {r['api_p99_ms']:.1f} |")
        return

    load_before = os.getloadavg()
    with BenchStack(args.agent_concurrency, args.api_workers) as stack:
        key = stack.team_key()
        with httpx.Client(base_url=f"{stack.api}/api/v1", headers={"X-API-Key": key},
                          timeout=30) as client:
            stack.run_campaign(client, 5, seed=100, policy="random")  # warm every process up
            with CpuMeter(stack) as pipeline_cpu:
                cid = stack.run_campaign(client, args.candidates + 2, seed=1, policy="random")
            expert = stack.run_campaign(client, 100, seed=1, policy="expert")
        cycles = cycle_times(stack.db_url, cid)
        decisions = decision_times(stack.db_url, expert)
        decisions_full = decision_times(stack.db_url, expert, cached=False)
        paced, _rps, paced_failed = asyncio.run(api_latency(
            stack.api, key, cid, args.clients, args.clients * args.paced_rounds, args.pace))
        with CpuMeter(stack, only=[stack.procs[0].pid]) as api_cpu:
            saturated, rps, failed = asyncio.run(api_latency(
                stack.api, key, cid, args.clients, args.requests))
    load_after = os.getloadavg()
    f = {
        "command": " ".join(["python -m bench.service_overhead", *sys.argv[1:]]),
        "date": dt.date.today().isoformat(),
        "machine": f"2-core dev box ({os.cpu_count()} CPUs, {platform.machine()}, "
                   f"Python {platform.python_version()}), no GPU",
        "commit": commit(),
        "agent_concurrency": args.agent_concurrency, "api_workers": args.api_workers,
        "candidates": len(cycles),
        "cycle_median_ms": statistics.median(cycles), "cycle_p90_ms": pct(cycles, 0.9),
        "cycle_first_ms": statistics.median(cycles[:50]),
        "cycle_last_ms": statistics.median(cycles[-50:]),
        "decision_median_ms": statistics.median(decisions),
        "decision_full_ms": statistics.median(decisions_full),
        "clients": args.clients, "pace_s": args.pace,
        "paced_p50_ms": pct(paced, 0.5), "paced_p99_ms": pct(paced, 0.99),
        "paced_failed": paced_failed,
        "sat_p50_ms": pct(saturated, 0.5), "sat_p99_ms": pct(saturated, 0.99),
        "sat_rps": rps, "sat_requests": len(saturated), "sat_failed": failed,
        "cpu_per_candidate_ms": 1000 * pipeline_cpu.service / (args.candidates + 2),
        "pg_cpu_per_candidate_ms": 1000 * pipeline_cpu.postgres / (args.candidates + 2),
        "api_cpu_per_request_ms": 1000 * api_cpu.service / max(1, len(saturated)),
        "load": "load average (1/5/15 min) {} before and {} after the run".format(
            "/".join(f"{x:.1f}" for x in load_before),
            "/".join(f"{x:.1f}" for x in load_after)),
    }
    if args.json:
        args.json.write_text(json.dumps(f, indent=1) + "\n")
    before = json.loads(args.before.read_text()) if args.before else None
    if args.write_docs:
        write_markdown(f, args.markdown, before)
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"service overhead (replay, loopback) · {f['load']}")
    for col, justify in (("figure", "left"), ("value", "right"), ("target", "right")):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for row in result_rows(f):
        table.add_row(*row)
    Console().print(table)


if __name__ == "__main__":
    main()
