"""The candidate statuses: where a candidate is in the loop, then its one final outcome.

The two ``Literal`` types below are the vocabulary; everything else derives from them: the
tuples the queries filter on, the API's and the feedback record's status types, the meanings,
and the colours of the plots and the dashboard (``agent.exports.STATUS_COLOURS``, served to the
dashboard by ``GET /campaigns/{id}/points``). ``tests/test_statuses.py`` checks that every
status has a meaning and every final status a colour.
"""

from __future__ import annotations

import re
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


#: The longest one-line reason :func:`failure_line` gives.
FAILURE_LINE_CHARS = 160
_TRACEBACK = "Traceback (most recent call last):"
#: ``RuntimeError('message')``: an exception's repr, as ``f"{exc!r}"`` records it
_EXC_REPR = re.compile(r"^(?P<name>[A-Za-z_][\w.]*)\((?P<q>['\"])(?P<msg>.*)(?P=q)\)$")
#: ``pycuda._driver.LogicError: message``: an exception as a traceback's last line says it
_EXC_LINE = re.compile(r"^(?:[A-Za-z_]\w*\.)+(?P<name>[A-Za-z_]\w*(?:Error|Exception)): ")


def failure_line(status: str, error: str | None) -> str:
    """One line saying why a failed candidate failed, from its recorded error: the line that
    says what went wrong (a traceback's exception, not its frames; a compile log's first error),
    an exception's repr as its class and message, at most :data:`FAILURE_LINE_CHARS`
    characters; the status's meaning when nothing was recorded. The whole error stays with the
    candidate."""
    text = (error or "").strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return MEANING.get(status, status)  # type: ignore[call-overload]
    head = lines[0]
    if any(_TRACEBACK in line for line in lines):
        prefix = head.split(_TRACEBACK)[0].strip().rstrip(":").strip()
        last = next((line for line in reversed(lines)
                     if not line.startswith(("File ", "^", "~", _TRACEBACK))), lines[-1])
        last = _EXC_LINE.sub(lambda m: f"{m['name']}: ", last)
        head = f"{prefix}: {last}" if prefix else last
    elif status in ("compile_error", "compile_timeout"):
        head = next((line for line in lines if "error" in line.lower()), head)
    for known in ("GPU worker error: ", "the GPU worker has no evaluator: "):
        if head.startswith(known):
            head = head.removeprefix(known)
            break
    found = _EXC_REPR.match(head)
    if found:
        head = f"{found['name'].rsplit('.', 1)[-1]}: {found['msg']}"
    head = _EXC_LINE.sub(lambda m: f"{m['name']}: ", head)
    if len(head) > FAILURE_LINE_CHARS:
        head = head[:FAILURE_LINE_CHARS - 1].rstrip() + "…"
    return head
