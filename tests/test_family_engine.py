"""A family defined only under ``tests/`` goes through the whole loop: the engine, the expert and
random policies, the replay of its H200 measurements, the feedback record, the report and the
export — nothing outside its package names it."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.embedded import EmbeddedRunner
from agent.engine.lifecycle import CampaignSpec, create_campaign
from agent.exports import campaign_points, kt_cache_document, markdown_report
from agent.policies import make_policy
from agent.report import summary
from agent.spaces import ReplaySpace
from api.views import campaign_read
from core.feedback import FeedbackRecord
from core.models import Campaign, Candidate
from core.replay import ReplayDataset
from kernels import register_family, unregister_family
from worker.evaluate import ReplayEvaluator

sys.path.insert(0, str(Path(__file__).resolve().parent))
from families.scale_add import FAMILY  # noqa: E402
from replay_support import candidates, new_database  # noqa: E402

SHAPE = "16777216"


@pytest.fixture(scope="module", autouse=True)
def _registered() -> Iterator[None]:
    register_family(FAMILY, replace=True)
    yield
    unregister_family(FAMILY.name)


def dataset() -> ReplayDataset:
    [path] = FAMILY.replay_datasets()
    return ReplayDataset(path)


def run_campaign(tmp_path: Path, policy: str, budget: int) -> tuple[Any, str]:
    _url, sessions = new_database(tmp_path)
    data = dataset()
    evaluator = ReplayEvaluator(FAMILY, data)
    with sessions.begin() as s:
        campaign = create_campaign(
            s, CampaignSpec(parallel=2, kernel=FAMILY.name, dims={"n": int(SHAPE)}, policy=policy,
                                   budget_iterations=budget),
            backend="replay", device=evaluator.device)
        cid = campaign.id
    runner = EmbeddedRunner(sessions, [evaluator], policy=make_policy(policy),
                            space=ReplaySpace(FAMILY, data, SHAPE))
    runner.run(cid)
    assert not runner.errors, runner.errors
    return sessions, cid


def test_the_dataset_holds_the_whole_space_measured_on_the_h200() -> None:
    data = dataset()
    assert data.meta["gpu"] == "NVIDIA H200"
    assert data.meta["device"]["copy_gbs"] > 3000
    measured = {json.dumps(r["params"], sort_keys=True) for r in data.points.values()}
    assert measured == {json.dumps(p.to_dict(), sort_keys=True) for p in FAMILY.space()}


def test_expert_campaign_on_a_test_family_reaches_the_measured_best(tmp_path: Path) -> None:
    sessions, cid = run_campaign(tmp_path, "expert", 20)
    data = dataset()
    best_row = data.best(FAMILY.make_dims({"n": int(SHAPE)}))
    assert best_row is not None
    with sessions() as s:
        campaign = s.get(Campaign, cid)
        assert campaign is not None
        assert campaign.status == "done"
        report = summary(s, campaign)
        read = campaign_read(s, campaign).model_dump(mode="json")
        points, total = campaign_points(s, campaign)
    rows = candidates(sessions, cid)
    assert rows[0].action is None  # the baseline first
    # the rule book's moves lead to within 10 % of the best of the 36 measured points
    assert report["best"]["avg_us"] <= 1.10 * best_row["perf"]["avg_us"]
    assert report["unit"] == "GB/s"
    assert report["best"]["throughput"] == pytest.approx(
        8 * int(SHAPE) / (report["best"]["avg_us"] * 1e-6) / 1e9, rel=1e-3)
    assert "throughput_tflops" not in report["best"]
    assert read["shape"] == {"n": int(SHAPE)}
    assert read["metric"]["unit"] == "GB/s"
    assert read["metric"]["peak_label"] == "copy bandwidth"
    assert total == len(rows)
    record = FeedbackRecord.model_validate(rows[-1].feedback)
    assert record.best_so_far is not None
    assert record.best_so_far.unit == "GB/s"
    assert record.best_so_far.throughput_tflops is None
    md = markdown_report(read, points)
    assert f"# Campaign {cid[:8]} · scale_add {SHAPE}" in md
    assert "| | time | GB/s | iteration |" in md
    cache = kt_cache_document(read, points)
    assert cache["problem_size"] == [int(SHAPE)]
    assert set(cache["tune_params_keys"]) == {"block", "vec", "items"}
    assert any("GB/s" in entry for entry in cache["cache"].values())


def test_random_campaign_measures_only_what_the_dataset_has(tmp_path: Path) -> None:
    sessions, cid = run_campaign(tmp_path, "random", 12)
    rows: list[Candidate] = candidates(sessions, cid)
    assert len(rows) == 12
    assert {r.status for r in rows} == {"ok"}
    assert len({r.params_key for r in rows}) == 12  # no point measured twice
