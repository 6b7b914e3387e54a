"""Builds for the host emulator of ``tests/simt`` (CUDA kernels run by g++ on the CPU)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

#: the emulator's headers and host launchers
SIMT = Path(__file__).resolve().parent / "simt"


def precompiled(gxx: str, name: str, flags: list[str], folder: Path) -> Path:
    """A copy of ``SIMT / name`` in ``folder`` with its precompiled header beside it
    (``name.gch``, built by ``gxx`` with ``flags``): a build with the same flags that includes
    the copy reads the image instead of compiling the header again."""
    header = folder / name
    shutil.copyfile(SIMT / name, header)
    done = subprocess.run([gxx, *flags, "-x", "c++-header", str(header), "-o", f"{header}.gch"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return header
