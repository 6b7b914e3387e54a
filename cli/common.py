"""Helpers shared by the CLI commands."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, NoReturn

import typer
from rich.console import Console

if TYPE_CHECKING:
    from kernels.base import Dims
    from kernels.family import KernelFamily

console = Console(stderr=False)
err_console = Console(stderr=True)


def fail(message: str, code: int = 2) -> NoReturn:
    """Print a one-line error naming the problem and exit (2 = bad input)."""
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


#: ``--kernel`` of every command that works on one family (default: the settings'
#: ``default_kernel``, ``TUNEFORGE_DEFAULT_KERNEL``).
KernelOpt = Annotated[str | None, typer.Option(
    "--kernel", help="kernel family (tuneforge kernels lists them; default gemm_bias_relu)")]


def resolve_family(name: str | None) -> KernelFamily:
    """The family ``--kernel`` names (default: the settings'); exit 2 naming the known ones."""
    from core.settings import get_settings
    from kernels import get_family

    try:
        return get_family(name or get_settings().default_kernel)
    except ValueError as exc:
        fail(f"--kernel: {exc}")


def resolve_shape(family: KernelFamily, text: str | None) -> Dims:
    """``--shape`` parsed by the family (default: its ``default_dims``); exit 2 on bad text."""
    if text is None:
        return family.default_dims
    try:
        return family.parse_dims(text)
    except ValueError as exc:
        fail(f"--shape: {exc}")
