"""The web dashboard in a real headless Chromium (Debian's, driven by Playwright) against
``tuneforge serve`` on an SQLite database that holds replay campaigns.

Screenshots go to ``$TUNEFORGE_ARTIFACTS`` (default: a pytest temporary folder); the folder is
printed at the start.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dashboard_support import (
    CHILD_DEATH,
    FAILURES,
    Server,
    TeamDb,
    create_campaign,
    finished_campaign,
    run_campaign,
    start_server,
)
from sqlalchemy import select
from typer.testing import CliRunner

from cli.main import app as cli_app
from core.models import Campaign, Candidate

CHROMIUM = os.environ.get("TUNEFORGE_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = os.environ.get("TUNEFORGE_ARTIFACTS")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
KEY_STORAGE = "tuneforge.apiKey"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
              ) -> Path:
    """Where the screenshots go (printed, whatever pytest captures)."""
    folder = Path(ARTIFACTS) if ARTIFACTS else tmp_path_factory.mktemp("dashboard-artifacts")
    folder.mkdir(parents=True, exist_ok=True)
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():  # past pytest's output capture
            reporter.write_line(f"dashboard screenshots: {folder}")
    return folder


@pytest.fixture(scope="module")
def done(tmp_path_factory: pytest.TempPathFactory) -> tuple[TeamDb, str]:
    """The finished campaign with failures (tests/test_reports.py makes its own)."""
    return finished_campaign(tmp_path_factory.mktemp("dashboard-campaign"))


@pytest.fixture(scope="module")
def server(done: tuple[TeamDb, str], tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("dashboard-server")
    (root / "home").mkdir()
    srv = start_server(done[0].url, root / "home", root / "serve.log")
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's Chromium, headless (``make test`` installs it where apt-get can). Missing, the
    dashboard's tests fail, here as in CI: a skip made a newcomer's ``make test`` pass
    without them."""
    if not Path(CHROMIUM).exists() or shutil.which(CHROMIUM) is None:
        pytest.fail(f"{CHROMIUM} is missing: `make browser` installs Debian's chromium as root "
                    "(sudo apt-get install -y chromium), or set TUNEFORGE_CHROMIUM to one")
    from playwright.sync_api import sync_playwright

    pw = sync_playwright().start()
    chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    try:
        yield chromium
    finally:
        chromium.close()
        pw.stop()


class Page:
    """A page with the team's key (or none), collecting script errors."""

    def __init__(self, browser: Any, base: str, key: str | None) -> None:
        self.context = browser.new_context(viewport={"width": 1500, "height": 1100})
        if key is not None:
            self.context.add_init_script(
                f"localStorage.setItem({json.dumps(KEY_STORAGE)}, {json.dumps(key)})")
        self.page = self.context.new_page()
        self.base = base
        self.errors: list[str] = []
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        self.page.on("console", lambda m: self.errors.append(f"console: {m.text}")
                     if m.type == "error" else None)

    def goto(self, path: str) -> Any:
        self.page.goto(self.base + path)
        return self.page

    def loaded(self) -> None:
        self.page.wait_for_selector("body[data-loaded=true]", timeout=20_000)

    def close(self) -> None:
        self.context.close()
        assert not self.errors, self.errors


@pytest.fixture
def page(browser: Any, server: Server, done: tuple[TeamDb, str]) -> Iterator[Page]:
    p = Page(browser, server.url, done[0].key)
    try:
        yield p
    finally:
        p.close()


def rows_of(db: TeamDb, campaign_id: str) -> list[Candidate]:
    with db.sessions() as s:
        return list(s.scalars(select(Candidate).where(Candidate.campaign_id == campaign_id)
                              .order_by(Candidate.iteration)).all())


def wait_js(page: Any, expression: str, timeout_s: float = 20.0) -> None:
    """Poll a JavaScript expression until it is true. (``wait_for_function`` compiles its
    predicate with ``new Function``, which the dashboard's CSP forbids; ``evaluate`` does not.)"""
    deadline = time.monotonic() + timeout_s
    while not page.evaluate(expression):
        if time.monotonic() > deadline:
            raise AssertionError(f"still false after {timeout_s} s: {expression}")
        time.sleep(0.1)


