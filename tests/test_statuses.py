"""The candidate-status vocabulary is defined once (``core.statuses``); what derives from it
covers every status."""

from __future__ import annotations

from typing import get_args

import pytest

from agent.exports import STATUS_COLOURS
from api.schemas import CandidateRead
from core import formats
from core.feedback import FeedbackRecord
from core.statuses import (
    CANDIDATE_FINAL,
    CANDIDATE_IN_FLIGHT,
    CANDIDATE_STATUSES,
    FAILURE_LINE_CHARS,
    MEANING,
    failure_line,
)


def test_every_status_is_in_flight_or_final_and_has_a_meaning() -> None:
    assert not set(CANDIDATE_IN_FLIGHT) & set(CANDIDATE_FINAL)
    assert list(MEANING) == list(CANDIDATE_STATUSES)
    assert all(MEANING.values())


def test_every_final_status_has_a_colour_in_the_vocabularys_order() -> None:
    assert list(STATUS_COLOURS) == list(CANDIDATE_FINAL)
    assert len(set(STATUS_COLOURS.values())) == len(STATUS_COLOURS)  # told apart on a plot


def test_every_final_status_has_a_t4_invalidity() -> None:
    assert set(formats.T4_INVALIDITY) == set(CANDIDATE_FINAL)


def test_the_api_and_the_feedback_record_take_exactly_the_vocabulary() -> None:
    api_status = CandidateRead.model_fields["status"].annotation
    assert get_args(api_status) == CANDIDATE_STATUSES
    record = FeedbackRecord.model_json_schema()["properties"]["status"]
    assert record["enum"] == list(CANDIDATE_FINAL)


@pytest.mark.parametrize(("status", "error", "line"), [
    # a traceback: what died and the exception, not the frames
    ("crashed", 'evaluation process died (exit -11): Traceback (most recent call last):\n'
                '  File "/w/gpu_child.py", line 3, in run\n    launch()\n'
                "pycuda._driver.LogicError: cuLaunchKernel failed: an illegal memory access",
     "evaluation process died (exit -11): LogicError: cuLaunchKernel failed: an illegal "
     "memory access"),
    # an exception's repr, as the GPU worker records what it caught
    ("crashed", "GPU worker error: RuntimeError('the child exited with code 3')",
     "RuntimeError: the child exited with code 3"),
    # a compile log: its first error, not its warnings
    ("compile_error", 'k.cu(12): warning: unused variable\nk.cu(14): error: identifier "TILE" '
                      "is undefined\n1 error detected",
     'k.cu(14): error: identifier "TILE" is undefined'),
    ("timeout", "no answer within 5 s", "no answer within 5 s"),
    ("wrong", None, "ran, but failed the correctness check"),  # nothing recorded: the meaning
])
def test_a_failure_is_one_line_saying_why(status: str, error: str | None, line: str) -> None:
    assert failure_line(status, error) == line


def test_a_long_failure_line_is_cut() -> None:
    line = failure_line("crashed", "x" * 1000)
    assert len(line) == FAILURE_LINE_CHARS
    assert line.endswith("…")
