"""``tuneforge family``: register your own kernel family (a declarative spec, no Python), list
and show families, and bring a Kernel Tuner description over. Into the local database (embedded
campaigns) or, with ``--url``/``--key``, into your team on the service."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from cli.client import KeyOpt, UrlOpt, api_client, call
from cli.common import (
    cannot_write,
    check_writable_folder,
    console,
    database_url,
    err_console,
    fail,
    open_database,
    path_option,
)
from core.settings import get_settings

family_app = typer.Typer(
    help="Your own kernel families, registered without Python.\n\n"
         "A family is a directory with the CUDA source, its tunables, "
         "dimensions, signature, reference kernel and correctness rule (docs/FAMILIES.md). "
         "Registered in the local database (--db), or in your team on the service "
         "(--url/--key; TUNEFORGE_API_KEY picks the service).\n\n"
         "Examples:\n\n"
         "  tuneforge family add examples/transpose --db runs.db\n\n"
         "  tuneforge family list --db runs.db\n\n"
         "  tuneforge tune --kernel transpose --db runs.db",
    no_args_is_help=True)

DbOpt = Annotated[str | None, typer.Option(
    "--db", help="SQLite file or database URL to register in (default: the local database, "
                 "~/.tuneforge/tuneforge.db; --url/--key or TUNEFORGE_API_KEY: the service)")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print JSON")]


def _target(db: str | None, url: str | None, key: str | None) -> tuple[str, Any]:
    """``("db", url)`` or ``("api", client)``: the database of ``--db``, the service of
    ``--url``/``--key``/TUNEFORGE_API_KEY, else the local database (as ``tuneforge report``)."""
    if db is not None and (url or key):
        fail("give either --db (a local database) or --url/--key (the service), not both")
    if db is None and (url or key or get_settings().api_key):
        return "api", api_client(url, key)
    target = database_url(db, create=True)
    open_database(target)
    return "db", target


def _load(folder: Path) -> dict[str, Any]:
    """The spec of a directory, validated here first (exit 2 with ``field: problem``)."""
    from kernels.userspec import SpecError, load_spec_dir, validate_spec

    if not folder.is_dir():
        fail(f"{folder}: not a directory (a family is a directory with its spec and files)")
    try:
        spec = load_spec_dir(folder)
        validate_spec(spec)
    except SpecError as exc:
        fail(f"{exc.field}: {exc.problem}" if exc.field else str(exc.problem))
    except OSError as exc:
        fail(f"{folder}: cannot read it: {exc.strerror or exc}")
    return spec


def _register(spec: dict[str, Any], db: str | None, url: str | None, key: str | None
              ) -> dict[str, Any]:
    """Register ``spec``; what ``POST /families`` answers (``name``, ``version``, ``key``,
    ``hash``, ``created``)."""
    kind, target = _target(db, url, key)
    if kind == "api":
        with target as client:
            return dict(call(client, "POST", "/families", json=spec))
    import getpass

    from core import families
    from core.db import session_scope
    from kernels.userspec import SpecError

    try:
        user: str | None = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container)
        user = None
    try:
        with session_scope(target) as session:
            done = families.register(session, spec=spec, team_id=None, created_by=user)
    except SpecError as exc:
        fail(f"{exc.field}: {exc.problem}" if exc.field else str(exc.problem))
    except families.FamilyError as exc:
        fail(str(exc))
    return {"name": done.name, "version": done.version, "key": done.key,
            "hash": done.spec_hash, "created": done.created}


def _say_registered(done: dict[str, Any], as_json: bool, db: str | None = None,
                    url: str | None = None) -> None:
    if as_json:
        sys.stdout.write(json.dumps(done) + "\n")
        return
    what = "registered" if done["created"] else "already registered (same content)"
    console.print(f"{done['name']} v{done['version']} {what}: key {done['key']}", highlight=False)
    if url:  # the service: a campaign JSON naming the family, submitted with the same key
        console.print(f'tune it: tuneforge submit SPEC.json --url {url} (SPEC.json: '
                      f'{{"kernel": "{done["name"]}", "shape": {{...}}}})', highlight=False,
                      soft_wrap=True)
    else:  # the same database the family went into
        where = f" --db {shlex.quote(db)}" if db else ""
        console.print(f"tune it: tuneforge tune --kernel {done['name']}{where}", highlight=False,
                      soft_wrap=True)  # one line: a command to copy


@family_app.command("add")
def add(folder: Annotated[Path, typer.Argument(help="the family's directory")],
        db: DbOpt = None, url: UrlOpt = None, key: KeyOpt = None,
        as_json: JsonOpt = False) -> None:
    """Validate a family directory and register it: a new version when its content changed,
    the version it is when not. A bad spec exits 2 with the field and the problem, and
    nothing is stored.

    Examples:

      tuneforge family add examples/transpose --db runs.db

      tuneforge family add my_kernel/ --url http://gpu-box:8000 --key tf_…
    """
    _say_registered(_register(_load(folder), db, url, key), as_json, db, url)


def _families(db: str | None, url: str | None, key: str | None) -> list[dict[str, Any]]:
    kind, target = _target(db, url, key)
    if kind == "api":
        with target as client:
            return list(call(client, "GET", "/families"))
    return local_families(target)


def local_families(url: str) -> list[dict[str, Any]]:
    """``GET /families`` of a local database (its URL, migrated): the built-ins, then the
    latest version of each family registered there."""
    from api.views import family_list
    from core import families
    from core.db import session_scope

    families.install(url)
    with session_scope(url) as session:
        return [f.model_dump(mode="json") for f in family_list(session, None)]


@family_app.command("list")
def list_cmd(db: DbOpt = None, url: UrlOpt = None, key: KeyOpt = None,
             as_json: JsonOpt = False) -> None:
    """List the families you can tune: the built-ins, then yours (latest version).

    Examples:

      tuneforge family list --db runs.db

      tuneforge family list --json | jq '.[].key'
    """
    found = _families(db, url, key)
    if as_json:
        sys.stdout.write(json.dumps(found, indent=1) + "\n")
        return
    table = Table(title="kernel families")
    for col in ("name", "dims", "unit", "actions", "key"):  # fits 80 columns
        table.add_column(col, no_wrap=col in ("name", "dims", "key"))
    for f in found:
        name = f"{f['name']} v{f['version']}" if f["version"] is not None else f["name"]
        name += " (retired)" if f.get("retired") else ""
        name += " (cannot be built: `family show` says why)" if f.get("problem") else ""
        table.add_row(escape(name), ",".join(f["dims"]), f["unit"],
                      str(f["transforms"]), f["key"] if f["origin"] == "team" else "built-in")
    console.print(table)


def _family(name: str, db: str | None, url: str | None, key: str | None) -> dict[str, Any]:
    kind, target = _target(db, url, key)
    if kind == "api":
        from urllib.parse import quote

        with target as client:
            return dict(call(client, "GET", f"/families/{quote(name, safe='@')}"))
    from api.views import read_family
    from core import families
    from core.db import session_scope

    families.install(target)
    try:
        with session_scope(target) as session:
            return read_family(session, None, name).model_dump(mode="json")
    except families.FamilyNotFound as exc:
        fail(str(exc), code=4)


@family_app.command("show")
def show(name: Annotated[str, typer.Argument(
             help="a family's name (its latest version), NAME@vN or NAME@hash12")],
         db: DbOpt = None, url: UrlOpt = None, key: KeyOpt = None,
         as_json: JsonOpt = False) -> None:
    """Show a family: its dimensions, signature, metric, vendor, correctness rule and
    tolerance, baseline, restrictions, launch, reference, tunables, actions and versions.

    Examples:

      tuneforge family show transpose --db runs.db

      tuneforge family show transpose@v1 --json
    """
    f = _family(name, db, url, key)
    if as_json:
        sys.stdout.write(json.dumps(f, indent=1) + "\n")
        return
    if f.get("problem"):  # stored before a check that refuses it now: what its row says
        console.print(f"{escape(f['name'])} v{f['version']} ({escape(f['key'])}): "
                      f"{escape(f['problem'])}", highlight=False, soft_wrap=True)
        return
    version = f"v{f['version']}" if f["version"] is not None else "built-in"
    head = Table(title=f"{f['name']} {version}", show_header=False)
    head.add_column(style="bold", no_wrap=True)
    head.add_column(overflow="fold")
    dims = ", ".join(f"{d['name']} {d['min']}..{d['max']}" for d in f["dim_bounds"])
    buffers = ", ".join(f"{b['name']} {b['role']} {b['dtype']}[{b['count']}]"
                        for b in f["signature"]["buffers"])
    scalars = ", ".join(f"{s['name']} = {s['value']}" for s in f["signature"]["scalars"])
    rows = [("key", f["key"]), ("hash", f["hash"] or "–"), ("description", f["description"]),
            ("dimensions", f"{dims} (default {f['default_shape']})"),
            ("buffers", buffers), ("scalars", scalars or "–"),
            ("metric", f"{f['metric']['kind']} {f['metric']['work']} → {f['metric']['unit']} "
                       f"(vs {f['metric']['peak_label']})"),
            ("vendor", f.get("vendor") or "none (no vendor baseline)"),
            ("correctness", f"{_rule_text(f['correctness'], f['tolerance'])}; inputs "
                            f"{', '.join(f['distributions'])}"),
            ("baseline", ", ".join(f"{k}={json.dumps(v)}" for k, v in f["baseline"].items())),
            *_declared_rows(f.get("spec")),
            ("edge shapes", ", ".join(f["edge_shapes"]) or "–"),
            ("actions", ", ".join(f["transform_names"]))]
    for label, value in rows:
        head.add_row(label, escape(str(value)))
    console.print(head)
    tunables = Table(title="tunables")
    tunables.add_column("name", no_wrap=True)
    tunables.add_column("values")
    for tname, values in f["tunables"].items():
        tunables.add_row(tname, escape(", ".join(map(str, values))))
    console.print(tunables)
    if f["all_versions"]:
        versions = Table(title="versions")
        for col in ("version", "key", "registered", "by"):
            versions.add_column(col, no_wrap=True)
        for v in f["all_versions"]:
            versions.add_row(f"v{v['version']}", v["key"], v["created_at"][:19].replace("T", " "),
                             v["created_by"] or "–")
        console.print(versions)


VersionArg = Annotated[str, typer.Argument(help="one version: NAME@vN or NAME@hash12")]


def _change_version(action: str, name: str, db: str | None, url: str | None,
                    key: str | None) -> dict[str, Any] | None:
    """Retire, restore or delete one version, on the service or in a local database; what
    the version is now (None once deleted)."""
    kind, target = _target(db, url, key)
    if kind == "api":
        from urllib.parse import quote

        from cli.client import check_response

        path = f"/families/{quote(name, safe='@')}"
        with target as client:
            if action == "delete":
                response = client.request("DELETE", path)
                if response.status_code != 204:
                    check_response(response)
                return None
            return dict(call(client, "POST", f"{path}/{action}"))
    from api.views import family_version
    from core import families
    from core.db import session_scope

    try:
        with session_scope(target) as session:
            if action == "delete":
                families.delete(session, team_id=None, name=name)
                return None
            row = families.retire(session, team_id=None, name=name,
                                  retired=action == "retire")
            return family_version(row).model_dump(mode="json")
    except families.FamilyNotFound as exc:
        fail(str(exc), code=4)
    except families.FamilyError as exc:
        fail(str(exc))


@family_app.command("retire")
def retire(name: VersionArg, db: DbOpt = None, url: UrlOpt = None, key: KeyOpt = None,
           undo: Annotated[bool, typer.Option("--undo", help="bring it back")] = False) -> None:
    """Retire one version: new campaigns refuse it, the family's name alone stops meaning it,
    and it stays readable with the campaigns that ran it (--undo brings it back).

    Examples:

      tuneforge family retire transpose@v1 --db runs.db

      tuneforge family retire transpose@v1 --undo
    """
    done = _change_version("restore" if undo else "retire", name, db, url, key)
    assert done is not None
    console.print(f"{name}: {'retired' if done['retired_at'] else 'not retired'} "
                  f"(key {done['key']})", highlight=False)


@family_app.command("delete")
def delete(name: VersionArg, db: DbOpt = None, url: UrlOpt = None,
           key: KeyOpt = None) -> None:
    """Delete one version that no campaign ran (one that campaigns ran is refused: retire it,
    their records need it); its stored bytes leave the team's quota.

    Examples:

      tuneforge family delete transpose@v2 --db runs.db
    """
    _change_version("delete", name, db, url, key)
    console.print(f"{name}: deleted", highlight=False)


def _rule_text(rule: str, tolerance: float) -> str:
    """The correctness rule and the tolerance a campaign of the family runs at."""
    if rule == "exact":
        return "exact: every element equal to the reference (no tolerance)"
    return f"{rule}, tolerance {tolerance:g} (a campaign's --tolerance overrides it)"


def _declared_rows(spec: dict[str, Any] | None) -> list[tuple[str, str]]:
    """What a user's spec declares beyond the summary, one row each: its restrictions, the
    kernel's launch, and the reference (file, kernel, output type, launch). A built-in keeps
    them in its Python package."""
    if spec is None:
        return [("rules", "the built-in family's own (its Python package under kernels/)")]

    def launch(d: dict[str, Any]) -> str:
        text = f"grid ({', '.join(d['grid'])}), block ({', '.join(d['block'])})"
        smem = d.get("dynamic_smem", "0")
        return text if smem in ("0", 0) else f"{text}, dynamic smem {smem}"

    kernel, ref = spec["kernel"], spec["reference"]
    return [
        ("restrictions", "\n".join(spec.get("restrictions") or []) or "none"),
        ("kernel", f"{kernel['name']} in {kernel['source']}"),
        ("launch", launch(spec["launch"])),
        ("reference", f"{ref['kernel']} in {ref['source']}, writes {ref['outputs_dtype']}; "
                      f"{launch(ref)}"),
    ]


@family_app.command("import-kt")
def import_kt(file: Annotated[Path, typer.Argument(help=(
                  "a Kernel Tuner description as JSON: kernel source, tune_params, "
                  "restrictions, problem size, grid divisors"))],
              out: Annotated[Path | None, typer.Option(
                  help="write the family's directory here instead of registering it",
                  parser=path_option("--out"))] = None,
              db: DbOpt = None, url: UrlOpt = None, key: KeyOpt = None,
              as_json: JsonOpt = False) -> None:
    """Bring a Kernel Tuner kernel over: its description becomes a family spec, written as a
    directory (--out) or registered at once (in --db, or on the service).

    Examples:

      tuneforge family import-kt kt_kernel.json --out my_kernel/

      tuneforge family import-kt kt_kernel.json --db runs.db
    """
    from kernels.userspec import SpecError, from_kernel_tuner, validate_spec

    try:
        described = json.loads(file.read_text())
    except OSError as exc:
        fail(f"{file}: cannot read it: {exc.strerror or exc}")
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        fail(f"{file}: not JSON: {exc}")
    if not isinstance(described, dict):
        fail(f"{file}: a Kernel Tuner description is a JSON object")
    try:
        spec = from_kernel_tuner(described)
        validate_spec(spec)
    except SpecError as exc:
        fail(f"{exc.field}: {exc.problem}" if exc.field else str(exc.problem))
    if out is None:
        _say_registered(_register(spec, db, url, key), as_json, db, url)
        return
    if db is not None or url or key:
        fail("give either --out (write the directory) or --db/--url/--key (register it)")
    check_writable_folder("--out", out)
    try:
        written = write_spec_dir(spec, out)
    except OSError as exc:
        cannot_write(out, exc)
    if as_json:
        sys.stdout.write(json.dumps({"out": str(out), "files": [str(p) for p in written]})
                         + "\n")
        return
    err_console.print(f"wrote {out} ({len(written)} files): register it with "
                      f"tuneforge family add {out}")


def write_spec_dir(spec: dict[str, Any], folder: Path) -> list[Path]:
    """Write ``spec`` as the directory :func:`kernels.userspec.load_spec_dir` reads back: its
    files under their names, the rest as ``family.json``; the paths written."""
    from kernels.userspec.files import SPEC_FILE, check_file_name

    files = dict(spec.get("files") or {})
    for name in files:
        check_file_name(name, f"files.{name}")  # never outside the folder
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)
    described = {k: v for k, v in spec.items() if k != "files"}
    (folder / SPEC_FILE).write_text(json.dumps(described, indent=1) + "\n")
    return [folder / SPEC_FILE, *written]


def register(app: typer.Typer) -> None:
    """Add ``tuneforge family`` to the app."""
    app.add_typer(family_app, name="family")