def point_on_screen(page: Any, plot: str, candidate_id: str) -> dict[str, float]:
    """Where a candidate's point is drawn, in viewport pixels (the plot scrolled into view)."""
    page.locator(f"#plot-{plot}").scroll_into_view_if_needed()
    where = page.evaluate(f"tuneforgeDashboard.pointPosition('{plot}', '{candidate_id}')")
    assert where is not None, f"{candidate_id} is not drawn in the {plot} plot"
    return dict(where)


def attr(page: Any, selector: str, name: str) -> str | None:
    value = page.get_attribute(selector, name)
    return None if value is None else str(value)


# ---- tests ------------------------------------------------------------------------------------
def test_key_is_asked_once_then_campaigns_are_listed(browser: Any, server: Server,
                                                     done: tuple[TeamDb, str],
                                                     artifacts: Path) -> None:
    db, cid = done
    p = Page(browser, server.url, None)
    page = p.goto("/ui/")
    page.wait_for_selector("#key-dialog")
    page.fill("#api-key", db.key)
    page.click("#key-form button[type=submit]")
    p.loaded()
    assert page.evaluate(f"localStorage.getItem({json.dumps(KEY_STORAGE)})") == db.key
    row = page.locator(f"#campaigns tr[data-id='{cid}']")
    cells = row.locator("td").all_inner_texts()
    with db.sessions() as s:
        campaign = s.get(Campaign, cid)
        assert campaign is not None
        assert campaign.best_us
        assert campaign.vendor_us
        tflops = 2 * 4096**3 / (campaign.best_us * 1e-6) / 1e12
        pct = 100 * campaign.vendor_us / campaign.best_us
    assert cells[0] == cid[:8]
    assert cells[1].startswith("done")
    assert cells[5] == "40 / 40"
    assert cells[6] == f"{tflops:.2f} TFLOP/s"
    assert cells[7] == f"{pct / 100:.2f}×"  # × vendor, the one wording of every page
    assert "× vendor" in page.inner_text("#campaigns thead")
    page.screenshot(path=str(artifacts / "campaigns.png"), full_page=True)
    page.goto(server.url + "/ui/history")  # the key is kept: no second question
    p.loaded()
    assert page.locator("#key-dialog").count() == 0
    p.close()


def test_a_refused_key_is_asked_again_with_the_servers_reason(browser: Any, server: Server
                                                               ) -> None:
    p = Page(browser, server.url, "tf_00000000_not-a-key")
    page = p.goto("/ui/")
    page.wait_for_selector("#key-dialog")
    assert "invalid API key" in page.inner_text("#key-form")
    p.errors = [e for e in p.errors if "401" not in e]  # the refused request itself
    p.close()


