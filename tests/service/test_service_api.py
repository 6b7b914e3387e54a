"""The API's contract: authentication, team isolation, bounded input; the CLI clients."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from service.service_stack import Stack, TeamKey, wait_finished

SHAPE = {"m": 4096, "n": 4096, "k": 4096}


@pytest.fixture(scope="module")
def campaign_of_a(stack: Stack, team_a: TeamKey) -> str:
    """A finished campaign of team A."""
    with stack.client(team_a.key) as client:
        cid = client.post("/campaigns", json={"shape": SHAPE, "budget": {"iterations": 4}}
                          ).json()["id"]
        wait_finished(client, cid, stack=stack)
    return str(cid)


def campaign_requests(cid: str) -> list[tuple[str, str, dict[str, Any] | None]]:
    return [
        ("GET", f"/campaigns/{cid}", None),
        ("GET", f"/campaigns/{cid}/candidates", None),
        ("GET", f"/campaigns/{cid}/candidates/whatever", None),
        ("GET", f"/campaigns/{cid}/best", None),
        ("GET", f"/campaigns/{cid}/events", None),
        ("POST", f"/campaigns/{cid}/actions", {"actions": ["apply_unroll(2)"]}),
        ("POST", f"/campaigns/{cid}/cancel", None),
    ]


def test_another_teams_campaign_is_a_404_everywhere(stack: Stack, team_a: TeamKey,
                                                     team_b: TeamKey, campaign_of_a: str
                                                     ) -> None:
    with stack.client(team_b.key) as other:
        for method, path, body in campaign_requests(campaign_of_a):
            response = other.request(method, path, json=body)
            assert response.status_code == 404, (method, path, response.text)
        assert campaign_of_a not in [c["id"] for c in other.get("/campaigns").json()]
        assert all(e["campaign_id"] != campaign_of_a for e in other.get("/history").json())
    with stack.client(team_a.key) as own:
        assert own.get(f"/campaigns/{campaign_of_a}").json()["status"] == "done"
        first = own.get(f"/campaigns/{campaign_of_a}/candidates").json()["items"][0]["id"]
    with stack.client(team_b.key) as other:
        assert other.get(f"/campaigns/{campaign_of_a}/candidates/{first}").status_code == 404


def test_cancelling_a_finished_campaign_is_a_409_naming_its_end(stack: Stack, team_a: TeamKey,
                                                                campaign_of_a: str) -> None:
    """A done campaign answered 200 with its unchanged body, as if it had been cancelled; a
    cancelled one is still answered as it is (a retried cancel)."""
    with stack.client(team_a.key) as client:
        before = client.get(f"/campaigns/{campaign_of_a}").json()
        refused = client.post(f"/campaigns/{campaign_of_a}/cancel")
        assert refused.status_code == 409, refused.text
        assert refused.json()["detail"] == (
            "campaign is done (iteration budget of 4 spent): it has nothing left to cancel")
        assert client.get(f"/campaigns/{campaign_of_a}").json() == before
        cid = client.post("/campaigns", json={"shape": SHAPE, "budget": {"iterations": 500}}
                          ).json()["id"]
        first = client.post(f"/campaigns/{cid}/cancel")
        again = client.post(f"/campaigns/{cid}/cancel")
        assert (first.status_code, again.status_code) == (200, 200), (first.text, again.text)
        assert again.json()["status"] == "cancelled"
        assert again.json()["status_reason"] == "cancelled by a user"


@pytest.mark.parametrize("key", [None, "", "tf_00000000_not-a-real-key"])
def test_missing_or_wrong_key_is_a_401(stack: Stack, campaign_of_a: str, key: str | None
                                       ) -> None:
    with stack.client(key) as client:
        for method, path, body in [("GET", "/campaigns", None),
                                   ("POST", "/campaigns", {"shape": SHAPE}),
                                   ("GET", "/history", None),
                                   *campaign_requests(campaign_of_a)]:
            response = client.request(method, path, json=body)
            assert response.status_code == 401, (method, path, response.text)
            assert "TUNEFORGE_API_KEY" in response.json()["detail"]


def test_revoked_and_rotated_keys_are_refused(stack: Stack, make_team: Any) -> None:
    team = make_team("revoke")
    with stack.client(team.key) as client:
        assert client.get("/campaigns").status_code == 200
    prefix = team.key[:11]  # "tf_" and 8 hex digits
    done = stack.tuneforge("admin", "revoke-key", prefix)
    assert done.returncode == 0, done.stderr
    with stack.client(team.key) as client:
        refused = client.get("/campaigns")
    assert refused.status_code == 401
    assert "revoked" in refused.json()["detail"]

    team2 = make_team("rotate")
    rotated = stack.tuneforge("admin", "rotate-key", team2.name)
    assert rotated.returncode == 0, rotated.stderr
    new_key = rotated.stdout.strip()
    with stack.client(team2.key) as old, stack.client(new_key) as new:
        assert old.get("/campaigns").status_code == 401
        assert new.get("/campaigns").status_code == 200
    unknown = stack.tuneforge("admin", "revoke-key", "tf_ffffffff")
    assert unknown.returncode == 2
    assert "no key with prefix" in unknown.stderr


BAD_BODIES: list[tuple[dict[str, Any], list[str | int]]] = [
    ({"shape": {"m": 0, "n": 4096, "k": 4096}}, ["body", "shape"]),
    ({"shape": {"m": 4096, "n": 70000, "k": 4096}}, ["body", "shape"]),
    ({"shape": {"m": 4096, "n": 4096}}, ["body", "shape"]),
    ({"shape": {"m": 4096, "n": "4096", "k": 4096}}, ["body", "shape", "n"]),
    ({"shape": {"m": 65536, "n": 65536, "k": 65536}}, ["body", "shape"]),
    ({"shape": SHAPE, "tolerance": 0.5}, ["body", "tolerance"]),
    ({"shape": SHAPE, "tolerance": 0}, ["body", "tolerance"]),
    ({"shape": SHAPE, "budget": {"iterations": 0}}, ["body", "budget", "iterations"]),
    ({"shape": SHAPE, "budget": {"iterations": 100_001}}, ["body", "budget", "iterations"]),
    ({"shape": SHAPE, "budget": {"wall_seconds": -1}}, ["body", "budget", "wall_seconds"]),
    ({"shape": SHAPE, "policy": "genius"}, ["body", "policy"]),
    ({"shape": SHAPE, "policy": "llm"}, ["body", "policy"]),  # no LLM endpoint configured
    ({"shape": SHAPE, "profile": "heavy"}, ["body", "profile"]),
    ({"shape": SHAPE, "parallel": 0}, ["body", "parallel"]),
    ({"shape": SHAPE, "parallel": 1000}, ["body", "parallel"]),
    ({"shape": SHAPE, "kernel": "conv2d"}, ["body", "kernel"]),
    ({"shape": SHAPE, "allowed_actions": ["apply_magic"]}, ["body", "allowed_actions"]),
    ({"shape": SHAPE, "accept_threshold_pct": -1}, ["body", "accept_threshold_pct"]),
    ({"shape": SHAPE, "start_from": "worst"}, ["body", "start_from"]),
    ({"shape": SHAPE, "leaderboard": [-3.0]}, ["body", "leaderboard"]),
    ({"shape": SHAPE, "colour": "blue"}, ["body", "colour"]),
    ({}, ["body", "shape"]),
]


@pytest.mark.parametrize(("body", "loc"), BAD_BODIES,
                         ids=[".".join(map(str, loc[1:])) + f"-{i}"
                              for i, (_, loc) in enumerate(BAD_BODIES)])
def test_bad_bodies_get_a_422_naming_the_field(stack: Stack, team_a: TeamKey,
                                               body: dict[str, Any], loc: list[str | int]
                                               ) -> None:
    with stack.client(team_a.key) as client:
        response = client.post("/campaigns", json=body)
    assert response.status_code == 422, response.text
    locs = [d["loc"] for d in response.json()["detail"]]
    assert any(found[:len(loc)] == loc for found in locs), locs


def test_non_finite_tolerance_is_refused(stack: Stack, team_a: TeamKey) -> None:
    raw = '{"shape": {"m": 8, "n": 8, "k": 8}, "tolerance": NaN}'
    with stack.client(team_a.key) as client:
        response = client.post("/campaigns", content=raw,
                               headers={"Content-Type": "application/json"})
    assert response.status_code == 422


def test_cli_submit_watch_export(stack: Stack, team_a: TeamKey, tmp_path: Path) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"shape": SHAPE, "budget": {"iterations": 8}}))
    submitted = stack.tuneforge("submit", str(spec), key=team_a.key)
    assert submitted.returncode == 0, submitted.stderr
    cid = submitted.stdout.strip()
    watched = stack.tuneforge("watch", cid, key=team_a.key, timeout=90)
    assert watched.returncode == 0, watched.stderr
    assert f"campaign {cid[:8]} · done" in watched.stdout
    assert "8/8" in watched.stderr  # the progress bar reached the budget

    cu = tmp_path / "best.cu"
    exported = stack.tuneforge("export", cid, "--format", "cu", "--out", str(cu), key=team_a.key)
    assert exported.returncode == 0, exported.stderr
    first, _, source = cu.read_text().partition("\n")
    provenance = json.loads(first.removeprefix("// "))
    assert provenance["campaign_id"] == cid
    assert provenance["launch"]["block"]
    assert "__global__" in source
    history = stack.tuneforge("export", cid, "--format", "json", key=team_a.key)
    assert history.returncode == 0, history.stderr
    data = json.loads(history.stdout)
    assert data["campaign"]["id"] == cid
    assert len(data["candidates"]) == 8
    assert all(c["feedback"] is not None for c in data["candidates"])


def test_cli_errors_say_what_to_do(stack: Stack, tmp_path: Path) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"shape": {"m": 0, "n": 1, "k": 1}}))
    no_key = stack.tuneforge("submit", str(spec), key="")
    assert no_key.returncode == 2
    assert "set TUNEFORGE_API_KEY or pass --key" in no_key.stderr
    wrong = stack.tuneforge("submit", str(spec), key="tf_00000000_wrong")
    assert wrong.returncode == 3
    assert "TUNEFORGE_API_KEY" in wrong.stderr
    away = stack.tuneforge("submit", str(spec), "--url", "http://127.0.0.1:9", key="tf_x_y")
    assert away.returncode == 1
    assert "TUNEFORGE_API_URL" in away.stderr
