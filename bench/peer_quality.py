"""tuneforge's kernels beside the vendor and the peers a PyTorch user reaches for, in one run.

    python bench/peer_quality.py --out out/            # the softmax sweep, the four GEMM shapes
    python bench/peer_quality.py --family softmax --points extra.json --out out/
    python bench/peer_quality.py --family softmax --campaigns tune.db --out out/
    python bench/peer_quality.py --family transpose --spec examples/transpose \\
        --campaigns tune.db --no-replay --shapes 8192x8192 --out out/

The families: those named by ``--family`` (default: the built-in families with peers and every
``--spec``'s), each one with peers in :mod:`bench.peer_families`. A user's family (declared
without Python: ``family.json`` and its CUDA files) is built from its spec directory by
``--spec DIR`` and registered in this process and in the peers' before any family is resolved;
``--family`` and ``--points`` name it by its spec name (``transpose``), while its campaigns
stored its registry key (``transpose@<hash12>``, of the spec's content): ``--campaigns``
finds those of exactly that spec's version.

The shapes: softmax, the replay dataset's shapes (its meta line) and 16384x1024,
32768x512, 65536x1024; the GEMM, :data:`GEMM_SHAPES`; another family, its replay datasets'
shapes, or where it has none (a user family) its ``default_dims``. ``--shapes`` replaces them
(one family). Our kernels: the replay datasets' fastest measured point at each shape (at a
shape the dataset did not measure, the fastest point of the shape it measured most), unless
``--no-replay`` (a user family has no replay dataset), and every entry of ``--points`` (a JSON
list of ``{"kernel", "label", "shape", "params"}``; ``kernel`` may be left out when one family
runs), and at every shape a running family's campaigns measured in the ``--campaigns``
databases (``tuneforge tune --db``: a SQLite path or a URL) the point the team's library exports
there: the fastest correct candidate of any campaign at that shape, labelled ``library entry``
(a campaign's shape joins the family's shapes; with ``--shapes``, only the entries at those
shapes are timed).

In one run on one GPU: the evaluation child of each family starts and the points compile (nvcc,
in the background) while :mod:`bench.peers` checks and times the vendor and every peer at every
shape in a process of its own (torch, Triton); then each of our points is checked on every input
distribution of its family and timed by the child: the flushed median (the protocol's L2 flush
and output poison before each launch, the same kernels the peers' harness runs) and the
sustained rate of back-to-back launches over at least ``--min-ms``. A peer's sustained figure
is the faster of its back-to-back calls and its CUDA-graph replays. The vendor column is the
peers' run's vendor (``torch.softmax``, cuBLAS fp32, ``torch transpose``): for a built-in
family the same times are written where the evaluator looks for its vendor baseline
(:func:`prefill_vendor_cache`), so that the child times no vendor of its own. A user family
(the transpose) declares no vendor baseline: the child times none, and its perf figures for our
points give instead the share of the spec's metric peak (for a bytes metric,
``copy_bandwidth``: the child's own device-to-device copy, ``cuMemcpyDtoD`` of a fixed size),
while the table sets ours against the peers' vendor and their ``copy`` of the same shape in
the same run. Prints the peers' problems, then a table a family (x = their time / ours,
flushed/sustained; the same-bytes copy as % of ours), last; writes ``peer_quality.json`` (and
the peers' ``peers.json``) under ``--out``.

``--bundle DIR`` (a family's library as ``tuneforge library export`` writes it; repeatable, one
a family) gives the peers' process our library too: at each shape of the run where the bundle
has an entry, its kernel is called through the bundle's own loader and checked and timed by
the peers' harness, the same code that times ``torch.compile`` and Triton. A second table a
family sets the peers against it, and against it the child's time of our fastest point there
(``child``): ours and the peers' in one timer, and how far the two timers differ. ::

    tuneforge library export --kernel softmax --db tune.db --out lib/
    python bench/peer_quality.py --family softmax --campaigns tune.db --bundle lib/ --out out/
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.peer_families import FAMILIES as PEER_FAMILIES  # noqa: E402
from bench.peer_families import VENDOR_PEER, check_bundles, peers_of, spec_families  # noqa: E402
from bench.peer_table import (  # noqa: E402
    format_library_table,
    format_table,
    library_rows,
    peer_problems,
    peer_times,
    summary_rows,
    vendor_noise,
)
from core.replay import ReplayDataset  # noqa: E402
from kernels import family_names, get_family  # noqa: E402
from kernels.base import Dims  # noqa: E402
from kernels.family import KernelFamily  # noqa: E402

#: the softmax shapes of the peer table that the replay dataset may lack
SOFTMAX_EXTRA_SHAPES = ("16384x1024", "32768x512", "65536x1024")
#: the GEMM shapes of the sweep
GEMM_SHAPES = ("4096x4096x4096", "8192x8192x8192", "3000x5000x2000", "2048x2048x8192")

@dataclass(frozen=True)
class Point:
    """One of our kernels at one shape."""

    label: str
    params: Any
    dims: Dims


def sweep_shapes(name: str, family: KernelFamily) -> list[Dims]:
    """The shapes of the sweep of family ``name``: the GEMM's four; softmax's replay shapes and
    the peer table's three; another family's replay shapes, or its ``default_dims`` where it
    has no replay dataset (a user family); by the last dimension, then the others."""
    if name == "gemm_bias_relu":
        return [family.parse_dims(s) for s in GEMM_SHAPES]
    texts: list[str] = []
    for path in family.replay_datasets():
        texts += ReplayDataset(Path(str(path)), family).meta.get("shapes", [])
    texts += SOFTMAX_EXTRA_SHAPES if name == "softmax" else ()
    if not texts:
        return [family.default_dims]
    shapes = {str(d): d for d in (family.parse_dims(s) for s in texts)}
    return sorted(shapes.values(), key=lambda d: tuple(reversed(d.values_tuple())))


def replay_points(family: KernelFamily, shapes: Sequence[Dims]) -> list[Point]:
    """The fastest correct point the family's replay datasets measured at each shape; at a
    shape none measured, the fastest at the shape with the most measured rows."""
    datasets = [ReplayDataset(Path(str(p)), family) for p in family.replay_datasets()]
    out = []
    for dims in shapes:
        found = [(b, "replay best") for b in (d.best(dims) for d in datasets) if b]
        if not found:
            for d in datasets:
                counts: dict[str, int] = {}
                for _, shape in d.points:
                    counts[shape] = counts.get(shape, 0) + 1
                if counts:
                    home = max(counts, key=lambda s: (counts[s], s))
                    best = d.best(family.parse_dims(home))
                    if best:
                        found.append((best, f"replay best at {home}"))
        if found:
            row, label = min(found, key=lambda f: f[0]["perf"]["avg_us"])
            params = family.for_shape(family.params_from_dict(row["params"]), dims)
            out.append(Point(label, params, dims))
    return out


def load_points(path: Path, families: dict[str, KernelFamily]) -> dict[str, list[Point]]:
    """``--points``: each entry's family (``kernel``: the name ``families`` has it by, or its
    registry key; or the one family running), label, shape and params; ValueError naming the
    entry on a bad one."""
    entries = json.loads(path.read_text())
    if not isinstance(entries, list):
        raise ValueError(f"--points {path}: a JSON list of {{kernel, label, shape, params}}")
    out: dict[str, list[Point]] = {name: [] for name in families}
    by_key = {family.name: name for name, family in families.items()}
    for i, e in enumerate(entries):
        name = e.get("kernel") or (next(iter(families)) if len(families) == 1 else None)
        name = by_key.get(str(name), name)
        if name not in families:
            raise ValueError(f"--points {path} entry {i}: kernel {name!r} is not one of the "
                             f"families running ({', '.join(families)})")
        family = families[name]
        try:
            dims = family.parse_dims(str(e["shape"]))
            params = family.for_shape(family.params_from_dict(dict(e["params"])), dims)
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"--points {path} entry {i}: {exc}") from exc
        out[name].append(Point(str(e.get("label") or f"point {i}"), params, dims))
    return out


def campaign_points(urls: Sequence[str], families: dict[str, KernelFamily]
                    ) -> dict[str, list[Point]]:
    """``--campaigns``: at every shape a running family's campaigns measured in the databases
    ``urls`` (SQLite paths or URLs), the point the team's library exports there
    (:func:`agent.library.entries`: the fastest correct candidate of any campaign at that shape,
    not only a campaign's accepted incumbent), the fastest over the databases, teams and GPU
    models; by the names ``families`` has them by (a campaign stored its family's registry key:
    a user family's ``name@hash12``). ValueError naming a database that cannot be read."""
    from sqlalchemy import select
    from sqlalchemy.exc import SQLAlchemyError

    from agent.library import entries, gpus
    from core.db import session_factory
    from core.models import Campaign

    by_key = {family.name: name for name, family in families.items()}
    found: dict[tuple[str, str], tuple[float, Point]] = {}
    for url in urls:
        address = url if "://" in url else f"sqlite:///{Path(url).resolve()}"
        if "://" not in url and not Path(url).exists():
            raise ValueError(f"--campaigns {url}: no such database")
        try:
            with session_factory(address)() as s:
                for key, name in by_key.items():
                    family = families[name]
                    teams = s.scalars(select(Campaign.team_id).where(
                        Campaign.kernel == key).distinct()).all()
                    every = (entry for team in teams for gpu in gpus(s, team_id=team, kernel=key)
                             for entry in entries(s, team_id=team, kernel=key, gpu=gpu))
                    for entry in every:
                        dims = family.parse_dims(entry.shape)
                        label = ("library entry" if entry.backend == "gpu"
                                 else f"library entry ({entry.backend})")
                        point = Point(label, family.for_shape(
                            family.params_from_dict(entry.params), dims), dims)
                        at = (name, str(dims))
                        if at not in found or entry.avg_us < found[at][0]:
                            found[at] = (entry.avg_us, point)
        except SQLAlchemyError as exc:
            raise ValueError(f"--campaigns {url}: {exc}") from exc
    out: dict[str, list[Point]] = {name: [] for name in families}
    for (name, _shape), (_us, point) in found.items():
        out[name].append(point)
    return out


# ---- figures ------------------------------------------------------------------------------

# ---- the GPU run ----------------------------------------------------------------------------
def run_peers(jobs: dict[str, list[Dims]], out: Path, *, min_ms: float, deadline_s: float,
              timeout_s: float, extra: Sequence[str]) -> dict[str, Any]:
    """:mod:`bench.peers` in a process of its own over every job, its stderr passed through;
    what it wrote (``{"error": why}`` where it wrote nothing)."""
    path = out / "peers.json"
    cmd = [sys.executable, str(ROOT / "bench" / "peers.py"), "--json-out", str(path),
           "--min-ms", str(min_ms), "--deadline-s", str(deadline_s), *extra]
    for name, shapes in jobs.items():
        cmd += ["--job", f"{name}={','.join(str(d) for d in shapes)}"]
    try:
        done = subprocess.run(cmd, cwd=str(ROOT), timeout=timeout_s)
        status = f"exit status {done.returncode}"
    except subprocess.TimeoutExpired:
        status = f"killed after {timeout_s:g} s"
    if not path.exists():
        return {"error": f"bench/peers.py wrote nothing ({status})"}
    found: dict[str, Any] = json.loads(path.read_text())
    found["status"] = status
    return found


def prefill_vendor_cache(name: str, family: KernelFamily, ev: Any, peers: dict[str, Any],
                         path: Path) -> None:
    """The vendor times the peers' run measured for family ``name``, stored where the evaluator
    looks for them, so that it times no vendor process of its own. Nothing for a family that
    declares no vendor baseline (``family.vendor`` None: a user family's spec names none): the
    evaluator asks for none, its perf has no share of a vendor, and the table's vendor column
    is the peers' alone."""
    if family.vendor is None:
        return
    from worker.evaluate import vendor_cache_key

    store = json.loads(path.read_text()) if path.exists() else {}
    for shape, at in (peers.get("families", {}).get(name, {}).get("shapes") or {}).items():
        us = peer_times((at.get("peers") or {}).get(VENDOR_PEER[name]))[0]
        if us:
            store[vendor_cache_key(family, family.parse_dims(shape), ev.device)] = us
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(store, indent=1))


def measure_ours(ev: Any, points: list[Point], futures: dict[str, Any], *, min_ms: float,
                 stop_at: float) -> list[dict[str, Any]]:
    """Each point checked on every distribution and timed, flushed and sustained (``skipped``
    past ``stop_at``, a ``time.monotonic()`` instant)."""
    rows = []
    for p in points:
        row: dict[str, Any] = {"label": p.label, "shape": str(p.dims),
                               "params": p.params.to_dict()}
        if time.monotonic() > stop_at:
            rows.append({**row, "status": "skipped (budget)"})
            continue
        began = time.perf_counter()
        compiled = futures[key_of(p.params)].result()
        row.update(compile=compiled.status, regs=compiled.regs_per_thread,
                   spill_bytes=compiled.spill_bytes)
        if compiled.status != "ok":
            row.update(status=compiled.status, error=compiled.error)
        else:
            m = ev.measure(p.params, compiled, shape=p.dims, iteration=0, seed=7, verify=True)
            row.update(status=m.status, perf=m.perf, correctness=m.correctness, error=m.error)
            if m.status == "ok":
                row["sustained"] = ev.sustained(p.params, compiled, shape=p.dims, min_ms=min_ms)
        row["seconds"] = round(time.perf_counter() - began, 2)
        print(f"ours: {row['shape']} {p.label}: {row['status']} "
              f"{(row.get('perf') or {}).get('avg_us')} us ({row['seconds']} s)",
              file=sys.stderr, flush=True)
        rows.append(row)
    return rows


def key_of(params: Any) -> str:
    """A point's identity for compiling it once."""
    return json.dumps(params.to_dict(), sort_keys=True)


def commit_of() -> str:
    """``TUNEFORGE_COMMIT``, else git's HEAD, else ``unknown``."""
    if os.environ.get("TUNEFORGE_COMMIT"):
        return os.environ["TUNEFORGE_COMMIT"]
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=str(ROOT),
                              capture_output=True, text=True, timeout=10).stdout.strip() \
            or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    """The command line."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", action="append", default=[],
                    help="a family to run (repeatable; default: the built-in ones with peers "
                         f"and every --spec's): one of {', '.join(sorted(PEER_FAMILIES))}")
    ap.add_argument("--spec", action="append", type=Path, default=[],
                    help="a user family's spec directory (family.json and its CUDA files; "
                         "repeatable): built and registered here and in the peers' process, "
                         "so that --family names it by its spec name")
    ap.add_argument("--shapes", default="", help="comma-separated shapes (one --family)")
    ap.add_argument("--points", type=Path, default=None,
                    help='JSON list of {"kernel", "label", "shape", "params"}')
    ap.add_argument("--campaigns", action="append", default=[],
                    help="a database of campaigns (SQLite path or URL; repeatable): time at "
                         "each shape the point the library exports (the fastest correct "
                         "candidate there)")
    ap.add_argument("--no-replay", action="store_true",
                    help="time only --points and --campaigns, not the replay datasets' bests")
    ap.add_argument("--min-ms", type=float, default=200.0, help="sustained run length (ms)")
    ap.add_argument("--budget-s", type=float, default=480.0,
                    help="seconds: the peers start no shape past 60 %% of it and are stopped at "
                         "75 %%; our points past it are skipped")
    ap.add_argument("--no-graph", action="store_true", help="peers: no CUDA-graph rate")
    ap.add_argument("--compile-mode", default=None, help="torch.compile's mode")
    ap.add_argument("--bundle", action="append", type=Path, default=[],
                    help="a family's exported library (repeatable, one a family): timed by "
                         "the peers' harness beside them where it has an entry")
    ap.add_argument("--cache", type=Path, default=Path("/tmp/tf-cache"))
    ap.add_argument("--out", type=Path, required=True)
    return ap


def plan(args: argparse.Namespace) -> tuple[dict[str, KernelFamily], dict[str, list[Dims]],
                                            dict[str, list[Point]]]:
    """The families (by the names their peers go by; ``--spec``'s built and registered first),
    each one's shapes and our points, from the arguments; ValueError naming the option on bad
    input."""
    specs = spec_families(args.spec)
    for name, family in specs.items():
        try:
            peers_of(name, family)
        except ValueError as exc:
            raise ValueError(f"--spec: {exc}") from exc
    known = family_names()
    names = list(dict.fromkeys(args.family)) or [
        n for n in sorted(PEER_FAMILIES, reverse=True) if n in specs or n in known]
    families: dict[str, KernelFamily] = {}
    for name in names:
        if name not in PEER_FAMILIES:
            raise ValueError(f"--family {name!r}: no peers for it (families with peers: "
                             f"{', '.join(sorted(PEER_FAMILIES))})")
        try:
            family = specs[name] if name in specs else get_family(name)
        except ValueError as exc:
            raise ValueError(f"--family {name}: {exc}; a user family is built from its spec "
                             f"directory: give it with --spec DIR") from exc
        try:
            peers_of(name, family)
        except ValueError as exc:
            raise ValueError(f"--family {name}: {exc}") from exc
        families[name] = family
    if args.shapes and len(families) != 1:
        raise ValueError("--shapes: give exactly one --family with it")
    shapes: dict[str, list[Dims]] = {}
    for name, family in families.items():
        try:
            shapes[name] = ([family.parse_dims(s) for s in args.shapes.split(",") if s.strip()]
                            if args.shapes else sweep_shapes(name, family))
        except ValueError as exc:
            raise ValueError(f"--shapes: {exc}") from exc
    points = {name: ([] if args.no_replay else replay_points(families[name], shapes[name]))
              for name in families}
    extras = [load_points(args.points, families)] if args.points is not None else []
    if args.campaigns:
        found = campaign_points(args.campaigns, families)
        if args.shapes:  # the shapes asked for, not every shape the databases hold
            found = {name: [p for p in found_points
                            if any(str(d) == str(p.dims) for d in shapes[name])]
                     for name, found_points in found.items()}
        extras.append(found)
    for found in extras:
        for name, extra in found.items():
            points[name] += extra
            for p in extra:  # the peers run at every shape a point runs at
                if all(str(d) != str(p.dims) for d in shapes[name]):
                    shapes[name].append(p.dims)
    if not any(points.values()):
        if args.no_replay and args.points is None and not args.campaigns:
            raise ValueError("no point to time: --no-replay needs --points or --campaigns")
        looked = ([] if args.no_replay else [
            "the replay datasets (" + ", ".join(
                f"{n}: {len(f.replay_datasets())}" for n, f in families.items()) + ")"])
        looked += ["--points"] if args.points is not None else []
        looked += ["--campaigns (campaigns of " + ", ".join(
            f.name for f in families.values()) + ")"] if args.campaigns else []
        hint = ("the campaigns' shapes and families must be those running" if args.points
                or args.campaigns else "a family without replay datasets (a user family) "
                "needs --points or --campaigns")
        raise ValueError(f"no point to time in {'; '.join(looked)}: {hint}")
    return families, shapes, points


def main(argv: list[str] | None = None) -> int:
    """Plan, run the peers and ours, print the problems and the tables, write the JSON."""
    ap = build_parser()
    args = ap.parse_args(argv)
    try:
        families, shapes, points = plan(args)
        bundles = check_bundles(args.bundle, list(families))
    except ValueError as exc:
        ap.error(str(exc))
    began = time.monotonic()
    from core.evaluation import EvalOptions
    from worker.compile import Compiler
    from worker.evaluate import GpuEvaluator

    args.out.mkdir(parents=True, exist_ok=True)
    evaluators, futures = {}, {}
    for name, family in families.items():  # children start, points compile meanwhile
        compiler = Compiler(args.cache / name, arch="sm_90", workers=max(2, (os.cpu_count() or
                                                                             4) // 2))
        evaluators[name] = GpuEvaluator(family, compiler, options=EvalOptions(timeout_s=120.0),
                                        vendor_cache=args.out / "vendor-cache.json")
        futures[name] = {key_of(p.params): evaluators[name].compile(p.params)
                         for p in points[name]}
    extra = (["--no-graph"] if args.no_graph else []) + (
        ["--compile-mode", args.compile_mode] if args.compile_mode else [])
    for spec in args.spec:  # the peers' process builds the user families too (its cwd: ROOT)
        extra += ["--spec", str(spec.resolve())]
    for path in bundles.values():
        extra += ["--bundle", str(path)]
    # the GEMM's few shapes first: past the deadline only the softmax's last rows go untimed
    peers = run_peers(dict(sorted(shapes.items())), args.out, min_ms=args.min_ms,
                      deadline_s=0.6 * args.budget_s,
                      timeout_s=max(60.0, 0.75 * args.budget_s - (time.monotonic() - began)),
                      extra=extra)
    record: dict[str, Any] = {"date": time.strftime("%Y-%m-%d"), "commit": commit_of(),
                              "min_ms": args.min_ms, "peers_device": peers.get("device"),
                              "peers_status": peers.get("status") or peers.get("error"),
                              "families": {}}
    for name, family in families.items():
        ev = evaluators[name]
        prefill_vendor_cache(name, family, ev, peers, args.out / "vendor-cache.json")
        ours = measure_ours(ev, points[name], futures[name], min_ms=args.min_ms,
                            stop_at=began + args.budget_s)
        ev.close()
        theirs = peers.get("families", {}).get(name, {})
        rows = summary_rows(name, ours, theirs)
        record["device"] = ev.device
        record["families"][name] = {"family": family.name, "ours": ours, "summary": rows,
                                    "library": library_rows(name, theirs, rows),
                                    "peers": peers.get("families", {}).get(name)}
        (args.out / "peer_quality.json").write_text(json.dumps(record, indent=1, default=str))
    device = str((record.get("device") or {}).get("name"))
    print(f"\npeers: {record['peers_status']} · {json.dumps(record['peers_device'])} · "
          f"{record['commit']} · {time.monotonic() - began:.0f} s in all")
    for line in peer_problems(peers):
        print("  " + line)
    for name in families:
        print("\n" + vendor_noise(name, peers))
        print("\n".join(format_table(name, record["families"][name]["summary"], device)))
        library = format_library_table(name, record["families"][name]["library"], device)
        if library:
            print("\n" + "\n".join(library))
    return 0


if __name__ == "__main__":
    sys.exit(main())