def test_campaign_page_plots_every_candidate_by_status(page: Page, done: tuple[TeamDb, str],
                                                       artifacts: Path) -> None:
    db, cid = done
    rows = rows_of(db, cid)
    pg = page.goto(f"/ui/campaigns/{cid}")
    page.loaded()
    pg.wait_for_selector("#candidate[data-ready=true]")  # the best one, selected on load
    for plot in ("iteration", "time"):
        assert attr(pg, f"#plot-{plot}", "data-points") == str(len(rows))
        assert attr(pg, f"#plot-{plot}", "data-drawn-points") == str(len(rows))
        legend = pg.inner_text(f"#plot-{plot} .u-legend")
        for label in ("best so far", "cuBLAS fp32 50.4", "FP32 FMA peak 66.9", "ok (30)",
                      "compile_error (5)", "wrong (2)", "crashed (2)", "timeout (1)"):
            assert label in legend, (plot, label, legend)
    with db.sessions() as s:
        campaign = s.get(Campaign, cid)
        assert campaign is not None
        best_id = campaign.best_id
    assert attr(pg, "#candidate", "data-candidate") == best_id
    assert pg.inner_text("[data-stat=evaluations] .value") == "40 / 40"
    with db.sessions() as s:
        campaign = s.get(Campaign, cid)
        assert campaign is not None
        assert campaign.best_us is not None
        assert campaign.vendor_us is not None
        ratio = campaign.vendor_us / campaign.best_us
        best_rate = 2 * 4096**3 / (campaign.best_us * 1e-6) / 1e12
    assert pg.inner_text("[data-stat=vendor] .label") == "× cuBLAS fp32"
    assert pg.inner_text("[data-stat=vendor] .value") == f"{ratio:.2f}×"
    # the SIMT best against the FP32 FMA peak, the peak that bounds it
    assert pg.inner_text("[data-stat=peak] .label") == "FP32 FMA peak"
    assert pg.inner_text("[data-stat=peak] .sub") == \
        f"the best runs at {100 * best_rate / 66.912:.0f}% of it"
    pg.screenshot(path=str(artifacts / "campaign.png"), full_page=True)
    # zoom by dragging across the first half of the iteration plot: fewer points drawn
    assert pg.evaluate("window.scrollY") == 0  # selecting the best did not move the page
    box = pg.locator("#plot-iteration .u-over").bounding_box()
    pg.mouse.move(box["x"] + 5, box["y"] + box["height"] / 2)
    pg.mouse.down()
    pg.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2, steps=5)
    pg.mouse.up()
    wait_js(pg, "Number(document.querySelector('#plot-iteration').dataset.drawnPoints)"
            f" < {len(rows)}")


def test_clicking_a_point_shows_its_source_diff_and_profile(page: Page, done: tuple[TeamDb, str],
                                                            artifacts: Path) -> None:
    db, cid = done
    rows = rows_of(db, cid)
    pg = page.goto(f"/ui/campaigns/{cid}")
    page.loaded()
    pg.wait_for_selector("#candidate[data-ready=true]")
    target = next(c for c in rows if c.accepted and c.iteration > 5 and c.action)
    where = point_on_screen(pg, "iteration", target.id)
    pg.mouse.click(where["x"], where["y"])
    pg.wait_for_selector(f"#candidate[data-candidate='{target.id}'][data-ready=true]")
    panel = pg.inner_text("#candidate")
    assert f"#{target.iteration}" in panel
    assert target.action is not None
    assert target.action in panel
    assert target.reason is not None
    assert target.reason in panel
    assert (target.decision or {})["reason"] in panel
    # the diff against its parent: lines removed and added, the changed parameter marked
    assert pg.locator("#diff .d2h-ins").count() > 0
    assert pg.locator("#diff .d2h-del").count() > 0
    assert pg.locator("#params .param.changed").count() >= 1
    # the profile: every figure with its source, every null one with its reason
    figures = pg.locator("#profile tr.figure")
    assert figures.count() >= 8
    for i in range(figures.count()):
        source = figures.nth(i).locator("td.source").inner_text().strip()
        value = figures.nth(i).locator("td.value").inner_text().strip()
        assert source, figures.nth(i).inner_text()
        if value == "null":
            assert source.startswith("null: profile=light"), source
    assert "cuFuncGetAttribute" in pg.inner_text("#profile")
    pg.screenshot(path=str(artifacts / "candidate.png"), full_page=True)
    pg.click(".tabs button[data-tab=Source]")
    source = pg.inner_text("pre#source")
    assert source == rows[target.iteration].source
    # a failed candidate, clicked in the plot against time, shows why it failed
    wrong = rows[next(i for i, s in FAILURES.items() if s == "wrong")]
    where = point_on_screen(pg, "time", wrong.id)
    pg.mouse.click(where["x"], where["y"])
    pg.wait_for_selector(f"#candidate[data-candidate='{wrong.id}'][data-ready=true]")
    assert pg.inner_text("#candidate .badge") == "wrong"
    assert "rel_err 3.1e-01 > 1e-04 (injected)" in pg.inner_text("#candidate")
    assert pg.locator("#chain tr.selected").get_attribute("data-id") == wrong.id


