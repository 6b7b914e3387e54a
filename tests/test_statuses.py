"""The candidate-status vocabulary is defined once (``core.statuses``); what derives from it
covers every status."""

from __future__ import annotations

from typing import get_args

from agent.exports import STATUS_COLOURS
from api.schemas import CandidateRead
from core import formats
from core.feedback import FeedbackRecord
from core.statuses import CANDIDATE_FINAL, CANDIDATE_IN_FLIGHT, CANDIDATE_STATUSES, MEANING


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
