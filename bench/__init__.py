"""Benchmarks and tools: each benchmark prints a table, writes its figures with date, GPU and
commit to docs/ and its raw record to runs/; the tools build datasets and the reference pages."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
_SCRIPT = Path(sys.executable).with_name("tuneforge")
#: the CLI as a user runs it: the console script, else ``python -m cli.main``
COMMAND = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "cli.main"]


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


def tuneforge_json(home: Path, *args: str, timeout: float = 3600) -> Any:
    """One ``tuneforge ARGS --json`` in a child process, as a user runs it (``home`` its
    ``TUNEFORGE_HOME``, no other ``TUNEFORGE_*`` setting): its last line; SystemExit with
    the end of its stderr when it fails."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUNEFORGE_")}
    env.update({"TUNEFORGE_HOME": str(home), "COLUMNS": "80"})
    done = subprocess.run([*COMMAND, *args, "--json"], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=timeout)
    if done.returncode != 0:
        raise SystemExit(f"tuneforge {' '.join(args)}:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.splitlines()[-1])