GUTTER = """(() => {
  const box = document.querySelector('#diff');
  const cells = [...box.querySelectorAll('.d2h-code-linenumber')];
  const off = cells.filter(c => Math.abs(c.getBoundingClientRect().top
                                         - c.closest('tr').getBoundingClientRect().top) > 1);
  const page = document.scrollingElement;
  return {cells: cells.length, misaligned: off.length,
          outside: cells.filter(c => !box.contains(c.offsetParent)).length,
          scrollHeight: box.scrollHeight, clientHeight: box.clientHeight,
          pageBottom: page.scrollHeight,
          boxBottom: box.getBoundingClientRect().bottom + page.scrollTop};
})()"""


def test_a_long_diff_keeps_its_line_numbers_inside_the_box(page: Page, done: tuple[TeamDb, str],
                                                           artifacts: Path) -> None:
    """diff2html's line-number gutter is absolutely positioned: in a scroll box that is not
    their containing block the numbers of a long diff (apply_shared_memory_load: ~170 lines)
    spilled below the 560 px box, grew the page by thousands of pixels, and stayed put when the
    box scrolled."""
    db, cid = done
    rows = rows_of(db, cid)
    target = next(c for c in rows if c.accepted and c.action == "apply_shared_memory_load(true)")
    pg = page.goto(f"/ui/campaigns/{cid}")
    page.loaded()
    pg.click(f"#chain tr[data-id='{target.id}']")
    pg.wait_for_selector(f"#candidate[data-candidate='{target.id}'][data-ready=true]")
    pg.locator("#diff").scroll_into_view_if_needed()
    gutter = pg.evaluate(GUTTER)
    assert gutter["cells"] > 100, gutter
    assert gutter["scrollHeight"] > 3 * gutter["clientHeight"], gutter  # a long diff, scrolled
    assert gutter["outside"] == 0, gutter  # positioned in the box, so clipped and scrolled by it
    assert gutter["misaligned"] == 0, gutter
    # nothing of the diff hangs below its box (the page grew to ~4300 px of numbers)
    assert gutter["pageBottom"] < gutter["boxBottom"] + 400, gutter
    pg.screenshot(path=str(artifacts / "candidate-long-diff.png"), full_page=True)
    for where in ("box.scrollHeight / 2", "box.scrollHeight"):
        pg.evaluate(f"(() => {{ const box = document.querySelector('#diff'); "
                    f"box.scrollTop = {where}; }})()")
        scrolled = pg.evaluate(GUTTER)
        assert scrolled["misaligned"] == 0, (where, scrolled)  # each number beside its line
    pg.screenshot(path=str(artifacts / "candidate-long-diff-scrolled.png"), full_page=True)


def test_a_failed_candidate_shows_its_status_and_one_line_the_rest_behind_a_click(
        page: Page, done: tuple[TeamDb, str], artifacts: Path) -> None:
    # the dashboard showed a failed candidate's raw Python exception text, traceback and all
    db, cid = done
    crashed = rows_of(db, cid)[12]
    assert crashed.error == CHILD_DEATH
    one_line = ("evaluation process died (exit 1): LogicError: cuStreamSynchronize failed: an "
                "illegal memory access was encountered (injected by the test)")
    pg = page.goto(f"/ui/campaigns/{cid}")
    page.loaded()
    row = pg.locator(f"#chain tr[data-id='{crashed.id}']")
    assert row.locator(".badge").inner_text() == "crashed"  # the recorded status
    assert row.locator(".failure").inner_text() == one_line
    assert "Traceback" not in row.inner_text()
    assert 'File "' not in pg.inner_text("#chain")
    row.click()
    pg.wait_for_selector(f"#candidate[data-candidate='{crashed.id}'][data-ready=true]")
    panel = pg.locator("#candidate")
    assert panel.locator(".failure").inner_text() == one_line
    assert "why it failed" in panel.inner_text()
    detail = pg.locator("#error-detail pre")
    assert not detail.is_visible()  # the detail waits behind a click
    pg.click("#error-detail summary")
    assert detail.is_visible()
    assert detail.inner_text() == CHILD_DEATH
    pg.screenshot(path=str(artifacts / "candidate-failed.png"), full_page=True)
    # every failed candidate's row is one line: its status and why
    for c in rows_of(db, cid):
        if c.status not in ("ok", "pending", "compiling", "compiled", "measuring"):
            cell = pg.locator(f"#chain tr[data-id='{c.id}'] .failure").inner_text()
            assert cell, c.iteration
            assert "\n" not in cell, (c.iteration, cell)


