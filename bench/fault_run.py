"""Fault run: one ``parallel: 4`` campaign on four replay GPU workers, with kills at every point
of a candidate's life, the agent and the compile worker killed, Redis and Postgres restarted.

Everything runs on a private Postgres cluster and a private Redis server on free ports
(``tests/service/fault_stack.py``; the shared ones on 5432 and 6379 are never touched): the API,
an agent (2 processes), a compile worker and four GPU workers (``--gpus 0`` … ``3``, replay
backend, ``--replay-speed``), 1 s heartbeats and the stalled-campaign look left at its 60 s (so
that what recovers a slot within seconds is not that look). The faults, in rounds:

- GPU worker killed outright (supervisor, Celery main and pool: SIGKILL) after its main process
  took an evaluation off the queue and before its pool claimed the candidate (the pool stopped
  with SIGSTOP first, as a worker that dies right then);
- GPU worker killed outright right after its claim (within ~20 ms);
- GPU pool process SIGKILLed during the measurement (Celery redelivers), and the whole GPU
  worker killed outright during the measurement;
- GPU worker killed outright after its result was recorded and before its ack (its main
  process stopped, so the ack never leaves);
- agent and compile worker: pool SIGKILL, and killed outright;
- Redis stopped without saving and started again; Postgres stopped (``-m immediate``) and
  started again.

A killed worker is started again at once (another machine); a process that exits is started
again as the deployment's supervisor does. Meanwhile a monitor samples the campaign every
0.2 s: how long any in-flight candidate stayed in one state (status, claim, attempts), and how
long the campaign had fewer candidates in flight than ``parallel`` while budget was left. At
the end: every candidate final, iterations ``0..budget-1``, one ``result`` event per
candidate, ``evaluations`` = budget, no claim left, ``tuneforge db check`` clean.

    .venv/bin/python -m bench.fault_run [--budget 300] [--rounds 2] [--replay-speed 0.1]
        [--json runs/DATE-COMMIT-fault-run/fault-run.json]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import redis
from sqlalchemy import func, select

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from service.fault_stack import (  # noqa: E402
    REVIVED,
    FaultStack,
    PrivatePostgres,
    PrivateRedis,
    children,
)
from service.service_stack import (  # noqa: E402
    START_TIMEOUT_S,
    create_team_in_db,
    free_port,
    live_roles,
    service_env,
)

from core.db import get_engine, session_scope, upgrade_database  # noqa: E402
from core.integrity import check  # noqa: E402
from core.models import Campaign, Candidate, Event  # noqa: E402
from core.statuses import CANDIDATE_IN_FLIGHT  # noqa: E402

GPUS = ("gpu0", "gpu1", "gpu2", "gpu3")
PARALLEL = 4


def wait_for(predicate: Any, timeout: float, interval: float = 0.05) -> Any:
    """``predicate()``'s first truthy value within ``timeout`` seconds, else None."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = predicate()
        except Exception:  # the database may be restarting
            value = None
        if value:
            return value
        time.sleep(interval)
    return None


