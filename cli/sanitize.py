"""``tuneforge sanitize``: the compute-sanitizer gate on a campaign's best kernel (or another
candidate), on this host's GPU; the record is stored with the candidate."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer
from rich.table import Table

from cli.common import DbOpt, console, database_url, err_console, fail
from core.settings import get_settings

#: exit codes: 0 passed, 1 flagged, 2 bad input or nothing to run on, 3 the gate could not judge
EXIT_FLAGGED = 1
EXIT_ERROR = 3


def gate_candidate(sessions: Any, candidate_id: str, *, tools: tuple[str, ...],
                   shapes: list[Any] | None, gpu: str, timeout_s: float, exe: str,
                   device: dict[str, Any]) -> dict[str, Any]:
    """Run the gate (:func:`worker.sanitize.gate`, the service's) on a stored candidate and
    store the record; the record."""
    from agent.sanitize import record_result
    from core.models import Campaign, Candidate
    from kernels import get_family
    from worker.compile import compiler_from_settings
    from worker.sanitize import gate

    with sessions() as s:
        cand = s.get(Candidate, candidate_id)
        campaign = s.get(Campaign, cand.campaign_id)
        family = get_family(campaign.kernel)
        params = family.params_from_dict(cand.params)
        source, arch, tolerance = cand.source, campaign.arch, campaign.tolerance
        campaign_shape = campaign.problem
    compiler = compiler_from_settings(get_settings(), arch=arch)
    try:
        with err_console.status(f"compute-sanitizer {', '.join(tools)} on candidate "
                                f"{candidate_id[:8]} …"):
            record = gate(compiler, family, params, source, campaign_shape=campaign_shape,
                          tolerance=tolerance, gpu=gpu, exe=exe, timeout_s=timeout_s,
                          tools=tools, shapes=shapes, device=device)
    finally:
        compiler.close()
    with sessions.begin() as s:
        record_result(s, candidate_id, record)
    return record


def print_record(record: dict[str, Any], title: str) -> None:
    """The record as a short table: one row per tool."""
    table = Table(title=title)
    for col, justify in (("tool", "left"), ("verdict", "left"), ("found", "right"),
                         ("shapes", "left"), ("s", "right"), ("first message / reason", "left")):
        table.add_column(col, justify=justify, overflow="fold")  # type: ignore[arg-type]
    colours = {"passed": "green", "flagged": "bold red", "error": "yellow"}
    for tool, run in record["tools"].items():
        if run["status"] == "error":
            found = "–"
        elif tool == "racecheck":
            found = (f"{run.get('hazards')} hazards ({run.get('hazard_errors')} err, "
                     f"{run.get('hazard_warnings')} warn)")
        else:
            found = f"{run.get('errors')} errors"
        note = run.get("error") or next(iter(run.get("messages") or []), "")
        table.add_row(tool, f"[{colours.get(run['status'], '')}]{run['status']}[/]", found,
                      ", ".join(run.get("shapes") or []), f"{run.get('seconds', 0):.1f}",
                      str(note)[:300])
    console.print(table)


def exit_code(record: dict[str, Any]) -> int:
    """0 passed, 1 flagged, 3 could not judge."""
    return {"passed": 0, "flagged": EXIT_FLAGGED}.get(record["status"], EXIT_ERROR)


def sanitize(
    campaign_id: Annotated[str, typer.Argument(help="campaign id (or a unique prefix)")],
    candidate: Annotated[str | None, typer.Option(
        "--candidate", help="candidate id or prefix (default: the campaign's accepted best)")
    ] = None,
    db: DbOpt = None,
    tools: Annotated[str, typer.Option(
        help="comma-separated: memcheck, racecheck, synccheck, initcheck")
    ] = "memcheck,racecheck",
    shape: Annotated[list[str] | None, typer.Option(
        "--shape", help="a shape to run at instead of the gate's, in the family's notation "
                        "(4096x4096x4096; repeatable)")] = None,
    gpu: Annotated[str, typer.Option(help="GPU index")] = "0",
    timeout: Annotated[float | None, typer.Option(
        help="seconds per tool before it is killed (TUNEFORGE_SANITIZE_TIMEOUT_S)", min=1)
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the record as JSON")] = False,
) -> None:
    """Check a campaign's best kernel with compute-sanitizer on this host's GPU.

    The result is stored with the candidate (its API record and `export --format json` show
    it). Each tool runs the compiled candidate in its own process, killed at the time limit, at
    the sanitizer shapes its family gives for that point (tails, scalar and vector paths,
    several tiles or rows in every direction); memcheck also at the campaign's shape.

    Exit 0 when every tool passed, 1 when one flagged the kernel, 2 for bad input or no GPU /
    compute-sanitizer / best kernel, 3 when a tool's run could not be judged (timeout,
    incomplete report; stored too: never a pass).

    Examples:

      tuneforge sanitize 81d814f4 --db runs.db

      tuneforge sanitize 81d814f4 --tools memcheck,racecheck,synccheck --shape 257x259x67

      tuneforge sanitize 81d814f4 --candidate 3fa0 --json
    """
    from cli.report import DbSource
    from core.models import Campaign, Candidate
    from kernels import get_family
    from worker.sanitize import SanitizerUnavailable, parse_tools, probe_gpu, sanitizer_path

    settings = get_settings()
    try:
        tool_list = parse_tools(tools)
    except ValueError as exc:
        fail(f"--tools: {exc}")
    source = DbSource(database_url(db))
    cid = source.resolve(campaign_id)
    with source.sessions() as s:
        campaign = s.get(Campaign, cid)
        assert campaign is not None
        shapes = None
        if shape:  # in the campaign's family's own notation
            family = get_family(campaign.kernel)
            try:
                shapes = [family.parse_dims(text) for text in shape]
            except ValueError as exc:
                fail(f"--shape: {exc}")
        if candidate is not None:
            ids = [i for (i,) in s.query(Candidate.id).filter(
                Candidate.campaign_id == cid, Candidate.id.startswith(candidate,
                                                                      autoescape=True))]
            if len(ids) != 1:
                fail(f"{'no' if not ids else len(ids)} candidate(s) of campaign {cid[:8]} "
                     f"start with {candidate!r}", code=2 if ids else 4)
            chosen = s.get(Candidate, ids[0])
        else:
            chosen = s.get(Candidate, campaign.best_id) if campaign.best_id else None
            if chosen is None:
                fail(f"campaign {cid[:8]} has no accepted best kernel (status "
                     f"{campaign.status}, {campaign.evaluations} evaluations): nothing to check")
        assert chosen is not None
        if chosen.status != "ok" or not chosen.source:
            fail(f"candidate {chosen.id[:8]} is {chosen.status}: only a kernel that passed its "
                 "evaluation can be checked")
        chosen_id, iteration, arch = chosen.id, chosen.iteration, campaign.arch
    exe = sanitizer_path(settings.compute_sanitizer)
    if exe is None:
        fail(f"{settings.compute_sanitizer} not found: compute-sanitizer comes with the CUDA "
             "toolkit (TUNEFORGE_COMPUTE_SANITIZER names another executable)")
    try:
        device = probe_gpu(gpu)
    except SanitizerUnavailable as exc:
        fail(f"no usable GPU here: {exc}")
    if device.get("arch") != arch.removesuffix("a"):
        fail(f"the campaign's kernels target {arch} but GPU {gpu} is {device.get('arch')} "
             f"({device.get('name')})")
    record = gate_candidate(source.sessions, chosen_id, tools=tool_list, shapes=shapes, gpu=gpu,
                            timeout_s=timeout or settings.sanitize_timeout_s, exe=exe,
                            device=device)
    if as_json:
        sys.stdout.write(json.dumps(record) + "\n")
    else:
        print_record(record, f"sanitizer gate · campaign {cid[:8]} · candidate {chosen_id[:8]} "
                             f"(iteration {iteration}) · {device.get('name')} · "
                             f"compute-sanitizer {record['sanitizer_version']}")
        err_console.print(f"{record['status']}: {record['summary']} · stored with candidate "
                          f"{chosen_id[:8]} in {source.where}")
    raise typer.Exit(exit_code(record))


def register(app: typer.Typer) -> None:
    """Add ``sanitize`` to the ``tuneforge`` app."""
    app.command()(sanitize)
