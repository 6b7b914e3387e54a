"""GPU faults inside a real campaign and in a user's family: run on the lent GPU
(``pytest -m gpu``).

An embedded campaign (the engine, the expert policy, SQLite, the GPU child and its watchdog, all
real) in which two of the kernels the agent asked for are swapped, at compile time, for planted
ones: one writes to an illegal address (the CUDA context is lost), one never returns. The
campaign must record them ``crashed`` and ``timeout``, restart the evaluation child, and go on
to spend its whole budget with a correct best. The swap happens in the evaluator's ``compile``,
the way the compile tests put a fake ``nvcc`` on the PATH: everything after it is the real path.

The same faults written in a user's kernel, through a family defined only under ``tests/`` (the
``cheat`` family's fault modes): an illegal address is ``crashed``, a hang ``timeout`` (both
restart the child), a launch with too many threads or too much shared memory ``launch_error``
(the context survives: no restart); the honest kernel evaluated next is ``ok``.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from gpu_support import ILLEGAL, SPIN, save
from sqlalchemy import select

from agent.embedded import EmbeddedRunner
from agent.engine.lifecycle import CampaignSpec, create_campaign
from agent.policies import make_policy
from agent.spaces import FullSpace
from core.db import session_factory, upgrade_database
from core.evaluation import CompileResult, EvalOptions
from core.models import Campaign, Candidate
from core.settings import get_settings
from kernels.base import Dims
from kernels.gemm_bias_relu import FAMILY
from kernels.gemm_bias_relu.shape import Shape
from worker.compile import Compiler
from worker.evaluate import GpuEvaluator
from worker.gpu_runner import ChildUnavailable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from families.cheat import FAMILY as CHEAT  # noqa: E402
from families.cheat import CheatParams  # noqa: E402

pytestmark = pytest.mark.gpu

#: new valid points (counted from 1, the baseline first) whose kernels are swapped for planted ones
PLANT = {3: ("crashed", ILLEGAL), 6: ("timeout", SPIN)}
SHAPE = Shape(1024, 1024, 1024)
BUDGET = 14


class PlantingEvaluator(GpuEvaluator):
    """A GPU evaluator whose n-th compile of a new valid point returns a planted kernel instead
    (the n-th candidate the agent proposed; the incumbent's recompiles are not counted)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.valid_compiles = 0
        self.seen: set[str] = set()
        self.planted: dict[str, str] = {}  # params key -> expected status

    def compile(self, params: Any) -> Future[CompileResult]:
        key = json.dumps(params.to_dict(), sort_keys=True)
        if self.family.validate(params, self.compiler.arch) is not None or key in self.seen:
            return super().compile(params)  # the incumbent is compiled again (a cache hit)
        self.seen.add(key)
        self.valid_compiles += 1
        plant = PLANT.get(self.valid_compiles)
        if plant is None:
            return super().compile(params)
        status, source = plant
        self.planted[key] = status
        return self.compiler.submit(source, entry=self.family.name)


def test_illegal_address_and_spinning_kernels_inside_a_campaign(
        compiler: Compiler, tmp_path: Path) -> None:
    try:
        ev = PlantingEvaluator(FAMILY, compiler, options=EvalOptions(timeout_s=5.0))
    except ChildUnavailable as exc:
        pytest.skip(f"no GPU evaluation here: {exc}")
    settings = get_settings()
    url = f"sqlite:///{tmp_path / 'faults.db'}"
    upgrade_database(url)
    sessions = session_factory(url)
    try:
        restarts = ev.child.restarts
        with sessions.begin() as s:
            campaign = create_campaign(
                s, CampaignSpec(dims=SHAPE.as_dict(), budget_iterations=BUDGET, parallel=1),
                backend="gpu", device=ev.device, vendor_us=ev.vendor_us(SHAPE))
            cid = campaign.id
        runner = EmbeddedRunner(sessions, [ev], policy=make_policy("expert", settings),
                                space=FullSpace(FAMILY, settings.arch), settings=settings)
        runner.run(cid)
        restarts_after = ev.child.restarts
    finally:
        ev.close()
    assert not runner.errors, runner.errors
    with sessions() as s:
        camp = s.get(Campaign, cid)
        assert camp is not None
        rows = s.scalars(select(Candidate).where(Candidate.campaign_id == cid)
                         .order_by(Candidate.iteration)).all()
        table: list[dict[str, Any]] = [
                 {"iteration": r.iteration, "action": r.action, "status": r.status,
                  "avg_us": r.avg_us, "error": (r.error or "")[:160],
                  "planted": ev.planted.get(json.dumps(
                      FAMILY.params_from_dict(r.params).to_dict(), sort_keys=True))}
                 for r in rows]
        best = s.get(Candidate, camp.best_id) if camp.best_id else None
        summary: dict[str, Any] = {"status": camp.status, "reason": camp.status_reason,
                   "evaluations": camp.evaluations, "restarts": restarts_after - restarts,
                   "best_us": camp.best_us, "best_status": best.status if best else None,
                   "candidates": table}
    save("campaign_faults", summary)

    assert len(ev.planted) == len(PLANT), ev.planted
    planted_rows = [r for r in table if r["planted"]]
    assert sorted(r["status"] for r in planted_rows) == ["crashed", "timeout"], planted_rows
    assert all(r["status"] == r["planted"] for r in planted_rows), planted_rows
    assert summary["restarts"] >= 2, summary
    assert camp.status == "done", summary
    assert camp.evaluations == BUDGET, summary
    assert all(r["status"] not in ("pending", "compiled", "running") for r in table), table
    assert best is not None
    assert best.status == "ok", summary
    assert [r["iteration"] for r in table] == list(range(len(table)))
    # the campaign went on after each fault: evaluations that passed come after both
    last_fault = max(r["iteration"] for r in planted_rows)
    assert any(r["status"] == "ok" for r in table if r["iteration"] > last_fault), table


# ---- the same faults in a user's kernel: the test-only family route ---------------------------
@pytest.fixture(scope="module")
def user_family_evaluator(compiler: Compiler) -> Iterator[GpuEvaluator]:
    """A GPU evaluator of the ``cheat`` test family (a family no module outside its package
    names, as a team's own would be)."""
    try:
        ev = GpuEvaluator(CHEAT, compiler, options=EvalOptions(timeout_s=5.0))
    except ChildUnavailable as exc:
        pytest.skip(f"no GPU evaluation here: {exc}")
    yield ev
    ev.close()


@pytest.mark.parametrize(("mode", "status", "restarted", "error"), [
    ("illegal_address", "crashed", True, "illegal memory access"),
    ("hang", "timeout", True, "no answer within 5 s"),
    ("too_many_threads", "launch_error", False, "cuFuncSetBlockShape failed"),
    ("too_much_smem", "launch_error", False, "cuFuncSetAttribute failed"),
])
def test_a_faulty_user_kernel_is_contained_and_the_next_one_evaluates(
        user_family_evaluator: GpuEvaluator, mode: str, status: str, restarted: bool,
        error: str) -> None:
    ev = user_family_evaluator
    shape = Dims(n=1 << 20)
    bad_params = CheatParams(mode)
    bad = ev.compile(bad_params).result()
    assert bad.status == "ok", bad.error
    restarts = ev.child.restarts
    t0 = time.perf_counter()
    m = ev.measure(bad_params, bad, shape=shape, iteration=0, seed=1)
    waited = time.perf_counter() - t0
    honest = CheatParams("honest")
    good = ev.compile(honest).result()
    m2 = ev.measure(honest, good, shape=shape, iteration=1, seed=1)
    save(f"user_fault_{mode}", {"fault": m.__dict__, "waited_s": waited,
                                "restarts": ev.child.restarts - restarts, "next": m2.__dict__})
    assert m.status == status, (m.status, m.error)
    assert error in (m.error or ""), m.error
    assert m.perf is None
    assert waited < 30
    assert m2.status == "ok", m2.error
    assert ((m2.correctness or {}).get("recheck") or {}).get("passed") is True, m2.correctness
    # a lost context (or a killed hang) costs a new child; a refused launch does not
    assert ev.child.restarts == restarts + (1 if restarted else 0)
