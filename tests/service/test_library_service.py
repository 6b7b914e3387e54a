"""The team's library through the service: a probe (``POST /library/{family}/probe``) queues a
campaign a shape that measures the library's fallback points there, the workers run it, and
the library answers there from the measurement after; a bad shape in the list stores nothing."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import func, select

from core.db import session_scope
from core.models import Campaign
from service.service_stack import Stack, wait_final


def tuned_team(stack: Stack, make_team: Any, prefix: str, budget: int) -> Any:
    """A fresh team whose library holds one shape, 8192x4096 (a finished campaign there)."""
    team = make_team(prefix)
    with stack.client(team.key) as client:
        tuned = client.post("/campaigns", json={
            "kernel": "softmax", "shape": {"rows": 8192, "cols": 4096},
            "budget": {"iterations": budget}, "parallel": 1})
        assert tuned.status_code == 201, tuned.text
        assert wait_final(stack, client, f"/campaigns/{tuned.json()['id']}")["status"] == "done"
    return team


def test_a_probe_through_the_service_measures_the_fallback_once(
        stack: Stack, make_team: Any) -> None:
    team = tuned_team(stack, make_team, "probe", 20)
    with stack.client(team.key) as client:
        before = client.get("/library/softmax/pick", params={"shape": "8192x8192"}).json()
        assert (before["rule"], before["from_shape"]) == (2, "8192x4096")

        def stored() -> int:
            with session_scope(stack.db_url) as s:
                return int(s.scalar(select(func.count()).select_from(Campaign)
                                    .where(Campaign.start_from == "library")) or 0)

        already = stored()
        bad = client.post("/library/softmax/probe", json={"shapes": [
            {"rows": 8192, "cols": 8192}, {"rows": 0, "cols": 1}]})
        assert bad.status_code == 422, bad.text
        assert bad.json()["detail"][0]["loc"] == ["body", "shapes", 1]
        assert stored() == already  # the first shape's campaign was not kept either

        probed = client.post("/library/softmax/probe", json={"shapes": [
            {"rows": 8192, "cols": 8192}]})
        assert probed.status_code == 201, probed.text
        [cid] = probed.json()["campaigns"]
        run = wait_final(stack, client, f"/campaigns/{cid}")
        assert run["status"] == "done", run
        assert run["evaluations"] >= 2  # the baseline and the fallback point
        after = client.get("/library/softmax/pick", params={"shape": "8192x8192"}).json()
        assert (after["rule"], after["measured_at_shape"]) == (1, True)
        assert cid in {e["campaign_id"] for e in client.get("/library/softmax").json()["entries"]}


def test_picks_at_a_programs_shapes_from_one_read_match_the_single_picks(
        stack: Stack, make_team: Any) -> None:
    """``POST /library/{family}/picks`` answers, in order, what ``GET .../pick`` answers at each
    shape; ``library pick --url`` and ``export --shapes`` use it. A bad shape is a 422 naming
    its index, in the API and on the command line."""
    team = tuned_team(stack, make_team, "picks", 12)
    shapes = ["8192x4096", "8192x2048", "16384x2048", "1x7"]
    with stack.client(team.key) as client:
        batch = client.post("/library/softmax/picks", json={"shapes": shapes})
        assert batch.status_code == 200, batch.text
        single = [client.get("/library/softmax/pick", params={"shape": s}).json()
                  for s in shapes]
        assert batch.json() == single
        assert [p["rule"] for p in single[:2]] == [1, 2]
        bad = client.post("/library/softmax/picks", json={"shapes": ["8192x4096", "0x1"]})
        assert bad.status_code == 422, bad.text
        assert bad.json()["detail"][0]["loc"] == ["body", "shapes", 1]
        assert client.post("/library/softmax/picks", json={"shapes": []}).status_code == 422
    url = ["--url", stack.api]
    picked = stack.tuneforge("library", "pick", "--kernel", "softmax", "--shape", "8192x2048",
                             "--json", *url, key=team.key)
    assert picked.returncode == 0, picked.stderr
    assert json.loads(picked.stdout.splitlines()[-1]) == single[1]
    refused = stack.tuneforge("library", "pick", "--kernel", "softmax", "--shape", "0x1",
                              *url, key=team.key)
    assert refused.returncode != 0
    assert "--shape: shape.rows must be in" in refused.stderr  # as the local path says it
