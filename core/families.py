"""A team's own kernel families: versions of declarative specs (``kernels.userspec``) stored in
the ``families`` table, found by the names users give for a team, and by content key for any
process that runs a campaign.

A version's registry key is its content key ``name@hash12`` (``kernels.userspec.family_key``),
which is what ``campaigns.kernel`` stores: an agent, compile or GPU worker, the API or an
embedded run finds the exact version a campaign runs through :func:`install`, which adds a
resolver to ``kernels.get_family`` that reads this table (the spec is built once per process).
Users name a family for their team (:func:`resolve`): a built-in's name, a family's name (its
latest version), ``NAME@vN``, or the full key. Service functions are keyword-only.
"""

from __future__ import annotations

import json
import logging
import re
import resource
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from sqlalchemy import func, select
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.orm import Session

from core.db import session_factory
from core.models import Family
from kernels import add_resolver, family_names, get_family
from kernels.family import KernelFamily

log = logging.getLogger(__name__)

#: How a user names a version: ``NAME``, ``NAME@v3`` or ``NAME@`` and 12 hex digits.
REFERENCE = re.compile(r"^(?P<name>[A-Za-z0-9_.-]{1,64})(?:@(?:v(?P<version>[0-9]{1,9})"
                       r"|(?P<hash>[0-9a-f]{12})))?$")


class FamilyError(ValueError):
    """A family that cannot be registered or found (the message names the problem)."""


class FamilyNotFound(FamilyError):
    """No such family among the team's (another team's families are not found either)."""


class FamilyConflict(FamilyError):
    """A name that belongs to a built-in family (or an installed plug-in)."""


@dataclass(frozen=True)
class Registered:
    """What :func:`register` did: the version the spec is, and whether it is new."""

    name: str
    version: int
    key: str
    spec_hash: str
    created: bool


def _team(team_id: str | None) -> Any:
    return Family.team_id == team_id if team_id is not None else Family.team_id.is_(None)


# ---- building, once per process --------------------------------------------------------------
_built: dict[str, KernelFamily] = {}
_urls: list[str] = []
_lock = threading.Lock()


def family_of(row: Family) -> KernelFamily:
    """The family a stored version defines (built from its spec once per process)."""
    with _lock:
        found = _built.get(row.key)
    if found is not None:
        return found
    from kernels.userspec import build_family

    family = cast(KernelFamily, build_family(row.spec))
    if family.name != row.key:  # the content is not what its key says: never run it
        raise FamilyError(f"the stored family {row.key} builds as {family.name}: its spec was "
                          "changed after it was registered")
    with _lock:
        return _built.setdefault(row.key, family)


def _find_key(name: str) -> KernelFamily | None:
    """The resolver :func:`install` adds: a content key, looked up in every installed
    database (newest first); None for anything else."""
    if "@" not in name:
        return None
    with _lock:
        found = _built.get(name)
        urls = list(reversed(_urls))
    if found is not None:
        return found
    for url in urls:
        if url.startswith("sqlite") and not _sqlite_file_exists(url):
            continue  # connecting would create an empty file
        try:
            with session_factory(url)() as session:
                row = session.scalar(select(Family).where(Family.key == name).limit(1))
                if row is not None:
                    return family_of(row)
        except DBAPIError as exc:  # a database gone (or not migrated): the next one may know it
            log.warning("cannot look up family %s in %s: %s", name, url.split("@")[-1], exc)
    return None


def _sqlite_file_exists(url: str) -> bool:
    path = url.split("///", 1)[1] if "///" in url else ""
    return not path or path == ":memory:" or Path(path).exists()


def install(url: str) -> None:
    """Let ``kernels.get_family`` find the families stored in the database of ``url`` by
    their content key (every process with a database calls it once: API, workers, CLI)."""
    with _lock:
        if url not in _urls:
            _urls.append(url)
    add_resolver(_find_key)


def uninstall(url: str) -> None:
    """Stop looking in the database of ``url`` (what was built from it stays known)."""
    with _lock:
        if url in _urls:
            _urls.remove(url)


# ---- compiling, before anything is stored ---------------------------------------------------
#: Characters of the compile check's output read at most.
_CHECK_OUTPUT_CHARS = 64 * 1024
#: Compile checks one process runs at a time (each may take its memory limit); the others wait.
CONCURRENT_CHECKS = 2
_checks = threading.BoundedSemaphore(CONCURRENT_CHECKS)


def compile_check(normalized: dict[str, Any]) -> None:
    """Compile the family's baseline point and its reference with nvcc, in a child process
    of the compile layer (``python -m worker.family_check``) under the settings' limits:
    nvcc's ``family_compile_timeout_s`` per kernel, twice that for the whole child, and
    ``family_compile_memory_mib`` of address space for it and its nvcc, at most
    :data:`CONCURRENT_CHECKS` at a time in a process.
    ``kernels.userspec.SpecError`` names ``kernel.source`` or ``reference.source`` with the
    first lines of nvcc's message when either does not compile."""
    from core.settings import get_settings
    from kernels.userspec import SpecError

    settings = get_settings()
    if not settings.family_compile_check:
        return
    limit_s = settings.family_compile_timeout_s
    memory = settings.family_compile_memory_mib * 2**20

    def limits() -> None:  # in the child, before it runs: inherited by nvcc and its tools
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    request = json.dumps({"spec": normalized, "timeout_s": limit_s})
    try:
        with _checks:
            proc = subprocess.run(
                [sys.executable, "-m", "worker.family_check"], input=request, text=True,
                capture_output=True, timeout=2 * limit_s + 10, preexec_fn=limits,
                start_new_session=True)
    except subprocess.TimeoutExpired:
        raise SpecError("kernel.source", f"compiling the baseline and the reference took "
                                         f"longer than {2 * limit_s + 10:g} s") from None
    out = proc.stdout[-_CHECK_OUTPUT_CHARS:].strip().splitlines()
    try:
        answer = json.loads(out[-1]) if out else {}
    except json.JSONDecodeError:
        answer = {}
    if answer.get("ok"):
        return
    if "field" in answer:
        raise SpecError(str(answer["field"]), str(answer.get("problem", "")))
    why = (proc.stderr.strip().splitlines() or ["no output"])[-1][:300]
    log.warning("the family compile check failed (exit %s): %s", proc.returncode, why)
    raise SpecError("kernel.source", f"the compile check could not run (exit "
                                     f"{proc.returncode}): {why}")


