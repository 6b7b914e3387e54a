"""Helpers shared by the CLI commands: the consoles, one-line errors, ``--db`` and the
parameters of ``--params``/``--actions``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.console import Console

if TYPE_CHECKING:
    from alembic.script import ScriptDirectory

    from kernels.base import Dims
    from kernels.family import KernelFamily

console = Console(stderr=False)
err_console = Console(stderr=True)

#: ``--db`` of every command that reads or writes a database.
DbOpt = Annotated[str | None, typer.Option(
    "--db", help="SQLite file or database URL (default TUNEFORGE_DATABASE_URL, else "
                 "~/.tuneforge/tuneforge.db)")]

#: The first 16 bytes of every SQLite 3 database file.
SQLITE_HEADER = b"SQLite format 3\x00"


def fail(message: str, code: int = 2) -> NoReturn:
    """Print a one-line error naming the problem and exit (2 = bad input)."""
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


#: ``--kernel`` of every command that works on one family (default: the settings'
#: ``default_kernel``, ``TUNEFORGE_DEFAULT_KERNEL``).
KernelOpt = Annotated[str | None, typer.Option(
    "--kernel", help="kernel family: a built-in (tuneforge kernels), or one of yours "
                     "(tuneforge family list: NAME, NAME@vN or NAME@hash12); default "
                     "gemm_bias_relu")]


def resolve_family(name: str | None, db: str | None = None) -> KernelFamily:
    """The family ``--kernel`` names (default: the settings'): a built-in, or a family
    registered in the local database of ``db`` (``--db``; default the configured one) by
    ``tuneforge family add``; exit 2 naming the known ones."""
    from core.settings import get_settings
    from kernels import family_names, get_family

    wanted = name or get_settings().default_kernel
    try:
        if wanted in family_names():
            return get_family(wanted)
    except ValueError as exc:
        fail(f"--kernel: {exc}")
    url = family_database(db)
    if url is None:
        try:
            return get_family(wanted)  # the ValueError names the known families
        except ValueError as exc:
            fail(f"--kernel: {exc} (no family database here: `tuneforge family add DIR` "
                 "registers one)")
    from core import families
    from core.db import session_scope

    try:
        with session_scope(url) as session:
            return families.resolve(session, team_id=None, name=wanted, for_new=True)
    except families.FamilyError as exc:
        fail(f"--kernel: {exc}")


def family_database(db: str | None) -> str | None:
    """The database whose families ``--kernel`` may name (``--db``, else the configured
    one), migrated and known to ``kernels.get_family``; None when it does not exist yet."""
    from core import families

    url = database_url(db, create=True)
    path = sqlite_path(url)
    if path is not None and not path.exists():
        return None
    open_database(url)
    families.install(url)
    return url


def resolve_shape(family: KernelFamily, text: str | None) -> Dims:
    """``--shape`` parsed by the family (default: its ``default_dims``); exit 2 on bad text."""
    if text is None:
        return family.default_dims
    try:
        return family.parse_dims(text)
    except ValueError as exc:
        fail(f"--shape: {exc}")


def path_option(option: str) -> Callable[[str], Path]:
    """A parser of ``option``'s path that refuses an empty one (exit 2): ``Path("")`` is the
    current folder, so ``--out ''`` wrote there as if it had been asked to."""

    def parse(value: str) -> Path:
        if not str(value).strip():
            fail(f"{option} is empty: give a path (or leave the option out for its default)")
        return Path(value)

    return parse


def cannot_write(path: Path, exc: OSError) -> NoReturn:
    """Exit naming the path that could not be written and why (no traceback)."""
    why = exc.strerror or str(exc)
    if exc.filename is not None and Path(str(exc.filename)) != path:
        why += f": {exc.filename}"
    fail(f"cannot write {path}: {why}")


def check_writable_folder(option: str, folder: Path) -> None:
    """Exit 2 unless files can be made under ``folder`` (made later, with its parents): its
    nearest existing ancestor is a folder that takes a new entry. Checked before the work that
    would fill it, which otherwise ran to the end and then failed on the first file; leaves
    nothing behind."""
    import shutil
    import tempfile

    existing = folder.absolute()
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        fail(f"{option} {folder}: {existing} is a file, not a folder")
    try:
        probe = tempfile.mkdtemp(prefix=".tuneforge-probe-", dir=existing)
    except OSError as exc:
        fail(f"{option} {folder}: cannot create a folder in {existing}: "
             f"{exc.strerror or exc}")
    shutil.rmtree(probe, ignore_errors=True)


def sqlite_path(url: str) -> Path | None:
    """The file of an SQLite URL (``None`` for another database or an in-memory one)."""
    if not url.startswith("sqlite"):
        return None
    path = url.split("///", 1)[1] if "///" in url else ""
    return Path(path) if path and path != ":memory:" else None


def database_url(value: str | None, *, create: bool = False) -> str:
    """The database of ``--db``: an SQLite file path or a database URL (``None``: the configured
    one, by default ``~/.tuneforge/tuneforge.db``). Exit 2 naming the problem when it is not a
    URL, names no file (unless ``create``: ``tune`` makes one; a command that reads does not),
    or names a file that is not an SQLite database: opening one of those is a page of
    SQLAlchemy traceback otherwise."""
    from core.settings import get_settings

    if value is None:
        url = get_settings().effective_database_url
        if "://" in url:
            supported_database(url, "TUNEFORGE_DATABASE_URL")
    elif "://" in value:
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError, NoSuchModuleError

        try:
            make_url(value).get_dialect()
        except (ArgumentError, NoSuchModuleError) as exc:
            fail(f"--db {value!r} is neither a database URL nor a file: {exc}")
        supported_database(value, "--db")
        url = value
    else:
        url = f"sqlite:///{Path(value).expanduser().resolve()}"
    path = sqlite_path(url)
    if path is None:
        return url
    if path.is_dir():
        fail(f"--db {path} is a folder: give the SQLite file (e.g. {path / 'runs.db'})")
    if not path.exists():
        if not create:
            run = "tuneforge tune" if value is None else f"tuneforge tune --db {value}"
            fail(f"no database at {path}: run `{run}` first, or pass --db with the file your "
                 "campaign wrote, or a database URL")
        return url
    try:
        with path.open("rb") as f:
            header = f.read(len(SQLITE_HEADER))
    except OSError as exc:
        fail(f"--db {path}: cannot read it: {exc.strerror or exc}")
    if header and header != SQLITE_HEADER:  # an empty file is an empty SQLite database
        fail(f"--db {path} is not an SQLite database (its first bytes are not SQLite's): give "
             "the file `tuneforge tune --db` wrote, or a database URL")
    return url


#: The databases tuneforge stores in (SQLAlchemy's backend names): its migrations and queries
#: are written and tested for these two.
SUPPORTED_DATABASES = ("sqlite", "postgresql")


def supported_database(url: str, option: str) -> None:
    """Exit 2 in one line unless ``url`` names SQLite or PostgreSQL through a driver that is
    installed (another database's URL otherwise fails on its first connection with a page of
    traceback: ``No module named 'MySQLdb'``)."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    backend = parsed.get_backend_name()
    shown = parsed.render_as_string(hide_password=True)
    if backend not in SUPPORTED_DATABASES:
        fail(f"{option} {shown}: tuneforge stores in SQLite or PostgreSQL only, not {backend} "
             "(give an SQLite file, or postgresql+psycopg://USER@HOST/DB)")
    try:
        parsed.get_dialect().import_dbapi()
    except ImportError:
        fail(f"{option} {shown}: its driver {parsed.get_driver_name()} is not installed: use "
             f"{'postgresql+psycopg' if backend == 'postgresql' else 'sqlite'}://…")


def require_tables(url: str) -> None:
    """Exit 2 in one line unless the database of ``url`` (not SQLite: reading commands
    migrate a file themselves) can be reached and holds tuneforge's tables at this version's
    newest migration, naming what to run; a service's database is migrated by
    ``tuneforge admin migrate`` (or ``serve``), never by a command that only reads it."""
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import DBAPIError

    from core.db import alembic_config, get_engine

    shown = make_url(url).render_as_string(hide_password=True)
    try:
        with get_engine(url).connect() as conn:
            current = MigrationContext.configure(conn).get_current_revision()
    except DBAPIError as exc:
        reason = str(exc.orig).strip().splitlines()[0] if exc.orig else type(exc).__name__
        fail(f"--db {shown}: cannot open it as a database: {reason}")
    migrate = f"TUNEFORGE_DATABASE_URL='{shown}' tuneforge admin migrate"
    if current is None:
        fail(f"--db {shown} has no tuneforge tables: create them with `{migrate}` (or pass "
             "the database your campaigns ran in)")
    scripts = ScriptDirectory.from_config(alembic_config(url))
    if current == scripts.get_current_head():
        return
    if not _known(scripts, current):
        fail(f"--db {shown} holds tuneforge's tables of a newer version (migration "
             f"{current}): use that version of tuneforge")
    fail(f"--db {shown} holds tuneforge's tables of an older version (migration {current}): "
         f"bring them up to date with `{migrate}`")


def _known(scripts: ScriptDirectory, revision: str) -> bool:
    """Whether ``revision`` is one of this version's migrations."""
    from alembic.util import CommandError

    try:
        return scripts.get_revision(revision) is not None
    except CommandError:
        return False


def open_database(url: str) -> None:
    """Migrate the database of ``url`` to head (creating an SQLite file and its folder); exit
    2 with the database's own reason, in one line, when it cannot be opened."""
    from sqlalchemy.exc import DBAPIError

    from core.db import upgrade_database

    where = str(sqlite_path(url) or url.split("@")[-1])
    try:
        upgrade_database(url)
    except DBAPIError as exc:
        reason = str(exc.orig).strip().splitlines()[0] if exc.orig else type(exc).__name__
        fail(f"--db {where}: cannot open it as a database: {reason}")
    except OSError as exc:
        fail(f"--db {where}: {exc.strerror or exc}: {exc.filename or where}")


def resolve_params(family: Any, params: str | None, actions: str | None,
                   shape: Any = None) -> Any:
    """Parameters from ``--params`` JSON and/or ``--actions``; exit 2 naming a bad input (a
    point outside the space included: the input is bad, as a misspelt name is).
    ``shape``: the problem shape the actions are applied for (``specialize_shape`` needs it)."""
    from kernels.base import Action, Candidate, Rejection, UnknownAction

    start = family.baseline
    if params is not None:
        try:
            data = json.loads(params)
        except json.JSONDecodeError as exc:
            fail(f"--params is not valid JSON: {exc.msg} at character {exc.pos}")
        if not isinstance(data, dict):
            fail("--params must be a JSON object of parameter names to values")
        try:
            start = family.params_from_dict(data)
        except ValueError as exc:
            fail(f"--params: {exc}")
        rejection = family.validate(start)
        if rejection is not None and rejection.reason == "out_of_domain":
            fail(f"--params: {rejection.message}")
    if not actions:
        return start
    try:
        parsed = Action.parse_many(actions)
        node = Candidate(start, shape=shape)
        for action in parsed:
            family.transforms.check(action)
            result = family.apply(node, action)
            if isinstance(result, Rejection):
                if result.reason == "no_change":  # the chain asks for what is already there
                    continue
                return result
            node = result
    except (ValueError, UnknownAction) as exc:
        fail(f"--actions: {exc}")
    return node.params
