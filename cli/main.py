"""The ``tuneforge`` command line (Typer + rich)."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any, NoReturn

import typer

from cli.common import console, fail, resolve_params
from core.settings import get_settings

app = typer.Typer(
    name="tuneforge",
    help="Auto-tune CUDA kernels with an agent in a closed loop.\n\n"
    "Examples:\n\n"
    "  tuneforge tune --budget 200 --db runs.db      # a campaign here (GPU, or a replay)\n\n"
    "  tuneforge report ID --db runs.db              # plots and a Markdown summary\n\n"
    "  tuneforge export ID --db runs.db --format kt  # for Kernel Tuner (also cu, json, t4)\n\n"
    "  tuneforge sanitize ID --db runs.db            # compute-sanitizer on the best kernel\n\n"
    "  tuneforge serve                               # the API and the dashboard on :8000\n\n"
    "  tuneforge actions --json\n\n"
    "  tuneforge render --params '{\"smem\": true, \"coalesced\": true}'\n\n"
    "Every command has --help with examples.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

KernelOpt = Annotated[str, typer.Option("--kernel", help="kernel family")]
ParamsOpt = Annotated[
    str | None, typer.Option("--params", help="parameters as JSON; omitted = the baseline")
]
ActionsOpt = Annotated[
    str | None,
    typer.Option("--actions", help="transforms applied in order from the baseline, ';'-separated"),
]


def _family(name: str) -> Any:
    from kernels import get_family

    try:
        return get_family(name)
    except ValueError as exc:
        fail(str(exc))


@app.command()
def actions(
    kernel: KernelOpt = "gemm_bias_relu",
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """List the action space: every transform with its argument domains.

    Examples:

      tuneforge actions

      tuneforge actions --json | jq '.[].name'
    """
    family = _family(kernel)
    specs = [spec.to_dict() for spec in family.transforms]
    if as_json:
        sys.stdout.write(json.dumps(specs, indent=1) + "\n")
        return
    from rich.table import Table

    table = Table(title=f"action space of {kernel}")
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
    kernel: KernelOpt = "gemm_bias_relu",
) -> None:
    """Print the CUDA source of a point (the baseline when nothing is given).

    Examples:

      tuneforge render --params '{"smem": true, "coalesced": true}'

      tuneforge render --actions 'apply_coalesce(true);apply_register_block(4, 4)'
    """
    from kernels.base import Rejection

    family = _family(kernel)
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
    kernel: KernelOpt = "gemm_bias_relu",
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
) -> None:
    """Compile a point with nvcc and report registers, smem, spills (no GPU needed).

    Examples:

      tuneforge compile --actions 'apply_shared_memory_load(true);apply_tiling(32)' --json

      tuneforge compile --params '{"block_x": 32, "block_y": 8}' --arch sm_80
    """
    from kernels.base import Rejection
    from worker.compile import CompileResult, compile_candidate, compiler_from_settings

    settings = get_settings()
    family = _family(kernel)
    arch = settings.arch if arch is None else arch
    try:
        limit = family.max_smem_limit(arch)
    except ValueError as exc:
        fail(f"--arch: {exc}")
    point = resolve_params(family, params, actions)
    if isinstance(point, Rejection):
        result = CompileResult.rejected(point.to_dict())
    else:
        compiler = compiler_from_settings(settings, arch=arch)
        result = compile_candidate(compiler, family, point)
    record = result.summary(limit)
    record.pop("rejection")
    # the target nvcc built for: a point may need more than --arch (wgmma: sm_90 -> sm_90a)
    record["arch"] = result.arch or arch
    record["rejection"] = result.rejection
    if as_json:
        sys.stdout.write(json.dumps(record) + "\n")
    else:
        from rich.pretty import Pretty

        console.print(Pretty(record))
    if result.status != "ok":
        raise typer.Exit(1)


from cli import db, report, sanitize  # noqa: E402
from cli.service import register  # noqa: E402
from cli.tune import evaluate, tune  # noqa: E402

app.command()(tune)
app.command()(evaluate)
register(app)
report.register(app)
db.register(app)
sanitize.register(app)


def main() -> NoReturn:
    """Entry point for ``python -m cli.main``."""
    app()
    raise SystemExit(0)


if __name__ == "__main__":
    main()
