"""A team's stored family versions over their life, on the running service: a listing that
answers 200 whatever was stored before (a row stored before today's checks, written straight
into the database as old data is), per-team quotas on versions and stored bytes, and an owner's
retire and delete (a version that campaigns ran stays readable for their records)."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from core.db import session_scope
from core.models import Family, Team
from kernels.userspec import load_spec_dir
from service.service_stack import (
    Stack,
    TeamKey,
)

SPEC_DIR = Path(__file__).resolve().parents[1] / "data" / "families" / "vscale"


def spec(**changes: Any) -> dict[str, Any]:
    return {**load_spec_dir(SPEC_DIR), **changes}


def store_old_row(stack: Stack, team: TeamKey, *, name: str, version: int, key: str,
                  stored: Any) -> None:
    """A version as a row stored before the checks of today (no validation, no build)."""
    with session_scope(stack.db_url) as s:
        team_id = s.scalar(select(Team.id).where(Team.name == team.name))
        s.add(Family(team_id=team_id, name=name, version=version, spec_hash="0" * 64,
                     key=key, spec=stored, created_by="old"))


def versions_of(stack: Stack, team: TeamKey) -> int:
    with session_scope(stack.db_url) as s:
        team_id = s.scalar(select(Team.id).where(Team.name == team.name))
        return int(s.scalar(select(func.count()).select_from(Family)
                            .where(Family.team_id == team_id)) or 0)


def test_a_listing_answers_200_whatever_was_stored(stack: Stack, make_team: Any) -> None:
    """A description with a lone surrogate (201 before registration refused it) made
    GET /families and GET /families/{name} a 500 for the team, for good."""
    team = make_team("old-rows")
    with stack.client(team.key) as client:
        first = client.post("/families", json=spec())
        assert first.status_code == 201, first.text
    store_old_row(stack, team, name="vscale", version=2, key="vscale@0123456789ab",
                  stored=spec(description="desc \udfff"))
    store_old_row(stack, team, name="husk", version=1, key="husk@0123456789ab",
                  stored={"name": "husk"})
    store_old_row(stack, team, name="odd", version=1, key="odd@0123456789ab",
                  stored=["not", "an", "object", "\ud800"])
    with stack.client(team.key) as client:
        listed = client.get("/families")
        assert listed.status_code == 200, listed.text
        mine = {f["name"]: f for f in listed.json() if f["origin"] == "team"}
        assert set(mine) == {"vscale", "husk", "odd"}
        assert mine["vscale"]["version"] == 2
        assert "cannot be built" in mine["vscale"]["problem"]
        assert mine["vscale"]["description"] == "desc \\udfff"  # shown, not a 500
        assert "cannot be built" in mine["husk"]["problem"]
        assert mine["odd"]["problem"]
        assert "gemm_bias_relu" in [f["name"] for f in listed.json()]  # the others still there
        for name in ("vscale", "vscale@v2", "vscale@0123456789ab", "husk", "odd"):
            read = client.get(f"/families/{name}")
            assert read.status_code == 200, (name, read.text)
            assert read.json()["problem"]
        good = client.get("/families/vscale@v1")
        assert good.status_code == 200
        assert good.json()["problem"] is None
        assert [v["version"] for v in good.json()["all_versions"]] == [1, 2]
        refused = client.post("/campaigns", json={"kernel": "vscale@v2", "shape": {"n": 64},
                                                  "budget": {"iterations": 1}})
        assert refused.status_code == 422, refused.text
        assert refused.json()["detail"][0]["loc"] == ["body", "kernel"]
    for args in (("family", "list"), ("family", "show", "vscale"), ("family", "show", "odd"),
                 ("family", "show", "vscale@v1")):
        done = stack.tuneforge(*args, key=team.key)
        assert done.returncode == 0, (args, done.stderr)
        assert "Traceback" not in done.stderr
    shown = stack.tuneforge("family", "show", "vscale", key=team.key).stdout
    assert "cannot be built" in shown
    # the owner's way out: delete the bad version (no campaign ran it)
    done = stack.tuneforge("family", "delete", "vscale@v2", key=team.key)
    assert done.returncode == 0, done.stderr
    with stack.client(team.key) as client:
        mine = {f["name"]: f for f in client.get("/families").json() if f["origin"] == "team"}
        assert mine["vscale"]["version"] == 1
        assert mine["vscale"]["problem"] is None


@pytest.fixture(scope="module")
def quota_api(stack: Stack) -> Iterator[str]:
    """A second API process on the same database, with small quotas: 3 versions, 20 KB."""
    name = f"api-quota-{secrets.token_hex(3)}"
    url = stack.start_another_api(name, what="the quota API", extra_env={
        "TUNEFORGE_MAX_FAMILY_VERSIONS": "3", "TUNEFORGE_MAX_FAMILY_BYTES": "20000"})
    try:
        yield url
    finally:
        stack.stop(name)


def test_quotas_on_versions_and_stored_bytes(stack: Stack, make_team: Any,
                                             quota_api: str) -> None:
    team = make_team("quota")
    other = make_team("quota-other")
    with httpx.Client(base_url=f"{quota_api}/api/v1", headers={"X-API-Key": team.key},
                      timeout=30) as client:
        for n in range(3):
            done = client.post("/families", json=spec(description=f"v{n}"))
            assert done.status_code == 201, done.text
        again = client.post("/families", json=spec(description="v0"))  # stored: no new one
        assert again.status_code == 200, again.text
        over = client.post("/families", json=spec(description="one too many"))
        assert over.status_code == 403, over.text
        assert "TUNEFORGE_MAX_FAMILY_VERSIONS" in over.json()["detail"]
        assert versions_of(stack, team) == 3
        assert client.delete("/families/vscale@v3").status_code == 204
        padded = spec()
        padded["files"] = {**padded["files"], "kernel.cu": padded["files"]["kernel.cu"]
                           + "\n// " + "x" * 19000 + "\n"}
        big = client.post("/families", json=padded)
        assert big.status_code == 403, big.text
        assert "TUNEFORGE_MAX_FAMILY_BYTES" in big.json()["detail"]
        assert versions_of(stack, team) == 2
        sizes = [v["size_bytes"] for v in client.get("/families/vscale").json()["all_versions"]]
        assert all(1000 < size < 20000 for size in sizes), sizes
        assert client.post("/families", json=spec(description="fits")).status_code == 201
    with httpx.Client(base_url=f"{quota_api}/api/v1", headers={"X-API-Key": other.key},
                      timeout=30) as client:  # a quota is per team
        assert client.post("/families", json=spec()).status_code == 201


def test_retire_and_delete_keep_what_campaigns_ran(stack: Stack, make_team: Any) -> None:
    team = make_team("retire")
    tag = secrets.token_hex(2)
    with stack.client(team.key) as client:
        v1 = client.post("/families", json=spec(description=f"one {tag}")).json()
        v2 = client.post("/families", json=spec(description=f"two {tag}")).json()
        ran = client.post("/campaigns", json={"kernel": "vscale@v1", "shape": {"n": 4096},
                                              "budget": {"iterations": 1}})
        assert ran.status_code == 201, ran.text
        campaign = ran.json()["id"]
        in_use = client.delete("/families/vscale@v1")
        assert in_use.status_code == 409, in_use.text
        assert "retire" in in_use.json()["detail"]
        assert client.get("/families/vscale@v1").status_code == 200
        plain = client.delete("/families/vscale")  # which version must be said
        assert plain.status_code == 422, plain.text
        retired = client.post("/families/vscale@v1/retire")
        assert retired.status_code == 200, retired.text
        assert retired.json()["retired_at"] is not None
        refused = client.post("/campaigns", json={"kernel": v1["key"], "shape": {"n": 4096},
                                                  "budget": {"iterations": 1}})
        assert refused.status_code == 422, refused.text
        assert "retired" in refused.json()["detail"][0]["msg"]
        read = client.get("/families/vscale@v1")  # readable for the campaign's record
        assert read.status_code == 200
        assert read.json()["retired"] is True
        assert client.get(f"/campaigns/{campaign}").json()["kernel"] == v1["key"]
        # the name alone is the latest version not retired
        assert client.get("/families/vscale").json()["key"] == v2["key"]
        assert client.delete("/families/vscale@v2").status_code == 204
        assert client.get("/families/vscale@v2").status_code == 404
        listed = {f["name"]: f for f in client.get("/families").json()}
        assert listed["vscale"]["key"] == v1["key"]
        assert listed["vscale"]["retired"] is True
        assert client.post("/families/vscale@v1/restore").json()["retired_at"] is None
        again = client.post("/campaigns", json={"kernel": "vscale", "shape": {"n": 4096},
                                                "budget": {"iterations": 1}})
        assert again.status_code == 201, again.text
        assert client.post("/families/vscale@v9/retire").status_code == 404
    with stack.client(make_team("retire-other").key) as client:  # another team's: not found
        assert client.delete(f"/families/{v1['key']}").status_code == 404
        assert client.post(f"/families/{v1['key']}/retire").status_code == 404
    cli = stack.tuneforge("family", "retire", "vscale@v1", key=team.key)
    assert cli.returncode == 0, cli.stderr
    assert "retired" in cli.stdout
    cli = stack.tuneforge("family", "delete", "vscale@v1", key=team.key)
    assert cli.returncode != 0
    assert "retire" in cli.stderr


def test_a_team_past_its_registrations_a_minute_gets_a_429(stack: Stack, make_team: Any
                                                            ) -> None:
    """One team flooding POST /families: past TUNEFORGE_MAX_FAMILY_REGISTRATIONS_PER_MINUTE
    (60) its requests are 429 with Retry-After, before the spec is looked at; another team is
    not slowed."""
    if time.time() % 60 > 45:  # the 61 requests in one window of the limit
        time.sleep(61 - time.time() % 60)
    flood, other = make_team("flood"), make_team("calm")
    with stack.client(flood.key) as client:
        answers = [client.post("/families", json={"name": f"f{i}"}).status_code
                   for i in range(61)]
        assert answers[:60] == [422] * 60, answers
        assert answers[60] == 429
        again = client.post("/families", json=spec())
        assert again.status_code == 429, again.text
        assert "TUNEFORGE_MAX_FAMILY_REGISTRATIONS_PER_MINUTE" in again.json()["detail"]
        assert 1 <= int(again.headers["Retry-After"]) <= 61
    with stack.client(other.key) as client:
        assert client.post("/families", json={"name": "g"}).status_code == 422
        assert client.post("/families", json=spec()).status_code == 201
    assert versions_of(stack, flood) == 0
