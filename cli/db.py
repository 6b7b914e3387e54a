"""``tuneforge db check``: the consistency of a tuneforge database (exit 1 on any finding)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from cli.common import err_console
from core.settings import get_settings

db = typer.Typer(help="Database maintenance (talks to the database directly).\n\n"
                 "Example: tuneforge db check --db runs.db",
                 no_args_is_help=True)


@db.command("check")
def check(
    url: Annotated[str | None, typer.Option(
        "--db", help="database URL or SQLite file (TUNEFORGE_DATABASE_URL)")] = None,
) -> None:
    """Report orphaned or inconsistent rows; exit 1 if there is any.

    Looks for candidates without a campaign, in-flight candidates of finished campaigns,
    best/incumbent/baseline ids that are not candidates of their campaign, evaluation counts
    that differ from the finished candidates, duplicate candidates and feedback records that
    do not validate against the schema.

    Examples:

      tuneforge db check

      tuneforge db check --db runs.db
    """
    from core.db import session_scope
    from core.integrity import check as run_check

    target = url or get_settings().effective_database_url
    if "://" not in target:
        target = f"sqlite:///{target}"
    with session_scope(target) as s:
        findings = run_check(s)
    for finding in findings:
        sys.stdout.write(f"{finding}\n")
    if findings:
        err_console.print(f"{len(findings)} inconsistent row(s)")
        raise typer.Exit(1)
    err_console.print("database consistent")


def register(app: typer.Typer) -> None:
    """Add ``tuneforge db`` to the app."""
    app.add_typer(db, name="db")
