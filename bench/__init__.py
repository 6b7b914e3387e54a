"""Benchmarks: each prints a table and writes its figures with date, GPU and commit to docs/."""

from __future__ import annotations

import subprocess


def git_commit() -> str:
    """The checkout's short commit, or 'unknown' (the device copy may have no .git)."""
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=5).stdout.strip() or "unknown"
    except OSError:
        return "unknown"
