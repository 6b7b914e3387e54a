"""A team's own families on the running service (real API, Postgres, Redis and Celery workers):
registered with ``POST /families``, listed and read for that team only, refused with the field
named, and run by workers that find the family in the database, not on their disk."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from core.db import session_scope
from core.models import Candidate, Family
from kernels.userspec import load_spec_dir
from service.service_stack import Stack, TeamKey, wait_finished

SPEC_DIR = Path(__file__).resolve().parents[1] / "data" / "families" / "vscale"
EXAMPLE_DIR = Path(__file__).resolve().parents[2] / "examples" / "transpose"


def spec(**changes: Any) -> dict[str, Any]:
    return {**load_spec_dir(SPEC_DIR), **changes}


def stored(stack: Stack) -> int:
    """Versions stored, of every team."""
    with session_scope(stack.db_url) as s:
        return int(s.scalar(select(func.count()).select_from(Family)) or 0)


@pytest.fixture
def team(make_team: Any) -> TeamKey:
    return make_team("families")


def test_register_again_and_a_new_version(stack: Stack, team: TeamKey) -> None:
    with stack.client(team.key) as client:
        first = client.post("/families", json=spec())
        assert first.status_code == 201, first.text
        body = first.json()
        assert body["name"] == "vscale"
        assert body["version"] == 1
        assert body["created"] is True
        assert body["key"] == f"vscale@{body['hash'][:12]}"
        again = client.post("/families", json=spec())
        assert again.status_code == 200, again.text
        assert again.json() == {**body, "created": False}
        changed = client.post("/families", json=spec(description="y = 2 x, again"))
        assert changed.status_code == 201
        assert changed.json()["version"] == 2
        listed = {f["name"]: f for f in client.get("/families").json()}
        assert listed["gemm_bias_relu"]["origin"] == "builtin"
        assert listed["vscale"]["origin"] == "team"
        assert listed["vscale"]["version"] == 2
        assert listed["vscale"]["versions"] == 2
        assert listed["vscale"]["key"] == changed.json()["key"]
        shown = client.get("/families/vscale").json()
        assert shown["version"] == 2
        assert shown["dims"] == ["n"]
        assert shown["tunables"] == {"BLOCK": [64, 128, 256], "ITEMS": [1, 2, 4]}
        assert [v["version"] for v in shown["all_versions"]] == [1, 2]
        assert shown["signature"]["buffers"][1]["role"] == "out"
        assert client.get("/families/vscale@v1").json()["key"] == body["key"]
        assert client.get(f"/families/{body['key']}").json()["version"] == 1
        assert client.get("/families/softmax").json()["origin"] == "builtin"


@pytest.mark.parametrize(("change", "loc", "words"), [
    ({"tunables": {"BLOCK": []}}, ["body", "tunables.BLOCK"], "non-empty list"),
    ({"restrictions": ["__import__('os').system('true')"]}, ["body", "restrictions[0]"], ""),
    ({"name": "Not A Name"}, ["body", "name"], "lower-case"),
    ({"files": {**load_spec_dir(SPEC_DIR)["files"], "kernel.cu": "int main() { return 0; }"}},
     ["body", "kernel.source"], "main function"),
])
def test_a_bad_spec_is_a_422_naming_the_field_and_nothing_is_stored(
        stack: Stack, team: TeamKey, change: dict[str, Any], loc: list[str], words: str) -> None:
    before = stored(stack)
    with stack.client(team.key) as client:
        refused = client.post("/families", json=spec(**change))
        assert refused.status_code == 422, refused.text
        detail = refused.json()["detail"][0]
        assert detail["loc"] == loc, detail
        assert detail["msg"].startswith(f"{loc[1]}: ")
        assert words in detail["msg"]
        assert [f["name"] for f in client.get("/families").json()
                if f["origin"] == "team"] == []
    assert stored(stack) == before


def test_a_built_in_name_is_a_409(stack: Stack, team: TeamKey) -> None:
    before = stored(stack)
    with stack.client(team.key) as client:
        refused = client.post("/families", json=spec(name="softmax"))
    assert refused.status_code == 409
    assert "built-in" in refused.json()["detail"]
    assert stored(stack) == before


def test_another_team_neither_sees_nor_runs_it(stack: Stack, team: TeamKey,
                                               make_team: Any) -> None:
    other = make_team("other")
    with stack.client(team.key) as client:
        key = client.post("/families", json=spec()).json()["key"]
    with stack.client(other.key) as client:
        for name in ("vscale", "vscale@v1", key):
            missing = client.get(f"/families/{name}")
            assert missing.status_code == 404, missing.text
            refused = client.post("/campaigns", json={"kernel": name, "shape": {"n": 4096},
                                                      "budget": {"iterations": 2}})
            assert refused.status_code == 422, refused.text
            assert refused.json()["detail"][0]["loc"] == ["body", "kernel"]
            assert "unknown kernel family" in refused.json()["detail"][0]["msg"]
        assert "vscale" not in [f["name"] for f in client.get("/families").json()]


def test_a_campaign_checks_its_shape_against_the_family(stack: Stack, team: TeamKey) -> None:
    with stack.client(team.key) as client:
        client.post("/families", json=spec())
        for shape, words in (({"m": 4}, "unknown dimension(s) m"),
                             ({"n": 0}, "shape.n must be in [1, 16777216]")):
            refused = client.post("/campaigns", json={"kernel": "vscale", "shape": shape})
            assert refused.status_code == 422, refused.text
            assert refused.json()["detail"][0]["loc"] == ["body", "shape"]
            assert words in refused.json()["detail"][0]["msg"]
        refused = client.post("/campaigns", json={"kernel": "vscale", "shape": {"n": 8},
                                                  "allowed_actions": ["apply_tiling"]})
        assert refused.status_code == 422
        assert refused.json()["detail"][0]["loc"] == ["body", "allowed_actions"]


def test_a_campaign_takes_the_tolerance_its_family_declares(stack: Stack,
                                                             team: TeamKey) -> None:
    """A spec's correctness.tolerance is its campaigns' default (it was ignored: 1e-4)."""
    loose = spec(correctness={"rule": "norm", "tolerance": 1e-3})
    with stack.client(team.key) as client:
        assert client.post("/families", json=loose).status_code in (200, 201)
        ids = {}
        for name, body in (("declared", {}), ("asked", {"tolerance": 1e-5})):
            created = client.post("/campaigns", json={
                "kernel": "vscale", "shape": {"n": 4096}, "budget": {"iterations": 1}, **body})
            assert created.status_code == 201, created.text
            ids[name] = created.json()["id"]
        builtin = client.post("/campaigns", json={"kernel": "softmax",
                                                  "shape": {"rows": 64, "cols": 64},
                                                  "budget": {"iterations": 1}})
        assert builtin.status_code == 201, builtin.text
        tolerances = {name: client.get(f"/campaigns/{cid}").json()["tolerance"]
                      for name, cid in {**ids, "builtin": builtin.json()["id"]}.items()}
        for cid in [*ids.values(), builtin.json()["id"]]:
            wait_finished(client, cid, stack=stack)
    assert tolerances == {"declared": 1e-3, "asked": 1e-5, "builtin": 1e-4}


def test_a_replay_fleet_says_it_has_nothing_to_replay(stack: Stack, team: TeamKey) -> None:
    """The agent worker built the family from the database: its reason is the family's (no
    replay dataset), not an unknown kernel."""
    with stack.client(team.key) as client:
        key = client.post("/families", json=spec()).json()["key"]
        created = client.post("/campaigns", json={"kernel": "vscale", "shape": {"n": 4096},
                                                  "budget": {"iterations": 3}})
        assert created.status_code == 201, created.text
        done = wait_finished(client, created.json()["id"], stack=stack)
    assert done["status"] == "failed", done
    assert done["status_reason"] == f"replay backend: the {key} family ships no replay dataset"
    assert (done["kernel"], done["family"], done["family_version"]) == (key, "vscale", 1)


@pytest.fixture
def gpu_api(stack: Stack) -> Iterator[str]:
    """A second API process on the same database and broker whose campaigns run on the gpu
    backend (the stack's GPU workers replay): what a GPU fleet's API does."""
    name = f"api-gpu-{secrets.token_hex(3)}"
    try:
        yield stack.start_another_api(name, what="the gpu-backend API",
                              extra_env={"TUNEFORGE_BACKEND": "gpu"})
    finally:
        stack.stop(name)


def test_workers_build_the_family_from_the_database(stack: Stack, team: TeamKey,
                                                    gpu_api: str) -> None:
    """The example family registered through the API, compiled by the compile worker with the
    real nvcc, taken by a GPU worker: each process found the family by its key in the
    database. The stack's GPU workers replay, so nothing can be measured: the baseline is
    compiled, then recorded not_measured with the reason, and the campaign fails saying so
    (the engine ends a campaign whose baseline does not pass)."""
    example = load_spec_dir(EXAMPLE_DIR)
    with httpx.Client(base_url=f"{gpu_api}/api/v1", headers={"X-API-Key": team.key},
                      timeout=30) as client:
        registered = client.post("/families", json=example)
        assert registered.status_code == 201, registered.text
        key = registered.json()["key"]
        created = client.post("/campaigns", json={
            "kernel": "transpose@v1", "shape": {"m": 130, "n": 66},
            "budget": {"iterations": 3}})
        assert created.status_code == 201, created.text
        campaign_id = created.json()["id"]
        done = wait_finished(client, campaign_id, timeout=180, stack=stack)
        assert (done["kernel"], done["backend"]) == (key, "gpu")
        assert done["family"] == "transpose"
        assert done["family_version"] == 1
        assert done["status"] == "failed", done
        assert done["best"] is None
        assert done["status_reason"].startswith(
            "the baseline did not pass: not_measured: a GPU worker of the replay backend took "
            "this gpu campaign's candidate: the API and every worker need the same "
            "TUNEFORGE_BACKEND"), done["status_reason"]
    with session_scope(stack.db_url) as s:
        rows = s.scalars(select(Candidate).where(Candidate.campaign_id == campaign_id)
                         .order_by(Candidate.iteration)).all()
        assert rows, "no candidate was proposed"
        baseline = rows[0]
        assert baseline.params == example["baseline"]  # the spec's baseline
        assert baseline.status == "not_measured", (baseline.status, baseline.error)
        compiled = baseline.compile or {}
        assert compiled.get("status") == "ok", compiled
        # registration compiled the baseline into the cache the compile worker reads
        assert compiled.get("cache_hit") is True
        assert (compiled.get("regs_per_thread") or 0) > 0  # ptxas's report: nvcc really ran
        assert 'extern "C" __global__' in (baseline.source or "")
    # the CLI reads the campaign over the API and builds its family from the team's spec
    # (GET /families/{key}): the exports know the family's tunables and unit
    exported = stack.tuneforge("export", campaign_id, "--format", "kt", "--url", gpu_api,
                               key=team.key)
    assert exported.returncode == 0, exported.stderr
    cache = json.loads(exported.stdout)
    assert cache["kernel_name"] == key
    assert list(cache["tune_params"]) == list(example["tunables"])
    assert len(cache["cache"]) == 1
    t4 = stack.tuneforge("export", campaign_id, "--format", "t4", "--url", gpu_api,
                         key=team.key)
    assert t4.returncode == 0, t4.stderr
    assert json.loads(t4.stdout)["results"][0]["configuration"] == example["baseline"]


def test_the_cli_registers_into_the_team_on_the_service(stack: Stack, team: TeamKey,
                                                         tmp_path: Path) -> None:
    """`tuneforge family add|list|show` with TUNEFORGE_API_KEY: the team's families on the
    service (a bad spec is refused before it is sent: exit 2 naming the field)."""
    added = stack.tuneforge("family", "add", str(SPEC_DIR), "--json", key=team.key)
    assert added.returncode == 0, added.stderr
    assert json.loads(added.stdout)["version"] == 1
    listed = stack.tuneforge("family", "list", "--json", key=team.key)
    assert listed.returncode == 0, listed.stderr
    assert "vscale" in [f["name"] for f in json.loads(listed.stdout)]
    shown = stack.tuneforge("family", "show", "vscale@v1", key=team.key)
    assert shown.returncode == 0, shown.stderr
    assert "BLOCK" in shown.stdout
    bad = tmp_path / "bad"
    bad.mkdir()
    for name in ("kernel.cu", "reference.cu"):
        (bad / name).write_text((SPEC_DIR / name).read_text())
    described = json.loads((SPEC_DIR / "family.json").read_text())
    (bad / "family.json").write_text(json.dumps({**described, "dims": []}))
    refused = stack.tuneforge("family", "add", str(bad), key=team.key)
    assert refused.returncode == 2, refused.stderr
    assert "error: dims: " in refused.stderr