def test_decision_chain_lists_every_step_and_filters_the_accepted(page: Page,
                                                                  done: tuple[TeamDb, str]
                                                                  ) -> None:
    db, cid = done
    rows = rows_of(db, cid)
    pg = page.goto(f"/ui/campaigns/{cid}")
    page.loaded()
    assert pg.locator("#chain tbody tr").count() == len(rows)
    pg.check("#accepted-only")
    accepted = [c for c in rows if c.accepted]
    shown = pg.locator("#chain tbody tr")
    assert shown.count() == len(accepted)
    assert [shown.nth(i).get_attribute("data-id") for i in range(shown.count())] == [
        c.id for c in accepted]
    shown.nth(2).click()
    pg.wait_for_selector(f"#candidate[data-candidate='{accepted[2].id}'][data-ready=true]")
    assert "✓ accepted" in pg.inner_text("#candidate")


def test_a_dropped_injected_action_is_shown_in_the_chain_and_by_watch(
        page: Page, server: Server, done: tuple[TeamDb, str], artifacts: Path) -> None:
    """``POST /campaigns/{id}/actions`` with an action that changes nothing is dropped with a
    note (``injected_not_tried``): the decision chain shows it where it happened and ``tuneforge
    watch`` prints it (neither did)."""
    import httpx

    db, _ = done
    cid = create_campaign(db, budget=6)
    injected = httpx.post(f"{server.url}/api/v1/campaigns/{cid}/actions",
                          headers={"X-API-Key": db.key},
                          json={"actions": ["apply_coalesce(false)"]})  # the baseline's own
    assert injected.status_code == 200, injected.text
    run_campaign(db, cid, faults=False)
    message = "apply_coalesce(false) was not tried: "
    pg = page.goto(f"/ui/campaigns/{cid}")
    page.loaded()
    notes = pg.locator("#chain tbody tr.note")
    assert notes.count() == 1
    assert message in notes.first.inner_text()
    # after the baseline (#0), the kernel it was refused from, before the next candidate
    order = pg.evaluate("[...document.querySelectorAll('#chain tbody tr')]"
                        ".map(r => r.classList.contains('note') ? 'note' : r.dataset.iteration)")
    assert order[:3] == ["0", "note", "1"], order
    assert "1 note" in pg.inner_text("#chain-count")
    pg.locator("#chain").screenshot(path=str(artifacts / "chain-note.png"))
    pg.check("#accepted-only")  # still shown among the accepted steps
    assert pg.locator("#chain tbody tr.note").count() == 1
    watched = CliRunner().invoke(cli_app, ["watch", cid[:8], "--url", server.url, "--key",
                                           db.key], env={"COLUMNS": "300"})
    assert watched.exit_code == 0, watched.output
    assert [line for line in watched.stderr.splitlines()
            if line.startswith(f"note: {message}")], watched.stderr


def test_a_running_campaign_updates_live(page: Page, done: tuple[TeamDb, str],
                                         artifacts: Path) -> None:
    db, _ = done
    live_id = create_campaign(db, budget=20)
    pg = page.goto(f"/ui/campaigns/{live_id}")
    page.loaded()
    wait_js(pg, "['live', 'connecting'].includes(document.querySelector('#live')"
                         ".dataset.state)")
    assert attr(pg, "#plot-iteration", "data-points") == "0"
    errors: list[BaseException] = []

    def work() -> None:
        try:
            run_campaign(db, live_id, delay_s=0.08)
        except BaseException as exc:
            errors.append(exc)

    worker = threading.Thread(target=work)
    worker.start()
    try:
        wait_js(pg, "Number(document.querySelector('#plot-iteration').dataset.points)"
                             " >= 5", 30)
        pg.screenshot(path=str(artifacts / "campaign-live.png"), full_page=True)
    finally:
        worker.join(60)
    assert not errors, errors
    wait_js(pg, "document.querySelector('#live').dataset.state === 'finished'", 30)
    wait_js(pg, "document.querySelector('#plot-time').dataset.drawnPoints === '20'", 30)
    # the stats and the points come from two requests of one refresh: the refresh that the
    # 'finished' event schedules (1 s later) brings the stats level with the points
    wait_js(pg, "document.querySelector('[data-stat=evaluations] .value').textContent"
                " === '20 / 20'", 15)
    wait_js(pg, "document.querySelector('[data-stat=status] .value').textContent === 'done'",
            15)