class Run:
    """The stack, the campaign, the monitor and the record of every fault."""

    def __init__(self, st: FaultStack, campaign_id: str, budget: int) -> None:
        self.st, self.campaign_id, self.budget = st, campaign_id, budget
        self.faults: list[dict[str, Any]] = []
        self.stuck_max = 0.0  # longest any in-flight candidate stayed in one state
        self.stuck_where = ""
        self.short_max = 0.0  # longest the campaign had fewer than PARALLEL in flight
        self.done = threading.Event()
        self.monitor = threading.Thread(target=self._monitor, daemon=True)
        self.monitor.start()

    # ---- the campaign's state -----------------------------------------------------------------
    def rows(self) -> list[tuple[str, str, str | None, int]]:
        with session_scope(self.st.db_url) as s:
            return [tuple(r) for r in s.execute(  # type: ignore[misc]
                select(Candidate.id, Candidate.status, Candidate.claimed_by, Candidate.attempts)
                .where(Candidate.campaign_id == self.campaign_id))]

    def status(self) -> str:
        with session_scope(self.st.db_url) as s:
            c = s.get(Campaign, self.campaign_id)
            return c.status if c is not None else "gone"

    def final(self, cid: str) -> bool:
        with session_scope(self.st.db_url) as s:
            c = s.get(Candidate, cid)
            return c is not None and c.status not in CANDIDATE_IN_FLIGHT

    def results(self) -> int:
        with session_scope(self.st.db_url) as s:
            return int(s.scalar(select(func.count()).select_from(Event).where(
                Event.campaign_id == self.campaign_id, Event.kind == "result")) or 0)

    def _monitor(self) -> None:
        since: dict[str, tuple[tuple[Any, ...], float]] = {}
        short_since: float | None = None
        while not self.done.is_set():
            try:
                self.st.revive()
                rows = self.rows()
            except Exception:  # Postgres restarting (the gap counts on the next sample), or a
                # worker being replaced by the faults' thread meanwhile
                time.sleep(0.2)
                continue
            now = time.monotonic()
            flying = [r for r in rows if r[1] in CANDIDATE_IN_FLIGHT]
            for cid, status, claim, attempts in flying:
                state = (status, claim, attempts)
                seen = since.get(cid)
                if seen is None or seen[0] != state:
                    since[cid] = (state, now)
                elif now - seen[1] > self.stuck_max:
                    self.stuck_max = now - seen[1]
                    self.stuck_where = f"{cid[:8]} {status} claimed by {claim}"
            left = self.budget - len(rows)
            if len(flying) < PARALLEL and left > 0:
                short_since = now if short_since is None else short_since
                self.short_max = max(self.short_max, now - short_since)
            else:
                short_since = None
            time.sleep(0.2)

    # ---- processes -----------------------------------------------------------------------------
    def main_pid(self, name: str) -> int | None:
        masters = children(self.st.procs[name].pid) if name in self.st.procs else []
        return masters[0] if masters else None

    def pool_pid(self, name: str) -> int | None:
        """A pool process of the worker (the first of the agent's two)."""
        main = self.main_pid(name)
        pools = children(main) if main else []
        return pools[0] if pools else None

    def holder(self, node: str | None) -> str | None:
        """The GPU worker whose Celery main process is the claim's node."""
        for name in GPUS:
            main = self.main_pid(name)
            if node and main and f":{main}-" in node:
                return name
        return None

    def replace(self, name: str) -> None:
        self.st.kill_outright(name)
        self.st.start_again(name)

    def record(self, kind: str, cid: str | None, started: float, **extra: Any) -> None:
        """Wait for the fault's candidate to be recorded (or the next result), and note how
        long it took."""
        results = self.results()
        if cid is not None:
            ok = wait_for(lambda: self.final(cid), 120, 0.1)
        else:
            ok = wait_for(lambda: self.results() > results or self.status() != "running",
                          120, 0.1)
        took = time.monotonic() - started
        self.faults.append({"fault": kind, "candidate": cid, "recovered_s": round(took, 1)
                            if ok else None, **extra})
        print(f"  {kind}: {'recovered' if ok else 'NOT recovered'} {took:.1f} s after it"
              f"{f' ({cid[:8]})' if cid else ''}", flush=True)

    # ---- the faults ----------------------------------------------------------------------------
    def busy(self, name: str) -> bool:
        """Whether the worker runs an evaluation: a candidate it claimed whose message is
        still unacknowledged (a claim outlives its task until the agent records the
        result)."""
        main = self.main_pid(name)
        return bool(main) and any(r[2] and f":{main}-" in r[2] and self.unacked(r[0])
                                  for r in self.rows() if r[1] in CANDIDATE_IN_FLIGHT)

    def unacked(self, cid: str) -> bool:
        """Whether a delivered, unacknowledged evaluation names ``cid`` (its task runs)."""
        return any(cid.encode() in raw and b"worker.evaluate" in raw
                   for raw in redis.Redis.from_url(self.st.redis_url).hvals("unacked"))

    def taken_before_claim(self) -> None:
        """Stop an idle GPU pool (tried again when it turns out to have claimed something
        meanwhile), wait for its main process to take an evaluation it never starts, then
        kill the worker outright."""
        for _attempt in range(100):
            idle = [n for n in GPUS if n in self.st.procs and not self.busy(n)]
            pool = self.pool_pid(idle[0]) if idle else None
            if pool is None:
                time.sleep(0.1)
                continue
            name = idle[0]
            os.kill(pool, signal.SIGSTOP)
            time.sleep(0.3)
            if not self.busy(name):
                break
            os.kill(pool, signal.SIGCONT)  # it had taken one already: another moment
            time.sleep(0.2)
        else:
            print("  taken before its claim: no idle GPU worker found (skipped)")
            return

        def held() -> str | None:
            for cid, status, claim, _a in self.rows():
                if status == "compiled" and claim is None and self.unacked(cid):
                    return cid
            return None

        first = wait_for(held, 30, 0.1)
        cid = wait_for(lambda: held() if first and held() == first else None, 2, 1.0)
        started = time.monotonic()
        self.replace(name)  # SIGKILL ends the stopped pool too
        if cid is None:
            print("  taken before its claim: no message held by the stopped pool (skipped)")
            return
        self.record("GPU worker killed outright: message taken, not claimed", cid, started)

    def measuring(self, min_age: float, fresh: bool) -> tuple[str, str, str] | None:
        """A candidate measuring (claimed ``fresh``ly, or for ``min_age``): id, claim, worker."""
        seen: dict[str, float] = {}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                rows = self.rows()
            except Exception:
                time.sleep(0.05)
                continue
            now = time.monotonic()
            for cid, status, claim, attempts in rows:
                if status != "measuring" or not claim or attempts != 1:
                    continue
                name = self.holder(claim)
                if name is None or not self.unacked(cid):  # not running any more
                    continue
                first = seen.setdefault(cid, now)
                if fresh and first == now and now > deadline - 60 + 0.05:
                    return cid, claim, name  # claimed since the previous look (~20 ms)
                if not fresh and now - first >= min_age:
                    return cid, claim, name
            time.sleep(0.02 if fresh else 0.05)
        return None

    def after_claim(self) -> None:
        found = self.measuring(0, fresh=True)
        if found is None:
            return
        cid, _claim, name = found
        started = time.monotonic()
        self.replace(name)
        self.record("GPU worker killed outright right after its claim", cid, started)

    def mid_measurement(self, outright: bool) -> None:
        found = self.measuring(0.2, fresh=False)
        if found is None:
            return
        cid, _claim, name = found
        started = time.monotonic()
        if outright:
            self.replace(name)
            self.record("GPU worker killed outright mid-measurement", cid, started)
        else:
            pool = self.pool_pid(name)
            if pool is not None:
                os.kill(pool, signal.SIGKILL)
            self.record("GPU pool process SIGKILLed mid-measurement", cid, started)

    def after_result_before_ack(self) -> None:
        found = self.measuring(0, fresh=True)  # stopped before its measurement ends
        if found is None:
            return
        cid, _claim, name = found
        main = self.main_pid(name)
        if main is None:
            return
        os.kill(main, signal.SIGSTOP)  # the pool reports; the ack (the main's) never leaves
        client = redis.Redis.from_url(self.st.redis_url)
        recorded = wait_for(lambda: self.final(cid), 30, 0.05)
        unacked = any(cid.encode() in raw and b"worker.evaluate" in raw
                      for raw in client.hvals("unacked"))
        self.replace(name)
        self.faults.append({"fault": "GPU worker killed outright after its result, before "
                            "its ack", "candidate": cid, "recovered_s": 0.0 if recorded
                            else None, "message_still_unacked": unacked})
        print(f"  after result, before ack: recorded {bool(recorded)}, its message still "
              f"unacked {unacked} ({cid[:8]})", flush=True)

    def worker(self, name: str, outright: bool) -> None:
        started = time.monotonic()
        if outright:
            self.replace(name)
        else:
            pool = self.pool_pid(name)
            if pool is None:
                return
            os.kill(pool, signal.SIGKILL)
        self.record(f"{name} {'killed outright' if outright else 'pool process SIGKILLed'}",
                    None, started)

    def restart(self, what: str) -> None:
        started = time.monotonic()
        if what == "redis":
            self.st.redis.stop()
            time.sleep(2.0)
            self.st.redis.start()
            self.record("Redis stopped without saving for 2 s", None, started)
        else:
            self.st.pg.stop()
            time.sleep(2.0)
            self.st.pg.start()
            self.record("Postgres stopped (immediate) for 2 s", None, started)