# ---- registering -----------------------------------------------------------------------------
def register(session: Session, *, spec: dict[str, Any], team_id: str | None,
             created_by: str | None = None) -> Registered:
    """Validate ``spec`` and store it as the team's next version of its name, unless the same
    content is stored already (then that version). A new version is compiled first
    (:func:`compile_check`). ``kernels.userspec.SpecError`` names the field of a bad spec or
    of a kernel nvcc refuses, :class:`FamilyConflict` a built-in's name: nothing is stored."""
    from kernels.userspec import family_from_normal, validate_spec

    wanted = spec.get("name") if isinstance(spec, dict) else None
    if isinstance(wanted, str) and wanted in family_names():
        raise FamilyConflict(f"name: {wanted!r} is the name of a built-in kernel family; "
                             "give yours another name")
    normalized = validate_spec(spec)  # once: the family is built from its normal form
    built = family_from_normal(normalized)
    name, digest, key = built.display_name, built.version_hash, built.name
    family = cast(KernelFamily, built)
    compiled = False
    for _attempt in range(5):
        existing = session.scalar(select(Family).where(_team(team_id), Family.key == key))
        if existing is not None:
            return Registered(existing.name, existing.version, existing.key,
                              existing.spec_hash, created=False)
        if not compiled:  # a new version: its kernels compile, or nothing is stored
            compile_check(normalized)
            compiled = True
        latest = session.scalar(select(func.max(Family.version))
                                .where(_team(team_id), Family.name == name)) or 0
        row = Family(team_id=team_id, name=name, version=latest + 1, spec_hash=digest, key=key,
                     spec=normalized, created_by=created_by)
        try:
            with session.begin_nested():  # a concurrent registration took the number: again
                session.add(row)
        except IntegrityError:
            continue
        with _lock:
            _built.setdefault(key, family)
        return Registered(name, row.version, key, digest, created=True)
    raise FamilyError(f"name: could not give {name!r} a version number (too many concurrent "
                      "registrations); try again")


# ---- finding ---------------------------------------------------------------------------------
def find(session: Session, *, team_id: str | None, name: str) -> Family | None:
    """The stored version ``name`` names for the team (``NAME``: the latest, ``NAME@vN``,
    ``NAME@hash12``), or None."""
    ref = REFERENCE.match(name)
    if ref is None:
        return None
    query = select(Family).where(_team(team_id), Family.name == ref["name"])
    if ref["version"] is not None:
        query = query.where(Family.version == int(ref["version"]))
    elif ref["hash"] is not None:
        query = query.where(Family.key == name)
    return session.scalar(query.order_by(Family.version.desc()).limit(1))


def versions(session: Session, *, team_id: str | None, name: str) -> list[Family]:
    """Every stored version of the team's family ``name``, oldest first."""
    return list(session.scalars(select(Family).where(_team(team_id), Family.name == name)
                                .order_by(Family.version)))


def latest(session: Session, *, team_id: str | None) -> list[Family]:
    """The latest version of each of the team's families, by name."""
    newest = (select(Family.name, func.max(Family.version).label("version"))
              .where(_team(team_id)).group_by(Family.name).subquery())
    return list(session.scalars(
        select(Family).join(newest, (newest.c.name == Family.name)
                            & (newest.c.version == Family.version))
        .where(_team(team_id)).order_by(Family.name)))


def version_of(session: Session, *, team_id: str | None, key: str) -> Family | None:
    """The team's stored version whose content key is ``key`` (None for a built-in)."""
    if "@" not in key:
        return None
    return session.scalar(select(Family).where(_team(team_id), Family.key == key))


def resolve(session: Session, *, team_id: str | None, name: str) -> KernelFamily:
    """The family a user means by ``name`` for the team: a built-in's name (or a plug-in's),
    one of the team's families by name (its latest version), ``NAME@vN`` or the full key.
    :class:`FamilyNotFound` names what the team has; another team's family is not found."""
    if name in family_names():
        return get_family(name)
    row = find(session, team_id=team_id, name=name)
    if row is not None:
        return family_of(row)
    ref = REFERENCE.match(name)
    if ref is not None and (ref["version"] or ref["hash"]):
        stored = versions(session, team_id=team_id, name=ref["name"])
        if stored:
            raise FamilyNotFound(
                f"kernel family {ref['name']!r} has no version "
                f"{'v' + ref['version'] if ref['version'] else ref['hash']}; it has "
                f"{', '.join(f'v{r.version} ({r.key})' for r in stored)}")
    own = [r.name for r in latest(session, team_id=team_id)]
    shown = name if len(name) <= 64 else f"{name[:64]}… ({len(name)} characters)"
    raise FamilyNotFound(f"unknown kernel family {shown!r}; known: "
                         f"{', '.join([*family_names(), *own])}")
