"""The API served for real to a test: uvicorn in a thread on a free port, an httpx client.

Starlette's TestClient (an httpx client over an in-process transport) is deprecated for httpx
and is not a real server; this is the same app behind the server `tuneforge serve` runs.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import uvicorn


@contextmanager
def served(app: Any, timeout_s: float = 20.0) -> Iterator[httpx.Client]:
    """Serve ``app`` (lifespan included) on 127.0.0.1 until the block ends; yield a client."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning",
                                           lifespan="on"))
    thread = threading.Thread(target=server.run, name="api-under-test", daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the API did not start")
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30.0) as client:
            yield client
    finally:
        server.should_exit = True
        thread.join(timeout_s)
