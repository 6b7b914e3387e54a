"""Access control, the whole matrix: every endpoint × (no key, wrong key, revoked key, another
team's key, the right key, the operator's token alone, a wrong operator token) against the
running API (the fleet-wide views, /workers and /metrics, only for the operator's token); keys
hashed at rest; rotation and revocation through the CLI, end to end."""

from __future__ import annotations

import secrets
import subprocess
from dataclasses import dataclass
from typing import Any

import pytest

from service.service_stack import (
    Stack,
    TeamKey,
    create_team,
    create_team_in_db,
    wait_finished,
)

SHAPE = {"m": 4096, "n": 4096, "k": 4096}
CALLERS = ("none", "wrong", "revoked", "other_team", "owner", "operator", "wrong_operator")


@dataclass(frozen=True)
class Endpoint:
    """One request and the status each caller gets."""

    method: str
    path: str  # {cid}: the owner's finished campaign, {cand}: one of its candidates
    body: dict[str, Any] | None
    owner: int  # the right key's status
    other_team: int  # another team's key (its own resources, never the owner's)
    public: bool = False  # no key needed: every caller gets ``owner``
    fleet: bool = False  # every team's: the operator's token only (a team's key: 403)


ENDPOINTS = [
    Endpoint("GET", "/campaigns", None, 200, 200),
    Endpoint("POST", "/campaigns", {"shape": SHAPE, "budget": {"iterations": 1}}, 201, 201),
    Endpoint("GET", "/campaigns/{cid}", None, 200, 404),
    Endpoint("GET", "/campaigns/{cid}/candidates", None, 200, 404),
    Endpoint("GET", "/campaigns/{cid}/candidates/{cand}", None, 200, 404),
    Endpoint("GET", "/campaigns/{cid}/best", None, 200, 404),
    Endpoint("GET", "/campaigns/{cid}/points", None, 200, 404),
    Endpoint("GET", "/campaigns/{cid}/events", None, 200, 404),
    Endpoint("POST", "/campaigns/{cid}/actions", {"actions": ["apply_unroll(2)"]}, 409, 404),
    Endpoint("POST", "/campaigns/{cid}/cancel", None, 409, 404),
    Endpoint("POST", "/campaigns", {"shapes": [{"shape": SHAPE}], "budget": {"iterations": 4}},
             201, 201),
    Endpoint("GET", "/shape-sets", None, 200, 200),
    Endpoint("GET", "/shape-sets/{sid}", None, 200, 404),
    Endpoint("POST", "/shape-sets/{sid}/cancel", None, 200, 404),
    Endpoint("GET", "/history", None, 200, 200),
    Endpoint("GET", "/workers", None, 403, 403, fleet=True),
    Endpoint("GET", "/healthz", None, 200, 200, public=True),
    Endpoint("GET", "/metrics", None, 403, 403, fleet=True),
]


@dataclass
class Keys:
    owner: TeamKey
    other: TeamKey
    revoked: str
    campaign: str
    candidate: str
    shape_set: str


@pytest.fixture(scope="module")
def keys(stack: Stack) -> Keys:
    tag = secrets.token_hex(3)
    owner = create_team(stack, f"matrix-owner-{tag}")  # through the CLI
    other = create_team_in_db(stack, f"matrix-other-{tag}")
    doomed = create_team_in_db(stack, f"matrix-revoked-{tag}")
    done = stack.tuneforge("admin", "revoke-key", doomed.key[:11])
    assert done.returncode == 0, done.stderr
    with stack.client(owner.key) as client:
        cid = client.post("/campaigns", json={"shape": SHAPE, "budget": {"iterations": 2}}
                          ).json()["id"]
        wait_finished(client, cid, stack=stack)
        cand = client.get(f"/campaigns/{cid}/candidates").json()["items"][0]["id"]
        sid = client.post("/campaigns", json={"shapes": [{"shape": SHAPE}],
                                              "budget": {"iterations": 4}}).json()["id"]
    return Keys(owner, other, doomed.key, cid, cand, sid)


