"""A test server is the process that listens on its port: a port another server took between
:func:`ports.free_port` and the bind (another xdist worker's) is not mistaken for it."""

from __future__ import annotations

import http.server
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import dashboard_support
import httpx
import pytest
from dashboard_support import start_server, team_database
from ports import free_port, listens


def test_listens_names_the_process_that_holds_the_port() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert listens(os.getpid(), port)
        other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        try:
            assert not listens(other.pid, port)
        finally:
            other.kill()
            other.wait()
    assert not listens(os.getpid(), port)  # closed
    assert not listens(os.getpid(), free_port())


class _AnyOk(http.server.BaseHTTPRequestHandler):
    """Another server: 200 to everything (as another worker's ``tuneforge serve`` is to /ui/)."""

    def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"another server")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def taken_port() -> Iterator[int]:
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _AnyOk)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield srv.server_address[1]
    finally:
        srv.shutdown()
        srv.server_close()


def test_a_server_whose_port_was_taken_starts_on_another(
        tmp_path: Path, taken_port: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first port handed out is already served by another process: the server started
    there fails to bind; ``start_server`` does not take the other's answer for its own, and
    starts it again on a free port."""
    db = team_database(tmp_path / "ports.db")
    handed = iter([taken_port])
    monkeypatch.setattr(dashboard_support, "free_port", lambda: next(handed, None) or free_port())
    (tmp_path / "home").mkdir()
    server = start_server(db.url, tmp_path / "home", tmp_path / "serve.log")
    try:
        assert not server.url.endswith(f":{taken_port}")
        assert listens(server.proc.pid, int(server.url.rsplit(":", 1)[1]))
        answer = httpx.get(f"{server.url}/api/v1/campaigns",
                           headers={"X-API-Key": db.key}, timeout=10)
        assert answer.status_code == 200, answer.text
    finally:
        server.stop()
