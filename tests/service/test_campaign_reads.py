"""``GET /campaigns/{id}`` answers from a cache keyed by the campaign row's version: every read
must still show the campaign as the database has it, whoever changed it."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import update

from api.routes.campaigns import campaign_read
from core.db import session_scope
from core.models import Campaign
from service.service_stack import Stack, TeamKey, wait_finished

SHAPE = {"m": 4096, "n": 4096, "k": 4096}


def _from_db(stack: Stack, campaign_id: str) -> dict[str, Any]:
    """The read built from the database in this process (no cache)."""
    with session_scope(stack.db_url) as s:
        campaign = s.get(Campaign, campaign_id)
        assert campaign is not None
        return dict(json.loads(campaign_read(s, campaign).model_dump_json()))


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
        last = wait_finished(client, cid, stack=stack)
        assert last == _from_db(stack, cid)
    with stack.client(team_b.key) as other:  # cached for team A, still a 404 for team B
        missing = other.get(f"/campaigns/{cid}")
        assert missing.status_code == 404
        assert missing.json()["detail"] == f"no campaign {cid!r}"
