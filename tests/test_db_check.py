"""``tuneforge db check`` finds each kind of inconsistent row it claims to (planted in a SQLite
database made by the migrations), and passes a consistent one."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from typer.testing import CliRunner

from agent.engine import lifecycle
from cli.main import app
from core.db import session_scope, upgrade_database
from core.integrity import check
from core.models import Campaign, Candidate


def test_db_check_finds_every_planted_inconsistency(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    url = f"sqlite:///{db}"
    upgrade_database(url)
    with session_scope(url) as s:
        campaign = lifecycle.create_campaign(s, lifecycle.CampaignSpec(budget_iterations=3),
                                             backend="replay")
        lifecycle.start_campaign(s, campaign.id)
        campaign_id = campaign.id
    runner = CliRunner()
    clean = runner.invoke(app, ["db", "check", "--db", str(db)])
    assert clean.exit_code == 0, clean.output
    with session_scope(url) as s:
        assert check(s) == []
        camp = s.get(Campaign, campaign_id)
        assert camp is not None
        camp.status = "done"  # its baseline is still pending: in flight after the finish
        camp.best_id = "0" * 32  # no such candidate
        camp.evaluations = 5  # nothing finished
        s.add(Candidate(campaign_id=campaign_id, iteration=7, params={}, params_key="k",
                        status="ok", feedback={"iteration": "not a number"}))
    raw = sqlite3.connect(db)  # foreign keys off: a row that the service could never write
    raw.execute("INSERT INTO candidates (id, campaign_id, iteration, params, params_key, status,"
                " attempts, accepted, gpu_seconds, created_at) VALUES ('orphan', 'gone', 0, "
                "'{}', 'x', 'pending', 0, 0, 0, '2026-11-29 00:00:00')")
    raw.commit()
    raw.close()
    with session_scope(url) as s:
        rules = {f.rule for f in check(s)}
    assert rules >= {"orphan_candidate", "in_flight_after_finish", "dangling_reference",
                     "evaluations_mismatch", "invalid_feedback"}
    dirty = runner.invoke(app, ["db", "check", "--db", str(db)])
    assert dirty.exit_code == 1
    assert "dangling_reference: campaigns" in dirty.output
