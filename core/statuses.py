"""The candidate statuses: where a candidate is in the loop, then its one final outcome.

The two ``Literal`` types below are the vocabulary; everything else derives from them: the
tuples the queries filter on, the API's and the feedback record's status types, the meanings,
and the colours of the plots and the dashboard (``agent.exports.STATUS_COLOURS``, served to the
dashboard by ``GET /campaigns/{id}/points``). ``tests/test_statuses.py`` checks that every
status has a meaning and every final status a colour.
"""

from __future__ import annotations

from typing import Literal, get_args

#: In flight, in the order a candidate passes them.
InFlightStatus = Literal["pending", "compiling", "compiled", "measuring"]
#: Final: a candidate's outcome (a failure is a status, never an exception).
FinalStatus = Literal["ok", "rejected", "compile_error", "compile_timeout", "wrong", "crashed",
                      "timeout", "launch_error", "not_measured"]
CandidateStatus = Literal[InFlightStatus, FinalStatus]

CANDIDATE_IN_FLIGHT: tuple[InFlightStatus, ...] = get_args(InFlightStatus)
CANDIDATE_FINAL: tuple[FinalStatus, ...] = get_args(FinalStatus)
CANDIDATE_STATUSES: tuple[CandidateStatus, ...] = (*CANDIDATE_IN_FLIGHT, *CANDIDATE_FINAL)

#: What each status means, one line each.
MEANING: dict[CandidateStatus, str] = {
    "pending": "proposed; waits for its compile",
    "compiling": "a compile worker holds it",
    "compiled": "compiled; waits for a GPU",
    "measuring": "a GPU worker holds it (each delivery counts one attempt)",
    "ok": "correct and timed",
    "rejected": "refused before nvcc by the family's rules, with the reason",
    "compile_error": "nvcc or ptxas failed",
    "compile_timeout": "nvcc ran past the compile timeout",
    "wrong": "ran, but failed the correctness check",
    "crashed": "the evaluation died (the child crashed, or the candidate killed its worker)",
    "timeout": "a launch ran past the evaluation timeout",
    "launch_error": "the launch itself failed",
    "not_measured": "no measurement exists for the point (a replay without it)",
}
