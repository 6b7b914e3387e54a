"""Where the repository is, for the tests that run its scripts, read its files or start its
programs with it as their working directory."""

from __future__ import annotations

from pathlib import Path

#: the repository's root (this file's folder's parent)
ROOT = Path(__file__).resolve().parents[1]
