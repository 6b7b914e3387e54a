"""Parent side of the GPU evaluation child: spawn, watchdog, restart.

One :class:`GpuChild` per GPU. A request that does not come back within its limit is a
``timeout``: the child's whole process group is killed and a fresh child is started for the next
request. A child that dies or reports a kernel fault gives ``crashed``; the next request is
served normally by a new child.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from worker.gpu_child import recv, send

PROJECT_ROOT = Path(__file__).resolve().parent.parent
STARTUP_TIMEOUT_S = 120.0


class ChildUnavailable(RuntimeError):
    """pycuda or a GPU is missing: the GPU backend cannot run here."""


class GpuChild:
    """A long-lived evaluation process pinned to one GPU."""

    def __init__(self, gpu: int | str = 0, *, setup: dict[str, Any] | None = None,
                 python: str = sys.executable) -> None:
        self.gpu = str(gpu)
        self.python = python
        self.setup_request = setup
        self.proc: subprocess.Popen[bytes] | None = None
        self.info: dict[str, Any] = {}
        self.restarts = 0
        self._stderr_tail: list[str] = []
        self._lock = threading.Lock()

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> dict[str, Any]:
        """Spawn the child and wait for it to report its device."""
        env = dict(os.environ)
        env["CUDA_VISIBLE_DEVICES"] = self.gpu
        env["PYTHONPATH"] = os.pathsep.join(
            [str(PROJECT_ROOT), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])]
        )
        env.setdefault("PYTHONUNBUFFERED", "1")
        self.proc = subprocess.Popen(
            [self.python, "-m", "worker.gpu_child"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=env, cwd=str(PROJECT_ROOT), start_new_session=True,
        )
        self._stderr_tail = []
        threading.Thread(target=self._drain_stderr, args=(self.proc,), daemon=True).start()
        hello = self._read(STARTUP_TIMEOUT_S)
        if hello is None or hello.get("status") != "ready":
            error = (hello or {}).get("error") or self.stderr_tail() or "child did not start"
            self.kill()
            raise ChildUnavailable(error)
        self.info = hello["info"]
        if self.setup_request is not None:
            reply = self._roundtrip(self.setup_request, STARTUP_TIMEOUT_S)
            if reply.get("status") != "ok":
                self.kill()
                raise ChildUnavailable(f"setup failed: {reply.get('error')}")
            self.info = reply["info"]
        return self.info

    def _drain_stderr(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:
            self._stderr_tail.append(raw.decode(errors="replace").rstrip())
            del self._stderr_tail[:-40]

    def stderr_tail(self) -> str:
        """The child's last lines on stderr (for error reports)."""
        return "\n".join(self._stderr_tail[-10:])

    def kill(self) -> None:
        """Kill the child's process group (a hung kernel included)."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        for stream in (proc.stdin, proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        proc.wait()

    def close(self) -> None:
        """Stop the child politely, then firmly."""
        proc = self.proc
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()

    @property
    def alive(self) -> bool:
        """Whether a child process is running."""
        return self.proc is not None and self.proc.poll() is None

    # -- requests ------------------------------------------------------------------------------
    def _read(self, timeout_s: float) -> dict[str, Any] | None:
        assert self.proc is not None
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout_s)
        if not ready:
            return None
        try:
            reply: dict[str, Any] = recv(self.proc.stdout)
            return reply
        except EOFError:
            return {"status": "crashed", "error": self._death_note()}

    def _death_note(self) -> str:
        assert self.proc is not None
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        time.sleep(0.05)  # let the stderr drain catch the last words
        tail = self.stderr_tail()
        return f"evaluation process died (exit {code}){': ' + tail[-300:] if tail else ''}"

    def _roundtrip(self, request: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        assert self.proc is not None
        assert self.proc.stdin is not None
        try:
            send(self.proc.stdin, request)
        except (BrokenPipeError, OSError):
            return {"status": "crashed", "error": self._death_note()}
        reply = self._read(timeout_s)
        if reply is None:
            return {"status": "timeout", "error": f"no answer within {timeout_s:g} s"}
        return reply

    def request(self, request: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """Send one request; restart the child after a timeout or a crash."""
        with self._lock:
            if not self.alive:
                if self.proc is not None:
                    self.kill()
                    self.restarts += 1
                self.start()
            reply = self._roundtrip(request, timeout_s)
            if reply.get("status") in ("timeout", "crashed"):
                self.kill()
                self.restarts += 1
            return reply
