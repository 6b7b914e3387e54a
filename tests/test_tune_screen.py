"""What ``tuneforge tune`` says on the replay before it starts: no GPU and why, then whose
measurements it replays (the GPU, the dates, the shapes, the number of points), in words a user
reads; the softmax banner printed session, call and commit jargon."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from core.replay import ReplayDataset
from kernels import get_family

_SCRIPT = Path(sys.executable).with_name("tuneforge")
COMMAND = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "cli.main"]


@pytest.mark.parametrize("kernel", ["softmax", "gemm_bias_relu"])
def test_the_replay_banner_says_gpu_dates_shapes_and_points(tmp_path: Path, kernel: str,
                                                           tuneforge_home: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUNEFORGE_")}
    env.update({"TUNEFORGE_HOME": str(tuneforge_home), "COLUMNS": "80"})
    done = subprocess.run([*COMMAND, "tune", "--backend", "replay", "--kernel", kernel,
                           "--budget", "3", "--db", str(tmp_path / "t.db"), "--out",
                           str(tmp_path / "out")], capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    box = done.stderr.split("╰")[0]
    assert all(len(line) <= 80 for line in box.splitlines())
    text = " ".join(line.strip("│ ") for line in box.splitlines()[1:])
    dataset = ReplayDataset(get_family(kernel).replay_datasets()[0])
    assert "No GPU here (" in text
    assert "Replaying measurements of NVIDIA H200 taken on " in text
    for date in re.findall(r"\d{4}-\d\d-\d\d", dataset.provenance()[0]):
        assert date in text
    assert f"{len(dataset.points)} points at " in text
    for shape in dataset.shapes():
        assert shape in text
    for jargon in ("session", "call", "commit", "driver", "s18"):
        assert jargon not in text, (jargon, text)
