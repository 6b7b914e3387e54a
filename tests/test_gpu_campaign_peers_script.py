"""``bench/gpu_campaign_peers.sh`` refuses a bad call before it installs or runs anything: no
kernel or shapes, an extra argument, a ``SPEC`` folder without ``family.json``, no ``OUT``;
each with a message naming the problem, and nothing written."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from repo import ROOT

SCRIPT = ROOT / "bench" / "gpu_campaign_peers.sh"


def run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("OUT", "SPEC")}
    return subprocess.run(["bash", str(SCRIPT), *args], cwd=cwd, env={**base, **env},
                          capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize(("args", "env", "says"), [
    ([], {}, "usage:"),
    (["softmax"], {}, "usage:"),
    (["softmax", "8192x8192", "extra"], {}, "usage:"),
    (["transpose", "8192x8192"], {"SPEC": "no/such/dir"}, "SPEC=no/such/dir: no family.json"),
    (["softmax", "8192x8192"], {}, "OUT: the folder whose files come back"),
])
def test_refuses_a_bad_call(tmp_path: Path, args: list[str], env: dict[str, str],
                            says: str) -> None:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    began = time.monotonic()
    done = run(args, env, cwd)
    assert done.returncode != 0
    assert says in done.stderr
    assert time.monotonic() - began < 5
    assert list(cwd.iterdir()) == []  # nothing installed, nothing written


def test_a_spec_folder_with_its_family_passes_the_checks(tmp_path: Path) -> None:
    """With a real spec folder the checks pass and the next refusal is the missing ``OUT``:
    the spec check looks at the folder the user named."""
    done = run(["transpose", "8192x8192"], {"SPEC": str(ROOT / "examples" / "transpose")},
               tmp_path)
    assert done.returncode != 0
    assert "OUT: the folder whose files come back" in done.stderr
    assert "no family.json" not in done.stderr
