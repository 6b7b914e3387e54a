"""``tuneforge campaigns``, ``report`` and ``export``: a campaign for people (PNG plots, a Markdown
summary) and for other tools (the best ``.cu``, the whole history as JSON, T4 results, a Kernel
Tuner cache), read from a local database (embedded campaigns) or from the REST API."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Protocol

import typer
from rich import box
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from cli.client import KeyOpt, UrlOpt, api_client, call, check_response, find_families_on
from cli.common import (
    cannot_write,
    console,
    database_url,
    err_console,
    fail,
    open_database,
    path_option,
    require_tables,
    sqlite_path,
)
from core.settings import get_settings

DbOpt = Annotated[str | None, typer.Option(
    "--db", help="SQLite file (`tuneforge tune --db`) or database URL; without --db, --url or "
                 "--key: TUNEFORGE_API_KEY picks the API, else the local database")]
FORMATS = ("cu", "json", "t4", "kt")


def progress(label: str, *, quiet: bool = False) -> Progress:
    """A progress bar on stderr (hidden with ``quiet`` or when stderr is not a terminal)."""
    return Progress(SpinnerColumn(), TextColumn(f"[bold]{label}[/] {{task.description}}"),
                    BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=err_console, transient=True, disable=quiet)


class Source(Protocol):
    """Where a campaign is read from: a database, or the API (same JSON either way)."""

    where: str

    def campaigns(self) -> list[dict[str, Any]]:
        """Campaigns, newest first (as ``GET /campaigns``)."""
        ...

    def resolve(self, campaign_id: str) -> str:
        """The full id of a campaign given by its id or a unique prefix of it."""
        ...

    def campaign(self, campaign_id: str) -> dict[str, Any]:
        """As ``GET /campaigns/{id}``."""
        ...

    def points(self, campaign_id: str, bar: Progress) -> dict[str, Any]:
        """As ``GET /campaigns/{id}/points``, every page in ``items``."""
        ...

    def best(self, campaign_id: str) -> dict[str, Any] | None:
        """As ``GET /campaigns/{id}/best`` (``None`` before a correct kernel)."""
        ...

    def candidates(self, campaign_id: str, bar: Progress) -> list[dict[str, Any]]:
        """Every candidate as ``GET /campaigns/{id}/candidates/{cid}``, by iteration."""
        ...


def _match(campaign_id: str, ids: list[str], where: str) -> str:
    if campaign_id in ids:
        return campaign_id
    found = [i for i in ids if i.startswith(campaign_id)]
    if len(found) == 1:
        return found[0]
    if not found:
        fail(f"no campaign {campaign_id!r} in {where}: `tuneforge campaigns` lists them "
             "(pass --db PATH for another local database, or --url/--key for the service)",
             code=4)
    fail(f"{len(found)} campaigns start with {campaign_id!r} in {where}: give more of the id")


class DbSource:
    """Campaigns of a local database (embedded runs; also a service's database)."""

    def __init__(self, url: str) -> None:
        """``url`` as :func:`cli.common.database_url` gives it (a file that exists)."""
        from core import families
        from core.db import session_factory

        path = sqlite_path(url)
        if path is not None:
            open_database(url)  # a file of an older version gets the newer columns
        else:
            require_tables(url)  # a service's database: migrated by its admin, not here
        families.install(url)  # its campaigns may run families registered in it
        self.sessions = session_factory(url)
        self.where = str(path) if path is not None else "the database"

    @contextmanager
    def _campaign(self, campaign_id: str) -> Iterator[tuple[Any, Any]]:
        from core.models import Campaign

        with self.sessions() as s:
            campaign = s.get(Campaign, campaign_id)
            assert campaign is not None
            yield s, campaign

    def campaigns(self) -> list[dict[str, Any]]:
        """Campaigns, newest first."""
        from sqlalchemy import select

        from api.views import campaign_read
        from core.models import Campaign

        with self.sessions() as s:
            rows = s.scalars(select(Campaign).order_by(Campaign.created_at.desc())
                             .limit(200)).all()
            return [campaign_read(s, c).model_dump(mode="json") for c in rows]

    def resolve(self, campaign_id: str) -> str:
        """Full id from an id or a unique prefix."""
        from sqlalchemy import select

        from core.models import Campaign

        with self.sessions() as s:
            ids = list(s.scalars(select(Campaign.id).where(
                Campaign.id.startswith(campaign_id, autoescape=True))).all())
        return _match(campaign_id, ids, self.where)

    def campaign(self, campaign_id: str) -> dict[str, Any]:
        """The campaign as the API reads it."""
        from api.views import campaign_read

        with self._campaign(campaign_id) as (s, campaign):
            return campaign_read(s, campaign).model_dump(mode="json")

    def points(self, campaign_id: str, bar: Progress) -> dict[str, Any]:
        """Every point of the campaign."""
        from api.views import point_page

        task = bar.add_task("points", total=None)
        with self._campaign(campaign_id) as (s, c):
            page = point_page(s, c).model_dump(mode="json")
        bar.update(task, total=page["total"], completed=page["total"])
        return page

    def best(self, campaign_id: str) -> dict[str, Any] | None:
        """The best kernel: source, launch configuration, provenance."""
        from agent.report import best_kernel

        with self._campaign(campaign_id) as (s, campaign):
            found = best_kernel(s, campaign)
        if found is None:
            return None
        return {"campaign_id": campaign_id,
                "candidate_id": found["provenance"]["candidate_id"], **found}

    def candidates(self, campaign_id: str, bar: Progress) -> list[dict[str, Any]]:
        """Every candidate with its feedback record and source."""
        from sqlalchemy import select

        from api.schemas import CandidateDetail
        from core.models import Candidate

        with self.sessions() as s:
            rows = s.scalars(select(Candidate).where(Candidate.campaign_id == campaign_id)
                             .order_by(Candidate.iteration)).all()
            task = bar.add_task("candidates", total=len(rows))
            out = []
            for c in rows:
                out.append(CandidateDetail.model_validate(c, from_attributes=True)
                           .model_dump(mode="json"))
                bar.advance(task)
        return out


class ApiSource:
    """Campaigns of the team, over the REST API."""

    def __init__(self, url: str | None, key: str | None) -> None:
        self.client = api_client(url, key)
        self.where = str(self.client.base_url).rstrip("/").removesuffix("/api/v1")
        find_families_on(self.client)  # the team's campaigns may run its own families

    def _get(self, path: str, **params: Any) -> Any:
        return call(self.client, "GET", path, params=params or None)

    def campaigns(self) -> list[dict[str, Any]]:
        """The team's campaigns, newest first."""
        return list(self._get("/campaigns", limit=200))

    def resolve(self, campaign_id: str) -> str:
        """Full id from an id or a unique prefix (of the team's 200 newest campaigns)."""
        if len(campaign_id) == 32:
            return campaign_id
        return _match(campaign_id, [c["id"] for c in self.campaigns()], self.where)

    def campaign(self, campaign_id: str) -> dict[str, Any]:
        """``GET /campaigns/{id}``."""
        return dict(self._get(f"/campaigns/{campaign_id}"))

    def points(self, campaign_id: str, bar: Progress) -> dict[str, Any]:
        """Every page of ``GET /campaigns/{id}/points``."""
        task = bar.add_task("points", total=None)
        items: list[dict[str, Any]] = []
        while True:
            page = self._get(f"/campaigns/{campaign_id}/points", limit=5000, offset=len(items))
            items += page["items"]
            bar.update(task, total=page["total"], completed=len(items))
            if len(items) >= page["total"] or not page["items"]:
                return {**page, "items": items}

    def best(self, campaign_id: str) -> dict[str, Any] | None:
        """``GET /campaigns/{id}/best`` (a 404 is "no correct kernel yet")."""
        response = self.client.get(f"/campaigns/{campaign_id}/best")
        if response.status_code == 404 and "no correct kernel" in response.text:
            return None
        return dict(check_response(response))

    def candidates(self, campaign_id: str, bar: Progress) -> list[dict[str, Any]]:
        """Every candidate's detail (one request each)."""
        ids: list[str] = []
        while True:
            page = self._get(f"/campaigns/{campaign_id}/candidates", limit=500,
                             offset=len(ids))
            ids += [c["id"] for c in page["items"]]
            if len(ids) >= page["total"] or not page["items"]:
                break
        task = bar.add_task("candidates", total=len(ids))
        out = []
        for cid in ids:
            out.append(self._get(f"/campaigns/{campaign_id}/candidates/{cid}"))
            bar.advance(task)
        return out


def open_source(db: str | None, url: str | None, key: str | None) -> Source:
    """The database of ``--db``, the API of ``--url``/``--key``/TUNEFORGE_API_KEY, else the
    local database (where `tuneforge tune` writes by default)."""
    settings = get_settings()
    if db is not None and (url or key):
        fail("give either --db (a local database) or --url/--key (the service), not both")
    if db is not None:
        return DbSource(database_url(db))
    if url or key or settings.api_key:
        return ApiSource(url, key)
    return DbSource(database_url(None))


# ---- commands -------------------------------------------------------------------------------
def campaigns(db: DbOpt = None, url: UrlOpt = None, key: KeyOpt = None,
              as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False
              ) -> None:
    """List campaigns: id, status, kernel and shape, evaluations, best, × the vendor's speed.

    Examples:

      tuneforge campaigns                      # the local database (~/.tuneforge)

      tuneforge campaigns --db /tmp/x.db

      tuneforge campaigns --url http://gpu-box:8000 --key tf_…
    """
    source = open_source(db, url, key)
    rows = source.campaigns()
    if as_json:
        sys.stdout.write(json.dumps(rows, indent=1) + "\n")
        return
    cells: list[dict[str, str]] = []
    for c in rows:
        best = c.get("best") or {}
        rate = best.get("throughput")
        cells.append({
            "id": c["id"][:8], "status": c["status"],
            "kernel\nshape": f"{c['kernel']}\n{c['shape_text']}",
            "policy": c["policy"], "backend\nGPU": f"{c['backend']}\n{c.get('gpu') or '–'}",
            "evalu-\nations": f"{c['evaluations']}/{c['budget']['iterations']}",
            "best": f"{rate}\n{c['metric']['unit']}" if rate is not None else "–",
            "×\nvendor": f"{c['pct_of_vendor'] / 100:.2f}×" if c.get("pct_of_vendor") else "–",
            "created": c["created_at"][:16].replace("T", " ")})
    # every cell whole (the id is what the other commands take); where the terminal is too
    # narrow the least needed columns give way instead (--json has them all)
    for dropped in ((), ("created",), ("created", "policy")):
        table = _table(f"campaigns in {source.where}", cells, dropped)
        wide = console.options.update_width(10_000)  # the table's own width, not the screen's
        if console.measure(table, options=wide).maximum <= console.width:
            break
    console.print(table)
    if not rows:
        err_console.print("no campaign yet: `tuneforge tune` runs one here, `tuneforge submit` "
                          "sends one to the service")


def _table(title: str, cells: list[dict[str, str]], dropped: tuple[str, ...]) -> Table:
    """The campaigns table without the ``dropped`` columns; no cell is cut."""
    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for col in (col for col in (cells[0] if cells else {"id": ""}) if col not in dropped):
        left = col in ("id", "status", "kernel\nshape", "policy", "backend\nGPU", "created")
        table.add_column(col, justify="left" if left else "right", no_wrap=True)
    for row in cells:
        table.add_row(*(value for col, value in row.items() if col not in dropped))
    return table


def report(
    campaign_id: Annotated[str, typer.Argument(help="campaign id (or a unique prefix)")],
    db: DbOpt = None, url: UrlOpt = None, key: KeyOpt = None,
    out: Annotated[Path | None, typer.Option(
        help="folder for the files (default tuneforge-out/<id8>/)",
        parser=path_option("--out"))] = None,
) -> None:
    """Write a campaign's report: convergence plots (PNG) and a Markdown summary.

    The plots show the best so far in the family's metric (TFLOP/s, GB/s) against iteration and
    against time, with the vendor baseline's line and the best kernel's ceiling; the summary has
    the best, the baseline, the speedup, × the vendor's speed, the accepted steps with their
    reasons and the transforms that paid.

    Examples:

      tuneforge report 81d814f4 --db /tmp/x.db

      tuneforge report 81d814f4 --url http://gpu-box:8000 --out reports/

      TUNEFORGE_API_KEY=tf_… tuneforge report 81d814f4e…
    """
    from agent.exports import convergence_png, markdown_report, vendor_speed

    source = open_source(db, url, key)
    cid = source.resolve(campaign_id)
    out_dir = out or Path("tuneforge-out") / cid[:8]
    if out_dir.exists() and not out_dir.is_dir():
        fail(f"--out {out_dir} is a file: a report is a folder (report.md and two PNGs)")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        cannot_write(out_dir, exc)
    with progress("report") as bar:
        campaign = source.campaign(cid)
        page = source.points(cid, bar)
        step = bar.add_task("plots", total=3)
        points = page["items"]
        plots = []
        md = out_dir / "report.md"
        path = md
        try:
            for by, name in (("iteration", "convergence-iteration.png"),
                             ("elapsed_s", "convergence-time.png")):
                path = out_dir / name
                plots.append(convergence_png(campaign, points, path, by=by,
                                             peak=page.get("peak"),
                                             peak_label=page.get("peak_label")))
                bar.advance(step)
            path = md
            md.write_text(markdown_report(campaign, points, plots=[p.name for p in plots],
                                          peak=page.get("peak"),
                                          peak_label=page.get("peak_label")))
        except OSError as exc:
            cannot_write(path, exc)
        bar.advance(step)
    for path in [md, *plots]:
        sys.stdout.write(f"{path}\n")
    best = campaign.get("best") or {}
    err_console.print(f"campaign {cid[:8]} ({campaign['status']}): best "
                      f"{best.get('throughput', '–')} {campaign['metric']['unit']}, "
                      f"{vendor_speed(campaign.get('pct_of_vendor'), page.get('vendor'))}, "
                      f"{campaign['evaluations']} evaluations · read from {source.where}")
    err_console.print(f"GPU time {campaign.get('gpu_seconds', 0):.1f} s; "
                      f"{campaign.get('served_from_history', 0)} evaluations served from the "
                      "team's history", highlight=False)


def export(
    campaign_id: Annotated[str, typer.Argument(help="campaign id (or a unique prefix)")],
    fmt: Annotated[str, typer.Option(
        "--format", help="cu: the best kernel (launch configuration and provenance in its "
                         "first line) | json: every candidate's feedback record and source | "
                         "t4: T4 autotuning results | kt: a Kernel Tuner cache file")] = "cu",
    out: Annotated[Path | None, typer.Option(help="file to write (default: stdout)",
                                             parser=path_option("--out"))] = None,
    db: DbOpt = None, url: UrlOpt = None, key: KeyOpt = None,
) -> None:
    """Export a campaign: its best kernel, or its whole history for people or other tuners.

    T4 and kt contain every evaluated candidate, failed ones with their error class.

    Examples:

      tuneforge export 81d814f4 --db /tmp/x.db > best.cu

      tuneforge export 81d814f4 --format kt --out cache.json   # kernel_tuner.tune_cache(...)

      tuneforge export 81d814f4 --format t4 --url http://gpu-box:8000 --key tf_…
    """
    from agent.exports import kt_cache_document, t4_document
    from agent.report import best_kernel_source
    from core.formats import kt_cache_text

    if fmt not in FORMATS:
        fail(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    source = open_source(db, url, key)
    cid = source.resolve(campaign_id)
    with progress(f"export {fmt}") as bar:
        if fmt == "cu":
            best = source.best(cid)
            if best is None:
                campaign = source.campaign(cid)
                if campaign["status"] not in ("queued", "running"):
                    fail(f"campaign {cid[:8]} is {campaign['status']} "
                         f"({campaign.get('status_reason') or 'no reason recorded'}) with no "
                         "correct kernel: --format json exports what it has", code=4)
                follow = (f"`tuneforge watch {cid[:8]}` follows it; "
                          if isinstance(source, ApiSource) else "")
                fail(f"campaign {cid[:8]} ({campaign['status']}) has no correct kernel yet: "
                     f"{follow}--format json exports what it has", code=4)
            text = best_kernel_source(best)
        elif fmt == "json":
            campaign = source.campaign(cid)
            text = json.dumps({"campaign": campaign,
                               "candidates": source.candidates(cid, bar)}, indent=1) + "\n"
        else:
            campaign = source.campaign(cid)
            points = source.points(cid, bar)["items"]
            text = (json.dumps(t4_document(campaign, points), indent=1) + "\n" if fmt == "t4"
                    else kt_cache_text(kt_cache_document(campaign, points)))
    if out is None:
        sys.stdout.write(text)
    else:
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(text)
        except OSError as exc:
            cannot_write(out, exc)
        err_console.print(f"wrote {out}")


def register(app: typer.Typer) -> None:
    """Add ``campaigns``, ``report`` and ``export`` to the ``tuneforge`` app."""
    app.command()(campaigns)
    app.command()(report)
    app.command()(export)
