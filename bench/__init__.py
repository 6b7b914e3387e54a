"""Benchmarks and tools: each benchmark prints a table, writes its figures with date, GPU and
commit to docs/ and its raw record to runs/; the tools build datasets and the reference pages."""

from __future__ import annotations

import os
import subprocess


def git_commit() -> str:
    """``$TUNEFORGE_COMMIT`` when set (a device copy of a working tree has no .git, or a stale
    one: the script that ships the tree names its commit), else the checkout's short commit,
    else 'unknown'."""
    named = os.environ.get("TUNEFORGE_COMMIT", "").strip()
    if named:
        return named
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=5).stdout.strip() or "unknown"
    except OSError:
        return "unknown"