def test_a_live_plots_legend_counts_the_points_it_holds(page: Page, done: tuple[TeamDb, str]
                                                        ) -> None:
    """Opened while a campaign runs (every candidate ok): the plots keep their first uPlot
    (same series) as points arrive, and the legend's "ok (N)" must grow with them (it stayed
    at the N of the first draw)."""
    db, _ = done
    # measured afresh: the team's earlier campaigns hold injected failures it would be served
    live_id = create_campaign(db, budget=24, reuse=False)
    errors: list[BaseException] = []

    def work() -> None:
        try:
            run_campaign(db, live_id, delay_s=0.15, faults=False)
        except BaseException as exc:
            errors.append(exc)

    worker = threading.Thread(target=work)
    worker.start()
    try:
        deadline = time.monotonic() + 30
        while sum(c.status == "ok" for c in rows_of(db, live_id)) < 3:
            assert time.monotonic() < deadline, "the campaign did not start"
            time.sleep(0.05)
        pg = page.goto(f"/ui/campaigns/{live_id}")
        page.loaded()
        first = int(attr(pg, "#plot-iteration", "data-points") or 0)
    finally:
        worker.join(60)
    assert not errors, errors
    assert 3 <= first < 24  # drawn first mid-way
    wait_js(pg, "document.querySelector('#live').dataset.state === 'finished'", 30)
    wait_js(pg, "document.querySelector('#plot-time').dataset.drawnPoints === '24'", 30)
    assert {c.status for c in rows_of(db, live_id)} == {"ok"}
    for plot in ("iteration", "time"):
        legend = pg.inner_text(f"#plot-{plot} .u-legend")
        assert "ok (24)" in legend, (plot, legend)


def test_a_campaign_that_failed_before_any_candidate_says_so(page: Page,
                                                              done: tuple[TeamDb, str]) -> None:
    """Its page must not say "yet" as if candidates were still to come."""
    from agent.engine import lifecycle

    db, _ = done
    failed_id = create_campaign(db, budget=10)
    with db.sessions.begin() as s:
        row = s.get(Campaign, failed_id)
        assert row is not None
        lifecycle.finish_campaign(s, row, "failed", "replay backend: no measurement (the test)")
    pg = page.goto(f"/ui/campaigns/{failed_id}")
    page.loaded()
    for plot in ("iteration", "time"):
        assert pg.inner_text(f"#plot-{plot}") == ("No candidate was evaluated: the campaign is "
                                                  "failed.")
    assert pg.inner_text("[data-stat=best] .sub") == "no correct kernel"
    assert "yet" not in pg.inner_text("main")


def test_a_team_familys_campaign_shows_its_name_and_version(page: Page,
                                                            done: tuple[TeamDb, str]) -> None:
    """A campaign stores the version's content key; people read the name and the version."""
    from agent.engine import lifecycle
    from core import families
    from kernels.userspec import load_spec_dir

    db, _ = done
    families.install(db.url)
    spec = load_spec_dir(Path(__file__).resolve().parent / "data" / "families" / "vscale")
    with db.sessions.begin() as s:
        key = families.register(s, spec=spec, team_id=db.team_id).key
        row = lifecycle.create_campaign(s, lifecycle.CampaignSpec(
            kernel=key, dims={"n": 4096}, budget_iterations=3, team_id=db.team_id),
            backend="gpu")
        lifecycle.finish_campaign(s, row, "failed", "no GPU here (the test)")
        campaign_id = row.id
    pg = page.goto(f"/ui/campaigns/{campaign_id}")
    page.loaded()
    assert pg.inner_text("#title") == f"Campaign {campaign_id[:8]} · vscale v1 4096"
    assert attr(pg, "#title span", "title") == key
    pg = page.goto("/ui/")
    page.loaded()
    wait_js(pg, f"document.querySelector('tr[data-id=\"{campaign_id}\"]') !== null")
    cell = pg.inner_text(f"tr[data-id='{campaign_id}'] td:nth-child(3)")
    assert cell.splitlines()[0] == "vscale v1"


