"""``tuneforge library``: the team's tuned kernels by shape, what runs at a shape, probes of the
shapes nobody measured, and the bundle a program loads (``export``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.table import Table

from cli.client import KeyOpt, UrlOpt, call
from cli.common import DbOpt, KernelOpt, console, err_console, fail
from cli.family import _target
from core.settings import get_settings

library_app = typer.Typer(
    help="The team's library: per family and GPU model, the best known point at every shape "
         "it measured (with its provenance), and what runs at a shape nobody measured.\n\n"
         "Examples:\n\n"
         "  tuneforge library show --kernel softmax --db runs.db\n\n"
         "  tuneforge library pick --kernel softmax --shape 65536x129 --db runs.db\n\n"
         "  tuneforge library probe --kernel softmax --shapes 65536x129 --db runs.db\n\n"
         "  tuneforge library export --kernel softmax --db runs.db --out lib/",
    no_args_is_help=True)

GpuOpt = Annotated[str | None, typer.Option(
    "--gpu", help="GPU model, as the driver names it (default: the one measured most)")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print JSON")]


def _family_name(kernel: str | None, kind: str, target: Any) -> str:
    """The registry key of ``--kernel`` (a team family's ``NAME@hash12``)."""
    from cli.common import resolve_family

    name = kernel or get_settings().default_kernel
    if kind == "api":
        return name
    return str(resolve_family(name, target).name)


def read_library(kernel: str | None, gpu: str | None, db: str | None, url: str | None,
                 key: str | None) -> dict[str, Any]:
    """``GET /library/{family}`` of the service, or of a local database."""
    kind, target = _target(db, url, key)
    name = _family_name(kernel, kind, target)
    if kind == "api":
        with target as client:
            return dict(call(client, "GET", f"/library/{name}",
                             params={"gpu": gpu} if gpu else None))
    from agent import library
    from core.db import session_scope

    with session_scope(target) as s:
        models = library.gpus(s, team_id=None, kernel=name)
        rows = library.entries(s, team_id=None, kernel=name, gpu=gpu)
        model = gpu or next(iter(models), None)
        sm_count = library.device(s, team_id=None, kernel=name, gpu=model).get("sm_count")
    return {"family": name, "gpu": model, "gpus": models, "sm_count": sm_count,
            "entries": [e.to_dict() for e in rows]}


@library_app.command("show")
def show(kernel: KernelOpt = None, gpu: GpuOpt = None, db: DbOpt = None, url: UrlOpt = None,
         key: KeyOpt = None, as_json: JsonOpt = False) -> None:
    """The best known point at every shape measured: its time, x the vendor, and where it
    comes from (campaign and iteration, date, commit, replay or GPU); the title counts the
    near-ties (other points within 3 % of a shape's best, which an export carries).

    Examples:

      tuneforge library show --kernel softmax --db runs.db

      tuneforge library show --kernel gemm_bias_relu --url http://gpu-box:8000 --json
    """
    found = read_library(kernel, gpu, db, url, key)
    if as_json:
        sys.stdout.write(json.dumps(found) + "\n")
        return
    if not found["entries"]:
        err_console.print(f"the library holds no {found['family']} point yet: tune some "
                          "shapes (tuneforge tune --kernel ... --shapes ...)")
        return
    backends = sorted({e["backend"] for e in found["entries"]})
    ties = sum(len(e.get("alternates") or ()) for e in found["entries"])
    table = Table(title=f"{found['family']} on {found['gpu']} ({', '.join(backends)}) · "
                        f"{len(found['entries'])} shapes · {ties} near-ties",
                  title_justify="left", box=box.SIMPLE_HEAD)
    for col, justify in (("shape", "left"), ("µs", "right"), ("× vendor", "right"),
                         ("campaign #it", "left"), ("measured", "left"), ("commit", "left")):
        table.add_column(col, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for e in found["entries"]:
        table.add_row(e["shape"], f"{e['avg_us']:.1f}",
                      f"{e['x_vendor']:.2f}" if e.get("x_vendor") else "–",
                      f"{e['campaign_id'][:8]} #{e['iteration']}",
                      (e.get("measured_at") or "")[:10], str(e.get("commit") or "–")[:13])
    console.print(table)


@library_app.command("pick")
def pick(shape: Annotated[str, typer.Option(help="the shape, as the family writes it")],
         kernel: KernelOpt = None, gpu: GpuOpt = None, db: DbOpt = None,
         url: UrlOpt = None, key: KeyOpt = None, as_json: JsonOpt = False) -> None:
    """What runs at a shape, and which rule picked it: a point measured there, the nearest
    measured shape's best that is valid there, or the vendor (docs/LIBRARY.md).

    Examples:

      tuneforge library pick --kernel softmax --shape 65536x129 --db runs.db
    """
    kind, target = _target(db, url, key)
    name = _family_name(kernel, kind, target)
    chosen = picks_of(kind, target, name, [shape], gpu, "--shape")[0]
    if as_json:
        sys.stdout.write(json.dumps(chosen) + "\n")
        return
    what = "the vendor" if chosen["kind"] == "vendor" else json.dumps(chosen["params"],
                                                                      sort_keys=True)
    console.print(f"{chosen['shape']}: rule {chosen['rule']}, {chosen['reason']}\n  runs "
                  f"{what}", highlight=False, soft_wrap=True)


def picks_of(kind: str, target: Any, name: str, shapes: list[str], gpu: str | None,
             option: str) -> list[dict[str, Any]]:
    """What the library runs at each of ``shapes`` (the service's ``POST .../picks``, or the
    local database's :func:`agent.library.picks`): one read of the library for all."""
    from kernels import get_family

    if kind == "api":
        with target as client:  # one request, one read of the library on the service
            if not shapes:
                return []
            answer = call(client, "POST", f"/library/{name}/picks", names={"shapes": option},
                          json={"shapes": shapes, "gpu": gpu})
        return [dict(p) for p in answer]
    from agent import library
    from core.db import session_scope

    family = get_family(name)
    wanted = []
    for text in shapes:
        try:
            wanted.append(family.parse_dims(text).as_dict())
        except ValueError as exc:
            fail(f"{option}: {exc}")
    with session_scope(target) as s:
        return [p.to_dict() for p in library.picks(s, team_id=None, kernel=name, shapes=wanted,
                                                   gpu=gpu, arch=get_settings().arch)]


@library_app.command("export")
def export(out: Annotated[Path, typer.Option(help="the bundle's folder (new or empty)")],
           kernel: KernelOpt = None, gpu: GpuOpt = None,
           shapes: Annotated[str | None, typer.Option(help=(
               "more shapes the program runs (as tune --shapes takes them): each gets the "
               "library's pick there, when that is a point measured there"))] = None,
           unmeasured: Annotated[bool, typer.Option(
               "--unmeasured", help=(
                   "also export picks never measured at their shape (the nearest measured "
                   "shape's best): unchecked, they can run slower than the vendor"))] = False,
           db: DbOpt = None, url: UrlOpt = None, key: KeyOpt = None,
           as_json: JsonOpt = False) -> None:
    """Write the library as a bundle a program loads without tuneforge: a cubin a point, the
    dispatch table (dispatch.json), a Python loader (torch + the CUDA driver bindings) and a
    C++ header over the driver API (docs/LIBRARY.md). A shape whose pick was never measured
    there runs the vendor unless --unmeasured: `library probe` measures such picks once.

    Examples:

      tuneforge library export --kernel softmax --db runs.db --out lib/softmax

      tuneforge library export --kernel softmax --shapes 65536x129,16384x2048 --url … --out lib/
    """
    from agent.bundle import BundleError, library_entries, write_bundle
    from cli.common import check_writable_folder
    from cli.shapeset import parse_shape_set
    from core.version import commit
    from kernels import get_family
    from worker.compile import compiler_from_settings

    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        fail(f"--out {out}: not an empty folder")
    check_writable_folder("--out", out)
    found = read_library(kernel, gpu, db, url, key)
    if not found["entries"]:
        fail(f"the library holds no {found['family']} point on {found['gpu'] or 'any GPU'}: "
             "nothing to export")
    family = get_family(found["family"])
    extra = [str(family.make_dims(e["shape"])) for e in parse_shape_set(family, shapes)] \
        if shapes else []
    kind, target = _target(db, url, key)
    picks = picks_of(kind, target, found["family"], extra, found["gpu"], "--shapes")
    settings = get_settings()
    compiler = compiler_from_settings(settings)
    try:
        with err_console.status(f"compiling {len(found['entries']) + len(picks)} entries …"):
            chosen = library_entries(family, found["entries"], picks, unmeasured=unmeasured)
            path = write_bundle(out, family, chosen,
                                compiler=compiler, arch=settings.arch,
                                sm_count=int(found.get("sm_count") or 132),
                                gpu_name=str(found["gpu"]),
                                provenance={"exported_by": commit(), "gpu": found["gpu"]})
    except BundleError as exc:
        fail(str(exc))
    finally:
        compiler.close()
    data = json.loads((path / "dispatch.json").read_text())
    unchecked = [p["shape"] for p in picks
                 if p["kind"] == "point" and not p["measured_at_shape"]]
    summary = {"out": str(path), "family": found["family"], "gpu": found["gpu"],
               "entries": len(data.get("entries", [])), "points": len(data.get("points", {})),
               "unmeasured": unchecked, "unmeasured_exported": unmeasured}
    if as_json:
        sys.stdout.write(json.dumps(summary) + "\n")
        return
    if unchecked and not unmeasured:
        err_console.print(
            f"{len(unchecked)} of the --shapes run the vendor: their pick was never measured "
            f"there. Measure it once: tuneforge library probe --kernel {found['family']} "
            f"--shapes {','.join(unchecked)} (or export it unchecked with --unmeasured)",
            highlight=False, soft_wrap=True)
    console.print(f"{summary['entries']} shapes, {summary['points']} kernels of "
                  f"{found['family']} for {found['gpu']} in {path}: load it with "
                  f"tuneforge_loader.load('{path}') or include {path}/tuneforge_dispatch.h",
                  highlight=False, soft_wrap=True)


@library_app.command("probe")
def probe(shapes: Annotated[str, typer.Option(help=(
              "the shapes to measure the library's picks at (as tune --shapes takes them)"))],
          kernel: KernelOpt = None, db: DbOpt = None, url: UrlOpt = None, key: KeyOpt = None,
          backend: Annotated[str, typer.Option(help="auto | gpu | replay")] = "auto",
          as_json: JsonOpt = False) -> None:
    """Measure, once, what the library would run at shapes nobody measured (the nearest
    measured shapes' bests valid there): a campaign a shape, on this host's GPU (or through
    the service with --url/--key). The library answers there from the measurement after.

    Examples:

      tuneforge library probe --kernel softmax --shapes 65536x129,16384x2048 --db runs.db
    """
    from cli.shapeset import parse_shape_set

    kind, target = _target(db, url, key)
    name = _family_name(kernel, kind, target)
    from kernels import get_family

    family = get_family(name)
    wanted = [e["shape"] for e in parse_shape_set(family, shapes)]
    if kind == "api":
        with target as client:
            done = dict(call(client, "POST", f"/library/{name}/probe",
                             json={"shapes": wanted}))
        if as_json:
            sys.stdout.write(json.dumps(done) + "\n")
        else:
            console.print(f"probing {len(wanted)} shape(s): campaigns "
                          f"{', '.join(c[:8] for c in done['campaigns'])} "
                          "(tuneforge watch ID)", highlight=False)
        return
    results = _probe_here(target, family, wanted, backend)
    if as_json:
        sys.stdout.write(json.dumps(results) + "\n")
        return
    for r in results:
        console.print(f"{r['shape']}: {r['evaluations']} measured, best "
                      f"{r['best_us'] or '–'} µs, vendor {r['vendor_us'] or '–'} µs",
                      highlight=False)


def _probe_here(url: str, family: Any, shapes: list[dict[str, int]],
                backend: str) -> list[dict[str, Any]]:
    """Probe campaigns on this host's evaluators, one after another."""
    from agent import campaigns, library
    from agent.embedded import EmbeddedRunner
    from agent.engine.locking import CampaignError
    from cli.tune import check_replay_shape, local_parallel, open_evaluators
    from core.db import session_factory
    from core.models import Campaign

    settings = get_settings()
    local = open_evaluators(backend, family, settings, ["0"], None)
    sessions = session_factory(url)
    out = []
    try:
        for dims in shapes:
            if local.backend == "replay":
                check_replay_shape(local, family, family.make_dims(dims))
            with sessions.begin() as s:
                points = library.fallback_points(s, team_id=None, kernel=family.name,
                                                 shape=dims, arch=settings.arch)
                request = campaigns.CampaignCreate.model_validate(
                    {"kernel": family.name, "shape": dims, "start_from": "library",
                     "budget": {"iterations": 1 + len(points)}}, context={"family": family})
                try:
                    campaign = campaigns.open_campaign(
                        s, request, family=family, arch=settings.arch, team_id=None,
                        backend=local.backend, default_parallel=local_parallel(local),
                        device=local.evaluators[0].device,
                        vendor_us=local.evaluators[0].vendor_us(family.make_dims(dims)))
                except CampaignError as exc:
                    fail(str(exc))
                cid = campaign.id
            EmbeddedRunner(sessions, local.evaluators, settings=settings).run(cid)
            with sessions() as s:
                done = s.get(Campaign, cid)
                assert done is not None
                out.append({"shape": done.shape_text, "campaign_id": cid,
                            "evaluations": done.evaluations, "best_us": done.best_us,
                            "vendor_us": done.vendor_us})
    finally:
        local.close()
    return out


def register(app: typer.Typer) -> None:
    """Add ``tuneforge library`` to the app."""
    app.add_typer(library_app, name="library")

