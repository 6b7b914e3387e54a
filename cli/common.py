"""Helpers shared by the CLI commands."""

from __future__ import annotations

from typing import NoReturn

import typer
from rich.console import Console

console = Console(stderr=False)
err_console = Console(stderr=True)


def fail(message: str, code: int = 2) -> NoReturn:
    """Print a one-line error naming the problem and exit (2 = bad input)."""
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)
