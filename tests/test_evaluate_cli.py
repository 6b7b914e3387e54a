"""``tuneforge evaluate``: one feedback record, from the replay dataset here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from repo import ROOT

from core.feedback import FeedbackRecord


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


@pytest.mark.parametrize("args", [
    # a point the dataset has not measured (the campaigns measured 128-row tiles)
    ["--actions", "apply_tf32x3(true) ; apply_wgmma(64) ; apply_block_swizzle(2)"],
    ["--params", '{"tf32x3": true, "wgmma": 64, "block_x": 128, "block_y": 1}'],
    ["--shape", "1024x1024x1024"],  # a measured point, at a shape the dataset does not have
], ids=["point-by-actions", "point-by-params", "shape"])
def test_evaluate_says_not_measured_instead_of_inventing(tmp_path: Path,
                                                         args: list[str]) -> None:
    """Both are ``not_measured`` (a missing point used to be a ``compile_error``)."""
    done = tuneforge(tmp_path, "evaluate", "--backend", "replay", *args, "--json")
    assert done.returncode == 1
    record = json.loads(done.stdout.strip().splitlines()[-1])
    assert record["status"] == "not_measured", record
    assert record["compile_status"] in ("not_measured", "ok"), record
    assert record["perf"] is None
    assert "not in the replay dataset" in record["error"] or "was not measured" in record["error"]


def test_evaluate_rejected_point_carries_its_numbers(tmp_path: Path) -> None:
    done = tuneforge(tmp_path, "evaluate", "--backend", "replay", "--params",
                     '{"smem": true, "tile_k": 64, "block_x": 256, "block_y": 4, '
                     '"coalesced": true, "reg_n": 8}', "--json")
    assert done.returncode == 1
    record = json.loads(done.stdout.strip().splitlines()[-1])
    assert record["status"] == "rejected"
    assert record["compile"]["rejection"]["reason"] == "smem_over_limit"
    assert record["compile"]["rejection"]["smem_bytes"] > record["compile"]["max_smem_limit"]


def test_evaluate_applies_actions_at_its_shape(tmp_path: Path) -> None:
    """--shape reaches the transforms: specialize_shape compiles that shape in, and a split-K
    that leaves a split without a K tile at that shape is rejected with its numbers."""
    done = tuneforge(tmp_path, "evaluate", "--backend", "replay", "--shape", "256x256x4096",
                     "--actions", "apply_coalesce(true);apply_shared_memory_load(true);"
                     "apply_split_k(4);specialize_shape(true)", "--json")
    record = json.loads(done.stdout.strip().splitlines()[-1])
    assert record["params"]["split_k"] == 4
    assert (record["params"]["shape_m"], record["params"]["shape_n"],
            record["params"]["shape_k"]) == (256, 256, 4096)
    assert record["status"] == "not_measured"  # not in the replay dataset
    short = tuneforge(tmp_path, "evaluate", "--backend", "replay", "--shape", "64x64x100",
                      "--actions", "apply_shared_memory_load(true);apply_split_k(16)", "--json")
    assert short.returncode == 1
    rejection = json.loads(short.stdout.strip().splitlines()[-1])["compile"]["rejection"]
    assert rejection["reason"] == "split_k_exceeds_k_tiles"
    assert (rejection["k"], rejection["k_tiles"], rejection["split_k"]) == (100, 7, 16)
