"""A campaign over HTTP through real Celery workers and Postgres (replay backend)."""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from core.db import session_scope
from core.feedback import FeedbackRecord
from core.models import Campaign, Candidate, Event
from core.statuses import CANDIDATE_FINAL
from service.service_stack import Stack, TeamKey, wait_finished, wait_until

SHAPE = {"m": 4096, "n": 4096, "k": 4096}


def submit(client: httpx.Client, **body: Any) -> str:
    response = client.post("/campaigns", json={"shape": SHAPE, **body})
    assert response.status_code == 201, response.text
    created = response.json()
    assert created["status"] == "queued"
    return str(created["id"])


def test_campaign_completes_and_every_row_is_written_once(stack: Stack, team_a: TeamKey) -> None:
    with stack.client(team_a.key) as client:
        cid = submit(client, budget={"iterations": 30}, parallel=2)
        final = wait_finished(client, cid, stack=stack)
        assert final["status"] == "done", final
        assert final["status_reason"] == "iteration budget of 30 spent"
        assert final["evaluations"] == 30
        best = client.get(f"/campaigns/{cid}/best").json()
        pages = [client.get(f"/campaigns/{cid}/candidates",
                            params={"limit": 10, "offset": off}).json() for off in (0, 10, 20)]
        ok_page = client.get(f"/campaigns/{cid}/candidates", params={"status": "ok"}).json()
        detail = client.get(f"/campaigns/{cid}/candidates/{best['candidate_id']}").json()

    with session_scope(stack.db_url) as s:
        rows = s.scalars(select(Candidate).where(Candidate.campaign_id == cid)).all()
        assert len(rows) == 30
        assert sorted(c.iteration for c in rows) == list(range(30))
        assert len({c.params_key for c in rows}) == 30
        assert all(c.status in CANDIDATE_FINAL for c in rows)
        assert all(c.attempts <= 1 for c in rows)  # nothing was evaluated twice
        for c in rows:
            assert c.feedback is not None
            assert c.feedback["candidate_id"] == c.id
            FeedbackRecord.model_validate(c.feedback)
        payloads = s.scalars(select(Event.payload).where(
            Event.campaign_id == cid, Event.kind == "result")).all()
        results = Counter(p["candidate_id"] for p in payloads)
        assert results == {c.id: 1 for c in rows}  # one result per candidate, exactly once
        accepted = [c for c in rows if c.status == "ok" and c.accepted]
        fastest = min(accepted, key=lambda c: c.avg_us or float("inf"))
        # two in flight: every decision names the incumbent it compared the candidate with
        iteration_of = {c.id: c.iteration for c in rows}
        for c in rows:
            if c.status == "ok" and c.iteration > 0:
                assert c.decision is not None
                against = iteration_of.get(c.decision.get("incumbent_id") or "")
                reason = c.decision["reason"]
                assert reason.startswith("first correct kernel") or \
                    f"incumbent #{against} (" in reason, c.decision
        campaign = s.get(Campaign, cid)
        assert campaign is not None
        assert campaign.best_id == fastest.id

    assert best["candidate_id"] == fastest.id
    assert final["best"]["candidate_id"] == fastest.id
    assert best["provenance"]["avg_us"] == fastest.avg_us
    assert "__global__" in best["source"]
    assert best["launch"]["block"]
    assert final["baseline"]["iteration"] == 0
    listed = [item["id"] for page in pages for item in page["items"]]
    assert len(listed) == len(set(listed)) == 30
    assert pages[0]["total"] == 30
    assert {item["status"] for item in ok_page["items"]} == {"ok"}
    assert detail["feedback"]["candidate_id"] == best["candidate_id"]
    assert detail["source"] == best["source"]


def test_two_campaigns_at_once_share_the_workers(stack: Stack, team_a: TeamKey) -> None:
    with stack.client(team_a.key, operator=True) as client:
        ids = [submit(client, budget={"iterations": 16}, parallel=2, seed=seed)
               for seed in (1, 2)]
        finals = [wait_finished(client, cid, stack=stack) for cid in ids]
        workers = client.get("/workers").json()
    assert [f["status"] for f in finals] == ["done", "done"]
    assert [f["evaluations"] for f in finals] == [16, 16]
    with session_scope(stack.db_url) as s:
        spans: dict[str, tuple[dt.datetime, dt.datetime]] = {}
        for cid in ids:
            times = [t for t in s.scalars(select(Candidate.finished_at)
                                          .where(Candidate.campaign_id == cid)) if t]
            spans[cid] = (min(times), max(times))
    (a0, a1), (b0, b1) = spans.values()
    assert a0 < b1, "the campaigns ran one after the other, not side by side"
    assert b0 < a1, "the campaigns ran one after the other, not side by side"
    gpus = [w for w in workers if w["role"] == "gpu"]
    assert len(gpus) == 2
    assert {w["gpu"]["visible_devices"] for w in gpus} == {"0", "1"}

    def both_gpus_worked() -> bool:
        with stack.client(team_a.key, operator=True) as client:
            return all(w["evaluations"] > 0 for w in client.get("/workers").json()
                       if w["role"] == "gpu")

    wait_until(both_gpus_worked, 10, "both GPU workers to report evaluations", stack)


