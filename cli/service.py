"""Service commands: ``serve``, ``worker``, ``admin``, and the clients ``submit`` and ``watch``
(httpx against the REST API); ``export`` and ``report`` read either the API or a database
(:mod:`cli.report`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from cli.client import KeyOpt, UrlOpt, api_client, call, check_response
from cli.common import console, err_console, fail
from core.settings import get_settings

admin = typer.Typer(help="Teams and API keys (talks to the database directly).",
                    no_args_is_help=True)

# ---- server side ----------------------------------------------------------------------------
def serve(
    host: Annotated[str, typer.Option(help="interface to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port")] = 8000,
    workers: Annotated[int, typer.Option(help="uvicorn worker processes")] = 1,
) -> None:
    """Run the REST API and the web dashboard (migrates the database to head first).

    Examples:

      TUNEFORGE_DATABASE_URL=postgresql+psycopg://tf@db/tuneforge tuneforge serve --host 0.0.0.0

      tuneforge serve --port 8080        # then open http://127.0.0.1:8080/ (the dashboard)
    """
    import uvicorn

    from core.db import upgrade_database

    if not 0 <= port <= 65535:
        fail(f"--port must be a TCP port number 0..65535, got {port}")
    if workers < 1:
        fail(f"--workers must be at least 1, got {workers}")
    settings = get_settings()
    url = settings.effective_database_url
    if url.startswith("sqlite"):
        why = ("TUNEFORGE_DATABASE_URL is not set" if not settings.database_url
               else "TUNEFORGE_DATABASE_URL names SQLite")
        err_console.print(f"[yellow]warning:[/] {why}: the service uses {url}; point it at "
                          "PostgreSQL for more than one worker")
    upgrade_database(url)
    err_console.print(f"new campaigns run on the {settings.backend} backend "
                      "(TUNEFORGE_BACKEND; every worker must have the same)", highlight=False)
    # h11, not httptools: h11 bounds what it buffers of a request line and its headers
    # (httptools reads a header of any size whole before the API can refuse it)
    uvicorn.run("api.main:app", host=host, port=port, workers=workers, log_level="warning",
                access_log=False, http="h11",
                h11_max_incomplete_event_size=settings.max_header_bytes)


ROLES = ("compile", "gpu", "agent")


def _celery_command(queue: str, concurrency: int, name: str, loglevel: str) -> list[str]:
    return [sys.executable, "-m", "celery", "-A", "core.queues", "worker", "-Q", queue,
            "-c", str(concurrency), "-n", name, "--prefetch-multiplier", "1",
            "--pool", "prefork", "-l", loglevel, "--without-gossip", "--without-mingle"]


def worker(
    role: Annotated[str, typer.Option(help="compile | gpu | agent")],
    backend: Annotated[str | None, typer.Option(
        help="gpu | replay: must be TUNEFORGE_BACKEND, the setting every role reads (the API "
             "stamps it on each campaign); replay answers from recorded measurements")
    ] = None,
    gpus: Annotated[str, typer.Option(
        help="GPU indices, one worker process each, e.g. 0,1")] = "0",
    concurrency: Annotated[int | None, typer.Option(
        help="processes (compile: CPU cores; agent: 2; gpu: always 1 per GPU)", min=1)] = None,
    replay_speed: Annotated[float | None, typer.Option(
        help="replay: sleep the recorded GPU time divided by this (0 = no sleep)", min=0)
    ] = None,
    loglevel: Annotated[str, typer.Option(help="Celery log level")] = "WARNING",
) -> None:
    """Run Celery workers of one role (one process per GPU for --role gpu).

    Examples:

      tuneforge worker --role gpu --gpus 0,1,2,3

      tuneforge worker --role compile --concurrency 16

      tuneforge worker --role gpu --backend replay --gpus 0,1   # no GPU: recorded measurements
    """
    settings = get_settings()
    if role not in ROLES:
        fail(f"--role must be one of {', '.join(ROLES)}, not {role!r}")
    if backend is not None and backend not in ("gpu", "replay"):
        fail(f"--backend must be gpu or replay, not {backend!r}")
    if backend is not None and backend != settings.backend:
        # the API stamps its TUNEFORGE_BACKEND on every campaign: a worker of another backend
        # would take each of its candidates and fail it
        fail(f"--backend {backend} is not TUNEFORGE_BACKEND ({settings.backend}), the backend "
             f"the API gives every campaign: export TUNEFORGE_BACKEND={backend} for the API "
             "and every worker (docs/SERVICE.md, \"By hand\")")
    backend = settings.backend
    if backend not in ("gpu", "replay"):
        fail(f"TUNEFORGE_BACKEND must be gpu or replay, not {backend!r}")
    env = dict(os.environ)
    env["TUNEFORGE_WORKER_ROLE"] = role
    env["TUNEFORGE_BACKEND"] = backend
    if replay_speed is not None:
        env["TUNEFORGE_REPLAY_SPEED"] = str(replay_speed)
    launches: list[tuple[list[str], dict[str, str]]] = []
    if role == "gpu":
        indices = [g.strip() for g in gpus.split(",") if g.strip()]
        if not indices or not all(g.isdigit() for g in indices):
            fail(f"--gpus must list GPU indices like 0,1, got {gpus!r}")
        for index in indices:
            pinned = {**env, "CUDA_VISIBLE_DEVICES": index}
            launches.append((_celery_command(f"gpu.{settings.arch}", 1, f"gpu{index}@%h",
                                             loglevel), pinned))
    else:
        default = (os.cpu_count() or 1) if role == "compile" else 2
        launches.append((_celery_command(role, concurrency or default, f"{role}@%h", loglevel),
                         env))
    _supervise(launches)


def _supervise(launches: list[tuple[list[str], dict[str, str]]]) -> NoReturn:
    """Start every worker, forward SIGINT/SIGTERM, stop all when one stops."""
    root = str(Path(__file__).resolve().parent.parent)
    procs = [subprocess.Popen(cmd, env=env, cwd=root) for cmd, env in launches]

    def forward(signum: int, _frame: Any) -> None:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    code = 0
    while True:
        codes = [p.poll() for p in procs]
        if all(c is not None for c in codes):
            break
        if any(c not in (None, 0) for c in codes) and code == 0:
            code = next(c for c in codes if c not in (None, 0)) or 1
            forward(signal.SIGTERM, None)
        time.sleep(0.2)
    raise typer.Exit(code or max((abs(p.returncode or 0) for p in procs), default=0))


@admin.command("migrate")
def migrate() -> None:
    """Upgrade the database schema to the newest migration (Alembic ``head``).

    Example: TUNEFORGE_DATABASE_URL=postgresql+psycopg://tf@db/tuneforge tuneforge admin migrate
    """
    from core.db import upgrade_database

    upgrade_database(get_settings().effective_database_url)
    err_console.print("database at head")


@admin.command("create-team")
def create_team(name: Annotated[str, typer.Argument(help="team name")]) -> None:
    """Create a team and print its first API key (shown once).

    Example: TUNEFORGE_API_KEY=$(tuneforge admin create-team kernels-team)
    """
    from api import security
    from core.db import session_scope

    try:
        with session_scope(get_settings().effective_database_url) as s:
            team, key = security.create_team(s, name=name)
            team_id = team.id
    except security.TeamKeyError as exc:
        fail(str(exc))
    err_console.print(f"team [bold]{name}[/] ({team_id}); its API key, shown only now:")
    sys.stdout.write(key + "\n")


@admin.command("rotate-key")
def rotate_key(team: Annotated[str, typer.Argument(help="team name")]) -> None:
    """Issue a new key for a team and revoke its old ones.

    Example: tuneforge admin rotate-key kernels-team
    """
    from api import security
    from core.db import session_scope

    try:
        with session_scope(get_settings().effective_database_url) as s:
            key = security.rotate_key(s, team_name=team)
    except security.TeamKeyError as exc:
        fail(str(exc))
    err_console.print(f"new key for [bold]{team}[/] (the old ones are revoked):")
    sys.stdout.write(key + "\n")


@admin.command("revoke-key")
def revoke_key(prefix: Annotated[str, typer.Argument(help="key prefix, e.g. tf_1a2b3c4d")]
               ) -> None:
    """Revoke one key by its prefix.

    Example: tuneforge admin revoke-key tf_1a2b3c4d
    """
    from api import security
    from core.db import session_scope

    try:
        with session_scope(get_settings().effective_database_url) as s:
            key = security.revoke_key(s, prefix=prefix)
            shown = key.prefix
    except security.TeamKeyError as exc:
        fail(str(exc))
    err_console.print(f"revoked {shown}")


# ---- clients --------------------------------------------------------------------------------
def submit(
    spec: Annotated[Path, typer.Argument(help="campaign JSON, e.g. "
                                              '{"shape": {"m": 4096, "n": 4096, "k": 4096}}')],
    url: UrlOpt = None, key: KeyOpt = None,
) -> None:
    """Submit a campaign; prints its id.

    Examples:

      echo '{"shape": {"m": 4096, "n": 4096, "k": 4096}, "budget": {"iterations": 300}}' > spec.json

      tuneforge submit spec.json --url http://gpu-box:8000 --key tf_…

      tuneforge watch "$(tuneforge submit spec.json)"
    """
    try:
        raw = spec.read_bytes()
        json.loads(raw)
    except (OSError, ValueError) as exc:  # ValueError: not JSON, or not UTF-8
        fail(f"{spec}: {exc}")
    with api_client(url, key) as client:  # sent as written: the server judges (NaN included)
        created = call(client, "POST", "/campaigns", content=raw,
                        headers={"Content-Type": "application/json"})
    sys.stdout.write(created["id"] + "\n")


def iter_sse(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    """Parse a server-sent event stream into ``{"id", "event", "data"}`` dicts."""
    event: dict[str, Any] = {}
    data: list[str] = []
    for line in lines:
        if line == "":
            if data:
                event["data"] = json.loads("\n".join(data))
                yield event
            event, data = {}, []
        elif line.startswith(":"):
            continue
        else:
            field, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if field == "data":
                data.append(value)
            elif field in ("id", "event"):
                event[field] = value


def watch(
    campaign_id: Annotated[str, typer.Argument(help="campaign id (or a unique prefix)")],
    url: UrlOpt = None, key: KeyOpt = None,
) -> None:
    """Follow a campaign's progress (server-sent events) until it finishes.

    The agent's notes (an injected action it did not try, say) are printed as they come.

    Examples:

      tuneforge watch 81d814f4e0c84d6c9a3e5a1f2b7d9c01

      tuneforge watch 81d814f4        # a unique prefix of the id

      TUNEFORGE_API_URL=http://gpu-box:8000 TUNEFORGE_API_KEY=tf_… tuneforge watch ID
    """
    import httpx
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    from cli.report import ApiSource

    source = ApiSource(url, key)
    campaign_id = source.resolve(campaign_id)  # an id, or a unique prefix of one
    with closing(source.client) as client:  # in use already (it resolved the id)
        campaign = call(client, "GET", f"/campaigns/{campaign_id}")
        total = campaign["budget"]["iterations"]
        rate = _rate_of(campaign)
        finished: dict[str, Any] | None = None
        progress = Progress(TextColumn(f"[bold]{campaign_id[:8]}[/]"), BarColumn(),
                            MofNCompleteColumn(), TextColumn("{task.fields[best]}"),
                            TimeElapsedColumn(), console=err_console)
        task = progress.add_task("watch", total=total, completed=campaign["evaluations"],
                                 best="")
        try:
            with progress, client.stream("GET", f"/campaigns/{campaign_id}/events",
                                         timeout=httpx.Timeout(30.0, read=None)) as response:
                if response.status_code >= 400:
                    response.read()
                    check_response(response)
                for event in iter_sse(response.iter_lines()):
                    data = event["data"]
                    if event.get("event") == "result":
                        best = data.get("best_us")
                        text = f"best {best:.1f} µs{rate(best)}" if best else ""
                        progress.update(task, completed=data.get("evaluations", 0), best=text)
                    elif event.get("event") == "note":  # e.g. an injected action dropped
                        progress.console.print(f"[yellow]note:[/] {data.get('message')}",
                                               highlight=False)
                    elif event.get("event") == "finished":
                        finished = data
                        progress.update(task, completed=data.get("evaluations", 0))
                        break
        except httpx.TransportError as exc:
            fail(f"the event stream broke ({exc.__class__.__name__}): run `tuneforge watch "
                 f"{campaign_id}` again to resume", code=1)
        final = call(client, "GET", f"/campaigns/{campaign_id}")
    best = final.get("best")
    found = (f"best {best['avg_us']} µs ({best['throughput']} {final['metric']['unit']})"
             if best else "no correct kernel")
    reason = f" ({final['status_reason']})" if final.get("status_reason") else ""
    console.print(f"campaign {campaign_id[:8]} · [bold]{final['status']}[/]{reason} · "
                  f"{final['evaluations']} evaluations · {found}")
    if finished is None and final["status"] not in ("done", "failed", "cancelled"):
        fail("the stream ended before the campaign did: run watch again", code=1)
    if final["status"] == "failed":
        raise typer.Exit(1)


def _rate_of(campaign: dict[str, Any]) -> Any:
    """``us -> " · 12.3 TFLOP/s"`` at the campaign's shape, when this CLI knows its family (a
    family registered on the service only shows times)."""
    from kernels import get_family

    try:
        family = get_family(campaign["kernel"])
        dims = family.make_dims(campaign["shape"])
    except (ValueError, ImportError):
        return lambda us: ""
    unit = family.metric.unit
    return lambda us: f" · {family.metric.rate(dims, us):.2f} {unit}"


def register(app: typer.Typer) -> None:
    """Add the service commands to the ``tuneforge`` app."""
    app.command()(serve)
    app.command()(worker)
    app.add_typer(admin, name="admin")
    app.command()(submit)
    app.command()(watch)
