"""Database work on a candidate that the agent and the workers both do (so that the service's
workers, which never import the agent, write a candidate exactly as embedded mode does)."""

from __future__ import annotations

from typing import Any, Protocol

from sqlalchemy.orm import Session

from core.models import Candidate
from core.statuses import CANDIDATE_IN_FLIGHT
from kernels import get_family


class CompileOutcome(Protocol):
    """What :func:`compile_columns` reads of a compile's result."""

    log: str

    def summary(self, max_smem_limit: int) -> dict[str, Any]:
        """The ``compile`` block of the feedback record."""
        ...


def mark_status(session: Session, candidate_id: str, status: str) -> Candidate | None:
    """Move an in-flight candidate along (compiling, measuring); counts delivery attempts."""
    cand = session.get(Candidate, candidate_id)
    if cand is None or cand.status not in CANDIDATE_IN_FLIGHT:
        return None
    cand.status = status
    if status == "measuring":
        cand.attempts += 1
    return cand


def compile_columns(kernel: str, arch: str, result: CompileOutcome) -> dict[str, Any]:
    """What a compile result writes to its candidate: the feedback record's ``compile`` block
    and the tail of the log."""
    return {"compile": result.summary(get_family(kernel).max_smem_limit(arch)),
            "compile_log": result.log[-20000:] if result.log else None}
