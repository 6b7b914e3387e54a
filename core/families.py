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
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from sqlalchemy import func, select
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.orm import Session

from core.db import session_factory
from core.models import Campaign, Family, utcnow
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


class QuotaExceeded(FamilyError):
    """A new version would take the team past its quota of versions or of stored bytes."""


class FamilyRetired(FamilyError):
    """A retired version named for a new campaign (it stays readable)."""


class FamilyInUse(FamilyError):
    """A version that campaigns ran cannot be deleted (their record needs it): retire it."""


@dataclass(frozen=True)
class Quota:
    """What one team may store: versions (retired ones count) and their specs' bytes."""

    versions: int
    stored_bytes: int


def stored_size(spec: dict[str, Any]) -> int:
    """The bytes a spec takes stored (its JSON text, as the JSON column writes it)."""
    return len(json.dumps(spec).encode())


def usage(session: Session, *, team_id: str | None) -> tuple[int, int]:
    """The team's stored versions and the bytes of their specs."""
    count, size = session.execute(select(func.count(), func.coalesce(func.sum(
        Family.size_bytes), 0)).where(_team(team_id))).one()
    return int(count), int(size)


def _check_quota(session: Session, team_id: str | None, size: int, quota: Quota) -> None:
    count, used = usage(session, team_id=team_id)
    if count + 1 > quota.versions:
        raise QuotaExceeded(
            f"the team stores {count} family versions, its quota "
            f"(TUNEFORGE_MAX_FAMILY_VERSIONS); delete unused versions (`tuneforge family "
            "delete NAME@vN`) or ask the operator for more")
    if used + size > quota.stored_bytes:
        raise QuotaExceeded(
            f"this version's spec takes {size} bytes and the team's versions take {used} of "
            f"its {quota.stored_bytes} (TUNEFORGE_MAX_FAMILY_BYTES); delete unused versions "
            "(`tuneforge family delete NAME@vN`) or ask the operator for more")


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
#: Families built in this process, the most recently used last; at most :data:`KEPT_BUILT`
#: (a built family holds its rendered sources: every registration kept one for good, and the
#: API's memory grew with each version registered)
_built: OrderedDict[str, KernelFamily] = OrderedDict()
KEPT_BUILT = 64


def _keep(key: str, family: KernelFamily) -> KernelFamily:
    """Keep a built family (the one kept already, if another thread built it first); the
    least recently used beyond :data:`KEPT_BUILT` are let go. Call with ``_lock`` held."""
    kept = _built.setdefault(key, family)
    _built.move_to_end(key)
    while len(_built) > KEPT_BUILT:
        _built.popitem(last=False)
    return kept


_urls: list[str] = []
_lock = threading.Lock()


def family_of(row: Family) -> KernelFamily:
    """The family a stored version defines (built from its spec once per process)."""
    with _lock:
        found = _built.get(row.key)
    if found is not None:
        return found
    from kernels.userspec import build_family

    try:
        family = cast(KernelFamily, build_family(row.spec))
    except (ValueError, TypeError, KeyError) as exc:  # stored before today's checks
        why = (f"the stored family {row.name} v{row.version} ({row.key}) cannot be built: "
               f"{str(exc)[:300]}; retire or delete it (`tuneforge family retire|delete "
               f"{row.name}@v{row.version}`)")
        raise FamilyError(why.encode("utf-8", "backslashreplace").decode("utf-8")) from None
    if family.name != row.key:  # the content is not what its key says: never run it
        raise FamilyError(f"the stored family {row.key} builds as {family.name}: its spec was "
                          "changed after it was registered")
    with _lock:
        return _keep(row.key, family)


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
             created_by: str | None = None, quota: Quota | None = None) -> Registered:
    """Validate ``spec`` and store it as the team's next version of its name, unless the same
    content is stored already (then that version). A new version is compiled first
    (:func:`compile_check`). ``kernels.userspec.SpecError`` names the field of a bad spec or
    of a kernel nvcc refuses, :class:`FamilyConflict` a built-in's name and
    :class:`QuotaExceeded` a team at its ``quota``: nothing is stored."""
    from kernels.userspec import family_from_normal, validate_spec

    wanted = spec.get("name") if isinstance(spec, dict) else None
    if isinstance(wanted, str) and wanted in family_names():
        raise FamilyConflict(f"name: {wanted!r} is the name of a built-in kernel family; "
                             "give yours another name")
    normalized = validate_spec(spec)  # once: the family is built from its normal form
    built = family_from_normal(normalized)
    name, digest, key = built.display_name, built.version_hash, built.name
    family = cast(KernelFamily, built)
    size = stored_size(normalized)
    compiled = False
    for _attempt in range(5):
        existing = session.scalar(select(Family).where(_team(team_id), Family.key == key))
        if existing is not None:
            return Registered(existing.name, existing.version, existing.key,
                              existing.spec_hash, created=False)
        if quota is not None:  # before the compile check: a team at its quota pays no nvcc
            _check_quota(session, team_id, size, quota)
        if not compiled:  # a new version: its kernels compile, or nothing is stored
            compile_check(normalized)
            compiled = True
        latest = session.scalar(select(func.max(Family.version))
                                .where(_team(team_id), Family.name == name)) or 0
        row = Family(team_id=team_id, name=name, version=latest + 1, spec_hash=digest, key=key,
                     spec=normalized, created_by=created_by, size_bytes=size)
        try:
            with session.begin_nested():  # a concurrent registration took the number: again
                session.add(row)
        except IntegrityError:
            continue
        with _lock:
            _keep(key, family)
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
    # NAME alone: the latest version not retired (the latest retired one when all are)
    return session.scalar(query.order_by(Family.retired_at.is_not(None), Family.version.desc())
                          .limit(1))


