"""The engine runs a declarative user family unchanged: the example transpose (built from its
spec directory) through the embedded runner with the expert, random and Optuna policies, the
feedback record, the report and the Kernel Tuner export.

No GPU here, and tuneforge has no compile-only backend, so the engine runs on the replay
backend over a **synthetic** dataset written by this test: every valid point of the space at
8192x8192, its time from a made-up model of a transpose (shared memory, padding, wider
accesses and more work a thread pay; the figures are not measurements and the dataset says so
in its meta row). What is tested is the loop's behaviour on a user family — its actions, its
rule book, its records — not the kernel's speed; that is the GPU test's
(``tests/test_gpu_user_family.py``).
"""

from __future__ import annotations

import gzip
import json
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.embedded import EmbeddedRunner
from agent.engine.lifecycle import CampaignSpec, create_campaign
from agent.exports import campaign_points, kt_cache_document
from agent.policies import make_policy
from agent.report import summary
from agent.spaces import ReplaySpace
from api.views import campaign_read
from core.feedback import FeedbackRecord
from core.models import Campaign
from core.replay import ReplayDataset
from kernels import register_family, unregister_family
from kernels.userspec import SpecFamily, build_family, load_spec_dir
from worker.evaluate import ReplayEvaluator

sys.path.insert(0, str(Path(__file__).resolve().parent))
from replay_support import candidates, new_database  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "transpose"
FAMILY: SpecFamily = build_family(load_spec_dir(EXAMPLE))
SHAPE = "8192x8192"
COPY_GBS = 4000.0


@pytest.fixture(scope="module", autouse=True)
def _registered() -> Iterator[None]:
    register_family(FAMILY, replace=True)
    yield
    unregister_family(FAMILY.name)


def model_efficiency(p: Any) -> float:
    """A made-up fraction of the copy rate (not a measurement)."""
    if not p.use_smem:
        return 0.12 + 0.02 * math.log2(p.vec)
    eff = 0.45 + 0.2 * p.pad + 0.04 * math.log2(p.rows) + 0.03 * math.log2(p.vec)
    eff += 0.02 * math.log2(p.tiles) - (0.1 if p.tile_x == 16 else 0.0)
    return min(eff, 0.93)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> ReplayDataset:
    path = tmp_path_factory.mktemp("synthetic") / "transpose-synthetic.jsonl.gz"
    nbytes = FAMILY.metric.amount(FAMILY.parse_dims(SHAPE))
    meta = {"kind": "meta", "family": FAMILY.name, "synthetic": True,
            "gpu": "synthetic (not measured)",
            "device": {"name": "synthetic (not measured)", "arch": "sm_90", "sm_count": 132,
                       "copy_gbs": COPY_GBS, "max_regs_per_sm": 65536,
                       "max_threads_per_sm": 2048, "max_blocks_per_sm": 32,
                       "max_smem_per_sm": 233472},
            "date": "synthetic", "vendor_us": {}, "domains": FAMILY.domains(),
            "method": "a made-up model of a transpose written by tests/test_userspec_engine.py"}
    with gzip.open(path, "wt") as fh:
        fh.write(json.dumps(meta) + "\n")
        for p in FAMILY.space():
            us = nbytes / (model_efficiency(p) * COPY_GBS * 1e9) * 1e6
            row: dict[str, Any] = {"params": p.to_dict(), "shape": SHAPE, "status": "ok",
                   "compile": {"status": "ok", "seconds": 0.0, "regs_per_thread": 32,
                               "smem_bytes": 0, "spill_bytes": 0},
                   "correctness": {"passed": True, "max_abs_err": 0.0, "rel_err": 0.0,
                                   "max_scaled_err": 0.0, "tolerance": 1e-4, "reason": None,
                                   "cases": []},
                   "perf": {"avg_us": us, "runs_us": [us, us * 1.001, us * 0.999],
                            "reps_per_run": 10},
                   "profile": None}
            fh.write(json.dumps(row) + "\n")
    return ReplayDataset(path)


def run_campaign(tmp_path: Path, data: ReplayDataset, policy: str, budget: int
                 ) -> tuple[Any, str]:
    _url, sessions = new_database(tmp_path)
    evaluator = ReplayEvaluator(FAMILY, data)
    with sessions.begin() as s:
        campaign = create_campaign(
            s, CampaignSpec(parallel=2, kernel=FAMILY.name, dims=FAMILY.parse_dims(SHAPE).as_dict(),
                            policy=policy, budget_iterations=budget),
            backend="replay", device=evaluator.device)
        cid = campaign.id
    runner = EmbeddedRunner(sessions, [evaluator], policy=make_policy(policy),
                            space=ReplaySpace(FAMILY, data, SHAPE))
    runner.run(cid)
    assert not runner.errors, runner.errors
    return sessions, cid


def test_the_synthetic_dataset_says_so_and_holds_the_whole_space(dataset: ReplayDataset
                                                                ) -> None:
    assert dataset.meta["synthetic"] is True
    assert "not measured" in dataset.meta["gpu"]
    assert len(dataset.points) == len(FAMILY.space())


def test_an_expert_campaign_uses_the_familys_actions_and_climbs(
        tmp_path: Path, dataset: ReplayDataset) -> None:
    sessions, cid = run_campaign(tmp_path, dataset, "expert", 40)
    rows = candidates(sessions, cid)
    assert rows[0].action is None
    assert rows[0].params == FAMILY.baseline.to_dict()  # the naive point first
    names = {r.action.split("(")[0] for r in rows[1:] if r.action}
    assert names <= set(FAMILY.transforms.names())
    assert "set_use_smem" in names or "apply_shared_memory_transpose" in names
    best_row = dataset.best(FAMILY.parse_dims(SHAPE))
    assert best_row is not None
    with sessions() as s:
        campaign = s.get(Campaign, cid)
        assert campaign is not None
        assert campaign.status == "done"
        report = summary(s, campaign)
        read = campaign_read(s, campaign).model_dump(mode="json")
        points, _ = campaign_points(s, campaign)
    assert report["unit"] == "GB/s"
    # the rule book's neighbour moves get within 20 % of the model's best in 40 evaluations
    assert report["best"]["avg_us"] <= 1.20 * best_row["perf"]["avg_us"]
    assert report["speedup_vs_baseline"] > 4
    assert read["kernel"] == FAMILY.name
    record = FeedbackRecord.model_validate(rows[-1].feedback)
    assert record.best_so_far is not None
    cache = kt_cache_document(read, points)
    assert set(cache["tune_params_keys"]) == set(FAMILY.domains())


@pytest.mark.parametrize("policy", ["random", "optuna"])
def test_numeric_policies_run_on_the_user_family(tmp_path: Path, dataset: ReplayDataset,
                                                 policy: str) -> None:
    sessions, cid = run_campaign(tmp_path, dataset, policy, 12)
    rows = candidates(sessions, cid)
    assert len(rows) == 12
    assert {r.status for r in rows} == {"ok"}
    assert all(FAMILY.validate(FAMILY.params_from_dict(r.params)) is None for r in rows)
