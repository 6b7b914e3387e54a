"""``tuneforge tune --shapes`` on the replay: a shape set over the replay dataset's shapes, run
as a user runs it (the console script in a child process); the same set again costs nothing;
the ways to write a set, and the bad ones refused in one line."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from typer.testing import CliRunner

from cli.main import app
from cli.shapeset import parse_shape_set
from kernels import get_family

_SCRIPT = Path(sys.executable).with_name("tuneforge")
COMMAND = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "cli.main"]
#: every shape the softmax replay dataset measured but the two slowest to tune through
SHAPES = "8192x8192:2,8192x4096,16384x1024,32768x512,65536x1024,65536x128,2048x65536"


def tune(home: Path, *args: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUNEFORGE_")}
    env.update({"TUNEFORGE_HOME": str(home), "COLUMNS": "80"})
    done = subprocess.run([*COMMAND, "tune", "--backend", "replay", "--json", *args],
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout.splitlines()[-1]))


def test_a_shape_set_on_the_replay_and_the_same_set_again(tmp_path: Path) -> None:
    args = ["--kernel", "softmax", "--shapes", SHAPES, "--budget", "140",
            "--db", str(tmp_path / "t.db"), "--out", str(tmp_path / "out")]
    first = tune(tmp_path, *args)
    assert first["status"] == "done"
    assert first["evaluations"] <= 140
    rows = {r["shape"]: r for r in first["shapes"]}
    assert list(rows)[0] == "8192x8192"  # the heaviest runs first
    assert set(rows) == {s.split(":")[0] for s in SHAPES.split(",")}
    for shape, row in rows.items():
        assert row["best"] is not None, shape
        assert row["x_vendor"] is not None
        assert row["pct_of_peak"] is not None
    # what separate campaigns reach on this replay at these shapes (the heavy one most)
    assert rows["8192x8192"]["x_vendor"] >= 2.0
    assert rows["65536x1024"]["x_vendor"] >= 1.0
    assert first["gpu_seconds"] > 5.0
    assert first["served_from_history"] == 0
    assert any(f.endswith(".cu") for f in first["files"])

    again = tune(tmp_path, *args)
    assert again["gpu_seconds"] == 0.0
    # every evaluation that passed or failed correctness was served; the rest (points the
    # replay never measured, refused before compiling) cost nothing either way
    engine = create_engine(f"sqlite:///{tmp_path / 't.db'}")
    with engine.connect() as conn:
        statuses = conn.execute(text(
            "SELECT c.status, c.served_from IS NOT NULL FROM candidates c JOIN campaigns k "
            "ON k.id = c.campaign_id WHERE k.set_id = :sid"), {"sid": again["set_id"]}).all()
    engine.dispose()
    assert again["served_from_history"] == sum(1 for st, _ in statuses if st in ("ok", "wrong"))
    assert all(served for st, served in statuses if st in ("ok", "wrong"))
    assert [(r["shape"], r["best"]["avg_us"]) for r in again["shapes"]] == \
        [(r["shape"], r["best"]["avg_us"]) for r in first["shapes"]]


@pytest.mark.parametrize(("option", "budget", "reason"), [
    ("--wall-seconds", 1.5, r"wall-clock budget of ([\d.]+) s spent"),
    ("--gpu-seconds", 2.0, r"GPU budget of ([\d.]+) s spent"),
])
def test_a_sets_seconds_are_shared_by_its_members(tmp_path: Path, option: str, budget: float,
                                                 reason: str) -> None:
    """Wall and GPU seconds are one budget for the whole set, like its evaluations: each
    member starts with its share of what is left. Given to every member whole, the seven
    shapes ran 9.4 s on a 1.5 s wall budget and spent 14.9 GPU-seconds of 2."""
    summary = tune(tmp_path, "--kernel", "softmax", "--shapes", SHAPES, "--budget", "100000",
                   option, str(budget), "--settle-after", "0", "--db", str(tmp_path / "t.db"),
                   "--out", str(tmp_path / "out"))
    assert summary["status"] == "done"
    if option == "--gpu-seconds":
        # replayed GPU-seconds hold no clock of this machine. A member's baseline and the
        # evaluations in flight when its share runs out go past it. Wall seconds are not
        # bounded here: a loaded machine stretches them; the shares below show the sharing
        assert summary["gpu_seconds"] <= 2 * budget, summary
    shares = [float(m.group(1)) for row in summary["shapes"]
              if (m := re.fullmatch(reason, row["reason"] or ""))]
    assert len(shares) >= 5, summary["shapes"]
    assert sum(shares) <= budget + 1e-6
    assert shares[0] < budget  # the heaviest shape's share, not the whole


def test_the_ways_to_write_a_set(tmp_path: Path) -> None:
    family = get_family("softmax")
    lines = tmp_path / "shapes.txt"
    lines.write_text("# the program's shapes\n8192x8192 3\n\n16x262144  # decode\n")
    as_json = tmp_path / "shapes.json"
    as_json.write_text(json.dumps([{"shape": {"rows": 8192, "cols": 8192}, "weight": 3},
                                   "16x262144"]))
    want = [{"shape": {"rows": 8192, "cols": 8192}, "weight": 3.0},
            {"shape": {"rows": 16, "cols": 262144}, "weight": 1.0}]
    assert parse_shape_set(family, str(lines)) == want
    assert parse_shape_set(family, str(as_json)) == want
    assert parse_shape_set(family, "8192x8192:3,16x262144") == want
    assert parse_shape_set(family, "rows=8192,cols=8192:3;rows=16,cols=262144") == want


@pytest.mark.parametrize(("args", "message"), [
    (["--shape", "8192x8192", "--shapes", "8192x8192"], "--shape and --shapes"),
    (["--shapes", "8192x8192,8192x8192"], "8192x8192 given more than once"),
    (["--shapes", "8192x8192,4096x4096"], "--shape: the replay dataset has no measurement at "
                                          "shape 4096x4096"),
    (["--shapes", "8192x8192:heavy"], "the weight must be a number"),
    (["--shapes", "8192x8192:0"], "--shapes"),
    (["--shapes", "8192x8192,16x262144", "--budget", "7"], "needs at least 8 evaluations"),
    (["--shapes", "8192"], "8192"),
], ids=["both", "twice", "not-in-replay", "weight-text", "weight-zero", "budget", "bad-shape"])
def test_bad_sets_exit_2_with_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, ["tune", "--backend", "replay", "--kernel", "softmax",
                                      "--db", str(tmp_path / "t.db"), "--out",
                                      str(tmp_path / "out"), *args], env={"COLUMNS": "300"})
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.output
    assert message in errors[0], result.output


def test_the_set_table_fits_80_columns(tmp_path: Path) -> None:
    """The table of a GEMM set (its widest shapes) is whole at 80 columns: no header or cell
    is cut to an ellipsis."""
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUNEFORGE_")}
    env.update({"TUNEFORGE_HOME": str(home), "COLUMNS": "80"})
    done = subprocess.run([*COMMAND, "tune", "--backend", "replay", "--kernel",
                           "gemm_bias_relu", "--shapes", "4096x4096x4096:3", "--budget", "10",
                           "--db", str(tmp_path / "g.db"), "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    table = done.stdout[done.stdout.index("shape set "):]
    assert "4096x4096x4096  3  10/10" in table, table
    for word in ("evals", "best µs", "TFLOP/s", "× vendor", "% peak", "GPU s", "hist."):
        assert word in table, (word, table)
    assert "…" not in table, table
    assert all(len(line) <= 80 for line in table.splitlines()), table
