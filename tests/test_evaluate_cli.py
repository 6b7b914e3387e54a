"""``tuneforge evaluate``: one feedback record, from the replay dataset here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from core.feedback import FeedbackRecord

ROOT = Path(__file__).resolve().parent.parent


def tuneforge(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TUNEFORGE_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "cli.main", *args], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=120)


def test_evaluate_prints_one_valid_feedback_record(tmp_path: Path) -> None:
    done = tuneforge(tmp_path, "evaluate", "--backend", "replay", "--actions",
                     "apply_coalesce(true);apply_shared_memory_load(true);"
                     "apply_register_block(8, 4);apply_vectorize(4)", "--json")
    assert done.returncode == 0, done.stderr
    record = FeedbackRecord.model_validate(json.loads(done.stdout.strip().splitlines()[-1]))
    assert record.status == "ok"
    assert record.backend == "replay"
    assert record.compile.max_smem_limit == 232448
    assert record.perf is not None
    assert record.perf.pct_of_vendor is not None
    assert 0 < record.perf.pct_of_vendor < 100
    assert record.correctness is not None
    assert record.correctness.passed
    assert "replay backend" in done.stderr


def test_evaluate_says_not_measured_instead_of_inventing(tmp_path: Path) -> None:
    done = tuneforge(tmp_path, "evaluate", "--backend", "replay", "--params",
                     '{"tf32x3": true}', "--json")
    assert done.returncode == 1
    record = json.loads(done.stdout.strip().splitlines()[-1])
    assert record["status"] in ("not_measured", "compile_error")
    assert record["perf"] is None
    assert "not" in (record["error"] or "")


def test_evaluate_rejected_point_carries_its_numbers(tmp_path: Path) -> None:
    done = tuneforge(tmp_path, "evaluate", "--backend", "replay", "--params",
                     '{"smem": true, "tile_k": 64, "block_x": 256, "block_y": 4, '
                     '"coalesced": true, "reg_n": 8}', "--json")
    assert done.returncode == 1
    record = json.loads(done.stdout.strip().splitlines()[-1])
    assert record["status"] == "rejected"
    assert record["compile"]["rejection"]["reason"] == "smem_over_limit"
    assert record["compile"]["rejection"]["smem_bytes"] > record["compile"]["max_smem_limit"]
