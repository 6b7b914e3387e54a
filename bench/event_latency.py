"""Event stream latency: from an event's commit to a client of ``GET /campaigns/{id}/events``
receiving it, and what an open stream costs the API.

Starts ``tuneforge serve`` of a source tree (``--tree``, default this one: run it against an
older commit's tree, e.g. from ``git archive``, for a before/after) on a fresh Postgres database
and an empty Redis database number. A second process (the writer, the same tree) creates a
team and a running campaign, then commits ``--events`` events one transaction each, as the
agent writes them (the campaign's row lock, ``locking.emit``, commit), ``--interval`` apart, and
records the time right after each commit; when the tree publishes events (``core.feed``) it
publishes them to Redis as the service's processes do. This process holds ``--streams`` open
streams of the campaign and records when each event arrives (same clock: one machine).

    .venv/bin/python -m bench.event_latency [--tree DIR] [--events 300] [--interval 0.02]
        [--streams 1] [--json figures.json]

Prints a table last: latency p50/p90/p99/max over every (stream, event), and the API's CPU per
second with the streams open and nothing happening, and per event while events flow.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import secrets
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import redis
from sqlalchemy import create_engine, text

from bench.service_overhead import PG, ROOT, claim_redis, free_port, pct

#: The writer (runs with the tree under test first on sys.path).
WRITER = r'''
import json, sys, time
from agent.engine import lifecycle, locking
from api.security import create_team
from core.db import session_scope, upgrade_database
url, redis_url, events, interval = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
upgrade_database(url)
try:
    from core import feed
    from core.queues import publish_events
    feed.set_publisher(lambda cid, evs: publish_events(cid, evs, redis_url))
    publishes = True
except ImportError:
    publishes = False
with session_scope(url) as s:
    team, key = create_team(s, name="latency")
    campaign = lifecycle.create_campaign(
        s, lifecycle.CampaignSpec(budget_iterations=1, team_id=team.id), backend="replay")
    campaign.status = "running"
    campaign_id = campaign.id
print(json.dumps({"key": key, "campaign": campaign_id, "publishes": publishes}), flush=True)
sys.stdin.readline()  # the streams are open
committed = {}
for i in range(events):
    with session_scope(url) as s:
        locking.lock_campaign(s, campaign_id)
        locking.emit(s, campaign_id, "note", {"i": i})
        s.flush()
        committed[i] = time.time()  # COMMIT (and the publish after it) on leaving the block
    time.sleep(interval)
with session_scope(url) as s:
    lifecycle.finish_campaign(s, locking.lock_campaign(s, campaign_id), "done", "bench over")
print(json.dumps(committed), flush=True)
'''


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process and its children that were waited for."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def read_stream(api: str, key: str, campaign_id: str, arrivals: dict[int, float],
                opened: threading.Event) -> None:
    """Record when each ``note`` event (by its ``i``) arrives, until ``finished``."""
    headers = {"X-API-Key": key}
    with httpx.Client(base_url=f"{api}/api/v1", headers=headers, timeout=120) as client, \
            client.stream("GET", f"/campaigns/{campaign_id}/events") as response:
        response.raise_for_status()
        kind = ""
        for line in response.iter_lines():
            now = time.time()
            if line.startswith("event: "):
                kind = line[7:]
            elif line.startswith("data: "):
                if kind == "created":
                    opened.set()  # caught up: the stream is live
                elif kind == "note":
                    arrivals[int(json.loads(line[6:])["i"])] = now
                elif kind == "finished":
                    return


def run(tree: Path, events: int, interval: float, streams: int) -> dict[str, Any]:
    db_name = f"tuneforge_latency_{secrets.token_hex(4)}"
    db_url = f"{PG}/{db_name}"
    redis_url = claim_redis()
    admin = create_engine(f"{PG}/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{db_name}"'))
    home = Path(tempfile.mkdtemp(prefix="tf-latency-"))
    port = free_port()
    api = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUNEFORGE_")}
    env.update({"TUNEFORGE_DATABASE_URL": db_url, "TUNEFORGE_REDIS_URL": redis_url,
                "TUNEFORGE_HOME": str(home), "PYTHONPATH": str(tree), "PYTHONUNBUFFERED": "1"})
    procs: list[subprocess.Popen[Any]] = []
    try:
        writer = subprocess.Popen([sys.executable, "-c", WRITER, db_url, redis_url,
                                   str(events), str(interval)], cwd=tree, env=env,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        procs.append(writer)
        assert writer.stdout is not None
        assert writer.stdin is not None
        setup = json.loads(writer.stdout.readline())
        server = subprocess.Popen([sys.executable, "-m", "cli.main", "serve", "--port",
                                   str(port)], cwd=tree, env=env,
                                  stdout=(home / "api.log").open("wb"),
                                  stderr=subprocess.STDOUT)
        procs.append(server)
        deadline = time.monotonic() + 90
        while True:
            try:
                if httpx.get(f"{api}/api/v1/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit(f"the API did not start: {(home / 'api.log').read_text()}")
            time.sleep(0.2)
        arrivals: list[dict[int, float]] = [{} for _ in range(streams)]
        readers = []
        for n in range(streams):
            opened = threading.Event()
            reader = threading.Thread(target=read_stream, args=(
                api, setup["key"], setup["campaign"], arrivals[n], opened), daemon=True)
            reader.start()
            if not opened.wait(30):
                raise SystemExit("a stream did not open")
            readers.append(reader)
        # the streams open, nothing happening: what do they cost the API?
        idle_s = 10.0
        cpu0 = cpu_s(server.pid)
        time.sleep(idle_s)
        idle_cpu = cpu_s(server.pid) - cpu0
        cpu1 = cpu_s(server.pid)
        started = time.monotonic()
        writer.stdin.write("go\n")
        writer.stdin.flush()
        committed = {int(i): t for i, t in json.loads(writer.stdout.readline()).items()}
        for reader in readers:
            reader.join(60)
        busy_cpu = cpu_s(server.pid) - cpu1
        wall = time.monotonic() - started
        writer.wait(30)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    proc.kill()
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)'))
        admin.dispose()
        redis.Redis.from_url(redis_url).flushdb()
    latencies = [(got[i] - committed[i]) * 1000 for got in arrivals for i in committed
                 if i in got]
    missing = sum(1 for got in arrivals for i in committed if i not in got)
    return {
        "tree": str(tree), "publishes": setup["publishes"], "events": events,
        "interval_s": interval, "streams": streams, "received": len(latencies),
        "missing": missing,
        "latency_ms": {"p50": pct(latencies, 0.5), "p90": pct(latencies, 0.9),
                       "p99": pct(latencies, 0.99), "max": max(latencies),
                       "mean": statistics.fmean(latencies)},
        "api_cpu_idle_ms_per_s": 1000 * idle_cpu / idle_s,
        "api_cpu_ms_per_event": 1000 * busy_cpu / max(1, events),
        "wall_s": wall,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", type=Path, default=ROOT,
                        help="source tree whose API and engine are measured")
    parser.add_argument("--events", type=int, default=300)
    parser.add_argument("--interval", type=float, default=0.02)
    parser.add_argument("--streams", type=int, default=1)
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    before = load()
    figures = run(args.tree.resolve(), args.events, args.interval, args.streams)
    figures.update({"date": dt.date.today().isoformat(), "load_before": before,
                    "load_after": load(),
                    "box": f"{os.cpu_count()} CPUs, {platform.machine()}, Python "
                           f"{platform.python_version()}"})
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    lat = figures["latency_ms"]
    print(f"tree {figures['tree']} (publishes to Redis: {figures['publishes']}), "
          f"{figures['streams']} stream(s), {figures['events']} events "
          f"{figures['interval_s'] * 1000:g} ms apart, load {before} -> {figures['load_after']}")
    print("| commit -> client, ms: p50 | p90 | p99 | max | received (missing) "
          "| API CPU idle, ms/s | API CPU per event, ms |")
    print("|---|---|---|---|---|---|---|")
    print(f"| {lat['p50']:.1f} | {lat['p90']:.1f} | {lat['p99']:.1f} | {lat['max']:.1f} "
          f"| {figures['received']} ({figures['missing']}) "
          f"| {figures['api_cpu_idle_ms_per_s']:.2f} | {figures['api_cpu_ms_per_event']:.2f} |")


if __name__ == "__main__":
    main()