def test_history_shows_the_teams_best_per_kernel_shape_and_gpu(page: Page,
                                                               done: tuple[TeamDb, str],
                                                               artifacts: Path) -> None:
    db, _ = done
    with db.sessions() as s:
        campaigns = [c for c in s.scalars(select(Campaign)).all() if c.best_us]
    best = min(campaigns, key=lambda c: c.best_us or 0.0)
    pg = page.goto("/ui/history")
    page.loaded()
    row = pg.locator("#history tbody tr")
    assert row.count() == 1
    cells = row.first.locator("td").all_inner_texts()
    assert cells[0] == "gemm_bias_relu"
    assert cells[1] == "4096×4096×4096"
    assert cells[2].startswith("NVIDIA H200")
    rate = 2 * 4096**3 / (best.best_us * 1e-6) / 1e12  # type: ignore[operator]
    assert cells[3] == f"{rate:.2f} TFLOP/s"
    assert cells[5] == str(len(campaigns))
    assert cells[7] == best.id[:8]
    pg.screenshot(path=str(artifacts / "history.png"), full_page=True)


def test_the_library_page_shows_each_shapes_best_and_picks_at_any_shape(
        page: Page, done: tuple[TeamDb, str], artifacts: Path) -> None:
    from agent import library

    db, _ = done
    with db.sessions() as s:
        known = library.entries(s, team_id=db.team_id, kernel="gemm_bias_relu")
    assert known, "the finished campaign put nothing in the team's library"
    pg = page.goto("/ui/history")
    page.loaded()
    pg.click("nav >> text=Library")
    page.loaded()
    assert pg.locator("#family").input_value() == "gemm_bias_relu"  # the team's tuned family
    rows = pg.locator("#entries tbody tr")
    assert rows.count() == len(known)
    cells = rows.first.locator("td").all_inner_texts()
    entry = known[0]
    assert cells[0] == entry.shape.replace("x", "×")
    assert cells[1] == f"{entry.avg_us:.1f} µs"
    assert cells[6].startswith(f"{entry.campaign_id[:8]} #{entry.iteration}")
    assert cells[4].splitlines()[0] == (str(len(entry.alternates)) if entry.alternates else "–")
    shapes, ties = len(known), len(entry.alternates)
    assert pg.locator("#summary").inner_text() == (
        f"{shapes} shape{'s' * (shapes != 1)} · {ties} near-tie{'s' * (ties != 1)} on {entry.gpu}")
    slower = entry.vendor_us is not None and entry.vendor_us < entry.avg_us
    assert ("the vendor runs" in cells[3]) == slower
    assert "--kernel gemm_bias_relu" in pg.locator("#export").inner_text()

    def pick(shape: str) -> Any:
        pg.fill("#shape", shape)
        pg.click("#pick-form button")
        pg.wait_for_selector(f"#pick[data-shown={json.dumps(shape)}]", timeout=20_000)
        return pg.locator("#pick")

    here = pick("4096x4096x4096")
    assert here.locator("[data-rule]").get_attribute("data-rule") == "1"
    assert "measured here" in here.inner_text()
    elsewhere = pick("2048x2048x2048")
    rule = elsewhere.locator("[data-rule]").get_attribute("data-rule")
    assert rule in ("2", "3")
    if rule == "2":  # the export runs the vendor there unless asked: the page says so
        assert "library probe --kernel gemm_bias_relu --shapes 2048x2048x2048" in \
            elsewhere.inner_text()
    pg.screenshot(path=str(artifacts / "library.png"), full_page=True)
    bad = pick("0x1x1")
    assert "must be in" in bad.locator("[role=alert]").inner_text()
    # the browser logs the refused request itself; nothing else may have gone wrong
    refused = [e for e in page.errors if "status of 422" in e]
    assert len(refused) == 1, page.errors
    page.errors.remove(refused[0])
    pg.select_option("#family", "softmax")  # a family the team never tuned: a new page
    pg.wait_for_url("**/ui/library?family=softmax", timeout=20_000)
    page.loaded()
    assert pg.locator("#summary").inner_text() == "nothing measured yet"
    assert "every shape runs the vendor" in pg.locator("#entries tbody").inner_text()


