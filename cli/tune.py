"""``tuneforge tune``: an embedded campaign (SQLite, in-process, GPU or replay)."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.panel import Panel
from rich.progress import Progress
from rich.table import Table

from agent.campaigns import DEFAULTS
from cli.common import (
    DbOpt,
    KernelOpt,
    cannot_write,
    check_writable_folder,
    console,
    database_url,
    err_console,
    fail,
    open_database,
    path_option,
    resolve_family,
    resolve_params,
    resolve_shape,
)
from cli.shapeset import parse_shape_set, print_result, progress_of
from core.settings import get_settings
from kernels.family import DEFAULT_TOLERANCE


def _load_leaderboard(path: Path | None) -> list[Any] | None:
    if path is None:
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        fail(f"--leaderboard {path}: {exc}")
    if isinstance(data, dict):
        data = data.get("entries")
    if not isinstance(data, list) or not data:
        fail(f"--leaderboard {path}: expected a JSON list of times in µs (or of objects with "
             "avg_us or tflops), or {\"entries\": [...]}")
    return data


#: The options of ``tune`` and ``evaluate`` by the campaign field (``agent.campaigns.
#: CampaignCreate``) each sets: a value the service would refuse is refused here too, naming
#: the option.
OPTION_OF: dict[tuple[str, ...], str] = {
    ("kernel",): "--kernel", ("shape",): "--shape", ("tolerance",): "--tolerance",
    ("budget", "iterations"): "--budget", ("budget", "wall_seconds"): "--wall-seconds",
    ("budget", "gpu_seconds"): "--gpu-seconds", ("budget", "settle_after"): "--settle-after",
    ("policy",): "--policy",
    ("accept_threshold_pct",): "--threshold", ("profile",): "--profile", ("seed",): "--seed",
    ("parallel",): "--parallel", ("leaderboard",): "--leaderboard",
    ("start_from",): "--start-from", ("allowed_actions",): "--actions",
    ("sanitize",): "--sanitize", ("fresh",): "--fresh", ("shapes",): "--shapes",
}


def campaign_request(fields: dict[str, Any], family: Any) -> Any:
    """The campaign request of the options given (``None`` values left out: the campaign's
    defaults apply); exit 2 with one line naming the option when ``fields`` break a rule of
    the service's campaign schema (sizes, GPU memory, tolerance, budgets, names)."""
    from pydantic import ValidationError

    from agent.campaigns import CampaignCreate

    given = {k: v for k, v in fields.items() if v is not None}
    if isinstance(given.get("budget"), dict):
        given["budget"] = {k: v for k, v in given["budget"].items() if v is not None}
    try:
        return CampaignCreate.model_validate(given, context={"family": family})
    except ValidationError as exc:
        error = exc.errors()[0]
        loc = tuple(str(part) for part in error["loc"])
        field = next((loc[:n] for n in (2, 1) if loc[:n] in OPTION_OF), loc[:1])
        where = ".".join(loc[len(field):])
        message = str(error["msg"]).removeprefix("Value error, ")
        fail(f"{OPTION_OF.get(field, '.'.join(field))}: {f'{where}: ' if where else ''}{message}")


def gpu_indices(gpus: str) -> list[str]:
    """``--gpus 0,1`` as indices; exit 2 on anything else."""
    indices = [g.strip() for g in gpus.split(",") if g.strip()]
    if not indices or not all(g.isascii() and g.isdigit() for g in indices):
        fail(f"--gpus must list GPU indices like 0,1, got {gpus!r}")
    return indices


def open_evaluators(backend: str, family: Any, settings: Any, gpus: list[str],
                    db: str | None) -> Any:
    """The evaluators of ``backend`` (``auto`` = GPU if pycuda finds one, else replay) from the
    one factory (:func:`worker.evaluators.open_local`); exit 2 saying why none can run."""
    from worker.evaluators import BackendUnavailable, open_local

    try:
        return open_local(backend, family, settings, gpus)
    except BackendUnavailable as exc:
        name = family.name.split("@")[0]
        hint = ""
        if "replay dataset" in str(exc):
            where = f" --db {shlex.quote(db)}" if db else ""
            hint = (f". Tune it where pycuda finds a GPU; here, `tuneforge compile --kernel "
                    f"{name}{where}` checks that its points compile and shows their registers")
        fail(f"{exc}{hint}")