def versions(session: Session, *, team_id: str | None, name: str) -> list[Family]:
    """Every stored version of the team's family ``name``, oldest first."""
    return list(session.scalars(select(Family).where(_team(team_id), Family.name == name)
                                .order_by(Family.version)))


def latest(session: Session, *, team_id: str | None) -> list[Family]:
    """The latest version of each of the team's families, by name (the latest not retired;
    the latest retired one when all are)."""
    chosen: dict[str, tuple[bool, int, str]] = {}
    for row_id, name, version, retired_at in session.execute(
            select(Family.id, Family.name, Family.version, Family.retired_at)
            .where(_team(team_id))):
        rank = (retired_at is None, version, row_id)
        if name not in chosen or rank > chosen[name]:
            chosen[name] = rank
    ids = [rank[2] for rank in chosen.values()]
    return list(session.scalars(select(Family).where(Family.id.in_(ids))
                                .order_by(Family.name))) if ids else []


def version_of(session: Session, *, team_id: str | None, key: str) -> Family | None:
    """The team's stored version whose content key is ``key`` (None for a built-in)."""
    if "@" not in key:
        return None
    return session.scalar(select(Family).where(_team(team_id), Family.key == key))


def resolve(session: Session, *, team_id: str | None, name: str,
            for_new: bool = False) -> KernelFamily:
    """The family a user means by ``name`` for the team: a built-in's name (or a plug-in's),
    one of the team's families by name (its latest version not retired), ``NAME@vN`` or the
    full key. :class:`FamilyNotFound` names what the team has; another team's family is not
    found. ``for_new`` (a new campaign): a retired version is :class:`FamilyRetired`."""
    if name in family_names():
        return get_family(name)
    row = find(session, team_id=team_id, name=name)
    if row is not None:
        if for_new and row.retired_at is not None:
            raise FamilyRetired(f"kernel family {row.name} v{row.version} ({row.key}) is "
                                "retired: its campaigns stay readable, new ones need a version "
                                "that is not (`tuneforge family list`)")
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


# ---- retiring and deleting -------------------------------------------------------------------
def _one_version(session: Session, *, team_id: str | None, name: str) -> Family:
    """The version ``NAME@vN`` or ``NAME@hash12`` names (a name alone is refused: which
    version is meant must be said)."""
    ref = REFERENCE.match(name)
    if ref is None or not (ref["version"] or ref["hash"]):
        raise FamilyError(f"name one version: NAME@vN or NAME@hash12, not {name[:80]!r}")
    row = find(session, team_id=team_id, name=name)
    if row is None:
        raise FamilyNotFound(f"the team has no family version {name!r}")
    return row


def retire(session: Session, *, team_id: str | None, name: str,
           retired: bool = True) -> Family:
    """Retire the version ``name`` (or bring it back, ``retired=False``): new campaigns refuse
    it and a name alone stops meaning it; it stays readable, its campaigns' records whole."""
    row = _one_version(session, team_id=team_id, name=name)
    if retired and row.retired_at is None:
        row.retired_at = utcnow()
    elif not retired:
        row.retired_at = None
    return row


def campaigns_of(session: Session, *, team_id: str | None, key: str) -> int:
    """How many of the team's campaigns ran the version whose content key is ``key``."""
    team = Campaign.team_id == team_id if team_id is not None else Campaign.team_id.is_(None)
    return int(session.scalar(select(func.count()).select_from(Campaign)
                              .where(team, Campaign.kernel == key)) or 0)


def delete(session: Session, *, team_id: str | None, name: str) -> Family:
    """Delete the version ``name`` that no campaign of the team ran (:class:`FamilyInUse`
    otherwise: retire it). Its number is not given again while a later version exists."""
    row = _one_version(session, team_id=team_id, name=name)
    used = campaigns_of(session, team_id=team_id, key=row.key)
    if used:
        raise FamilyInUse(f"{row.name} v{row.version} ({row.key}) was run by {used} "
                          "campaign(s), whose records need it: retire it instead (`tuneforge "
                          f"family retire {row.name}@v{row.version}`)")
    session.delete(row)
    session.flush()
    return row
