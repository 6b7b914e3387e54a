"""Free loopback ports for the servers the tests start, and whether a given process is the one
listening on a port.

A port from :func:`free_port` is free when it is chosen, not when the server binds it: under
pytest-xdist another worker's server can take it in between. The server started second then
fails to bind, and a readiness probe of the port reaches the first one (another database: its
campaigns were a 404 to the dashboard tests). :func:`listens` tells the two apart.
"""

from __future__ import annotations

import socket
from pathlib import Path


def free_port() -> int:
    """A TCP port nobody listens on (loopback)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _listening_inodes(port: int) -> set[str]:
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:  # LISTEN
                inodes.add(cols[9])
    return inodes


def listens(pid: int, port: int) -> bool:
    """Whether process ``pid`` holds a socket listening on TCP ``port`` (Linux ``/proc``)."""
    inodes = {f"socket:[{inode}]" for inode in _listening_inodes(port)}
    if not inodes:
        return False
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return False
    for fd in fds:
        try:
            if str(fd.readlink()) in inodes:
                return True
        except OSError:
            continue
    return False