def local_parallel(local: Any) -> int:
    """Candidates an embedded campaign keeps in flight unless ``--parallel`` says: on GPUs,
    each measures one while nvcc compiles up to 8 ahead on the cores it leaves (about 1.3 s a
    compile against a fraction of a second a measurement); a replay compiles one ahead."""
    n = len(local.evaluators)
    if local.backend != "gpu":
        return 2 * n
    return n * (1 + max(1, min(8, (os.cpu_count() or 2) // (2 * n))))


def check_replay_shape(local: Any, family: Any, problem: Any) -> None:
    """Exit 2 when the replay measured nothing at the campaign's shape (before the campaign is
    stored)."""
    from agent.spaces import ReplaySpace

    try:
        ReplaySpace(family, local.evaluators[0].dataset, str(problem))
    except ValueError as exc:
        local.close()
        fail(f"--shape: {exc}")


def replay_banner(local: Any) -> None:
    """Say that the campaign replays recorded measurements, and whose."""
    from cli.progress import replay_banner_text

    err_console.print(Panel(replay_banner_text(local.evaluators[0], local.why_not_gpu),
                            title="replay backend", border_style="yellow"))


def tune(
    shape: Annotated[str | None, typer.Option(help=(
        "problem shape as the family writes it (4096x4096x4096, rows=8192,cols=32768); "
        "default: the family's"))] = None,
    shapes: Annotated[str | None, typer.Option(help=(
        "a shape set tuned as one job under one budget: a file (a shape a line, an optional "
        "weight after it; or JSON), or shapes inline: 4096x4096x4096,8192x1024x4096:2 "
        "(';' between shapes written by name)"))] = None,
    budget: Annotated[int | None, typer.Option(
        help=f"evaluations (iterations) [default: {DEFAULTS.budget_iterations}]")] = None,
    wall_seconds: Annotated[float | None, typer.Option(help="wall-clock budget")] = None,
    gpu_seconds: Annotated[float | None, typer.Option(help="GPU-time budget")] = None,
    settle_after: Annotated[int | None, typer.Option(help=(
        "end once settled: no accepted improvement over this many evaluations and every "
        f"point next to the best tried; 0: never [default: {DEFAULTS.settle_after}]"))] = None,
    policy: Annotated[str | None, typer.Option(
        help=f"expert | optuna | random | llm [default: {DEFAULTS.policy}]")] = None,
    seed: Annotated[int | None, typer.Option(
        help=f"seed of inputs and policies [default: {DEFAULTS.seed}]")] = None,
    tolerance: Annotated[float | None, typer.Option(
        help=f"correctness tolerance [default: the family's, else {DEFAULT_TOLERANCE:g}]")
    ] = None,
    threshold: Annotated[float | None, typer.Option(
        help=f"accept above this % improvement [default: {DEFAULTS.accept_threshold_pct:g}]")
    ] = None,
    profile: Annotated[str | None, typer.Option(
        help="light (ptxas + occupancy) or full (+ Nsight Compute, ~2.5 s a candidate) "
             f"[default: {DEFAULTS.profile}]")] = None,
    backend: Annotated[str, typer.Option(help="auto | gpu | replay")] = "auto",
    gpus: Annotated[str, typer.Option(help="GPU indices, e.g. 0,1")] = "0",
    parallel: Annotated[int | None, typer.Option(
        help="candidates in flight at once [default: 2 a GPU for a replay; on GPUs, one "
             "measuring and up to 8 compiling ahead, by the cores]")] = None,
    db: DbOpt = None,
    leaderboard: Annotated[Path | None, typer.Option(help="JSON leaderboard for rank_est")] = None,
    actions: Annotated[str | None, typer.Option(
        help="restrict the action space to these transform names (comma-separated)")] = None,
    start_from: Annotated[str | None, typer.Option(
        help="'best': warm start from the best earlier result of this kernel and GPU; "
             "'library': from the library's picks at this shape (a probe)")] = None,
    out: Annotated[Path, typer.Option(help="where the best kernel and the plot go",
                                      parser=path_option("--out"))] = Path("tuneforge-out"),
    kernel: KernelOpt = None,
    sanitize: Annotated[bool, typer.Option(
        "--sanitize", help="check the final best kernel with compute-sanitizer (memcheck, "
                           "racecheck) on the GPU; exit 1 unless it passes")] = False,
    fresh: Annotated[bool, typer.Option(
        "--fresh", help="measure every candidate again, even one the database has measured "
                        "(by default such an evaluation is served from the history)")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="last stdout line: one JSON")] = False,
) -> None:
    """Run an embedded tuning campaign and print its summary.

    Examples:

      tuneforge tune                          # 4096³, expert policy, GPU or replay

      tuneforge tune --budget 200 --policy random --seed 3 --json

      tuneforge tune --actions apply_coalesce,apply_tiling,apply_shared_memory_load

      tuneforge tune --backend gpu --budget 300 --sanitize

      tuneforge tune --kernel softmax --shapes 8192x8192,4096x32768:2 --budget 160
    """
    settings = get_settings()
    family = resolve_family(kernel, db)
    if shape is not None and shapes is not None:
        fail("--shape and --shapes: give one shape or a shape set, not both")
    problem = resolve_shape(family, shape)
    entries = parse_shape_set(family, shapes) if shapes is not None else None
    if policy is not None:
        _check_policy(policy, settings)
    _check_choices(backend=backend, profile=profile)
    fields = {
        "kernel": family.name, "tolerance": tolerance,
        "shape": problem.as_dict() if entries is None else None, "shapes": entries,
        "policy": policy, "accept_threshold_pct": threshold, "profile": profile, "seed": seed,
        "parallel": parallel, "leaderboard": _load_leaderboard(leaderboard),
        "start_from": start_from, "fresh": fresh or None,
        "allowed_actions": [a.strip() for a in actions.split(",") if a.strip()]
        if actions else None,
        "budget": {"iterations": budget, "wall_seconds": wall_seconds,
                   "gpu_seconds": gpu_seconds, "settle_after": settle_after}}
    campaign_request(fields, family)  # bad options fail before a GPU is started
    indices = gpu_indices(gpus)
    check_writable_folder("--out", out)  # before the campaign, not after its last evaluation
    url = database_url(db, create=True)
    open_database(url)
    local = open_evaluators(backend, family, settings, indices, db)
    try:
        if sanitize and local.backend != "gpu":
            err_console.print("[yellow]--sanitize:[/] the replay backend has no GPU to run "
                              "compute-sanitizer on: the best kernel will not be checked")
        elif sanitize:
            _check_sanitizer(settings)
            fields["sanitize"] = True
        if local.backend == "replay":
            for dims in ([e["shape"] for e in entries] if entries else [problem.as_dict()]):
                check_replay_shape(local, family, family.make_dims(dims))
            replay_banner(local)
        if entries is not None:
            _tune_set(url, campaign_request(fields, family), family, settings, local, out,
                      as_json)
            return
        campaign_id, total = _open(url, campaign_request(fields, family), family, settings,
                                   local, problem)
        runner, progress = _runner(url, local, family, problem, total, settings, as_json)
        try:
            with progress:
                runner.run(campaign_id)
        except KeyboardInterrupt:
            err_console.print("[yellow]interrupted: the campaign stays in the database[/]")
            raise typer.Exit(130) from None
    finally:
        local.close()
    result = _result(url, campaign_id, out, runner)
    if as_json:
        sys.stdout.write(json.dumps(result) + "\n")
    else:
        _print_steps(result)
        _print_summary(result)
    if result["status"] == "failed" or (result.get("sanitizer") or {}).get("status") in (
            "flagged", "error"):
        raise typer.Exit(1)


def _tune_set(url: str, request: Any, family: Any, settings: Any, local: Any, out: Path,
              quiet: bool) -> None:
    """Open the shape set, run its members one after another, print its table (or its JSON)
    and write each shape's best kernel under ``out``."""
    from agent.embedded import EmbeddedRunner
    from agent.engine.locking import CampaignError
    from agent.report import best_kernel_files
    from agent.shapesets import members, open_set, result
    from core.db import session_factory
    from core.models import ShapeSet

    sessions = session_factory(url)
    with sessions.begin() as s:
        try:
            shape_set = open_set(s, request, family=family, arch=settings.arch, team_id=None,
                                 backend=local.backend, default_parallel=local_parallel(local),
                                 device=local.evaluators[0].device,
                                 vendor_us=local.evaluators[0].vendor_us)
        except CampaignError as exc:
            fail(str(exc))
        set_id, campaigns = shape_set.id, members(s, shape_set.id)
    progress, on_progress = progress_of(family, campaigns, quiet)
    runner = EmbeddedRunner(sessions, local.evaluators, settings=settings,
                            on_progress=on_progress)
    try:
        with progress:
            runner.run_set(set_id)
    except KeyboardInterrupt:
        err_console.print("[yellow]interrupted: the set stays in the database[/]")
        raise typer.Exit(130) from None
    with sessions() as s:
        found = s.get(ShapeSet, set_id)
        assert found is not None
        outcome = result(s, found)
        files = []
        for member in members(s, set_id):
            try:
                files += [str(p) for p in best_kernel_files(
                    s, member, out / set_id[:8] / member.shape_text)]
            except OSError as exc:
                cannot_write(out / set_id[:8], exc)
    outcome["files"] = files
    if runner.errors:
        outcome["error"] = repr(runner.errors[0])
    if quiet:
        sys.stdout.write(json.dumps(outcome) + "\n")
    else:
        print_result(outcome)
    if outcome["status"] == "failed":
        raise typer.Exit(1)


def _check_choices(*, backend: str, profile: str | None) -> None:
    """Exit 2 naming the option when ``--backend`` or ``--profile`` is none of its choices."""
    if profile is not None and profile not in ("light", "full"):
        fail(f"--profile must be light or full, not {profile!r}")
    if backend not in ("auto", "gpu", "replay"):
        fail(f"--backend must be auto, gpu or replay, not {backend!r}")


def _check_policy(name: str, settings: Any) -> None:
    """Exit 2 when the policy cannot run here (optuna missing, llm without an endpoint)."""
    from agent.policies import make_policy

    try:
        make_policy(name, settings)
    except ValueError as exc:
        fail(str(exc))


def _check_sanitizer(settings: Any) -> None:
    """Exit 2 when compute-sanitizer is not here (before the campaign, not after it)."""
    from worker.sanitize import sanitizer_path

    if sanitizer_path(settings.compute_sanitizer) is None:
        fail(f"--sanitize: {settings.compute_sanitizer} not found (it comes with the CUDA "
             "toolkit; TUNEFORGE_COMPUTE_SANITIZER names another executable)")


def _open(url: str, request: Any, family: Any, settings: Any, local: Any,
          problem: Any) -> tuple[str, int]:
    """The queued campaign through the one door (``agent.campaigns.open_campaign``): its id
    and its iteration budget."""
    from agent.campaigns import open_campaign
    from agent.engine.locking import CampaignError
    from core.db import session_factory

    vendor_us = local.evaluators[0].vendor_us(problem)
    with session_factory(url).begin() as s:
        try:
            campaign = open_campaign(s, request, family=family, arch=settings.arch,
                                     team_id=None, backend=local.backend,
                                     default_parallel=local_parallel(local),
                                     device=local.evaluators[0].device, vendor_us=vendor_us)
        except CampaignError as exc:
            fail(str(exc))
        return campaign.id, campaign.budget_iterations


def _runner(url: str, local: Any, family: Any, problem: Any, total: int, settings: Any,
            quiet: bool) -> tuple[Any, Progress]:
    """The embedded runner and the progress line it updates after each result."""
    from agent.embedded import EmbeddedRunner
    from cli.progress import campaign_progress
    from core.db import session_factory

    progress, on_progress = campaign_progress(family, problem, total, quiet)
    runner = EmbeddedRunner(session_factory(url), local.evaluators, settings=settings,
                            on_progress=on_progress)
    return runner, progress


def _result(url: str, campaign_id: str, out: Path, runner: Any) -> dict[str, Any]:
    """The campaign's summary, its accepted steps, its files and its sanitizer gate."""
    from agent.exports import campaign_peak
    from agent.report import best_kernel_files, convergence_plot, summary
    from core.db import session_factory
    from core.models import Campaign, Candidate

    with session_factory(url)() as s:
        finished = s.get(Campaign, campaign_id)
        assert finished is not None
        result = summary(s, finished)
        result["steps"] = _accepted_path(s, finished)
        out_dir = out / campaign_id[:8]
        try:
            files = best_kernel_files(s, finished, out_dir)
            plot = convergence_plot(s, finished, out_dir / "convergence.png",
                                    campaign_peak(finished))
        except OSError as exc:  # the folder changed while the campaign ran
            cannot_write(out_dir, exc)
        if finished.sanitize:
            best = s.get(Candidate, finished.best_id) if finished.best_id else None
            record = (best.sanitizer if best is not None else None) or {}
            result["sanitizer"] = {
                "status": record.get("status", "skipped"),
                "summary": record.get("summary"), "candidate_id": finished.best_id,
                "reason": None if record else "the campaign has no correct kernel"}
    result["files"] = [str(p) for p in [*files, plot]]
    if runner.errors:
        result["error"] = repr(runner.errors[0])
    return result


def _accepted_path(session: Any, campaign: Any) -> list[dict[str, Any]]:
    """The campaign's accepted steps, by iteration: the action, why the agent tried it, the
    rate it reached and its speed-up over the incumbent it replaced."""
    from agent.exports import accepted_steps, campaign_points, step_speedup

    points, _ = campaign_points(session, campaign)
    out = []
    for p in accepted_steps(points):
        speedup = step_speedup((p.get("decision") or {}).get("improvement_pct"))
        out.append({"iteration": p["iteration"], "action": p.get("action") or "baseline",
                    "reason": p.get("reason"), "throughput": p.get("throughput"),
                    "speedup": round(speedup, 3) if speedup is not None else None})
    return out


#: accepted steps ``tuneforge tune`` prints at most (the largest speed-ups, in order)
SHOWN_STEPS = 10


def _print_steps(r: dict[str, Any]) -> None:
    """The path to the best, one accepted step a row, the agent's reason under its action; of
    a long path the :data:`SHOWN_STEPS` steps that paid most, in order."""
    steps = r.get("steps") or []
    if not steps:
        return
    shown = steps
    if len(steps) > SHOWN_STEPS:
        top = sorted(steps, key=lambda st: -(st.get("speedup") or 0.0))[:SHOWN_STEPS]
        shown = [st for st in steps if st in top]
    title = ("how it got there: the accepted steps" if shown is steps else
             f"how it got there: {len(shown)} of {len(steps)} accepted steps, those that "
             f"paid most (all: tuneforge report {r['campaign_id'][:8]})")
    table = Table(title=title, title_justify="left")
    table.add_column("it", justify="right")
    table.add_column("step · why the agent tried it", overflow="fold")
    table.add_column(r["unit"], justify="right")
    table.add_column("×", justify="right")
    for step in shown:
        why = step.get("reason")
        table.add_row(str(step["iteration"]),
                      step["action"] + (f"\n[dim]{why}[/]" if why else ""),
                      f"{step['throughput']:.1f}" if step.get("throughput") else "–",
                      f"{step['speedup']:.2f}" if step.get("speedup") else "–")
    console.print(table)


def _print_summary(r: dict[str, Any]) -> None:
    from agent.exports import vendor_speed

    table = Table(title=f"campaign {r['campaign_id'][:8]} · {r['status']} ({r['reason']})",
                  title_justify="left", show_header=False)
    table.add_column(style="bold")
    table.add_column()
    best, base = r["best"] or {}, r["baseline"] or {}
    rows = [
        ("kernel / shape", f"{r['kernel']} {r['shape']}"),
        ("backend / GPU", f"{r['backend']} / {r['gpu']}"),
        ("policy / evaluations", f"{r['policy']} / {r['evaluations']}"),
        ("best", f"{best.get('avg_us')} µs · {best.get('throughput')} {r['unit']}"
                 f" (iteration {best.get('iteration')})" if best else "none: no correct kernel"),
        ("best params", json.dumps(best.get("params"), sort_keys=True) if best else "–"),
        ("baseline", f"{base.get('avg_us')} µs · {base.get('throughput')} {r['unit']}"
         if base else "–"),
        ("speedup vs baseline", f"{r['speedup_vs_baseline']}x"
         if r["speedup_vs_baseline"] else "–"),
        ("against the vendor", vendor_speed(r["pct_of_vendor"], r.get("vendor"))),
        ("rank estimate", str(r["rank_est"]) if r["rank_est"] else "– (no --leaderboard)"),
        ("files", "\n".join(r["files"])),
    ]
    if r.get("sanitizer"):
        san = r["sanitizer"]
        rows.append(("sanitizer gate", f"{san['status']}: "
                                       f"{san.get('summary') or san.get('reason')}"))
    for k, v in rows:
        table.add_row(k, v)
    console.print(table)


def evaluate(
    params: Annotated[str | None, typer.Option(
        help="parameters as JSON (default baseline)")] = None,
    actions: Annotated[str | None, typer.Option(
        help="transforms applied in order from the baseline, ';'-separated")] = None,
    shape: Annotated[str | None, typer.Option(help=(
        "problem shape as the family writes it (4096x4096x4096, rows=8192,cols=32768); "
        "default: the family's"))] = None,
    backend: Annotated[str, typer.Option(help="auto | gpu | replay")] = "auto",
    tolerance: Annotated[float | None, typer.Option(
        help=f"correctness tolerance [default: the family's, else {DEFAULT_TOLERANCE:g}]")
    ] = None,
    profile: Annotated[str | None, typer.Option(
        help=f"light | full (Nsight Compute) [default: {DEFAULTS.profile}]")] = None,
    seed: Annotated[int | None, typer.Option(
        help=f"seed of the random inputs [default: {DEFAULTS.seed}]")] = None,
    kernel: KernelOpt = None,
    db: DbOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the record as one JSON line")
                       ] = False,
) -> None:
    """Compile, check and time one point; print its feedback record.

    Examples:

      tuneforge evaluate --json

      tuneforge evaluate --actions 'apply_coalesce(true);apply_shared_memory_load(true)' --json

      tuneforge evaluate --backend gpu --profile full --shape 2048x2048x2048
    """
    from agent.campaigns import resolve
    from core.evaluation import CompileResult
    from kernels.base import Rejection
    from worker.evaluate import feedback_record
    from worker.evaluators import default_options

    settings = get_settings()
    family = resolve_family(kernel, db)
    problem = resolve_shape(family, shape)
    _check_choices(backend=backend, profile=profile)
    request = campaign_request({"kernel": family.name, "shape": problem.as_dict(),
                                "tolerance": tolerance, "profile": profile, "seed": seed},
                               family)
    spec = resolve(request, family=family, arch=settings.arch, team_id=None,
                   default_parallel=1)
    point = resolve_params(family, params, actions, problem)
    local = open_evaluators(backend, family, settings, ["0"], db)
    ev = local.evaluators[0]
    try:
        if local.backend == "replay":
            err_console.print(f"[yellow]replay backend[/] ({local.why_not_gpu or 'asked for'}): "
                              f"measurements of {ev.device.get('name')} taken on "
                              f"{ev.measured_on}")
        limit = family.max_smem_limit(settings.arch)
        if isinstance(point, Rejection):
            compiled = CompileResult.rejected({**point.to_dict(), "max_smem_limit": limit})
            m = None
        else:
            compiled = ev.compile(point).result()
            options = default_options(settings, tolerance=spec.tolerance, profile=spec.profile)
            m = (ev.measure(point, compiled, shape=problem, iteration=0, seed=spec.seed,
                            options=options)
                 if compiled.status == "ok" else None)
        record = feedback_record(point if not isinstance(point, Rejection)
                                 else family.baseline, compiled, m, max_smem_limit=limit,
                                 device=ev.device, backend=local.backend,
                                 action=actions)
    finally:
        local.close()
    if as_json:
        sys.stdout.write(json.dumps(record) + "\n")
    else:
        from rich.pretty import Pretty

        console.print(Pretty(record))
    if record["status"] != "ok":
        raise typer.Exit(1)
