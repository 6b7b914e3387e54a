"""The replay campaigns decide as recorded, seed for seed: ``tuneforge tune`` on the replay,
run as a user runs it, against the decision chains in ``tests/data/replay-decisions.json``
(``python bench/replay_decisions.py record tests/data/replay-decisions.json`` records them
again after a change meant to move them; say why in the commit)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.replay_decisions import run_all

RECORDED = Path(__file__).with_name("data") / "replay-decisions.json"


@pytest.mark.parametrize("case", ["gemm-expert-s1", "gemm-random-s3", "softmax-random-s2"])
def test_a_replay_campaign_decides_as_recorded(case: str) -> None:
    recorded = json.loads(RECORDED.read_text())[case]
    found = run_all([case])[case]
    assert found["args"] == recorded["args"]
    for i, (now, was) in enumerate(zip(found["chain"], recorded["chain"], strict=False)):
        assert now == was, f"{case}: candidate {i} was {was}, is now {now}"
    assert len(found["chain"]) == len(recorded["chain"])
    assert found["best_us"] == recorded["best_us"]
