"""softmax without a GPU: its H200 campaigns replayed through the engine, as `tuneforge tune
--kernel softmax` runs them on a laptop."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from agent.embedded import EmbeddedRunner
from agent.engine.lifecycle import CampaignSpec, create_campaign
from agent.policies import make_policy
from agent.report import summary
from agent.spaces import ReplaySpace
from core.models import Campaign
from core.replay import ReplayDataset
from kernels import get_family
from worker.evaluate import ReplayEvaluator

sys.path.insert(0, str(Path(__file__).resolve().parent))
from replay_support import candidates, new_database  # noqa: E402

FAMILY = get_family("softmax")


@pytest.mark.parametrize("shape", ["8192x8192", "65536x128", "1024x131072"])
def test_an_expert_replay_reaches_the_measured_best(tmp_path: Path, shape: str) -> None:
    dataset = ReplayDataset(FAMILY.replay_datasets()[0])
    evaluator = ReplayEvaluator(FAMILY, dataset)
    dims = FAMILY.parse_dims(shape)
    best = dataset.best(dims)
    assert best is not None
    _url, sessions = new_database(tmp_path)
    with sessions.begin() as s:
        cid = create_campaign(s, CampaignSpec(parallel=2, kernel="softmax", dims=dims.as_dict(),
                                              budget_iterations=80),
                              backend="replay", device=evaluator.device,
                              vendor_us=evaluator.vendor_us(dims)).id
    runner = EmbeddedRunner(sessions, [evaluator], policy=make_policy("expert"),
                            space=ReplaySpace(FAMILY, dataset, shape))
    runner.run(cid)
    assert not runner.errors, runner.errors
    with sessions() as s:
        campaign = s.get(Campaign, cid)
        assert campaign is not None
        report = summary(s, campaign)
    # the replay walks what the H200 campaign measured: it ends where that campaign ended
    assert report["best"]["avg_us"] == pytest.approx(best["perf"]["avg_us"], rel=0.02)
    assert report["unit"] == "GB/s"
    assert report["vendor"] == "torch.softmax"
    statuses = {c.status for c in candidates(sessions, cid)}
    assert statuses <= {"ok", "wrong", "not_measured", "rejected", "compile_error"}


@pytest.mark.parametrize("family_name", ["softmax", "gemm_bias_relu"])
def test_every_shipped_dataset_lists_the_values_its_points_take(family_name: str) -> None:
    # the domains a replay space offers moves in (agent/spaces.py): a field a point's JSON
    # leaves out at its default must still list that default, or no move could go back to it
    family = get_family(family_name)
    for path in family.replay_datasets():
        dataset = ReplayDataset(path)
        domains = dataset.meta["domains"]
        for (_key, _shape), row in dataset.points.items():
            point = family.params_from_dict(row["params"])
            for name in family.domains():
                assert getattr(point, name) in domains[name], (path.name, name, row["params"])
