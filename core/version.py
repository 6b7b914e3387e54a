"""Which tuneforge measured a result: the git commit of the checkout it runs from (its package
version outside a checkout), read once per process."""

from __future__ import annotations

import subprocess
from functools import lru_cache
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@lru_cache(maxsize=1)
def commit() -> str:
    """The short commit of this checkout (``+dirty`` with uncommitted changes), else
    ``tuneforge <version>``."""
    try:
        done = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty=+dirty",
                               "--abbrev=7", "--match", "NO-TAGS"],
                              capture_output=True, text=True, timeout=5)
        if done.returncode == 0 and done.stdout.strip():
            return done.stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        pass
    try:
        return f"tuneforge {metadata.version('tuneforge')}"
    except metadata.PackageNotFoundError:
        return "tuneforge (unknown version)"
