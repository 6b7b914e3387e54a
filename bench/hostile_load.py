"""Hostile load: one client sends hostile family specs and oversized requests while a campaign
runs with 50 event streams open on it; what everybody else sees.

A private stack (``bench.service_overhead.BenchStack``: a fresh Postgres database, an empty
Redis database number, the API, an agent of 2 processes, a compile worker and ``--gpus`` replay
GPU workers at ``--replay-speed``, 1 s heartbeats). One team runs a ``parallel: 4`` campaign of
``--budget`` iterations and holds 50 streams of its events; a second client of that team reads
(``GET /campaigns/{id}``, ``/campaigns``, ``/families``, ``/healthz``) in a loop and times each
request. Another team's client sends, one after the other for the whole run, the hostile kinds
of ``--kinds``: lone UTF-16 surrogates in a description and in a kernel file, a Jinja template
that renders 70000 lines, a 700 KB kernel file (a new version each time: the quota ends them),
a buffer count of ``n * 1000000000``, a 5000-digit number, a 64 MiB ``X-API-Key`` header and a
2 MiB body. The API's resident memory is sampled every 0.2 s. It prints the other requests'
latency (p50, p99, max), the hostile requests' answers by kind and status, and the API's RSS
at the start, at its peak and at the end; every stream must get every event once.

    .venv/bin/python -m bench.hostile_load [--budget 300] [--gpus 2] [--replay-speed 2]
        [--kinds all] [--json runs/DATE-COMMIT-hostile-load/hostile-load.json]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import socket
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from bench.service_overhead import BenchStack, commit
from bench.stream_load import Stream, event_ids

ROOT = Path(__file__).resolve().parents[1]
SPEC_DIR = ROOT / "tests" / "data" / "families" / "vscale"
STREAMS = 50
MIB = 1 << 20


def base_spec() -> dict[str, Any]:
    from kernels.userspec import load_spec_dir

    return dict(load_spec_dir(SPEC_DIR))


def _with_file(spec: dict[str, Any], text: str) -> dict[str, Any]:
    return {**spec, "files": {**spec["files"], "kernel.cu": spec["files"]["kernel.cu"] + text}}


def hostile_bodies(n: int) -> dict[str, Callable[[], tuple[bytes, dict[str, str]]]]:
    """Each kind: a function that gives the next body to POST to /families (and headers)."""
    spec = base_spec()
    js = {"Content-Type": "application/json"}

    def as_json(value: Any) -> tuple[bytes, dict[str, str]]:
        return json.dumps(value).encode(), js

    bomb = {**spec, "kernel": {**spec["kernel"], "template": "jinja"},
            "files": {**spec["files"], "kernel.cu": "{{ range(70000)|join('\\n#define "
                      "QQQQQQQQQQQQ 1') }}\n" + spec["files"]["kernel.cu"]}}
    signature = {**spec["signature"], "buffers": [{"name": "x", "count": "n * 1000000000"},
                                                  {"name": "y", "count": "n", "role": "out"}]}
    digits = json.dumps({**spec, "description": "DIGITS"}).replace('"DIGITS"', "9" * 5000)
    return {
        "surrogate-description": lambda: as_json({**spec, "description": "desc \udfff"}),
        "surrogate-source": lambda: as_json(_with_file(spec, "// \ud800\n")),
        "render-bomb": lambda: as_json(bomb),
        "big-file": lambda: as_json(_with_file(
            spec, f"// {n}-{time.monotonic_ns()} " + "x" * 700_000 + "\n")),
        "huge-count": lambda: as_json({**spec, "signature": signature}),
        "digits": lambda: (digits.encode(), js),
        "body-2mib": lambda: (b" " * (2 * MIB), js),
    }


def send_huge_header(api: str, key: str) -> int:
    """A 64 MiB X-API-Key, streamed: the status line the server answers with (0: none)."""
    host, port = api.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as conn:
        try:
            conn.sendall(b"GET /api/v1/campaigns HTTP/1.1\r\nHost: x\r\nX-API-Key: " +
                         key.encode())
            for _ in range(64):
                conn.sendall(b"A" * MIB)
            conn.sendall(b"\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        try:
            answer = conn.recv(64)
        except (ConnectionResetError, TimeoutError):
            return 0
    parts = answer.split(b" ")
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0


class Hostile(threading.Thread):
    """Sends the hostile kinds one after the other until stopped: (kind, status, seconds)."""

    def __init__(self, api: str, key: str, kinds: list[str]) -> None:
        super().__init__(daemon=True)
        self.api, self.key, self.kinds = api, key, kinds
        self.stop = threading.Event()
        self.answers: list[tuple[str, int, float]] = []

    def run(self) -> None:
        n = 0
        with httpx.Client(base_url=f"{self.api}/api/v1", headers={"X-API-Key": self.key},
                          timeout=120) as client:
            while not self.stop.is_set():
                if not self.kinds:
                    self.stop.wait(1.0)
                    continue
                bodies = hostile_bodies(n)
                for kind in self.kinds:
                    if self.stop.is_set():
                        break
                    started = time.monotonic()
                    try:
                        if kind == "header-64mib":
                            code = send_huge_header(self.api, self.key)
                        else:
                            body, headers = bodies[kind]()
                            code = client.post("/families", content=body,
                                               headers=headers).status_code
                    except httpx.HTTPError:
                        code = 0
                    self.answers.append((kind, code, time.monotonic() - started))
                    n += 1


class Reader(threading.Thread):
    """Another client's reads in a loop, each timed."""

    def __init__(self, api: str, key: str, campaign_id: str) -> None:
        super().__init__(daemon=True)
        self.api, self.key, self.campaign_id = api, key, campaign_id
        self.stop = threading.Event()
        self.latencies: list[float] = []
        self.errors: Counter[int] = Counter()

    def run(self) -> None:
        paths = [f"/campaigns/{self.campaign_id}", "/campaigns", "/families", "/healthz"]
        with httpx.Client(base_url=f"{self.api}/api/v1", headers={"X-API-Key": self.key},
                          timeout=30) as client:
            i = 0
            while not self.stop.is_set():
                started = time.monotonic()
                response = client.get(paths[i % len(paths)])
                self.latencies.append(time.monotonic() - started)
                if response.status_code != 200:
                    self.errors[response.status_code] += 1
                i += 1
                time.sleep(0.02)


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=300)
    parser.add_argument("--gpus", type=int, default=2)
    parser.add_argument("--replay-speed", type=float, default=2.0)
    parser.add_argument("--kinds", default="all",
                        help="comma-separated hostile kinds, all, or none (the baseline)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    every = [*hostile_bodies(0), "header-64mib"]
    kinds = every if args.kinds == "all" else [] if args.kinds == "none" \
        else args.kinds.split(",")
    unknown = set(kinds) - set(every)
    if unknown:
        parser.error(f"unknown kinds {sorted(unknown)}; known: {', '.join(every)}")
    out: dict[str, Any] = {"date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                           "commit": commit(), "cpus": os.cpu_count(), "budget": args.budget,
                           "gpu_workers": args.gpus, "replay_speed": args.replay_speed,
                           "kinds": kinds, "streams": STREAMS}
    with BenchStack(agent_concurrency=2, api_workers=1, gpus=args.gpus,
                    replay_speed=args.replay_speed, heartbeat_s=1.0) as st:
        key, hostile_key = st.team_key(), st.team_key()
        api_pid = st.procs[0].pid
        rss = [rss_mib(api_pid)]
        with httpx.Client(base_url=f"{st.api}/api/v1", headers={"X-API-Key": key},
                          timeout=30) as client:
            created = client.post("/campaigns", json={
                "shape": {"m": 4096, "n": 4096, "k": 4096}, "parallel": 4,
                "budget": {"iterations": args.budget}, "fresh": True})
            assert created.status_code == 201, created.text
            campaign_id = created.json()["id"]
        streams = [Stream(st.api, key, campaign_id) for _ in range(STREAMS)]
        reader = Reader(st.api, key, campaign_id)
        hostile = Hostile(st.api, hostile_key, kinds)
        reader.start()
        hostile.start()
        started = time.monotonic()
        while any(s.is_alive() for s in streams) and time.monotonic() - started < 900:
            rss.append(rss_mib(api_pid))
            time.sleep(0.2)
        run_s = time.monotonic() - started
        hostile.stop.set()
        reader.stop.set()
        hostile.join(180)
        reader.join(60)
        rss.append(rss_mib(api_pid))
        ids = event_ids(st.db_url, campaign_id)
    lat = reader.latencies
    exact = sum(s.ids == ids and s.kinds[-1:] == ["finished"] and s.error is None
                for s in streams)
    answers: dict[str, Counter[int]] = {}
    worst: dict[str, float] = {}
    for kind, code, seconds in hostile.answers:
        answers.setdefault(kind, Counter())[code] += 1
        worst[kind] = max(worst.get(kind, 0.0), seconds)
    out.update({
        "run_s": round(run_s, 1), "events": len(ids), "streams_exact": exact,
        "reads": len(lat), "read_errors": dict(reader.errors),
        "read_p50_ms": round(1000 * statistics.median(lat), 1),
        "read_p99_ms": round(1000 * percentile(lat, 0.99), 1),
        "read_max_ms": round(1000 * max(lat), 1),
        "api_rss_mib_start": round(rss[0], 1), "api_rss_mib_peak": round(max(rss), 1),
        "api_rss_mib_end": round(rss[-1], 1),
        "hostile": {k: {"answers": {str(c): n for c, n in v.items()},
                        "slowest_s": round(worst[k], 2)} for k, v in answers.items()},
    })
    print(f"campaign {args.budget} iterations, {len(ids)} events, {run_s:.0f} s; "
          f"{exact} of {STREAMS} streams got every event once")
    print(f"other requests: {len(lat)} reads, p50 {out['read_p50_ms']} ms, p99 "
          f"{out['read_p99_ms']} ms, max {out['read_max_ms']} ms, errors {dict(reader.errors)}")
    print(f"API RSS: {out['api_rss_mib_start']} MiB at the start, "
          f"{out['api_rss_mib_peak']} at the peak, {out['api_rss_mib_end']} at the end")
    print("| hostile kind | answers (status: count) | slowest |")
    print("|---|---|---|")
    for kind, info in out["hostile"].items():
        print(f"| {kind} | {info['answers']} | {info['slowest_s']} s |")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
