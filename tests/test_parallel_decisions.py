"""With two candidates in flight (``--gpus 0,1``), each decision names the incumbent it
compared the candidate with, and its figure is against that one; where that is not the
candidate's parent, it also gives the speed against the parent. A candidate at 0.99x its parent
read "0.051x the incumbent's speed" before, against a later incumbent it did not name."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.main import app

RATIO = re.compile(r"^(\d+\.\d{3})x the speed of incumbent #(\d+) \(")
PARENT = re.compile(r"; (\d+\.\d{3})x its parent #(\d+)'s recorded speed, the incumbent when "
                    r"it was proposed")


def test_each_decision_says_which_incumbent_it_compared_with(tmp_path: Path,
                                                             tuneforge_home: Path) -> None:
    db = tmp_path / "t.db"
    done = CliRunner().invoke(app, ["tune", "--gpus", "0,1", "--budget", "60", "--db", str(db),
                                    "--out", str(tmp_path / "o"), "--json"])
    assert done.exit_code == 0, done.output
    cid = json.loads(done.stdout.splitlines()[-1])["campaign_id"]
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT id, iteration, parent_id, status, avg_us, decision "
                            "FROM candidates ORDER BY iteration").fetchall()
    by_id = {r[0]: r for r in rows}
    decided = not_parent = 0
    for _id, iteration, parent_id, status, avg_us, decision in rows:
        if status != "ok" or iteration == 0:
            continue
        d = json.loads(decision)
        incumbent = by_id[d["incumbent_id"]]
        assert d["incumbent_iteration"] == incumbent[1]
        found = RATIO.match(d["reason"])
        assert found, d["reason"]
        # the replay's interleaved runs of the incumbent are its recorded ones
        assert float(found[1]) == pytest.approx(incumbent[4] / avg_us, abs=2e-3)
        assert int(found[2]) == incumbent[1]
        decided += 1
        parent = by_id[parent_id]
        if parent_id != d["incumbent_id"]:
            not_parent += 1
            said = PARENT.search(d["reason"])
            assert said, d["reason"]
            assert float(said[1]) == pytest.approx(parent[4] / avg_us, abs=2e-3)
            assert int(said[2]) == parent[1]
        else:
            assert "its parent" not in d["reason"]
    assert decided > 30
    assert not_parent > 3  # two in flight: some results come after the incumbent moved
    # the report's accepted steps say which incumbent each speed-up is against
    done = CliRunner().invoke(app, ["report", cid, "--db", str(db), "--out",
                                    str(tmp_path / "r")])
    assert done.exit_code == 0, done.output
    md = (tmp_path / "r" / "report.md").read_text()
    assert "| speed-up vs incumbent (#) |" in md
    assert re.search(r"\| \d+\.\d\dx \(#\d+\) \|", md)