def test_event_stream_delivers_progress_and_resumes(stack: Stack, team_a: TeamKey) -> None:
    with stack.client(team_a.key) as client:
        cid = submit(client, budget={"iterations": 12}, parallel=1)
        events = []
        with client.stream("GET", f"/campaigns/{cid}/events",
                           timeout=httpx.Timeout(60.0)) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            frame: dict[str, str] = {}
            for line in response.iter_lines():
                if not line:
                    if "data" in frame:
                        events.append({"id": int(frame["id"]), "event": frame["event"],
                                       "data": json.loads(frame["data"])})
                    frame = {}
                elif not line.startswith(":"):
                    key, _, value = line.partition(": ")
                    frame[key] = value
        kinds = [e["event"] for e in events]
        assert kinds[0] == "created", kinds
        assert kinds[-1] == "finished", kinds
        assert "started" in kinds
        ids = [e["id"] for e in events]
        assert ids == sorted(ids)
        assert len(set(ids)) == len(ids)
        progress = [e["data"]["evaluations"] for e in events if e["event"] == "result"]
        assert progress == list(range(1, 13))
        assert events[-1]["data"]["status"] == "done"

        fifth = [e for e in events if e["event"] == "result"][4]["id"]
        resumed = client.get(f"/campaigns/{cid}/events", headers={"Last-Event-ID": str(fifth)})
        again = [int(line.split(": ", 1)[1]) for line in resumed.text.splitlines()
                 if line.startswith("id: ")]
        assert again == [i for i in ids if i > fifth]


def test_a_shape_the_replay_never_measured_fails_fast(stack: Stack, team_a: TeamKey) -> None:
    with stack.client(team_a.key) as client:
        cid = client.post("/campaigns", json={"shape": {"m": 1024, "n": 1024, "k": 1024},
                                              "budget": {"iterations": 10}}).json()["id"]
        final = wait_finished(client, cid, timeout=30, stack=stack)
        page = client.get(f"/campaigns/{cid}/candidates").json()
    assert final["status"] == "failed"
    assert "1024x1024x1024" in final["status_reason"]
    assert "4096x4096x4096" in final["status_reason"]  # names the shapes it has
    assert page["total"] == 0


def test_inject_actions_then_cancel(stack: Stack, team_a: TeamKey) -> None:
    with stack.client(team_a.key) as client:
        cid = submit(client, budget={"iterations": 5000}, parallel=1)
        wait_until(lambda: client.get(f"/campaigns/{cid}").json()["status"] == "running",
                   30, "the campaign to start", stack)
        injected = client.post(f"/campaigns/{cid}/actions",
                               json={"actions": ["apply_register_block(4, 4)"]})
        assert injected.status_code == 200, injected.text
        bad = client.post(f"/campaigns/{cid}/actions", json={"actions": ["make_it_fast()"]})
        assert bad.status_code == 422
        assert bad.json()["detail"][0]["loc"] == ["body", "actions"]
        cancelled = client.post(f"/campaigns/{cid}/cancel").json()
        assert cancelled["status"] == "cancelled"
        late = client.post(f"/campaigns/{cid}/actions",
                           json={"actions": ["apply_unroll(2)"]})
        assert late.status_code == 409

        def drained() -> bool:
            page = client.get(f"/campaigns/{cid}/candidates").json()
            return page["total"] > 0 and all(
                c["status"] not in ("pending", "compiling", "compiled", "measuring")
                for c in client.get(f"/campaigns/{cid}/candidates",
                                    params={"limit": 500}).json()["items"])

        wait_until(drained, 30, "in-flight candidates to be recorded", stack)
        final = client.get(f"/campaigns/{cid}").json()
    assert final["status"] == "cancelled"
    assert final["evaluations"] < 5000
    with session_scope(stack.db_url) as s:
        kinds = s.scalars(select(Event.kind).where(Event.campaign_id == cid)).all()
    assert "injected" in kinds
    assert kinds.count("finished") == 1


def test_history_workers_metrics_and_health(stack: Stack, make_team: Any) -> None:
    team = make_team("history")
    with stack.client(team.key, operator=True) as client:
        assert client.get("/history").json() == []
        ids = [submit(client, budget={"iterations": 6}, seed=s) for s in (3, 4)]
        finals = [wait_finished(client, cid, stack=stack) for cid in ids]
        history = client.get("/history", params={"kernel": "gemm_bias_relu",
                                                 "shape": "4096x4096x4096"}).json()
        other_shape = client.get("/history", params={"kernel": "gemm_bias_relu",
                                                     "shape": "m=2048,n=2048,k=2048"}).json()
        listed = client.get("/campaigns").json()
        workers = client.get("/workers").json()
        metrics = client.get("/metrics")
        health = client.get("/healthz").json()
    assert len(history) == 1
    entry = history[0]
    assert entry["campaigns"] == 2
    assert entry["avg_us"] == min(f["best"]["avg_us"] for f in finals)
    assert entry["gpu"] == "NVIDIA H200"
    assert entry["backend"] == "replay"
    assert entry["shape"] == {"m": 4096, "n": 4096, "k": 4096}
    assert entry["shape_text"] == "4096x4096x4096"
    assert entry["unit"] == "TFLOP/s"
    assert entry["throughput"] == pytest.approx(2 * 4096**3 / (entry["avg_us"] * 1e-6) / 1e12,
                                                rel=1e-3)
    assert other_shape == []
    assert [c["id"] for c in listed] == ids[::-1]  # newest first, only this team's
    assert {w["role"] for w in workers} == {"agent", "compile", "gpu"}
    assert metrics.status_code == 200
    assert 'tuneforge_campaigns{status="done"}' in metrics.text
    assert 'tuneforge_queue_length{queue="gpu.sm_90"}' in metrics.text
    assert "tuneforge_candidates_evaluated_total" in metrics.text
    assert health == {"status": "ok", "database": "ok", "redis": "ok"}
