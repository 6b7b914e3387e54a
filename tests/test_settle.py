"""A campaign that has settled stops before its budget and says why; the budget stays the upper
bound, and the replay's campaigns reach the same best as when they run their whole budget. And
`make tune`'s progress line stays whole at 80 columns ("600/6…" before)."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

from agent.engine.lifecycle import SETTLE_AFTER

_SCRIPT = Path(sys.executable).with_name("tuneforge")
COMMAND = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "cli.main"]


def tune(home: Path, tmp: Path, name: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``tuneforge tune`` on the replay in an 80-column terminal, as ``make tune`` runs it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUNEFORGE_")}
    env.update({"TUNEFORGE_HOME": str(home), "COLUMNS": "80"})
    return subprocess.run([*COMMAND, "tune", "--backend", "replay", "--db",
                           str(tmp / f"{name}.db"), "--out", str(tmp / name), *args],
                          capture_output=True, text=True, env=env, timeout=600)


def campaign(tmp: Path, name: str) -> dict[str, Any]:
    with sqlite3.connect(tmp / f"{name}.db") as conn:
        conn.row_factory = sqlite3.Row
        row = conn.execute("SELECT * FROM campaigns").fetchone()
        return dict(row)


def test_a_settled_campaign_stops_says_why_and_keeps_its_best(tmp_path: Path,
                                                              tuneforge_home: Path) -> None:
    done = tune(tuneforge_home, tmp_path, "settled")  # the defaults of `make tune`
    assert done.returncode == 0, done.stderr
    settled = campaign(tmp_path, "settled")
    assert settled["settle_after"] == SETTLE_AFTER
    assert settled["evaluations"] < settled["budget_iterations"] == 600
    quiet = re.match(r"settled: the last (\d+) evaluations found nothing better than #\d+",
                     settled["status_reason"])
    assert quiet, settled["status_reason"]
    assert SETTLE_AFTER <= int(quiet[1]) < SETTLE_AFTER + 10
    assert "and every point one transform from it was tried" in settled["status_reason"]
    title = " ".join(line.strip() for line in done.stdout.splitlines())
    assert "· done (settled: the last" in title  # the summary says why it stopped
    # the progress line, whole in 80 columns: the count, the best, the vendor, the clock
    line = next(x for x in done.stderr.splitlines() if x.startswith("tuning "))
    assert len(line) <= 80, line
    assert f" {settled['evaluations']}/600 best " in line, line
    assert "× cuBLAS fp32 0:00:" in line, line
    # the same campaign with its budget the only stop: the same best, more evaluations
    done = tune(tuneforge_home, tmp_path, "full", "--settle-after", "0", "--json")
    assert done.returncode == 0, done.stderr
    full = json.loads(done.stdout.splitlines()[-1])
    assert full["reason"] == "iteration budget of 600 spent"
    assert full["best"]["avg_us"] == settled["best_us"]


def test_the_budget_stays_the_upper_bound(tmp_path: Path, tuneforge_home: Path) -> None:
    done = tune(tuneforge_home, tmp_path, "short", "--budget", "50", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1])["reason"] == "iteration budget of 50 spent"
    # a search that never explores the incumbent's neighbourhood does not settle: random draws
    done = tune(tuneforge_home, tmp_path, "random", "--policy", "random", "--budget", "40",
                "--settle-after", "5", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1])["reason"] == "iteration budget of 40 spent"
