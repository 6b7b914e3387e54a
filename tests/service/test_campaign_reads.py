"""``GET /campaigns/{id}`` answers from a cache keyed by the campaign row's version: every read
must still show the campaign as the database has it, whoever changed it."""

from __future__ import annotations

import json
import time
from typing import Any

from sqlalchemy import func, select, update

from agent.engine.lifecycle import SETTLE_AFTER
from api.views import campaign_read
from core.db import session_scope
from core.models import Campaign, Candidate
from core.statuses import CANDIDATE_IN_FLIGHT
from service.service_stack import Stack, TeamKey, wait_finished

SHAPE = {"m": 4096, "n": 4096, "k": 4096}


def _from_db(stack: Stack, campaign_id: str) -> dict[str, Any]:
    """The read built from the database in this process (no cache)."""
    with session_scope(stack.db_url) as s:
        campaign = s.get(Campaign, campaign_id)
        assert campaign is not None
        return dict(json.loads(campaign_read(s, campaign).model_dump_json()))


def _wait_none_in_flight(stack: Stack, campaign_id: str, timeout_s: float = 60.0) -> None:
    """Until no candidate of the campaign is in flight (pending, compiled, running)."""
    deadline = time.monotonic() + timeout_s
    while True:
        with session_scope(stack.db_url) as s:
            left = s.scalar(select(func.count()).select_from(Candidate).where(
                Candidate.campaign_id == campaign_id,
                Candidate.status.in_(CANDIDATE_IN_FLIGHT)))
        if not left:
            return
        assert time.monotonic() < deadline, f"{left} candidate(s) still in flight"
        time.sleep(0.2)


def test_reads_follow_every_change_of_the_campaign(stack: Stack, team_a: TeamKey) -> None:
    with stack.client(team_a.key) as client:
        cid = client.post("/campaigns", json={"shape": SHAPE, "budget": {"iterations": 30},
                                              "parallel": 2}).json()["id"]
        seen = []
        while True:  # polled while the agent and the workers update it
            read = client.get(f"/campaigns/{cid}")
            assert read.status_code == 200
            assert read.headers["content-type"] == "application/json"
            seen.append(read.json())
            if seen[-1]["status"] in ("done", "failed"):
                break
        evaluations = [r["evaluations"] for r in seen]
        assert evaluations == sorted(evaluations)
        assert seen[-1]["evaluations"] == 30
        assert seen[-1]["budget"]["settle_after"] == SETTLE_AFTER  # the default, read back
        assert seen[-1] == _from_db(stack, cid)
        assert seen[-1]["best"] is not None
        for _ in range(3):  # the same version again: the same answer
            assert client.get(f"/campaigns/{cid}").json() == seen[-1]

        # a change made behind the API's back (an operator's SQL) is read at once
        with session_scope(stack.db_url) as s:
            s.execute(update(Campaign).where(Campaign.id == cid)
                      .values(status_reason="edited by hand"))
        after = client.get(f"/campaigns/{cid}").json()
        assert after["status_reason"] == "edited by hand"
        assert after == _from_db(stack, cid)


def test_a_cancel_is_read_at_once(stack: Stack, team_a: TeamKey, team_b: TeamKey) -> None:
    with stack.client(team_a.key) as client:
        cid = client.post("/campaigns", json={"shape": SHAPE, "budget": {"iterations": 500}}
                          ).json()["id"]
        assert client.get(f"/campaigns/{cid}").json()["status"] in ("queued", "running")
        assert client.post(f"/campaigns/{cid}/cancel").json()["status"] == "cancelled"
        assert client.get(f"/campaigns/{cid}").json()["status"] == "cancelled"
        wait_finished(client, cid, stack=stack)
        # a candidate in flight at the cancel still finishes and is recorded as it comes
        # (agent/service.py, plan): once none is left, the read is the database's
        _wait_none_in_flight(stack, cid)
        assert client.get(f"/campaigns/{cid}").json() == _from_db(stack, cid)
    with stack.client(team_b.key) as other:  # cached for team A, still a 404 for team B
        missing = other.get(f"/campaigns/{cid}")
        assert missing.status_code == 404
        assert missing.json()["detail"] == f"no campaign {cid!r}"
