"""Helpers of the service tests: throwaway Postgres databases, a running stack of the API and
Celery workers as subprocesses, polling."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from ports import free_port, listens
from repo import ROOT
from sqlalchemy import create_engine, text

from core.db import get_engine, session_scope

PG_HOST = os.environ.get("TUNEFORGE_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432")
REDIS_HOST = os.environ.get("TUNEFORGE_TEST_REDIS", "redis://127.0.0.1:6379")
_SCRIPT = Path(sys.executable).with_name("tuneforge")
TUNEFORGE = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "cli.main"]
START_TIMEOUT_S = 90.0
#: The operator's token of every test stack (the fleet-wide views: /workers, /metrics).
OPERATOR_TOKEN = "tf-operator-" + secrets.token_hex(8)


def create_database(prefix: str = "tuneforge_test") -> str:
    """A new, empty Postgres database; its SQLAlchemy URL."""
    name = f"{prefix}_{secrets.token_hex(4)}"
    admin = create_engine(f"{PG_HOST}/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return f"{PG_HOST}/{name}"


def drop_database(url: str) -> None:
    """Drop a database made by :func:`create_database` (connections closed first)."""
    get_engine(url).dispose()
    name = url.rsplit("/", 1)[-1]
    admin = create_engine(f"{PG_HOST}/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@dataclass
class Stack:
    """A running service: its URLs, environment and processes."""

    api: str
    db_url: str
    redis_url: str
    env: dict[str, str]
    logs: Path
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def client(self, key: str | None, *, operator: bool = False) -> httpx.Client:
        """An HTTP client of the API, with ``key`` as X-API-Key (and the operator's token)."""
        headers = {"X-API-Key": key} if key else {}
        if operator:
            headers["X-Operator-Token"] = OPERATOR_TOKEN
        return httpx.Client(base_url=f"{self.api}/api/v1", headers=headers, timeout=30.0)

    def tuneforge(self, *args: str, key: str | None = None,
                  extra_env: dict[str, str] | None = None, timeout: float = 120.0
                  ) -> subprocess.CompletedProcess[str]:
        """Run the CLI against this stack."""
        env = {**self.env, **(extra_env or {}), "COLUMNS": "100"}
        if key is not None:
            env["TUNEFORGE_API_KEY"] = key
        return subprocess.run([*TUNEFORGE, *args], capture_output=True, text=True, env=env,
                              timeout=timeout, cwd=ROOT)

    def start(self, name: str, *args: str, extra_env: dict[str, str] | None = None) -> None:
        """Start a long-running ``tuneforge`` command (its log under ``logs``)."""
        log = (self.logs / f"{name}.log").open("wb")
        self.procs[name] = subprocess.Popen(
            [*TUNEFORGE, *args], env={**self.env, **(extra_env or {})}, cwd=ROOT,
            stdout=log, stderr=subprocess.STDOUT)

    def wait_api(self, name: str, port: int, what: str = "the API") -> None:
        """Wait until the API process ``name`` answers on ``port``: its health check, and the
        listening socket its own (not another test worker's server on a port it took)."""
        def up() -> bool:
            try:
                return httpx.get(f"http://127.0.0.1:{port}/api/v1/healthz",
                                 timeout=2).status_code == 200 \
                    and listens(self.procs[name].pid, port)
            except httpx.TransportError:
                return False

        wait_until(up, START_TIMEOUT_S, what, self, interval=0.3)

    def start_another_api(self, name: str, *, extra_env: dict[str, str] | None = None,
                  what: str = "the API") -> str:
        """Start one more API process on this stack's database and broker (``extra_env`` its
        own settings) and wait until it answers; its URL."""
        port = free_port()
        self.start(name, "serve", "--port", str(port), extra_env=extra_env)
        self.wait_api(name, port, what)
        return f"http://127.0.0.1:{port}"

    def stop(self, name: str) -> None:
        """SIGTERM one process (it forwards to its Celery workers), SIGKILL after 20 s."""
        proc = self.procs.pop(name)
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def stop_all(self) -> None:
        """SIGTERM every process at once, then wait for each."""
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for name in list(self.procs):
            self.stop(name)

    def log_tail(self) -> str:
        """The end of every log (for a failing test's message)."""
        return "\n".join(f"--- {p.name}\n" + p.read_text(errors="replace")[-3000:]
                         for p in sorted(self.logs.glob("*.log")))


def service_env(db_url: str, redis_url: str, home: Path, api: str) -> dict[str, str]:
    """The environment of every process of a test stack (nothing from the caller's
    TUNEFORGE_* variables)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUNEFORGE_")}
    env.update({
        "TUNEFORGE_DATABASE_URL": db_url, "TUNEFORGE_REDIS_URL": redis_url,
        "TUNEFORGE_BACKEND": "replay", "TUNEFORGE_HOME": str(home),
        "TUNEFORGE_API_URL": api, "TUNEFORGE_HEARTBEAT_S": "1", "TUNEFORGE_RECONCILE_S": "2",
        "TUNEFORGE_OPERATOR_TOKEN": OPERATOR_TOKEN,
        "PYTHONUNBUFFERED": "1",
    })
    return env


def wait_until(predicate: Any, timeout: float, what: str, stack: Stack | None = None,
               interval: float = 0.1) -> Any:
    """Poll ``predicate`` until it returns something truthy."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            detail = f"\n{stack.log_tail()}" if stack is not None else ""
            pytest.fail(f"timed out after {timeout:g} s waiting for {what}{detail}")
        time.sleep(interval)


FINAL = ("done", "failed", "cancelled")


def wait_final(stack: Stack, client: httpx.Client, path: str, timeout: float = 120.0
               ) -> dict[str, Any]:
    """``GET path`` (a campaign's or a shape set's) until its status is final; its last read."""
    last: dict[str, Any] = {}

    def finished() -> bool:
        nonlocal last
        last = client.get(path).json()
        return last["status"] in FINAL

    wait_until(finished, timeout, path, stack, interval=0.3)
    return last


def live_roles(stack: Stack) -> dict[str, int]:
    with get_engine(stack.db_url).connect() as conn:
        rows = conn.execute(text(
            "SELECT role, count(*) FROM worker_heartbeats "
            "WHERE last_seen > now() - interval '5 seconds' GROUP BY role")).all()
    return {role: int(n) for role, n in rows}


@dataclass
class TeamKey:
    """A team and one of its keys."""

    name: str
    key: str


def create_team_in_db(stack: Stack, name: str) -> TeamKey:
    """A team and its key, made with the service function the CLI calls (no subprocess)."""
    from api.security import create_team as create

    with session_scope(stack.db_url) as s:
        _team, key = create(s, name=name)
    return TeamKey(name, key)


def create_team(stack: Stack, name: str) -> TeamKey:
    done = stack.tuneforge("admin", "create-team", name)
    assert done.returncode == 0, done.stderr
    key = done.stdout.strip()
    assert key.startswith("tf_"), done.stdout
    return TeamKey(name, key)


def wait_finished(client: httpx.Client, campaign_id: str, timeout: float = 90.0,
                  stack: Stack | None = None) -> dict[str, Any]:
    """Poll the campaign until it is done, failed or cancelled; its last JSON."""
    last: dict[str, Any] = {}

    def finished() -> bool:
        nonlocal last
        last = client.get(f"/campaigns/{campaign_id}").json()
        return last.get("status") in ("done", "failed", "cancelled")

    wait_until(finished, timeout, f"campaign {campaign_id} to finish", stack, interval=0.25)
    return last

