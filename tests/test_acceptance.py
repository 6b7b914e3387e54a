"""The acceptance rule as a pure function of the times (``agent.engine.acceptance.accept``)."""

from __future__ import annotations

import pytest

from agent.engine.acceptance import Decision, accept

THRESHOLD = 0.5


def _accept(candidate_us: float | None, runs: tuple[float, ...] = (), *, status: str = "ok",
            failure: str | None = None, first: bool = False, threshold_pct: float = THRESHOLD,
            incumbent_runs_us: tuple[float, ...] = (),
            incumbent_us: float | None = None, incumbent: str | None = None) -> Decision:
    return accept(candidate_us, runs, status=status, failure=failure, first=first,
                  threshold_pct=threshold_pct, incumbent_runs_us=incumbent_runs_us,
                  incumbent_us=incumbent_us, incumbent=incumbent)


def test_the_first_correct_kernel_becomes_the_incumbent() -> None:
    decision = _accept(500.0, (500.0,), first=True)
    assert decision == Decision(True, None, "first correct kernel: the incumbent")


@pytest.mark.parametrize(("status", "failure", "reason"), [
    ("wrong", "max scaled error 3e-2 above 1e-4", "wrong: max scaled error 3e-2 above 1e-4"),
    ("crashed", None, "crashed: crashed"),
    ("compile_error", "ptxas: too many resources", "compile_error: ptxas: too many resources"),
])
def test_a_failed_candidate_is_never_accepted_and_says_why(
        status: str, failure: str | None, reason: str) -> None:
    # even the first result, and even with a time that would win
    decision = _accept(1.0, (1.0,), status=status, failure=failure, first=True,
                       incumbent_us=100.0)
    assert decision == Decision(False, None, reason)


def test_a_result_without_a_time_is_a_failure_and_a_long_reason_is_cut() -> None:
    decision = _accept(None, status="ok", failure="x" * 600)
    assert not decision.accepted
    assert decision.improvement_pct is None
    assert decision.reason.startswith("ok: xxx")
    assert len(decision.reason) == 500


def test_against_the_recorded_time_above_the_threshold_accepts() -> None:
    decision = _accept(90.0, (89.0, 90.0, 91.0), incumbent_us=100.0)
    assert decision.accepted
    assert decision.improvement_pct == pytest.approx(10.0)
    assert decision.reason == ("1.111x the incumbent's speed (time -10.00%, against the "
                               "incumbent's recorded time), above the 0.5% threshold")


def test_the_reason_names_the_incumbent_it_compared_with() -> None:
    decision = _accept(90.0, (89.0, 90.0, 91.0), incumbent_us=100.0, incumbent="incumbent #7")
    assert decision.reason.startswith("1.111x the speed of incumbent #7 (time -10.00%, ")


def test_below_the_threshold_reverts() -> None:
    decision = _accept(99.8, (99.8,), incumbent_us=100.0)
    assert not decision.accepted
    assert decision.improvement_pct == pytest.approx(0.2)
    assert decision.reason.endswith("below the 0.5% threshold; revert")


@pytest.mark.parametrize("candidate_us", [99.5, 100.0, 101.0])
def test_a_tie_at_the_threshold_or_with_the_incumbent_or_slower_reverts(
        candidate_us: float) -> None:
    decision = _accept(candidate_us, (candidate_us,), incumbent_us=100.0)
    assert not decision.accepted
    assert decision.improvement_pct == pytest.approx(100.0 - candidate_us)
    assert "below the 0.5% threshold; revert" in decision.reason


def test_the_threshold_is_the_callers() -> None:
    assert _accept(90.0, (90.0,), incumbent_us=100.0, threshold_pct=10.0).reason.endswith(
        "below the 10% threshold; revert")
    assert _accept(89.0, (89.0,), incumbent_us=100.0, threshold_pct=10.0).accepted


def test_interleaved_runs_all_faster_accept_against_their_median() -> None:
    decision = _accept(95.0, (94.0, 95.0, 96.0), incumbent_runs_us=(99.0, 100.0, 130.0),
                       incumbent_us=500.0)  # the recorded time is not used
    assert decision.accepted
    assert decision.improvement_pct == pytest.approx(5.0)
    assert "interleaved A/B in one process" in decision.reason


def test_interleaved_runs_that_overlap_are_not_confident() -> None:
    decision = _accept(97.0, (96.0, 97.0, 99.5), incumbent_runs_us=(99.0, 100.0, 101.0))
    assert not decision.accepted
    assert decision.improvement_pct == pytest.approx(3.0)
    assert decision.reason.endswith("but the runs overlap the incumbent's: not confident; revert")


def test_interleaved_runs_that_touch_are_not_confident() -> None:
    # the candidate's slowest run equals the incumbent's fastest: a tie is no evidence
    decision = _accept(95.0, (94.0, 95.0, 99.0), incumbent_runs_us=(99.0, 100.0, 101.0))
    assert not decision.accepted
    assert "not confident" in decision.reason


def test_no_incumbent_time_reverts() -> None:
    decision = _accept(90.0, (90.0,), incumbent_us=None)
    assert not decision.accepted
    assert decision.reason.startswith("no incumbent time (against the incumbent's recorded time)")


def test_the_decision_is_stored_as_the_dict_the_engine_always_wrote() -> None:
    assert Decision(True, 1.5, "why").as_dict() == {"accepted": True, "improvement_pct": 1.5,
                                                    "reason": "why"}
