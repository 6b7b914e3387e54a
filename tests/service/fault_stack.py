"""A private Postgres server and a private Redis server, for the tests that restart or kill them
(the shared ones on 5432 and 6379 are never touched); the process tree of a worker."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import redis

from service.service_stack import free_port


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
