"""The replay judges every recorded measurement at the campaign's tolerance, from the error
figures the GPU recorded: a pass at the recording's tolerance is not a pass at a tighter one, and
a failure it recorded is never shown as a timed pass at a looser one."""

from __future__ import annotations

import gzip
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cli.main import app
from core.evaluation import EvalOptions
from core.replay import ReplayDataset
from kernels import get_family
from worker.evaluate import ReplayEvaluator

GEMM = get_family("gemm_bias_relu")
SHAPE = GEMM.parse_dims("4096x4096x4096")


@pytest.fixture(scope="module")
def gemm_replay() -> ReplayEvaluator:
    return ReplayEvaluator(GEMM, ReplayDataset(GEMM.replay_datasets()[0]))


def rows(evaluator: ReplayEvaluator, status: str, tolerance: float) -> list[dict[str, Any]]:
    """The dataset's rows of ``status`` recorded at ``tolerance``."""
    return [r for r in evaluator.dataset.points.values()
            if r["status"] == status and (r.get("correctness") or {}).get("tolerance") == tolerance]


def measure(evaluator: ReplayEvaluator, row: dict[str, Any], tolerance: float) -> Any:
    params = evaluator.family.params_from_dict(row["params"])
    compiled = evaluator.compile(params).result()
    return evaluator.measure(params, compiled, shape=SHAPE, iteration=1, seed=0,
                             options=EvalOptions(tolerance=tolerance))


def test_a_pass_recorded_at_1e4_whose_errors_exceed_1e5_is_wrong_at_1e5(
        gemm_replay: ReplayEvaluator) -> None:
    # the bf16x3 kernel the 1e-5 replay campaign took as its best: 1.04e-5 on one case
    passed = [r for r in rows(gemm_replay, "ok", 1e-4)
              if 1e-5 < r["correctness"]["max_scaled_err"] <= 1e-4]
    assert passed
    m = measure(gemm_replay, passed[0], 1e-5)
    assert m.status == "wrong"
    assert m.perf is None  # a wrong answer is not timed
    assert m.correctness["tolerance"] == 1e-5
    assert m.correctness["passed"] is False
    assert "element error / reference scale" in m.error
    assert "> 1e-05" in m.error
    # at the tolerance it was recorded at, the row is what was recorded
    same = measure(gemm_replay, passed[0], 1e-4)
    assert same.status == "ok"
    assert same.correctness == passed[0]["correctness"]


def test_a_failure_recorded_at_1e5_is_never_a_timed_pass_at_1e4(
        gemm_replay: ReplayEvaluator) -> None:
    failed = rows(gemm_replay, "wrong", 1e-5)
    assert failed
    m = measure(gemm_replay, failed[0], 1e-4)
    assert m.status == "not_measured"
    assert m.perf is None
    assert "passes at tolerance 0.0001 (measured at 1e-05) on its recorded errors, but it " \
        "failed when measured and was never timed" in m.error


def test_a_row_without_error_figures_is_not_judged(tmp_path: Path) -> None:
    family = get_family("softmax")
    source = ReplayDataset(family.replay_datasets()[0])
    row = next(r for r in source.points.values() if r["status"] == "ok")
    stripped = json.loads(json.dumps(row))
    for case in stripped["correctness"]["cases"]:
        case.pop("rel_err")
    path = tmp_path / "rows.jsonl.gz"
    with gzip.open(path, "wt") as fh:
        fh.write(json.dumps({**source.meta, "kind": "meta"}) + "\n")
        fh.write(json.dumps(stripped) + "\n")
    evaluator = ReplayEvaluator(family, ReplayDataset(path))
    params = family.params_from_dict(row["params"])
    shape = family.parse_dims(row["shape"])
    compiled = evaluator.compile(params).result()
    kept = evaluator.measure(params, compiled, shape=shape, iteration=1, seed=0,
                             options=EvalOptions(tolerance=1e-4))
    assert kept.status == "ok"  # the tolerance it was recorded at: nothing to judge again
    m = evaluator.measure(params, compiled, shape=shape, iteration=1, seed=0,
                          options=EvalOptions(tolerance=1e-3))
    assert m.status == "not_measured"
    assert "its row lacks the error figures" in (m.error or "")


def test_a_campaign_at_an_impossible_tolerance_fails_and_stores_no_pass(
        tmp_path: Path, tuneforge_home: Path) -> None:
    # `tune --tolerance 1e-30 --budget 10` exited 0 and stored its best as passed at 1e-4
    db = tmp_path / "t.db"
    result = CliRunner().invoke(app, ["tune", "--tolerance", "1e-30", "--budget", "10",
                                      "--db", str(db), "--out", str(tmp_path / "out"),
                                      "--json"], env={"COLUMNS": "80"})
    assert result.exit_code == 1, result.output
    summary = json.loads(result.stdout.splitlines()[-1])
    assert summary["status"] == "failed"
    assert "the baseline did not pass: wrong:" in summary["reason"]
    assert "> 1e-30" in summary["reason"]
    assert summary["best"] is None
    with sqlite3.connect(db) as conn:
        stored = conn.execute("SELECT status, correctness FROM candidates").fetchall()
    assert stored
    for status, correctness in stored:
        assert status != "ok"
        assert json.loads(correctness)["tolerance"] == 1e-30


def test_a_1e5_campaign_keeps_only_kernels_within_1e5(tmp_path: Path,
                                                      tuneforge_home: Path) -> None:
    db = tmp_path / "t.db"
    result = CliRunner().invoke(app, ["tune", "--tolerance", "1e-5", "--budget", "80",
                                      "--db", str(db), "--out", str(tmp_path / "out"),
                                      "--json"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    with sqlite3.connect(db) as conn:
        stored = conn.execute("SELECT status, correctness FROM candidates "
                              "WHERE correctness IS NOT NULL").fetchall()
    passed = [json.loads(c) for s, c in stored if s == "ok"]
    assert passed
    for block in passed:
        assert block["tolerance"] == 1e-5
        assert max(block["rel_err"], block["max_scaled_err"]) <= 1e-5
    assert any(s == "wrong" for s, _ in stored)
