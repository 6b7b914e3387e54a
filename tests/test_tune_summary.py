"""``bench/tune_summary.py``, the GPU scripts' short table of a ``tuneforge tune --json``
result, read from real replay campaigns (embedded, a temporary ``--db``): a shape set's rows,
one campaign's row with its speed against the vendor, and a killed step's empty file refused
with exit 1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bench.tune_summary import main
from cli.main import app


def tune_json(tmp_path: Path, *where: str, budget: int) -> Path:
    done = CliRunner().invoke(app, ["tune", "--kernel", "softmax", *where, "--budget",
                                    str(budget), "--json", "--db", str(tmp_path / "t.db"),
                                    "--out", str(tmp_path / "out")], env={"COLUMNS": "80"})
    assert done.exit_code == 0, done.stderr
    path = tmp_path / "tune.json"
    path.write_text(done.stdout.strip().splitlines()[-1])
    return path


def test_a_shape_set(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tune_json(tmp_path, "--shapes", "8192x8192,16384x1024", budget=24)
    result = json.loads(path.read_text())
    assert main([str(path), "--params"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"tune: done · {result['evaluations']} evaluations")
    assert len(out) == 3
    for line, member in zip(out[1:], result["shapes"], strict=True):
        assert line.split()[0] == member["shape"]
        assert f"best {member['best']['avg_us']} us" in line
        assert f"{member['x_vendor']}x vendor" in line
        assert json.dumps(member["best"]["params"], sort_keys=True) in line


def test_one_campaign(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tune_json(tmp_path, "--shape", "8192x8192", budget=10)
    result = json.loads(path.read_text())
    assert main([str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2
    assert out[1].split()[:3] == ["8192x8192", str(result["evaluations"]), "evals"]
    assert f"{round(result['pct_of_vendor'] / 100, 3)}x vendor" in out[1]
    assert "{" not in out[1]  # no parameters without --params


def test_a_killed_step_leaves_no_summary(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "tune.json"
    empty.write_text("")
    assert main([str(empty)]) == 1
    assert "no summary in" in capsys.readouterr().err
