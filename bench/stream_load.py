"""Event streams under load: 50 concurrent streams of a 2000-event campaign, and what idle
streams cost the API.

A private stack (``bench.service_overhead.BenchStack``: a fresh Postgres database, an empty
Redis database number, the API, an agent of 2 processes, a compile worker and ``--gpus``
replay GPU workers at ``--replay-speed``). First 50 streams are held open on a running campaign
that nothing writes to, and the API's CPU (its process tree, from ``/proc``) is read over
``--idle-s`` with them and without them. Then a campaign of ``--budget`` iterations at
``parallel: 4`` runs (about two events per iteration: a result and a proposal), and 20 streams
open at its start, 15 once it has written half its events, 15 after it has finished; a stream
from ``Last-Event-ID`` mid-way is read last. Every stream must receive every event of the
campaign after its start point exactly once, in order, ending with ``finished``.

    .venv/bin/python -m bench.stream_load [--budget 1000] [--gpus 4] [--replay-speed 1]
        [--idle-s 20] [--json runs/DATE-COMMIT-stream-load/stream-load.json]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import func, select

from bench.service_overhead import BenchStack, commit, cpu_seconds

STREAMS = (20, 15, 15)  # opened at the start, mid-way, after the end


class Stream(threading.Thread):
    """One stream read in a thread: the ids of its events, their names, how it ended."""

    def __init__(self, api: str, key: str, campaign_id: str,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(daemon=True)
        self.api, self.key, self.campaign_id = api, key, campaign_id
        self.headers = headers or {}
        self.ids: list[int] = []
        self.kinds: list[str] = []
        self.error: str | None = None
        self.seconds = 0.0
        self.start()

    def run(self) -> None:
        started = time.monotonic()
        try:
            with httpx.stream("GET", f"{self.api}/api/v1/campaigns/{self.campaign_id}/events",
                              headers={"X-API-Key": self.key, **self.headers},
                              timeout=httpx.Timeout(120.0)) as response:
                for line in response.iter_lines():
                    if line.startswith("id: "):
                        self.ids.append(int(line[4:]))
                    elif line.startswith("event: "):
                        self.kinds.append(line[7:])
        except Exception as exc:  # reported in the table
            self.error = repr(exc)[:200]
        self.seconds = time.monotonic() - started


def event_ids(db_url: str, campaign_id: str) -> list[int]:
    from core.db import session_scope
    from core.models import Event

    with session_scope(db_url) as s:
        return list(s.scalars(select(Event.id).where(Event.campaign_id == campaign_id)
                              .order_by(Event.id)))


def event_count(db_url: str, campaign_id: str) -> int:
    from core.db import session_scope
    from core.models import Event

    with session_scope(db_url) as s:
        return int(s.scalar(select(func.count()).select_from(Event).where(
            Event.campaign_id == campaign_id)) or 0)


def idle_cost(st: BenchStack, key: str, seconds: float) -> dict[str, float]:
    """API CPU seconds per second without streams and with 50 streams open on a campaign that
    nothing writes to."""
    from agent.engine import lifecycle, locking
    from api.security import authenticate
    from core.db import session_scope

    with session_scope(st.db_url) as s:
        who = authenticate(s, key=key)
        assert not isinstance(who, str)
        campaign = lifecycle.create_campaign(
            s, lifecycle.CampaignSpec(budget_iterations=1, team_id=who.team_id), backend="replay")
        campaign.status = "running"  # nothing drives it: its streams stay idle
        campaign_id = campaign.id
    api = [st.procs[0].pid]
    before = cpu_seconds(api)
    time.sleep(seconds)
    alone = (cpu_seconds(api) - before) / seconds
    streams = [Stream(st.api, key, campaign_id) for _ in range(50)]
    time.sleep(3.0)  # opened and caught up
    before = cpu_seconds(api)
    time.sleep(seconds)
    with_streams = (cpu_seconds(api) - before) / seconds
    with session_scope(st.db_url) as s:
        lifecycle.finish_campaign(s, locking.lock_campaign(s, campaign_id), "done", "measured")
    for stream in streams:
        stream.join(30)
    return {"api_cpu_per_s_no_streams": round(alone, 4),
            "api_cpu_per_s_50_idle_streams": round(with_streams, 4),
            "idle_streams_ended": sum(not s.is_alive() and s.kinds[-1:] == ["finished"]
                                      for s in streams)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=1000)
    parser.add_argument("--gpus", type=int, default=4)
    parser.add_argument("--replay-speed", type=float, default=1.0)
    parser.add_argument("--idle-s", type=float, default=20.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    out: dict[str, Any] = {"date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                           "commit": commit(), "cpus": os.cpu_count(), "budget": args.budget,
                           "parallel": 4, "gpu_workers": args.gpus,
                           "replay_speed": args.replay_speed}
    with BenchStack(agent_concurrency=2, api_workers=1, gpus=args.gpus,
                    replay_speed=args.replay_speed, heartbeat_s=1.0) as st:
        key = st.team_key()
        out.update(idle_cost(st, key, args.idle_s))
        with httpx.Client(base_url=f"{st.api}/api/v1", headers={"X-API-Key": key},
                          timeout=30) as client:
            created = client.post("/campaigns", json={
                "shape": {"m": 4096, "n": 4096, "k": 4096}, "parallel": 4,
                "budget": {"iterations": args.budget}})
            assert created.status_code == 201, created.text
            campaign_id = created.json()["id"]
        api = [st.procs[0].pid]
        cpu_before, started = cpu_seconds(api), time.monotonic()
        streams = [("start", Stream(st.api, key, campaign_id)) for _ in range(STREAMS[0])]
        half = args.budget  # about two events per iteration
        while event_count(st.db_url, campaign_id) < half:
            time.sleep(0.5)
        streams += [("mid-way", Stream(st.api, key, campaign_id)) for _ in range(STREAMS[1])]
        for _where, stream in streams:
            stream.join(900)
        run_s = time.monotonic() - started
        out["api_cpu_per_s_during_the_campaign"] = round(
            (cpu_seconds(api) - cpu_before) / run_s, 3)
        streams += [("after the end", Stream(st.api, key, campaign_id))
                    for _ in range(STREAMS[2])]
        ids = event_ids(st.db_url, campaign_id)
        resumed = Stream(st.api, key, campaign_id,
                         headers={"Last-Event-ID": str(ids[len(ids) // 2])})
        for _where, stream in streams:
            stream.join(120)
        resumed.join(120)
    rows = []
    for where in ("start", "mid-way", "after the end"):
        group = [s for w, s in streams if w == where]
        exact = sum(s.ids == ids and s.kinds[-1:] == ["finished"] and s.error is None
                    for s in group)
        rows.append({"opened": where, "streams": len(group), "every_event_once_in_order": exact,
                     "events_received_min": min(len(s.ids) for s in group),
                     "events_received_max": max(len(s.ids) for s in group),
                     "errors": [s.error for s in group if s.error]})
    out.update({
        "events": len(ids), "campaign_s": round(run_s, 1), "streams": rows,
        "resumed_mid_way_exact": resumed.ids == ids[len(ids) // 2 + 1:],
        "after_the_end_replay_s_max": round(max(s.seconds for w, s in streams
                                                if w == "after the end"), 2),
    })
    print("| opened | streams | every event once, in order, ending `finished` | events |")
    print("|---|---|---|---|")
    for r in rows:
        print(f"| {r['opened']} | {r['streams']} | {r['every_event_once_in_order']} | "
              f"{r['events_received_min']}-{r['events_received_max']} of {len(ids)} |")
    print(f"\nresumed from Last-Event-ID mid-way exact: {out['resumed_mid_way_exact']}; "
          f"replay after the end at most {out['after_the_end_replay_s_max']} s; campaign "
          f"{out['campaign_s']} s; API CPU {out['api_cpu_per_s_during_the_campaign']} s/s "
          f"during it; idle: {out['api_cpu_per_s_no_streams']} s/s without streams, "
          f"{out['api_cpu_per_s_50_idle_streams']} s/s with 50 idle streams")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
