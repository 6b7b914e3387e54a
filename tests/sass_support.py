"""Where the SASS disassembler is: ``cuobjdump`` on PATH, or the one ``$CUOBJDUMP`` names (for
example the copy Triton's wheel carries, on a machine whose CUDA has none)."""

from __future__ import annotations

import os
import shutil


def cuobjdump() -> str | None:
    """The path of a ``cuobjdump``, or ``None``."""
    named = os.environ.get("CUOBJDUMP")
    if named and os.access(named, os.X_OK):
        return named
    return shutil.which("cuobjdump")