def key_of(keys: Keys, caller: str) -> str | None:
    return {"none": None, "wrong": "tf_00000000_not-a-key", "revoked": keys.revoked,
            "other_team": keys.other.key, "owner": keys.owner.key, "operator": None,
            "wrong_operator": None}[caller]


def expected(endpoint: Endpoint, caller: str) -> int:
    if endpoint.public:
        return endpoint.owner
    if caller == "operator" and endpoint.fleet:
        return 200
    if caller in ("none", "wrong", "revoked", "operator", "wrong_operator"):
        return 401
    return endpoint.other_team if caller == "other_team" else endpoint.owner


def test_every_endpoint_for_every_caller(stack: Stack, keys: Keys) -> None:
    seen: list[str] = []
    # the owner's cancel comes last: it would be a write (it is refused: the campaign is done)
    order = sorted(((e, c) for e in ENDPOINTS for c in CALLERS),
                   key=lambda ec: ec[0].path.endswith("/cancel") and ec[1] == "owner")
    for endpoint, caller in order:
        path = endpoint.path.format(cid=keys.campaign, cand=keys.candidate,
                                    sid=keys.shape_set)
        with stack.client(key_of(keys, caller), operator=caller == "operator") as client:
            if caller == "wrong_operator":
                client.headers["X-Operator-Token"] = "not-the-operator-token"
            response = client.request(endpoint.method, path, json=endpoint.body)
        want = expected(endpoint, caller)
        if response.status_code != want:
            seen.append(f"{endpoint.method} {endpoint.path} as {caller}: "
                        f"{response.status_code}, expected {want}: {response.text[:200]}")
        elif want == 401:
            assert "revoked" in response.json()["detail"] if caller == "revoked" else True
        elif caller == "other_team" and endpoint.path in ("/campaigns", "/history",
                                                          "/shape-sets") \
                and endpoint.method == "GET":
            assert keys.campaign not in response.text  # lists never show another team's
            assert keys.shape_set not in response.text
        elif want == 403:
            assert "X-Operator-Token" in response.json()["detail"]
    assert seen == [], "\n".join(seen)
    assert len(order) == len(ENDPOINTS) * len(CALLERS)


def test_keys_are_hashed_at_rest(stack: Stack, keys: Keys) -> None:
    url = stack.db_url.replace("postgresql+psycopg://", "postgresql://")
    dump = subprocess.run(["pg_dump", "--data-only", url], capture_output=True, text=True,
                          check=True).stdout
    assert keys.owner.key[:11] in dump  # the prefix is stored (revoke-key takes it)...
    for raw in (keys.owner.key, keys.other.key, keys.revoked):
        secret = raw.split("_", 2)[2]
        assert raw not in dump  # ...the key and its secret part are not
        assert secret not in dump


def test_rotation_and_revocation_through_the_cli(stack: Stack, make_team: Any) -> None:
    team = make_team("cli-keys")
    rotated = stack.tuneforge("admin", "rotate-key", team.name)
    assert rotated.returncode == 0, rotated.stderr
    new = rotated.stdout.strip()
    assert new.startswith("tf_")
    assert new != team.key
    with stack.client(team.key) as old, stack.client(new) as fresh:
        assert old.get("/campaigns").status_code == 401
        assert "revoked" in old.get("/campaigns").json()["detail"]
        assert fresh.get("/campaigns").status_code == 200
    revoked = stack.tuneforge("admin", "revoke-key", new[:11])
    assert revoked.returncode == 0, revoked.stderr
    with stack.client(new) as fresh:
        assert fresh.get("/campaigns").status_code == 401
    again = stack.tuneforge("admin", "rotate-key", team.name)  # a revoked team gets a new key
    assert again.returncode == 0, again.stderr
    with stack.client(again.stdout.strip()) as client:
        assert client.get("/campaigns").status_code == 200
    for bad in (("rotate-key", "no-such-team"), ("revoke-key", "tf_ffffffff")):
        refused = stack.tuneforge("admin", *bad)
        assert refused.returncode == 2
        assert refused.stderr.strip().count("\n") == 0  # one line naming the problem
        assert "no " in refused.stderr
