"""The ``tuneforge`` command line (Typer + rich)."""

from __future__ import annotations

import inspect
import json
import sys
from typing import Annotated, Any, NoReturn

import typer

from cli.common import DbOpt, KernelOpt, console, fail, resolve_family, resolve_params
from core.settings import get_settings

app = typer.Typer(
    name="tuneforge",
    help="Auto-tune CUDA kernels with an agent in a closed loop.\n\n"
    "Examples:\n\n"
    "  tuneforge tune --budget 200 --db runs.db    # a campaign (GPU or replay)\n\n"
    "  tuneforge family add DIR --db runs.db       # your kernel: --kernel NAME\n\n"
    "  tuneforge report ID --db runs.db            # plots and a summary\n\n"
    "  tuneforge export ID --db runs.db --format kt   # Kernel Tuner cache\n\n"
    "  tuneforge sanitize ID --db runs.db          # compute-sanitizer\n\n"
    "  tuneforge serve                             # API + dashboard on :8000\n\n"
    "  tuneforge kernels                           # the kernel families\n\n"
    "  tuneforge actions --kernel NAME --json      # its transforms\n\n"
    "Every command has --help with examples.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

ParamsOpt = Annotated[
    str | None, typer.Option("--params", help="parameters as JSON; omitted = the baseline")
]
ActionsOpt = Annotated[
    str | None,
    typer.Option("--actions", help="transforms applied in order from the baseline, ';'-separated"),
]




@app.command()
def kernels(
    db: DbOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """List the kernel families: the built-ins, then the team's own.

    For each: its dimensions, default shape, metric, vendor baseline (what "× vendor" is
    measured against; none for a family without one) and number of actions.
    The team's families registered in the database come after the built-ins, the latest version
    of each (every version: `tuneforge family show NAME`).

    Examples:

      tuneforge kernels

      tuneforge kernels --db runs.db          # and the families registered there

      tuneforge kernels --json | jq '.[].name'
    """
    from kernels import family_names, get_family
    from kernels.family import describe

    found = []
    for name in family_names():
        try:
            found.append({**describe(get_family(name)), "origin": "builtin"})
        except (ImportError, TypeError, ValueError) as exc:  # a broken plug-in: say so
            found.append({"name": name, "origin": "builtin",
                          "error": f"{type(exc).__name__}: {exc}"})
    team = _team_families(db)
    if as_json:
        sys.stdout.write(json.dumps(found + team, indent=1) + "\n")
        return
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="kernel families", show_lines=True)
    # the name over its description (the one column that wraps); the rest whole
    table.add_column("family", min_width=20, ratio=1)
    for col in ("shape", "metric", "vendor", "actions"):
        table.add_column(col, no_wrap=True)
    for f in found:
        if "error" in f:
            table.add_row(f"[bold]{f['name']}[/]\n[red]{escape(f['error'])}[/]", "–", "–", "–",
                          "–")
            continue
        dims = ", ".join(d["name"] for d in f["dims"])
        vendor = get_family(f["name"]).vendor
        table.add_row(f"[bold]{f['name']}[/]\n{escape(f['description'])}",
                      f"{dims}\n{f['default_shape']}", f["metric"]["unit"],
                      vendor.name if vendor is not None else "none", str(len(f["transforms"])))
    for f in team:
        table.add_row(f"[bold]{f['name']} v{f['version']}[/] [dim](yours)[/]\n"
                      f"{escape(f['description'])}",
                      f"{', '.join(f['dims'])}\n{f['default_shape']}", f["unit"],
                      f.get("vendor") or "none", str(f["transforms"]))
    console.print(table)


def _team_families(db: str | None) -> list[dict[str, Any]]:
    """The team's own families in ``--db`` (else the default database, where there is one):
    the latest version of each, as ``GET /families`` lists them. A ``--db`` that is missing or
    not a database exits 2 naming it; the default one only adds its families when it opens."""
    from cli.common import database_url, open_database, require_tables, sqlite_path

    if db is not None:
        url = database_url(db)
    else:
        url = database_url(None, create=True)
        path = sqlite_path(url)
        if path is not None and not path.exists():
            return []  # no database yet: nobody registered anything (and none is created)
    try:
        if sqlite_path(url) is None:
            require_tables(url)  # a server's database is migrated by its admin, not by a read
        else:
            open_database(url)
    except typer.Exit:
        if db is not None:
            raise
        return []  # the configured database is down: the built-ins still list
    from cli.family import local_families

    return [f for f in local_families(url) if f["origin"] == "team"]


@app.command()
def actions(
    kernel: KernelOpt = None,
    db: DbOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """List the action space: every transform with its argument domains.

    Examples:

      tuneforge actions

      tuneforge actions --json | jq '.[].name'
    """
    family = resolve_family(kernel, db)
    specs = [spec.to_dict() for spec in family.transforms]
    if as_json:
        sys.stdout.write(json.dumps(specs, indent=1) + "\n")
        return
    from rich.table import Table

    table = Table(title=f"action space of {family.name}")
    for col in ("action", "arguments", "origin", "what it does"):  # names whole, the rest wraps
        table.add_column(col, no_wrap=col in ("action", "origin"))
    for spec in specs:
        args = ", ".join(f"{a['name']} ∈ {a['choices']}" for a in spec["args"]) or "–"
        table.add_row(spec["name"], args, spec["origin"], spec["doc"])
    console.print(table)


@app.command()
def render(
    params: ParamsOpt = None,
    actions: ActionsOpt = None,
    kernel: KernelOpt = None,
    db: DbOpt = None,
) -> None:
    """Print the CUDA source of a point (the baseline when nothing is given).

    Examples:

      tuneforge render --params '{"smem": true, "coalesced": true}'

      tuneforge render --actions 'apply_coalesce(true);apply_register_block(4, 4)'
    """
    from kernels.base import Rejection

    family = resolve_family(kernel, db)
    point = resolve_params(family, params, actions)
    if isinstance(point, Rejection):
        fail(f"rejected: {point.reason}: {point.message}", code=1)
    rejection = family.validate(point, get_settings().arch)
    if rejection is not None:
        fail(f"rejected: {rejection.reason}: {rejection.message}", code=1)
    sys.stdout.write(family.render(point))


@app.command(name="compile")
def compile_cmd(
    params: ParamsOpt = None,
    actions: ActionsOpt = None,
    arch: Annotated[str | None, typer.Option("--arch", help="target, e.g. sm_90")] = None,
    kernel: KernelOpt = None,
    db: DbOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
) -> None:
    """Compile a point and the family's reference kernel with nvcc (no GPU needed).

    Reports registers, shared memory and spills; exit 1 when either does not compile.

    Examples:

      tuneforge compile --actions 'apply_shared_memory_load(true);apply_tiling(32)' --json

      tuneforge compile --params '{"block_x": 32, "block_y": 8}' --arch sm_80
    """
    from core.evaluation import CompileResult
    from kernels.base import Rejection
    from worker.compile import compile_candidate, compiler_from_settings
    from worker.family_check import compile_reference, first_lines

    settings = get_settings()
    family = resolve_family(kernel, db)
    arch = settings.arch if arch is None else arch
    try:
        limit = family.max_smem_limit(arch)
    except ValueError as exc:
        fail(f"--arch: {exc}")
    point = resolve_params(family, params, actions)
    compiler = compiler_from_settings(settings, arch=arch)
    if isinstance(point, Rejection):
        result = CompileResult.rejected(point.to_dict())
    else:
        result = compile_candidate(compiler, family, point)
    # the reference the GPU evaluator loads first: a CPU command says whether it compiles
    reference = compile_reference(compiler, family)
    record = result.summary(limit)
    record.pop("rejection")
    # the target nvcc built for: a point may need more than --arch (wgmma: sm_90 -> sm_90a)
    record["arch"] = result.arch or arch
    record["rejection"] = result.rejection
    record["reference"] = {
        "status": reference.status,
        "error": None if reference.status == "ok" else (
            first_lines(reference.log or "", "reference") or reference.error)}
    if as_json:
        sys.stdout.write(json.dumps(record) + "\n")
    else:
        from rich.pretty import Pretty

        console.print(Pretty(record))
    if result.status != "ok" or reference.status != "ok":
        raise typer.Exit(1)


from cli import db, family, library, report, sanitize  # noqa: E402
from cli.service import register  # noqa: E402
from cli.tune import evaluate, tune  # noqa: E402

app.command()(tune)
app.command()(evaluate)
register(app)
report.register(app)
db.register(app)
family.register(app)
library.register(app)
sanitize.register(app)


def _one_line_summaries(typer_app: typer.Typer) -> None:
    """Give each command the first paragraph of its docstring, its lines joined, as its short
    help: the list of commands shows that paragraph, and Typer's rich mode keeps its line
    breaks, so a summary wrapped in the source broke mid-sentence at 80 columns."""
    for info in typer_app.registered_commands:
        if info.short_help is None:
            doc = info.help or (info.callback.__doc__ if info.callback else None) or ""
            info.short_help = " ".join(inspect.cleandoc(doc).split("\n\n")[0].split())
    for group in typer_app.registered_groups:
        if group.typer_instance is not None:
            _one_line_summaries(group.typer_instance)


_one_line_summaries(app)


def main() -> NoReturn:
    """Entry point for ``python -m cli.main``."""
    app()
    raise SystemExit(0)


if __name__ == "__main__":
    main()
