"""Request sizes against the real API process (``tuneforge serve``): a huge header is refused
before it is read whole, a huge body too; the process's peak memory stays where it was."""

from __future__ import annotations

import socket
import time
from pathlib import Path

from service.service_stack import Stack, TeamKey

MIB = 1 << 20


def peak_rss_mib(stack: Stack) -> float:
    """The API process's peak resident memory so far (``VmHWM``), MiB."""
    status = Path(f"/proc/{stack.procs['api'].pid}/status").read_text()
    line = next(x for x in status.splitlines() if x.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024


def send_stream(stack: Stack, head: bytes, filler: bytes, total: int) -> tuple[int, bytes]:
    """Send ``head`` then ``filler`` until ``total`` bytes or the server stops reading (it
    answered and closed): (bytes sent, what it answered)."""
    host, port = stack.api.removeprefix("http://").split(":")
    sent = 0
    with socket.create_connection((host, int(port)), timeout=10) as conn:
        conn.settimeout(10)
        try:
            conn.sendall(head)
            sent = len(head)
            while sent < total:
                conn.sendall(filler)
                sent += len(filler)
        except (BrokenPipeError, ConnectionResetError):
            pass
        answer = b""
        try:
            while chunk := conn.recv(65536):
                answer += chunk
        except (ConnectionResetError, TimeoutError):
            pass
    return sent, answer


def test_a_64_mib_api_key_header_is_refused_before_it_is_read(stack: Stack,
                                                              team_a: TeamKey) -> None:
    """The server took the whole 64 MiB header (httptools) before the 401: RSS +183 MB.
    Now h11 stops at TUNEFORGE_MAX_HEADER_BYTES (64 KiB): 400 and the connection closed."""
    before = peak_rss_mib(stack)
    started = time.monotonic()
    for _ in range(3):
        sent, answer = send_stream(
            stack, b"GET /api/v1/campaigns HTTP/1.1\r\nHost: x\r\nX-API-Key: tf_",
            b"A" * MIB, 64 * MIB)
        assert answer.startswith(b"HTTP/1.1 400"), answer[:200]
        assert sent < 64 * MIB  # it stopped reading long before the end
    took = time.monotonic() - started
    grown = peak_rss_mib(stack) - before
    assert grown < 16, f"the API's peak RSS grew {grown:.0f} MiB"
    assert took < 10, took
    with stack.client(team_a.key) as client:  # and it goes on serving
        assert client.get("/campaigns").status_code == 200


def test_many_headers_of_a_few_kib_are_refused_too(stack: Stack) -> None:
    """The bound is on the whole head, not on one header."""
    head = b"GET /api/v1/healthz HTTP/1.1\r\nHost: x\r\n"
    _sent, answer = send_stream(stack, head, b"X-Pad: " + b"p" * 4000 + b"\r\n", 8 * MIB)
    assert answer.startswith(b"HTTP/1.1 400"), answer[:200]


def test_a_chunked_body_over_the_limit_is_a_413_before_it_is_read(stack: Stack,
                                                                  team_a: TeamKey) -> None:
    """A body without Content-Length is counted as it comes: 413 at the limit (1 MiB)."""
    before = peak_rss_mib(stack)
    chunk = b"%x\r\n%s\r\n" % (MIB, b" " * MIB)
    head = (b"POST /api/v1/families HTTP/1.1\r\nHost: x\r\nX-API-Key: "
            + team_a.key.encode() + b"\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n")
    _sent, answer = send_stream(stack, head, chunk, 64 * MIB)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b"TUNEFORGE_MAX_BODY_BYTES" in answer
    assert peak_rss_mib(stack) - before < 16
