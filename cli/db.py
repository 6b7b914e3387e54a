"""``tuneforge db check``: the consistency of a tuneforge database (exit 1 on any finding)."""

from __future__ import annotations

import sys

import typer

from cli.common import DbOpt, database_url, err_console, fail, require_tables, sqlite_path

db = typer.Typer(help="Database maintenance (talks to the database directly).\n\n"
                 "Example: tuneforge db check --db runs.db",
                 no_args_is_help=True)


@db.command("check")
def check(db: DbOpt = None) -> None:
    """Report orphaned or inconsistent rows; exit 1 if there is any, 2 if the database cannot
    be read (no such file, not a URL, cannot connect, no tuneforge tables).

    Looks for candidates without a campaign, in-flight candidates of finished campaigns,
    best/incumbent/baseline ids that are not candidates of their campaign, evaluation counts
    that differ from the finished candidates, duplicate candidates and feedback records that
    do not validate against the schema.

    Examples:

      tuneforge db check

      tuneforge db check --db runs.db
    """
    from sqlalchemy.exc import DBAPIError

    from core.db import session_scope
    from core.integrity import check as run_check

    target = database_url(db)  # an SQLite file that is there: connecting would make one
    if sqlite_path(target) is None:
        require_tables(target)  # a server's database: reachable, with tuneforge's tables
    try:
        with session_scope(target) as s:
            findings = run_check(s)
    except DBAPIError as exc:
        reason = str(exc.orig).strip().splitlines()[0] if exc.orig else type(exc).__name__
        hint = (" (not a tuneforge database? `tuneforge admin migrate` creates the tables)"
                if "table" in reason or "relation" in reason else "")
        fail(f"cannot check {target.split('@')[-1]}: {reason}{hint}")
    for finding in findings:
        sys.stdout.write(f"{finding}\n")
    if findings:
        err_console.print(f"{len(findings)} inconsistent row(s)")
        raise typer.Exit(1)
    err_console.print("database consistent")


def register(app: typer.Typer) -> None:
    """Add ``tuneforge db`` to the app."""
    app.add_typer(db, name="db")
