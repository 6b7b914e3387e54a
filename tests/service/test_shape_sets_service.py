"""Shape sets through the service (API, agent, compile and replay GPU workers): one job over
several shapes, members in turn under one budget, transfer between shapes; the same set again
served from the team's history at no GPU cost; another team's history never read."""

from __future__ import annotations

from typing import Any

import httpx
from sqlalchemy import select

from core.db import session_scope
from core.models import Campaign, Candidate
from service.service_stack import Stack, TeamKey, wait_final

SHAPES = [{"shape": {"rows": 8192, "cols": 8192}, "weight": 2.0},
          {"shape": {"rows": 8192, "cols": 4096}},
          {"shape": {"rows": 16384, "cols": 1024}}]
#: one candidate in flight: the decision chain is then the same whatever the order in which
#: the two GPU workers finish, and a set submitted again is served whole from history
BODY = {"kernel": "softmax", "shapes": SHAPES, "budget": {"iterations": 45}, "parallel": 1}


def run_set(stack: Stack, client: httpx.Client, body: dict[str, Any]) -> dict[str, Any]:
    """Submit a set and wait for its end; its final table."""
    created = client.post("/campaigns", json=body)
    assert created.status_code == 201, created.text
    answer = created.json()
    assert answer["kind"] == "shape_set"
    assert len(answer["campaigns"]) == len(body["shapes"])
    last = wait_final(stack, client, f"/shape-sets/{answer['id']}")
    assert [row["campaign_id"] for row in last["shapes"]] == answer["campaigns"]
    return last


def test_a_shape_set_runs_its_members_in_turn_and_again_from_history(
        stack: Stack, team_a: TeamKey, team_b: TeamKey) -> None:
    with stack.client(team_a.key) as client:
        first = run_set(stack, client, BODY)
        assert first["status"] == "done", first
        assert [row["shape"] for row in first["shapes"]] == ["8192x8192", "8192x4096",
                                                             "16384x1024"]  # heaviest first
        assert first["evaluations"] <= 45
        assert all(row["best"] is not None and row["x_vendor"] for row in first["shapes"])
        assert first["gpu_seconds"] > 1.0
        assert first["served_from_history"] == 0
        ids = [row["campaign_id"] for row in first["shapes"]]
        with session_scope(stack.db_url) as s:
            members = [s.get(Campaign, cid) for cid in ids]
            for before, after in zip(members, members[1:], strict=False):
                assert before is not None
                assert after is not None
                assert before.finished_at is not None
                assert after.started_at is not None
                assert after.started_at >= before.finished_at  # in turn
            transferred = s.scalars(select(Candidate.reason).where(
                Candidate.campaign_id.in_(ids[1:]), Candidate.proposed_by == "transfer")).all()
        assert transferred, "no member started from what the set found at another shape"
        assert any("the best at 8192x8192" in (r or "") for r in transferred)
        # each member's read says it belongs to the set and what its share was
        member = client.get(f"/campaigns/{ids[1]}").json()
        assert member["evaluations"] == first["shapes"][1]["evaluations"]

        again = run_set(stack, client, BODY)
    assert again["status"] == "done"
    assert again["gpu_seconds"] == 0.0
    assert again["served_from_history"] >= again["evaluations"] - 6  # not_measured: free
    assert [(r["shape"], r["best"]["params"], r["best"]["avg_us"]) for r in again["shapes"]] \
        == [(r["shape"], r["best"]["params"], r["best"]["avg_us"]) for r in first["shapes"]]

    with stack.client(team_a.key) as client:
        # the library of the team holds each shape's best; a shape nobody measured gets the
        # nearest measured shape's best that is valid there
        lib = client.get("/library/softmax").json()
        assert {e["shape"] for e in lib["entries"]} >= {"8192x8192", "8192x4096", "16384x1024"}
        near = client.get("/library/softmax/pick", params={"shape": "8192x2048"}).json()
        assert (near["rule"], near["from_shape"]) == (2, "8192x4096")
        assert client.get("/library/softmax/pick", params={"shape": "0x1"}).status_code == 422
        assert client.get("/library/no_such_family").status_code == 404

    with stack.client(team_b.key) as client:
        empty = client.get("/library/softmax/pick", params={"shape": "8192x8192"}).json()
        assert (empty["rule"], empty["kind"]) == (3, "vendor")  # never team a's library
        theirs = run_set(stack, client, BODY)
        assert theirs["served_from_history"] == 0
        assert theirs["gpu_seconds"] > 1.0
        listed = client.get("/shape-sets").json()
        assert first["set_id"] not in {s["set_id"] for s in listed}
        assert client.get(f"/shape-sets/{first['set_id']}").status_code == 404


def test_bad_shape_sets_are_refused_naming_the_field(stack: Stack, team_a: TeamKey) -> None:
    with stack.client(team_a.key) as client:
        cases = [
            ({**BODY, "shape": {"rows": 8, "cols": 8}}, "either shape"),
            ({**BODY, "shapes": []}, "shapes"),
            ({**BODY, "shapes": [SHAPES[0], SHAPES[0]]}, "more than once"),
            ({**BODY, "budget": {"iterations": 5}}, "needs at least 12 evaluations"),
            ({**BODY, "shapes": [{"shape": {"rows": 0, "cols": 8}}]}, "shapes"),
            ({**BODY, "shapes": [{"shape": {"rows": 8, "cols": 8}, "weight": -1}]}, "weight"),
        ]
        before = client.get("/shape-sets").json()
        for body, words in cases:
            answer = client.post("/campaigns", json=body)
            assert answer.status_code == 422, (body, answer.text)
            assert words in answer.text, answer.text
        assert client.get("/shape-sets").json() == before  # nothing stored