def verdict(st: FaultStack, campaign_id: str, budget: int) -> dict[str, Any]:
    """Lost, duplicated and in-flight counts, and ``db check``'s findings."""
    with session_scope(st.db_url) as s:
        cands = list(s.scalars(select(Candidate).where(Candidate.campaign_id == campaign_id)))
        results = Counter(e.payload["candidate_id"] for e in s.scalars(
            select(Event).where(Event.campaign_id == campaign_id, Event.kind == "result")))
        campaign = s.get(Campaign, campaign_id)
        assert campaign is not None
        findings = [str(f) for f in check(s)]
        out = {
            "status": campaign.status, "status_reason": campaign.status_reason,
            "candidates": len(cands), "evaluations": campaign.evaluations,
            "iterations_as_expected": sorted(c.iteration for c in cands) == list(range(budget)),
            "in_flight": sum(c.status in CANDIDATE_IN_FLIGHT for c in cands),
            "claims_left": sum(c.claimed_by is not None for c in cands),
            "results_lost": sum(1 for c in cands if results[c.id] == 0),
            "results_twice": sum(1 for n in results.values() if n > 1),
            "statuses": dict(Counter(c.status for c in cands)),
            "redelivered": sum(c.attempts > 1 for c in cands),
            "not_ok": [{"candidate": c.id[:8], "status": c.status, "attempts": c.attempts,
                        "error": (c.error or "")[:200]} for c in cands if c.status != "ok"],
            "db_check_findings": findings,
        }
    done = st.tuneforge("db", "check")
    out["db_check_exit"] = done.returncode
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--replay-speed", type=float, default=0.1)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    pg, rds = PrivatePostgres.create(), PrivateRedis.create()
    home = Path(os.environ.get("TMPDIR", "/tmp")) / f"tuneforge-fault-run-{secrets.token_hex(3)}"
    home.mkdir(parents=True)
    port = free_port()
    api = f"http://127.0.0.1:{port}"
    env = service_env(pg.url, rds.url, home, api)
    env["TUNEFORGE_RECONCILE_S"] = "60"
    st = FaultStack(api=api, db_url=pg.url, redis_url=rds.url, env=env, logs=home)
    st.pg, st.redis, st.port, st.nvcc_token = pg, rds, port, "0"
    st.launched = {}
    started = time.monotonic()
    try:
        upgrade_database(pg.url)
        st.start_api()
        st.start("agent", "worker", "--role", "agent", "--concurrency", "2")
        st.start("compile", "worker", "--role", "compile", "--concurrency", "1")
        for i, name in enumerate(GPUS):
            st.start(name, "worker", "--role", "gpu", "--backend", "replay", "--gpus", str(i),
                     "--replay-speed", str(args.replay_speed))
        up = wait_for(lambda: live_roles(st).get("gpu", 0) >= 4
                      and live_roles(st).get("agent", 0) >= 1, START_TIMEOUT_S, 0.3)
        assert up, st.log_tail()
        team = create_team_in_db(st, f"fault-run-{secrets.token_hex(3)}")
        with httpx.Client(base_url=f"{api}/api/v1", headers={"X-API-Key": team.key},
                          timeout=30) as client:
            created = client.post("/campaigns", json={
                "shape": {"m": 4096, "n": 4096, "k": 4096}, "parallel": PARALLEL,
                "budget": {"iterations": args.budget}})
            assert created.status_code == 201, created.text
            campaign_id = created.json()["id"]
        run = Run(st, campaign_id, args.budget)
        wait_for(lambda: run.results() >= 8, 60, 0.2)
        for round_ in range(args.rounds):
            print(f"round {round_ + 1}", flush=True)
            for fault in (run.taken_before_claim, run.after_claim,
                          lambda: run.mid_measurement(False), lambda: run.mid_measurement(True),
                          run.after_result_before_ack,
                          lambda: run.worker("agent", False), lambda: run.worker("agent", True),
                          lambda: run.worker("compile", False),
                          lambda: run.worker("compile", True),
                          lambda: run.restart("redis"), lambda: run.restart("postgres")):
                if run.status() != "running":
                    break
                fault()
                time.sleep(1.0)
        finished = wait_for(lambda: run.status() in ("done", "failed", "cancelled"), 900, 0.5)
        run.done.set()
        run.monitor.join()
        out = verdict(st, campaign_id, args.budget)
        out.update({
            "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                                     capture_output=True, text=True).stdout.strip(),
            "cpus": os.cpu_count(), "budget": args.budget, "parallel": PARALLEL,
            "gpu_workers": len(GPUS), "replay_speed": args.replay_speed,
            "finished": bool(finished), "wall_s": round(time.monotonic() - started, 1),
            "faults": run.faults, "longest_candidate_stuck_s": round(run.stuck_max, 1),
            "longest_stuck_where": run.stuck_where,
            "longest_short_of_parallel_s": round(run.short_max, 1),
            "revived_by_supervisor": dict(REVIVED),
        })
    finally:
        st.stop_all()
        get_engine(pg.url).dispose()
        rds.destroy()
        pg.destroy()
    print("\n| fault | candidate | recovered (s) |\n|---|---|---|")
    for f in out["faults"]:
        print(f"| {f['fault']} | {(f['candidate'] or '')[:8]} | {f['recovered_s']} |")
    print(f"\nstatus {out['status']}, {out['evaluations']} evaluations of {args.budget}; "
          f"results lost {out['results_lost']}, twice {out['results_twice']}; in flight "
          f"{out['in_flight']}, claims left {out['claims_left']}; db check exit "
          f"{out['db_check_exit']} ({len(out['db_check_findings'])} findings); longest a "
          f"candidate stayed in one state {out['longest_candidate_stuck_s']} s "
          f"({out['longest_stuck_where']}); longest short of {PARALLEL} in flight "
          f"{out['longest_short_of_parallel_s']} s; {out['wall_s']} s")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
