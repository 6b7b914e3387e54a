"""The dashboard's shape-set page in a real headless Chromium (Debian's, driven by Playwright)
against ``tuneforge serve``: a softmax set tuned on the replay, each shape's row, and the
campaigns page's link to it."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dashboard_support import Server, TeamDb, start_server, team_database

from agent.campaigns import CampaignCreate
from agent.embedded import EmbeddedRunner
from agent.shapesets import members, open_set
from core.replay import ReplayDataset
from kernels import get_family
from worker.evaluate import ReplayEvaluator

CHROMIUM = os.environ.get("TUNEFORGE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
SHAPES = ["8192x8192", "16384x1024", "65536x128"]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory) -> tuple[TeamDb, str, list[str]]:
    """A team database where a 3-shape softmax set ran to its end on the replay."""
    db = team_database(tmp_path_factory.mktemp("dashboard-sets") / "sets.db", "sets-team")
    family = get_family("softmax")
    evaluator = ReplayEvaluator(family, ReplayDataset(family.replay_datasets()[0]))
    request = CampaignCreate.model_validate(
        {"kernel": "softmax", "budget": {"iterations": 36},
         "shapes": [{"shape": family.parse_dims(s).as_dict()} for s in SHAPES]},
        context={"family": family})
    with db.sessions.begin() as s:
        shape_set = open_set(s, request, family=family, arch="sm_90", team_id=db.team_id,
                             backend="replay", default_parallel=2, device=evaluator.device,
                             vendor_us=evaluator.vendor_us)
        set_id, ids = shape_set.id, [m.id for m in members(s, shape_set.id)]
    runner = EmbeddedRunner(db.sessions, [evaluator])
    runner.run_set(set_id)
    assert not runner.errors, runner.errors
    return db, set_id, ids


@pytest.fixture(scope="module")
def server(tuned: tuple[TeamDb, str, list[str]], tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("dashboard-sets-server")
    (root / "home").mkdir()
    srv = start_server(tuned[0].url, root / "home", root / "serve.log")
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def page(tuned: tuple[TeamDb, str, list[str]], server: Server) -> Iterator[Any]:
    if not Path(CHROMIUM).exists() or shutil.which(CHROMIUM) is None:
        pytest.fail(f"{CHROMIUM} is missing: `make browser` installs Debian's chromium as root")
    from playwright.sync_api import sync_playwright

    pw = sync_playwright().start()
    chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    context.add_init_script(
        f"localStorage.setItem('tuneforge.apiKey', {json.dumps(tuned[0].key)})")
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
    tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    try:
        yield tab
    finally:
        context.close()
        chromium.close()
        pw.stop()
    assert not errors, errors


def test_the_set_page_shows_each_shape(tuned: tuple[TeamDb, str, list[str]], server: Server,
                                       page: Any) -> None:
    _db, set_id, ids = tuned
    page.goto(f"{server.url}/ui/sets/{set_id}")
    page.wait_for_selector("body[data-loaded=true]", timeout=20_000)
    assert page.inner_text("#title").startswith(f"Shape set {set_id[:8]} · softmax · 3 shapes")
    assert "of 36 evaluations" in page.inner_text("#summary")
    rows = page.query_selector_all("#shapes tbody tr")
    assert [r.get_attribute("data-id") for r in rows] == ids
    texts = [r.inner_text() for r in rows]
    for shape, text in zip(SHAPES, texts, strict=True):
        assert shape.replace("x", "×") in text
        assert "done" in text
        assert "×" in text.split(shape.replace("x", "×"), 1)[1]  # its x vendor
    rows[1].click()
    page.wait_for_url(f"**/ui/campaigns/{ids[1]}")


def test_the_campaigns_page_links_each_member_to_its_set(
        tuned: tuple[TeamDb, str, list[str]], server: Server, page: Any) -> None:
    _db, set_id, _ids = tuned
    page.goto(f"{server.url}/ui/")
    page.wait_for_selector("body[data-loaded=true]", timeout=20_000)
    links = page.query_selector_all(f"a[href='/ui/sets/{set_id}']")
    assert sorted(link.inner_text() for link in links) == [
        f"shape set {set_id[:8]} #{i}" for i in (1, 2, 3)]
    links[0].click()
    page.wait_for_url(f"**/ui/sets/{set_id}")
