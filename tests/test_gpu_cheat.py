"""A user kernel cannot game the timer: run on the lent GPU
(``pytest -m gpu tests/test_gpu_cheat.py``).

The ``cheat`` test family (``tests/families/cheat``) plants kernels that pass the correctness
check run before the timing and then stop working: computing on the first launch only, writing
half the output on later launches at a length already seen, skipping all work for an input
pointer seen last time. Each must come back ``wrong`` by the recheck after the timed launches
("after timing: ..."), its timing unused; the honest kernel of the same family must pass it. The
same holds after the back-to-back launches of a sustained run. A kernel that reads its output to
tell whether it worked before is timed working: the outputs are poisoned before every timed
launch.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from core.evaluation import EvalOptions, Measurement
from kernels.base import Dims
from worker.compile import Compiler
from worker.evaluate import GpuEvaluator
from worker.gpu_runner import ChildUnavailable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from families.cheat import FAMILY, SKIP_IF_WRITTEN, CheatParams  # noqa: E402
from gpu_support import save  # noqa: E402

pytestmark = pytest.mark.gpu

SHAPE = Dims(n=1 << 24)


@pytest.fixture(scope="module")
def evaluator(compiler: Compiler) -> Iterator[GpuEvaluator]:
    try:
        ev = GpuEvaluator(FAMILY, compiler, options=EvalOptions(timeout_s=30.0))
    except ChildUnavailable as exc:
        pytest.skip(f"no GPU evaluation here: {exc}")
    yield ev
    ev.close()


def measure(ev: GpuEvaluator, mode: str, *, iteration: int, options: EvalOptions | None = None
            ) -> Measurement:
    params = CheatParams(mode)
    compiled = ev.compile(params).result()
    assert compiled.status == "ok", (mode, compiled.error)
    return ev.measure(params, compiled, shape=SHAPE, iteration=iteration, seed=21,
                      options=options)


def summary(m: Measurement) -> dict[str, Any]:
    c = m.correctness or {}
    return {"status": m.status, "error": m.error, "avg_us": (m.perf or {}).get("avg_us"),
            "cases": [(x["shape"], x["dist"], x["seed"], x["passed"]) for x in c.get("cases", [])],
            "recheck": c.get("recheck")}


def test_the_honest_kernel_passes_the_recheck_after_timing(evaluator: GpuEvaluator) -> None:
    m = measure(evaluator, "honest", iteration=0)
    save("cheat_honest", summary(m))
    assert m.status == "ok", m.error
    recheck = (m.correctness or {})["recheck"]
    assert recheck["passed"], recheck
    assert recheck["after"] == "timing"
    assert recheck["unwritten"] == 0
    assert recheck["launches_before"] >= 3
    assert recheck["seed"] not in {c["seed"] for c in (m.correctness or {})["cases"]}
    assert recheck["timed_us"] == pytest.approx(statistics.median((m.perf or {})["runs_us"]),
                                                rel=1e-3)


@pytest.mark.parametrize(("mode", "edge_shapes", "unwritten"), [
    # one check before the timing: the first launch is that check
    ("first_launch", (), SHAPE.n),
    # the family's edge shapes too: each is a new length, so the check writes it all
    ("partial", None, SHAPE.n - SHAPE.n // 2),
    # the edge shapes have buffers of their own: each check sees a new pointer
    ("pointer_cache", None, SHAPE.n),
])
def test_a_kernel_that_stops_working_after_the_check_is_wrong_after_timing(
        evaluator: GpuEvaluator, mode: str, edge_shapes: tuple[Dims, ...] | None,
        unwritten: int) -> None:
    honest = measure(evaluator, "honest", iteration=1)
    assert honest.status == "ok", honest.error
    opts = replace(evaluator.options, edge_shapes=edge_shapes)
    m = measure(evaluator, mode, iteration=2, options=opts)
    save(f"cheat_{mode}", {"cheat": summary(m), "honest_avg_us": (honest.perf or {})["avg_us"]})
    correctness = m.correctness or {}
    cases = correctness["cases"]
    # it passed every check before the timing: only the recheck can catch it
    assert cases, m
    assert all(c["passed"] for c in cases), cases
    if edge_shapes is None:
        assert len(cases) == 1 + len(FAMILY.edge_shapes), cases
    recheck = correctness["recheck"]
    assert m.status == "wrong", summary(m)
    assert m.perf is None  # its timing is not used
    assert not correctness["passed"]
    assert not recheck["passed"]
    assert recheck["after"] == "timing"
    assert recheck["unwritten"] == unwritten, recheck
    assert (m.error or "").startswith("after timing: 16777216 normal:"), m.error
    assert "never written" in (m.error or "")
    # and the timer would have credited it: faster than the honest kernel
    assert recheck["timed_us"] < (honest.perf or {})["avg_us"], (recheck, honest.perf)


@pytest.mark.parametrize("mode", ["first_launch", "pointer_cache"])
def test_a_sustained_run_ends_with_the_same_recheck(evaluator: GpuEvaluator, mode: str) -> None:
    honest = CheatParams("honest")
    good = evaluator.sustained(honest, evaluator.compile(honest).result(), shape=SHAPE,
                               seed=3, min_ms=50.0)
    cheat = CheatParams(mode)
    bad = evaluator.sustained(cheat, evaluator.compile(cheat).result(), shape=SHAPE, seed=3,
                              min_ms=50.0)
    save(f"cheat_sustained_{mode}", {"honest": good, "cheat": bad})
    assert "error" not in good, good
    assert good["recheck"]["passed"], good
    assert good["recheck"]["after"] == "sustained launches"
    assert good["recheck"]["launches_before"] == good["launches"]
    assert good["graph"]["recheck"]["passed"], good  # the graph timed, replayed on the case
    assert "us_per_launch" not in bad
    assert bad["error"].startswith("wrong after sustained launches: 16777216 normal:"), bad
    assert not bad["recheck"]["passed"]
    assert bad["recheck"]["unwritten"] == SHAPE.n


def test_a_kernel_that_skips_when_its_output_holds_numbers_is_timed_working(
        evaluator: GpuEvaluator) -> None:
    """It has no device state to catch: its output tells it the work was done. The benchmark
    poisons the outputs before every timed launch (outside the events), so it does the work on
    each and is timed like the honest kernel, and passes."""
    honest = measure(evaluator, "honest", iteration=5)
    m = measure(evaluator, SKIP_IF_WRITTEN, iteration=6)
    save("cheat_skip_if_written", {"cheat": summary(m), "honest": summary(honest)})
    assert honest.status == "ok", honest.error
    assert m.status == "ok", m.error
    assert ((m.correctness or {}).get("recheck") or {}).get("passed") is True
    # without the poison it timed at a read of one element per block
    assert (m.perf or {})["avg_us"] > 0.8 * (honest.perf or {})["avg_us"], (m.perf, honest.perf)
