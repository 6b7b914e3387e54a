"""The acceptance rule, a pure function of plain numbers: no session, no rows
(docs/ARCHITECTURE.md#the-campaign-driver-and-its-two-deliveries).

A candidate is accepted only if it beats the incumbent by more than the threshold, with
confidence: against interleaved runs of the incumbent (measured in the same process, A/B) every
candidate run must be faster than every incumbent run; against the incumbent's recorded time
alone the figure is taken as it is. Otherwise the campaign reverts to the incumbent. The first
correct kernel becomes the incumbent; a failed candidate is never accepted.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Decision:
    """What the engine made of a result, and why (stored with the candidate and its event)."""

    accepted: bool
    #: the share of the incumbent's time saved, in % (None: nothing to compare)
    improvement_pct: float | None
    reason: str

    def as_dict(self) -> dict[str, Any]:
        """The decision as the candidate's ``decision`` column and the result event hold it."""
        return {"accepted": self.accepted, "improvement_pct": self.improvement_pct,
                "reason": self.reason}


def accept(candidate_us: float | None, candidate_runs_us: Sequence[float] = (), *,
           status: str, failure: str | None = None, first: bool, threshold_pct: float,
           incumbent_runs_us: Sequence[float] = (),
           incumbent_us: float | None = None, incumbent: str | None = None) -> Decision:
    """Decide on one result.

    ``candidate_us`` is the candidate's time (None when it has none), ``candidate_runs_us`` its
    runs; ``status`` its outcome and ``failure`` what went wrong (the reason of a failed one).
    ``first``: no incumbent yet. The incumbent is its ``incumbent_runs_us`` interleaved with the
    candidate's (their median is its time) or, without them, its recorded ``incumbent_us``;
    ``incumbent`` names it in the reason (``incumbent #12``; None: "the incumbent").
    An improvement exactly at the threshold, or runs that touch the incumbent's, revert.
    """
    if status != "ok" or candidate_us is None:
        return Decision(False, None, f"{status}: {failure or status}"[:500])
    if first:
        return Decision(True, None, "first correct kernel: the incumbent")
    runs = [float(r) for r in candidate_runs_us]
    inc_runs = [float(r) for r in incumbent_runs_us]
    if inc_runs:
        inc_us = statistics.median(inc_runs)
        confident = bool(runs) and max(runs) < min(inc_runs)
        basis = "interleaved A/B in one process"
    else:
        inc_us = float(incumbent_us or math.inf)
        confident = True
        basis = "against the incumbent's recorded time"
    # improvement_pct (and the threshold) is the share of the incumbent's time saved; the reason
    # also says the speed-up, which is what a kernel engineer reads (81 % less time is 5.3x)
    improvement = 100.0 * (inc_us - candidate_us) / inc_us
    whose = f"the speed of {incumbent}" if incumbent else "the incumbent's speed"
    change = (f"{inc_us / candidate_us:.3f}x {whose} (time {-improvement:+.2f}%, {basis})"
              if math.isfinite(inc_us) else f"no incumbent time ({basis})")
    if improvement > threshold_pct and confident:
        return Decision(True, round(improvement, 3),
                        f"{change}, above the {threshold_pct:g}% threshold")
    if improvement > threshold_pct:
        why = f"{change}, but the runs overlap the incumbent's: not confident; revert"
    else:
        why = f"{change}, below the {threshold_pct:g}% threshold; revert"
    return Decision(False, round(improvement, 3), why)
