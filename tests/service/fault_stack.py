"""A private Postgres server and a private Redis server, for the tests that restart or kill them
(the shared ones on 5432 and 6379 are never touched); the process tree of a worker."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import httpx
import redis

from service.service_stack import START_TIMEOUT_S, Stack, free_port, wait_until

#: Processes that died of a fault and were started again by the test's supervisor.
REVIVED: Counter[str] = Counter()


def _as_postgres(cmd: list[str]) -> list[str]:
    """initdb and postgres refuse root: run them as the ``postgres`` user then."""
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *cmd]
    return cmd


@dataclass
class PrivatePostgres:
    """A throwaway Postgres cluster on a free port (trust auth, fsync off)."""

    root: Path
    port: int

    @classmethod
    def create(cls) -> PrivatePostgres:
        root = Path(tempfile.mkdtemp(prefix="tuneforge-pg-"))
        if os.geteuid() == 0:
            shutil.chown(root, "postgres", "postgres")
        pg = cls(root, free_port())
        subprocess.run(_as_postgres(["initdb", "-D", str(root / "data"), "-U", "postgres",
                                     "-A", "trust", "--no-sync"]),
                       check=True, capture_output=True)
        pg.start()
        return pg

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def _ctl(self, *args: str) -> None:
        subprocess.run(_as_postgres([
            "pg_ctl", "-D", str(self.root / "data"), "-l", str(self.root / "log"), "-w",
            "-o", f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off",
            *args]), check=True, capture_output=True, timeout=60)

    def start(self) -> None:
        self._ctl("start")

    def stop(self) -> None:
        """Stop at once (``-m immediate``: like a crash; clients lose their connections)."""
        self._ctl("stop", "-m", "immediate")

    def destroy(self) -> None:
        try:
            self.stop()
        except subprocess.CalledProcessError:
            pass
        shutil.rmtree(self.root, ignore_errors=True)


@dataclass
class PrivateRedis:
    """A throwaway Redis server on a free port, without persistence (a restart loses all)."""

    root: Path
    port: int

    @classmethod
    def create(cls) -> PrivateRedis:
        r = cls(Path(tempfile.mkdtemp(prefix="tuneforge-redis-")), free_port())
        r.start()
        return r

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        subprocess.run(["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
                        "--save", "", "--appendonly", "no", "--daemonize", "yes",
                        "--dir", str(self.root), "--pidfile", str(self.root / "redis.pid"),
                        "--logfile", str(self.root / "redis.log")], check=True)
        client = redis.Redis(port=self.port)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                return
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def stop(self) -> None:
        """Shut down without saving: every queued message and guard is gone."""
        try:
            redis.Redis(port=self.port).shutdown(nosave=True)
        except redis.ConnectionError:
            pass  # the shutdown closes the connection it came on
        pid = self.root / "redis.pid"
        deadline = time.monotonic() + 10
        while pid.exists() and time.monotonic() < deadline:
            time.sleep(0.05)

    def destroy(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)


def children(pid: int) -> list[int]:
    """Live child processes of ``pid``."""
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


def descendants(pid: int) -> list[int]:
    """Every process below ``pid``, parents first."""
    found: list[int] = []
    todo = [pid]
    while todo:
        kids = children(todo.pop())
        found.extend(kids)
        todo.extend(kids)
    return found


class FaultStack(Stack):
    """A :class:`Stack` on a private Postgres and Redis, with the means to hurt them."""

    pg: PrivatePostgres
    redis: PrivateRedis
    port: int
    nvcc_token: str
    launched: dict[str, tuple[tuple[str, ...], dict[str, str] | None]]

    def start(self, name: str, *args: str, extra_env: dict[str, str] | None = None) -> None:
        self.launched[name] = (args, extra_env)
        super().start(name, *args, extra_env=extra_env)

    def revive(self) -> list[str]:
        """Start again every process that exited, as the deployment's supervisor does
        (docker-compose.yml: ``restart: unless-stopped``); the names restarted."""
        dead = [name for name, proc in self.procs.items() if proc.poll() is not None]
        for name in dead:
            self.procs.pop(name)
            args, extra_env = self.launched[name]
            super().start(name, *args, extra_env=extra_env)
            REVIVED[name] += 1
        return dead

    def kill_outright(self, name: str) -> None:
        """SIGKILL a worker's whole tree at once (the supervisor, the Celery main process and
        its pool): a worker whose machine was lost, with no chance to give its messages back."""
        proc = self.procs.pop(name)
        for pid in [proc.pid, *descendants(proc.pid)]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.wait()

    def start_again(self, name: str) -> None:
        """Start a fresh process as ``name`` was started (a replacement worker)."""
        args, extra_env = self.launched[name]
        self.start(name, *args, extra_env=extra_env)

    def start_api(self) -> None:
        self.start("api", "serve", "--port", str(self.port))
        wait_until(self._api_up, START_TIMEOUT_S, "the API", self, interval=0.2)

    def _api_up(self) -> bool:
        try:
            return httpx.get(f"{self.api}/api/v1/healthz", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    def pool(self, name: str) -> int:
        """The pid of the pool process of a one-process worker (supervisor > master > pool)."""
        def found() -> int | None:
            masters = children(self.procs[name].pid)
            pools = children(masters[0]) if masters else []
            return pools[0] if len(pools) == 1 else None
        return int(wait_until(found, 60, f"the {name} pool process", self, interval=0.05))


def fake_nvcc(path: Path, token: str) -> Path:
    """An nvcc that never finishes a compile (its sleep is tagged to be found and reaped)."""
    path.write_text("#!/bin/sh\n"
                    'if [ "$1" = "--version" ]; then echo "Build cuda_0.0.fake"; exit 0; fi\n'
                    f"exec sleep 300.{token}\n")
    path.chmod(0o755)
    return path
