"""``tuneforge tune``: an embedded campaign (SQLite, in-process, GPU or replay)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.panel import Panel
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

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
    resolve_family,
    resolve_params,
    resolve_shape,
)
from core.settings import get_settings
from kernels.family import campaign_tolerance


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


#: The options of ``tune`` and ``evaluate`` by the campaign field (``api.schemas.CampaignCreate``)
#: each sets: a value the service would refuse is refused here too, naming the option.
OPTION_OF: dict[tuple[str, ...], str] = {
    ("kernel",): "--kernel", ("shape",): "--shape", ("tolerance",): "--tolerance",
    ("budget", "iterations"): "--budget", ("budget", "wall_seconds"): "--wall-seconds",
    ("budget", "gpu_seconds"): "--gpu-seconds", ("policy",): "--policy",
    ("accept_threshold_pct",): "--threshold", ("profile",): "--profile", ("seed",): "--seed",
    ("parallel",): "--gpus", ("leaderboard",): "--leaderboard", ("start_from",): "--start-from",
    ("allowed_actions",): "--actions",
}


def check_campaign(fields: dict[str, Any], family: Any) -> None:
    """Exit 2 with one line naming the option when ``fields`` break a rule of the service's
    campaign schema (sizes, GPU memory, tolerance, budgets, names) for ``family``."""
    from pydantic import ValidationError

    from api.schemas import CampaignCreate

    try:
        CampaignCreate.model_validate(fields, context={"family": family})
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


def make_evaluators(backend: str, family: Any, settings: Any, gpus: list[str], *,
                    tolerance: float, profile: str = "light"
                    ) -> tuple[list[Any], str, str | None]:
    """Evaluators for ``backend`` (``auto`` = GPU if pycuda finds one, else replay), the backend
    used, and why the GPU was not used (if it was not)."""
    from core.evaluation import EvalOptions
    from core.replay import ReplayDataset
    from worker.evaluate import GpuEvaluator, ReplayEvaluator

    options = EvalOptions(tolerance=tolerance, profile=profile)
    why_not_gpu = None
    if backend in ("auto", "gpu"):
        from worker.compile import compiler_from_settings
        from worker.gpu_runner import ChildUnavailable

        try:
            evaluators = [GpuEvaluator(family, compiler_from_settings(settings), gpu=g,
                                       options=options,
                                       vendor_cache=settings.home / "vendor.json")
                          for g in gpus]
            return evaluators, "gpu", None
        except (ChildUnavailable, RuntimeError, OSError) as exc:
            why_not_gpu = str(exc).splitlines()[0][:200]
            if backend == "gpu":
                fail(f"--backend gpu: {why_not_gpu}")
    datasets = family.replay_datasets()
    if not datasets:
        name = family.name.split("@")[0]
        fail(f"--backend replay: the {family.name} family ships no replay dataset "
             f"(no GPU here: {why_not_gpu or 'replay asked for'}). Tune it where pycuda "
             f"finds a GPU; here, `tuneforge compile --kernel {name}` checks that its points "
             "compile and shows their registers")
    dataset = ReplayDataset(datasets[0])
    return [ReplayEvaluator(family, dataset, options=options)], "replay", why_not_gpu


def tune(
    shape: Annotated[str | None, typer.Option(help=(
        "problem shape as the family writes it (4096x4096x4096, rows=8192,cols=32768); "
        "default: the family's"))] = None,
    budget: Annotated[int, typer.Option(help="evaluations (iterations)")] = 600,
    wall_seconds: Annotated[float | None, typer.Option(help="wall-clock budget")] = None,
    gpu_seconds: Annotated[float | None, typer.Option(help="GPU-time budget")] = None,
    policy: Annotated[str, typer.Option(help="expert | optuna | random | llm")] = "expert",
    seed: Annotated[int, typer.Option(help="seed of inputs and policies")] = 0,
    tolerance: Annotated[float | None, typer.Option(
        help="correctness tolerance [default: the family's, else 1e-4]")] = None,
    threshold: Annotated[float, typer.Option(help="accept above this % improvement")] = 0.5,
    profile: Annotated[str, typer.Option(
        help="light (ptxas + occupancy) or full (+ Nsight Compute, ~2.5 s a candidate)")] = "light",
    backend: Annotated[str, typer.Option(help="auto | gpu | replay")] = "auto",
    gpus: Annotated[str, typer.Option(help="GPU indices, e.g. 0,1")] = "0",
    db: DbOpt = None,
    leaderboard: Annotated[Path | None, typer.Option(help="JSON leaderboard for rank_est")] = None,
    actions: Annotated[str | None, typer.Option(
        help="restrict the action space to these transform names (comma-separated)")] = None,
    start_from: Annotated[str | None, typer.Option(
        help="'best': warm start from the best earlier result of this kernel and GPU")] = None,
    out: Annotated[Path, typer.Option(help="where the best kernel and the plot go")] = Path(
        "tuneforge-out"),
    kernel: KernelOpt = None,
    sanitize: Annotated[bool, typer.Option(
        "--sanitize", help="check the final best kernel with compute-sanitizer (memcheck, "
                           "racecheck) on the GPU; exit 1 unless it passes")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="last stdout line: one JSON")] = False,
) -> None:
    """Run an embedded tuning campaign and print its summary.

    Examples:

      tuneforge tune                          # 4096³, expert policy, GPU or replay

      tuneforge tune --budget 200 --policy random --seed 3 --json

      tuneforge tune --actions apply_coalesce,apply_tiling,apply_shared_memory_load

      tuneforge tune --backend gpu --budget 300 --sanitize
    """

    from agent.embedded import EmbeddedRunner
    from agent.engine.lifecycle import CampaignSpec, create_campaign
    from agent.engine.locking import CampaignError
    from agent.exports import campaign_peak
    from agent.policies import make_policy
    from agent.report import best_kernel_files, convergence_plot, summary
    from agent.spaces import FullSpace, ReplaySpace
    from core.db import session_factory

    settings = get_settings()
    family = resolve_family(kernel, db)
    problem = resolve_shape(family, shape)
    tolerance = campaign_tolerance(family, tolerance)
    try:
        policy_obj = make_policy(policy, settings)
    except ValueError as exc:
        fail(str(exc))
    if profile not in ("light", "full"):
        fail(f"--profile must be light or full, not {profile!r}")
    if backend not in ("auto", "gpu", "replay"):
        fail(f"--backend must be auto, gpu or replay, not {backend!r}")
    indices = gpu_indices(gpus)
    allowed = [a.strip() for a in actions.split(",") if a.strip()] if actions else None
    board = _load_leaderboard(leaderboard)
    check_campaign({
        "kernel": family.name, "shape": problem.as_dict(),
        "tolerance": tolerance, "policy": policy, "accept_threshold_pct": threshold,
        "profile": profile, "seed": seed, "parallel": len(indices), "leaderboard": board,
        "start_from": start_from, "allowed_actions": allowed,
        "budget": {"iterations": budget, "wall_seconds": wall_seconds,
                   "gpu_seconds": gpu_seconds}}, family)
    check_writable_folder("--out", out)  # before the campaign, not after its last evaluation
    url = database_url(db, create=True)
    open_database(url)
    sessions = session_factory(url)

    evaluators, used, why_not_gpu = make_evaluators(backend, family, settings, indices,
                                                    tolerance=tolerance, profile=profile)
    device = evaluators[0].device
    sanitizer_exe = None
    if sanitize and used == "gpu":
        from worker.sanitize import sanitizer_path

        sanitizer_exe = sanitizer_path(settings.compute_sanitizer)
        if sanitizer_exe is None:
            for ev in evaluators:
                ev.close()
            fail(f"--sanitize: {settings.compute_sanitizer} not found (it comes with the CUDA "
                 "toolkit; TUNEFORGE_COMPUTE_SANITIZER names another executable)")
    elif sanitize:
        err_console.print("[yellow]--sanitize:[/] the replay backend has no GPU to run "
                          "compute-sanitizer on: the best kernel will not be checked")
    if used == "replay":
        ev = evaluators[0]
        try:  # before the panel: a bad shape is a one-line error
            space: Any = ReplaySpace(family, ev.dataset, str(problem))
        except ValueError as exc:
            fail(f"--shape: {exc}")
        err_console.print(Panel(
            f"No GPU here ({why_not_gpu or 'replay asked for'}).\n"
            f"Replaying real measurements of [bold]{device.get('name')}[/] taken on "
            f"{ev.measured_on} (driver {ev.dataset.meta.get('driver')}, commits "
            f"{ev.dataset.provenance()[1]}): {len(ev.dataset.points)} points at "
            f"{', '.join(ev.dataset.shapes())}.", title="replay backend", border_style="yellow"))
    else:
        space = FullSpace(family, settings.arch)
    vendor_us = evaluators[0].vendor_us(problem)
    spec = CampaignSpec(
        kernel=family.name, dims=problem.as_dict(), tolerance=tolerance,
        policy=policy, accept_threshold_pct=threshold, seed=seed, budget_iterations=budget,
        budget_wall_s=wall_seconds, budget_gpu_s=gpu_seconds, leaderboard=board,
        start_from=start_from, allowed_actions=allowed, parallel=len(evaluators), profile=profile,
        arch=settings.arch, sanitize=sanitizer_exe is not None,
    )
    with sessions.begin() as s:
        try:
            campaign = create_campaign(s, spec, backend=used, device=device,
                                       vendor_us=vendor_us)
        except CampaignError as exc:
            fail(str(exc))
        campaign_id = campaign.id

    unit = family.metric.unit
    vendor_name = family.vendor.name if family.vendor else "vendor"
    progress = Progress(TextColumn("[bold]tuning[/]"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("{task.fields[best]}"), TimeElapsedColumn(),
                        console=err_console, transient=False, disable=as_json)
    task = progress.add_task("tune", total=budget, best="")

    def on_progress(camp: Any, cand: Any) -> None:
        best = camp.best_us
        text = ""
        if best:
            rate = family.metric.rate(problem, best) or 0.0
            pct = f" · {100 * vendor_us / best:.0f}% of {vendor_name}" if vendor_us else ""
            text = f"best {best:.1f} µs · {rate:.2f} {unit}{pct}"
        progress.update(task, completed=camp.evaluations, best=text)

    # on a GPU, compile several candidates ahead so nvcc (about 1.3 s each) runs on every core
    # while the GPU measures; a replay has no compile time to hide
    lookahead = max(1, min(8, (os.cpu_count() or 2) // (2 * len(evaluators)))) \
        if used == "gpu" else 1
    runner = EmbeddedRunner(sessions, evaluators, policy=policy_obj, space=space,
                            settings=settings, on_progress=on_progress, lookahead=lookahead)
    try:
        with progress:
            runner.run(campaign_id)
    except KeyboardInterrupt:
        err_console.print("[yellow]interrupted: the campaign stays in the database[/]")
        raise typer.Exit(130) from None
    finally:
        for ev in evaluators:
            ev.close()

    with sessions() as s:
        from core.models import Campaign

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
    result["files"] = [str(p) for p in [*files, plot]]
    if runner.errors:
        result["error"] = repr(runner.errors[0])
    if sanitize:
        result["sanitizer"] = _sanitize_best(sessions, campaign_id, sanitizer_exe, gpus,
                                             quiet=as_json)
    if as_json:
        sys.stdout.write(json.dumps(result) + "\n")
    else:
        _print_steps(result)
        _print_summary(result)
    if result["status"] == "failed" or (result.get("sanitizer") or {}).get("status") in (
            "flagged", "error"):
        raise typer.Exit(1)


def _sanitize_best(sessions: Any, campaign_id: str, exe: str | None, gpus: str, *,
                   quiet: bool) -> dict[str, Any]:
    """``--sanitize``: the gate on the campaign's best kernel (stored with it); a short
    summary for the campaign's result."""
    from cli.sanitize import gate_candidate, print_record
    from core.models import Campaign
    from worker.sanitize import DEFAULT_TOOLS, SanitizerUnavailable, probe_gpu

    if exe is None:
        return {"status": "skipped", "reason": "the replay backend has no GPU"}
    with sessions() as s:
        campaign = s.get(Campaign, campaign_id)
        best_id = campaign.best_id if campaign is not None else None
    if best_id is None:
        return {"status": "skipped", "reason": "the campaign has no correct kernel"}
    gpu = gpus.split(",")[0].strip() or "0"
    try:
        device = probe_gpu(gpu)
    except SanitizerUnavailable as exc:
        return {"status": "error", "reason": f"no usable GPU: {exc}", "candidate_id": best_id}
    settings = get_settings()
    record = gate_candidate(sessions, best_id, tools=DEFAULT_TOOLS, shapes=None, gpu=gpu,
                            timeout_s=settings.sanitize_timeout_s, exe=exe, device=device)
    if not quiet:
        print_record(record, f"sanitizer gate · best kernel {best_id[:8]} · "
                             f"compute-sanitizer {record['sanitizer_version']}")
    return {"status": record["status"], "summary": record["summary"], "candidate_id": best_id}


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
    table = Table(title=f"campaign {r['campaign_id'][:8]} · {r['status']} ({r['reason']})",
                  show_header=False)
    table.add_column(style="bold")
    table.add_column()
    best, base = r["best"] or {}, r["baseline"] or {}
    rows = [
        ("kernel / shape", f"{r['kernel']} {r['shape']}"),
        ("backend / GPU", f"{r['backend']} / {r['gpu']}"),
        ("policy / evaluations", f"{r['policy']} / {r['evaluations']}"),
        ("best", f"{best.get('avg_us')} µs · {best.get('throughput')} {r['unit']}"
                 f" (iteration {best.get('iteration')})"),
        ("best params", json.dumps(best.get("params"), sort_keys=True)),
        ("baseline", f"{base.get('avg_us')} µs · {base.get('throughput')} {r['unit']}"),
        ("speedup vs baseline", f"{r['speedup_vs_baseline']}x"),
        (f"% of {r.get('vendor') or 'vendor'}", f"{r['pct_of_vendor']}%"),
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
        help="correctness tolerance [default: the family's, else 1e-4]")] = None,
    profile: Annotated[str, typer.Option(help="light | full (Nsight Compute)")] = "light",
    seed: Annotated[int, typer.Option(help="seed of the random inputs")] = 0,
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
    from core.evaluation import CompileResult
    from kernels.base import Rejection
    from worker.evaluate import feedback_record

    settings = get_settings()
    family = resolve_family(kernel, db)
    problem = resolve_shape(family, shape)
    tolerance = campaign_tolerance(family, tolerance)
    if backend not in ("auto", "gpu", "replay"):
        fail(f"--backend must be auto, gpu or replay, not {backend!r}")
    if profile not in ("light", "full"):
        fail(f"--profile must be light or full, not {profile!r}")
    check_campaign({"kernel": family.name, "shape": problem.as_dict(),
                    "tolerance": tolerance, "profile": profile, "seed": seed}, family)
    point = resolve_params(family, params, actions, problem)
    evaluators, used, why_not_gpu = make_evaluators(backend, family, settings, ["0"],
                                                    tolerance=tolerance, profile=profile)
    ev = evaluators[0]
    try:
        if used == "replay":
            err_console.print(f"[yellow]replay backend[/] ({why_not_gpu or 'asked for'}): "
                              f"measurements of {ev.device.get('name')} taken on "
                              f"{ev.measured_on}")
        limit = family.max_smem_limit(settings.arch)
        if isinstance(point, Rejection):
            compiled = CompileResult.rejected({**point.to_dict(), "max_smem_limit": limit})
            m = None
        else:
            compiled = ev.compile(point).result()
            m = (ev.measure(point, compiled, shape=problem, iteration=0, seed=seed)
                 if compiled.status == "ok" else None)
        record = feedback_record(point if not isinstance(point, Rejection)
                                 else family.baseline, compiled, m, max_smem_limit=limit,
                                 device=ev.device, backend=used,
                                 action=actions)
    finally:
        for e in evaluators:
            e.close()
    if as_json:
        sys.stdout.write(json.dumps(record) + "\n")
    else:
        from rich.pretty import Pretty

        console.print(Pretty(record))
    if record["status"] != "ok":
        raise typer.Exit(1)
