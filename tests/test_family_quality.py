"""bench/family_quality.py's table header says how long the sustained runs lasted, read from a
recorded H200 run (2026-12-02, commit 75efee1, call 4), not the length they were sized for."""

from __future__ import annotations

import json

from repo import ROOT

from bench.family_quality import sustained_lengths

RUN = ROOT / "runs/2026-12-02-75efee1/call4/quality.json"


def test_the_header_gives_the_lengths_the_runs_lasted() -> None:
    rows = json.loads(RUN.read_text())["rows"]
    assert sustained_lengths(rows, 200) == ("sustained runs sized for 200 ms: ours 118-195 ms, "
                                            "vendor 156-199 ms")
    assert sustained_lengths([], 300) == "sustained runs sized for 300 ms"