def test_report_and_exports_read_the_api_as_they_read_the_database(
        server: Server, done: tuple[TeamDb, str], tmp_path: Path) -> None:
    db, cid = done
    path = db.url.split("///", 1)[1]
    runner = CliRunner()
    remote = ["--url", server.url, "--key", db.key]
    for fmt in ("t4", "kt", "json", "cu"):
        local = runner.invoke(cli_app, ["export", cid, "--format", fmt, "--db", path])
        api = runner.invoke(cli_app, ["export", cid[:8], "--format", fmt, *remote])
        assert local.exit_code == 0, local.output
        assert api.exit_code == 0, api.output
        assert api.stdout == local.stdout, fmt
    for name, source in (("local", ["--db", path]), ("api", remote)):
        result = runner.invoke(cli_app, ["report", cid, "--out", str(tmp_path / name), *source])
        assert result.exit_code == 0, result.output
    assert (tmp_path / "api" / "report.md").read_text() == \
        (tmp_path / "local" / "report.md").read_text()
    refused = runner.invoke(cli_app, ["report", cid, "--url", server.url, "--key", "tf_nope"])
    assert refused.exit_code == 3
    assert "TUNEFORGE_API_KEY" in refused.stderr


def test_watch_takes_a_prefix_and_says_when_there_is_no_kernel(
        server: Server, done: tuple[TeamDb, str]) -> None:
    """``tuneforge watch`` takes a unique prefix of the id, as ``report`` and ``export`` do (it
    answered "no campaign '…' (is it your team's campaign?" for the team's own campaign), and a
    campaign without a correct kernel is said so ("best None µs (None TFLOP/s)" before)."""
    from agent.engine import lifecycle

    db, cid = done
    remote = ["--url", server.url, "--key", db.key]
    runner = CliRunner()
    watched = runner.invoke(cli_app, ["watch", cid[:8], *remote])
    assert watched.exit_code == 0, watched.output
    assert f"campaign {cid[:8]} · done" in watched.stdout
    assert "None" not in watched.stdout
    failed_id = create_campaign(db, budget=10)
    with db.sessions.begin() as s:
        row = s.get(Campaign, failed_id)
        assert row is not None
        lifecycle.finish_campaign(s, row, "failed", "no measurement (the test)")
    failed = runner.invoke(cli_app, ["watch", failed_id[:10], *remote], env={"COLUMNS": "300"})
    assert failed.exit_code == 1, failed.output
    # words, not lines: a console made where COLUMNS was set (an xdist worker's 80) keeps its
    # width, and the line wraps there
    assert (f"campaign {failed_id[:8]} · failed (no measurement (the test)) · 0 evaluations · "
            "no correct kernel") in " ".join(failed.stdout.split())
    assert "None" not in failed.stdout
    exported = runner.invoke(cli_app, ["export", failed_id[:8], *remote])
    assert exported.exit_code == 4
    assert exported.stderr.strip() == (
        f"error: campaign {failed_id[:8]} is failed (no measurement (the test)) with no correct "
        "kernel: --format json exports what it has")
    unknown = runner.invoke(cli_app, ["watch", "abcdef12", *remote])
    assert unknown.exit_code == 4
    assert "no campaign 'abcdef12'" in unknown.stderr
