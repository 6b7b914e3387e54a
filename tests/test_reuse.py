"""Never measure twice: an evaluation the team has made is served from its history.

Embedded campaigns on the shipped H200 replay, through the real driver and the real engine:
the second campaign of the same spec costs no GPU time, decides as the first did, and each of
its served candidates links to the measurement it came from; another tolerance, ``reuse``
off, or another team's history measures afresh.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from replay_support import campaign_of, candidates, create, events, new_database, run

from core.models import Team

SERVED = ("ok", "wrong")


def _two_runs(tmp_path: Path, first: dict[str, Any], second: dict[str, Any]
              ) -> tuple[Any, list[Any], list[Any], str]:
    _url, sessions = new_database(tmp_path)
    a = create(sessions, **first)
    run(sessions, a)
    b = create(sessions, **second)
    run(sessions, b)
    return sessions, candidates(sessions, a), candidates(sessions, b), b


def test_the_same_campaign_again_is_served_from_history_and_decides_the_same(
        tmp_path: Path) -> None:
    spec = {"policy": "expert", "budget_iterations": 25, "seed": 1}
    sessions, first, again, cid = _two_runs(tmp_path, spec, spec)
    assert len(again) == len(first) == 25
    # the same points, the same outcomes, the same decisions and reasons, seed for seed
    assert [(c.params_key, c.status, c.accepted, (c.decision or {}).get("reason"))
            for c in again] == [(c.params_key, c.status, c.accepted,
                                 (c.decision or {}).get("reason")) for c in first]
    measured = [(o, c) for o, c in zip(first, again, strict=True) if o.status in SERVED]
    assert measured
    for original, served in measured:
        assert served.served_from == original.id
        assert served.evaluation_key == original.evaluation_key is not None
        assert served.gpu_seconds == 0.0
        assert served.perf == original.perf
    campaign = campaign_of(sessions, cid)
    assert campaign.gpu_seconds == 0.0
    assert campaign_of(sessions, first[0].campaign_id).gpu_seconds > 1.0
    results = [e.payload for e in events(sessions, cid) if e.kind == "result"]
    assert {r["served_from"] for r in results if r["status"] in SERVED} == \
        {o.id for o, _ in measured}


def test_fresh_measurements_and_another_tolerance_are_measured_again(tmp_path: Path) -> None:
    spec = {"policy": "random", "budget_iterations": 12, "seed": 4}
    _s, _first, fresh, _ = _two_runs(tmp_path, spec, {**spec, "reuse": False})
    assert not any(c.served_from for c in fresh)
    assert sum(c.gpu_seconds for c in fresh) > 0.5
    (tmp_path / "tol").mkdir()
    _s, _first, other, _ = _two_runs(tmp_path / "tol", spec, {**spec, "tolerance": 5e-5})
    assert not any(c.served_from for c in other)


def test_another_teams_history_is_never_read(tmp_path: Path) -> None:
    _url, sessions = new_database(tmp_path)
    with sessions.begin() as s:
        s.add_all([Team(id="a" * 32, name="team a"), Team(id="b" * 32, name="team b")])
    spec = {"policy": "expert", "budget_iterations": 10, "seed": 2}
    ours = create(sessions, team_id="a" * 32, **spec)
    run(sessions, ours)
    theirs = create(sessions, team_id="b" * 32, **spec)
    run(sessions, theirs)
    assert not any(c.served_from for c in candidates(sessions, theirs))
    assert campaign_of(sessions, theirs).gpu_seconds > 0.5
    local = create(sessions, **spec)  # embedded use without a team: its own history
    run(sessions, local)
    assert not any(c.served_from for c in candidates(sessions, local))
    again = create(sessions, team_id="a" * 32, **spec)
    run(sessions, again)
    served = {c.served_from for c in candidates(sessions, again) if c.served_from}
    assert served
    assert served <= {c.id for c in candidates(sessions, ours)}
