"""Storing a team's own families (``core.families``) on SQLite: the same content is the same
version, a changed spec the next one, a refused spec stores nothing, names resolve for one
team only, and a fresh process finds a version by its content key in the database."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from repo import ROOT
from sqlalchemy import func, select

from core import families
from core.db import session_scope, upgrade_database
from core.models import Family, Team
from kernels import get_family
from kernels.userspec import SpecError, load_spec_dir

SPEC_DIR = ROOT / "tests" / "data" / "families" / "vscale"


def spec(**changes: Any) -> dict[str, Any]:
    """The test family's spec as the API takes it, with top-level fields changed."""
    return {**load_spec_dir(SPEC_DIR), **changes}


@pytest.fixture
def db(tmp_path: Path) -> Iterator[str]:
    url = f"sqlite:///{tmp_path / 'families.db'}"
    upgrade_database(url)
    families.install(url)
    yield url
    families.uninstall(url)


def count(url: str) -> int:
    with session_scope(url) as s:
        return int(s.scalar(select(func.count()).select_from(Family)) or 0)


def test_the_same_content_is_the_same_version_and_a_change_the_next(db: str) -> None:
    with session_scope(db) as s:
        first = families.register(s, spec=spec(), team_id=None, created_by="me")
    with session_scope(db) as s:
        again = families.register(s, spec=spec(), team_id=None, created_by="someone else")
    assert (first.version, first.created) == (1, True)
    assert (again.version, again.key, again.created) == (1, first.key, False)
    assert first.key == f"vscale@{first.spec_hash[:12]}"
    changed = spec(description="y = 2 x, described again")
    with session_scope(db) as s:
        second = families.register(s, spec=changed, team_id=None)
    assert (second.version, second.created) == (2, True)
    assert second.key != first.key
    assert second.key.startswith("vscale@")
    assert count(db) == 2
    with session_scope(db) as s:  # NAME is the latest, NAME@vN and the key that version
        assert families.resolve(s, team_id=None, name="vscale").name == second.key
        assert families.resolve(s, team_id=None, name="vscale@v1").name == first.key
        assert families.resolve(s, team_id=None, name=first.key).name == first.key
        assert families.resolve(s, team_id=None, name="gemm_bias_relu").name == "gemm_bias_relu"
        with pytest.raises(families.FamilyNotFound, match="has no version v3; it has v1"):
            families.resolve(s, team_id=None, name="vscale@v3")
        with pytest.raises(families.FamilyNotFound, match="unknown kernel family 'nope'; "
                                                          "known: .*vscale"):
            families.resolve(s, team_id=None, name="nope")


def test_a_built_family_is_what_the_spec_says(db: str) -> None:
    with session_scope(db) as s:
        done = families.register(s, spec=spec(), team_id=None)
    family = get_family(done.key)
    assert family.name == done.key
    assert getattr(family, "display_name", None) == "vscale"
    assert [d.name for d in family.dims] == ["n"]
    assert {k: list(v) for k, v in family.domains().items()} == {"BLOCK": [64, 128, 256],
                                                                 "ITEMS": [1, 2, 4]}


def test_a_bad_spec_or_a_built_in_name_stores_nothing(db: str) -> None:
    bad = spec(tunables={"BLOCK": []})
    with session_scope(db) as s, pytest.raises(SpecError) as caught:
        families.register(s, spec=bad, team_id=None)
    assert caught.value.field.startswith("tunables")
    with session_scope(db) as s, pytest.raises(families.FamilyConflict,
                                               match="built-in kernel family"):
        families.register(s, spec=spec(name="softmax"), team_id=None)
    assert count(db) == 0


def test_a_team_finds_its_own_families_only(db: str) -> None:
    with session_scope(db) as s:
        a, b = Team(name="a"), Team(name="b")
        s.add_all([a, b])
        s.flush()
        team_a, team_b = a.id, b.id
        mine = families.register(s, spec=spec(), team_id=team_a)
    with session_scope(db) as s:
        assert families.resolve(s, team_id=team_a, name="vscale").name == mine.key
        for name in ("vscale", "vscale@v1", mine.key):
            with pytest.raises(families.FamilyNotFound):
                families.resolve(s, team_id=team_b, name=name)
            with pytest.raises(families.FamilyNotFound):  # nor the embedded (no team) ones
                families.resolve(s, team_id=None, name=name)
        assert [r.name for r in families.latest(s, team_id=team_b)] == []
    with session_scope(db) as s:  # the same content in another team: its own version 1
        theirs = families.register(s, spec=spec(), team_id=team_b)
    assert (theirs.version, theirs.key, theirs.created) == (1, mine.key, True)


def test_a_fresh_process_finds_the_family_in_the_database(db: str, tmp_path: Path) -> None:
    """Nothing of the spec is on the other process's disk: only the database has it."""
    with session_scope(db) as s:
        done = families.register(s, spec=spec(), team_id=None)
    probe = (
        "import json, sys\n"
        "from core import families\n"
        "from kernels import get_family\n"
        "try:\n"
        "    get_family(sys.argv[2])\n"
        "    raise SystemExit('found before the resolver was installed')\n"
        "except ValueError:\n"
        "    pass\n"
        "families.install(sys.argv[1])\n"
        "f = get_family(sys.argv[2])\n"
        "print(json.dumps({'name': f.name, 'display': f.display_name,\n"
        "                  'source': f.render(f.baseline)}))\n"
    )
    done_run = subprocess.run([sys.executable, "-c", probe, db, done.key], capture_output=True,
                              text=True, cwd=tmp_path, timeout=120,
                              env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin",
                                   "TUNEFORGE_HOME": str(tmp_path)})
    assert done_run.returncode == 0, done_run.stderr
    found = json.loads(done_run.stdout)
    assert found["name"] == done.key
    assert found["display"] == "vscale"
    assert "vscale" in found["source"]
    assert "2.0f * x[j]" in found["source"]


def test_a_tampered_spec_is_not_built(db: str) -> None:
    """A row whose spec no longer hashes to its key is refused, never run as that version."""
    with session_scope(db) as s:
        done = families.register(s, spec=spec(), team_id=None)
    with session_scope(db) as s:
        row = s.scalar(select(Family).where(Family.key == done.key))
        assert row is not None
        row.spec = {**row.spec, "description": "changed behind the store's back"}
        row.key = "vscale@000000000000"
    with session_scope(db) as s:
        row = s.scalar(select(Family).where(Family.key == "vscale@000000000000"))
        assert row is not None
        with pytest.raises(families.FamilyError, match="builds as vscale@"):
            families.family_of(row)


def test_a_process_keeps_a_bounded_number_of_built_families(
        db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every registered version stayed built in the process for good (the API's memory grew
    about 0.8 MB per 757 KB version): at most KEPT_BUILT now, the most recently used (the
    bound set to 4 here: each registration compiles its family)."""
    monkeypatch.setattr(families, "KEPT_BUILT", 4)
    registered = []
    for n in range(families.KEPT_BUILT + 3):
        with session_scope(db) as s:
            registered.append(families.register(s, spec=spec(description=f"kept {n}"),
                                                team_id=None).key)
    assert len(families._built) <= families.KEPT_BUILT
    assert registered[-1] in families._built
    assert registered[0] not in families._built
    with session_scope(db) as s:  # one let go is built again when asked for
        row = s.scalar(select(Family).where(Family.key == registered[0]))
        assert row is not None
        assert families.family_of(row).name == registered[0]
