"""The exported library at shapes nobody tuned, beside the shapes it was tuned at: the honest
score of a tuned shape set.

    python bench/library_held_out.py --kernel softmax --db KEEP/set.db --home KEEP --out $OUT/h
    python bench/library_held_out.py --kernel softmax --tune 8192x8192,16384x1024 --budget 60 \\
        --backend gpu --out $OUT/h
    python bench/library_held_out.py --kernel softmax --db runs.db --no-measure   # CPU: plan

1. The library: a database with a tuned set (``--db``; ``bench/shape_sets.py --keep`` keeps
   one), or ``tuneforge tune --shapes TUNE`` run here first into a new one. Its measured
   shapes (``tuneforge library show``) are the in-set shapes.
2. ``--held-out`` shapes outside the set, seeded: half near (each dimension of a set shape
   times ``e^u``, ``u`` uniform in ``[-NEAR, NEAR]``; at most ``NEAR`` from the set in the
   library's distance), half far (log-uniform over the ranges of ``bench/loader_bench.py``:
   GEMM 1..8192 a dimension, softmax up to 65536 rows and 262144 columns, at most 2^28
   elements; more than ``NEAR`` from every set shape). None is a set shape or drawn twice.
3. ``tuneforge library export --shapes HELD-OUT``: every held-out shape gets the library's
   pick (an entry: ``nearest``, ``rule_book``) or none (the loader runs the bundle's fallback).
4. In a fresh process that imports nothing of tuneforge (checked: it fails otherwise), the
   bundle is loaded as a user loads it (its folder on ``sys.path``, ``import
   tuneforge_loader``) and called at every shape, in-set and held-out: each output checked
   against float64 by the family's rule (``scaled``, tolerance 1e-4), the loader, the vendor
   and the strongest peer of the peers' run timed with the L2 flushed (median) and sustained
   (back-to-back calls for at least 200 ms, wall time: the headline). The peer, checked by
   the same rule: softmax's ``torch.compile`` (one compiled function for every shape, as a
   program of many shapes has it), the GEMM's three cuBLAS bf16 GEMMs composed. The helpers
   (inputs, the check, the vendor, the peer, the flushed timing) are
   ``bench/loader_timing.py``'s, which imports only the standard library (and the torch it is
   handed), as ``bench/loader_bench.py`` does.

Prints per shape its class, distance to the set, the entry's source (``tuned``, ``nearest``,
``rule_book``, ``fallback``: no entry, the vendor runs) and the loader's speed over the
vendor's and the peer's; then the geometric means in the set and held out. Writes
``held-out.json`` (and ``dispatch.json``) under ``--out``; the measuring process writes
``measure.json`` after every shape, so a run cut short keeps what it measured.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
import warnings
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import tuneforge_json  # noqa: E402

#: a near shape is at most this far from a set shape (the library's distance, the sum over the
#: dimensions of |ln(a / b)|), a far one more
NEAR = 1.0
#: back-to-back calls last at least this long (seconds) for the sustained figure
SUSTAINED_S = 0.2


# ---- the plan (this process may import tuneforge) -----------------------------------------
def distance(a: dict[str, int], b: dict[str, int]) -> float:
    """The library's distance between two shapes (``agent.shapesets.shape_distance``)."""
    from agent.shapesets import shape_distance

    return float(shape_distance(a, b))


def nearest_of(shape: dict[str, int], tuned: list[dict[str, int]]) -> tuple[float, int]:
    """The distance to the nearest of ``tuned`` and its index."""
    return min((distance(shape, t), i) for i, t in enumerate(tuned))


def in_range(family: str, shape: dict[str, int]) -> bool:
    """Within bench/loader_bench.py's ranges (softmax: at most 2^28 elements too)."""
    from bench.loader_bench import MAX_SOFTMAX_ELEMENTS, RANGES

    return all(1 <= shape[n] <= hi for n, hi in RANGES[family].items()) and (
        family != "softmax" or shape["rows"] * shape["cols"] <= MAX_SOFTMAX_ELEMENTS)


def held_out_shapes(family: str, tuned: list[dict[str, int]], count: int, seed: int,
                    near_share: float = 0.5) -> list[dict[str, Any]]:
    """``count`` shapes outside ``tuned``, ``near_share`` of them near (a set shape's dims
    each times ``e^u``, ``u`` uniform in ``[-NEAR, NEAR]``, at most ``NEAR`` from the set),
    the rest far (log-uniform over the ranges, more than ``NEAR`` from every set shape); each
    with its class, its distance to the set and the nearest set shape."""
    from bench.loader_bench import random_shape

    rng = random.Random(seed)
    taken = {tuple(sorted(t.items())) for t in tuned}
    out: list[dict[str, Any]] = []
    want_near = round(count * near_share)
    for _ in range(100_000):
        if len(out) == count:
            break
        near = len(out) < want_near
        if near:
            base = tuned[rng.randrange(len(tuned))]
            shape = {n: max(1, round(v * math.exp(rng.uniform(-NEAR, NEAR))))
                     for n, v in base.items()}
        else:
            shape = random_shape(rng, family)
        key = tuple(sorted(shape.items()))
        if key in taken or not in_range(family, shape):
            continue
        far, index = nearest_of(shape, tuned)
        if (far <= NEAR) != near:
            continue
        taken.add(key)
        out.append({"shape": shape, "class": "near" if near else "far",
                    "distance": round(far, 3), "nearest_set_shape": tuned[index]})
    if len(out) < count:
        raise SystemExit(f"found only {len(out)} held-out shapes of {count}")
    return out


def text_of(shape: dict[str, int]) -> str:
    """A shape as the families write it (dims in order, joined by x)."""
    return "x".join(str(v) for v in shape.values())


def plan(args: argparse.Namespace, home: Path) -> dict[str, Any]:
    """Tune (if asked), read the library, choose the held-out shapes and export the bundle."""
    from kernels import get_family

    family = get_family(args.kernel)
    db = args.db or home / "set.db"
    started = time.perf_counter()
    tuned_run = None
    if args.tune:
        tuned_run = tuneforge_json(home, "tune", "--kernel", args.kernel, "--shapes", args.tune,
                        "--budget", str(args.budget), "--backend", args.backend,
                        "--db", str(db), "--out", str(home / "o"))
        tuned_run.pop("files", None)
    tune_s = time.perf_counter() - started
    if args.tune:
        print(f"tuned {args.tune} (budget {args.budget}): {tune_s:.1f} s", flush=True)
    library = tuneforge_json(home, "library", "show", "--kernel", args.kernel, "--db", str(db))
    tuned = [family.make_dims(e["dims"]).as_dict() for e in library["entries"]]
    if not tuned:
        raise SystemExit(f"{db}: the library holds no {args.kernel} shape")
    cases: list[dict[str, Any]] = [
        {"shape": e["dims"], "class": "in_set", "distance": 0.0,
         "nearest_set_shape": e["dims"], "library_us": e["avg_us"],
         "library_vendor_us": e.get("vendor_us")} for e in library["entries"]]
    cases += held_out_shapes(args.kernel, tuned, args.held_out, args.seed, args.near_share)
    bundle = args.work / f"bundle-{args.kernel}"
    held = ",".join(text_of(c["shape"]) for c in cases if c["class"] != "in_set")
    probe, probe_s = None, 0.0
    if args.probe:  # the library's picks measured at the held-out shapes before the export
        started = time.perf_counter()
        probe = tuneforge_json(home, "library", "probe", "--kernel", args.kernel, "--db", str(db),
                    "--backend", args.backend, "--shapes", held)
        probe_s = time.perf_counter() - started
        print(f"probed {len(held.split(','))} held-out shapes: {probe_s:.1f} s", flush=True)
    started = time.perf_counter()
    export = tuneforge_json(home, "library", "export", "--kernel", args.kernel, "--db", str(db),
                 "--out", str(bundle), "--shapes", held,
                 *([] if args.probe else ["--unmeasured"]))
    export_s = time.perf_counter() - started
    print(f"exported {bundle}: {export_s:.1f} s", flush=True)
    data = json.loads((bundle / "dispatch.json").read_text())
    entries = {text_of(e["shape"]): e for e in data["entries"]}
    for case in cases:
        entry = entries.get(text_of(case["shape"]))
        case["source"] = entry["source"] if entry else "fallback"
        case["measured_at_shape"] = bool(entry and entry.get("measured_at_shape"))
    return {"kernel": args.kernel, "db": str(db), "gpu": library.get("gpu"),
            "bundle": str(bundle), "fallback": data["fallback"], "tune": tuned_run,
            "tune_s": round(tune_s, 2), "probe": probe, "probe_s": round(probe_s, 2),
            "export": export, "export_s": round(export_s, 2),
            "seed": args.seed, "near": NEAR, "cases": cases}


# ---- the measurement (a fresh process: nothing of tuneforge) -------------------------------
def sustained_us(torch: Any, fn: Any, seconds: float = SUSTAINED_S) -> dict[str, float]:
    """Wall time a call of back-to-back calls of ``fn`` lasting at least ``seconds`` (a
    short run sizes the long one; it is run again, longer, until it lasts that long)."""
    calls = 20
    while True:
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return {"us": elapsed / calls * 1e6, "calls": calls, "seconds": elapsed}
        calls = max(calls + 1, math.ceil(calls * seconds * 1.1 / max(elapsed, 1e-6)))


def tuneforge_modules() -> list[str]:
    """The product's packages this process has imported (the repository's, but for
    ``bench``, whose torch-only timing helpers it uses)."""
    own = {p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file()} - {"bench"}
    return sorted({name.split(".")[0] for name in sys.modules} & own)


def timed_peer(torch: Any, family: str, peer_of: Any, args: list[Any], flush: Any, reps: int,
               loader_us: float, loader_sustained_us: float) -> dict[str, Any]:
    """The strongest peer at one case (``bench.loader_timing.peer``): checked by the family's
    rule, timed as the loader is; ``peer_error`` where it could not build or run."""
    from bench.loader_timing import TOLERANCE, flushed_us, scaled_error

    try:
        once = peer_of(*args)
        check = scaled_error(torch, family, once(), args)  # built (compiled) here, untimed
        peer_us = flushed_us(torch, once, flush, reps)
        peer_s = sustained_us(torch, once)
    except Exception as exc:  # the row keeps the loader's figures and says why
        return {"peer_error": f"{type(exc).__name__}: {exc}"[:300]}
    return {"peer_passed": check["rel_err"] <= TOLERANCE
            and check["max_scaled_err"] <= TOLERANCE,
            "peer_max_scaled_err": check["max_scaled_err"], "peer_us": peer_us,
            "x_peer": peer_us / loader_us, "peer_sustained_us": peer_s["us"],
            "x_peer_sustained": peer_s["us"] / loader_sustained_us}


def measure(bundle: Path, cases_path: Path, out: Path, seed: int) -> int:
    """Every case's correctness and times, the loader against the vendor; ``measure.json``
    under ``out`` after each."""
    import torch

    from bench.loader_timing import (
        PEER_NAMES,
        TOLERANCE,
        flushed_us,
        inputs,
        peer,
        reps_for,
        scaled_error,
        vendor,
    )

    sys.path.insert(0, str(bundle))
    import tuneforge_loader

    torch.backends.cuda.matmul.allow_tf32 = False
    lib = tuneforge_loader.load(bundle)
    kernel = lib.kernels[next(iter(lib.kernels))]
    family = json.loads((bundle / "dispatch.json").read_text())["family"]["name"]
    ven = vendor(torch, family)
    peer_of = peer(torch, family, {})
    flush = torch.empty(64 << 20, device="cuda")  # 256 MiB: four H200 L2s
    cases = json.loads(cases_path.read_text())
    record: dict[str, Any] = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                              "loader": tuneforge_loader.__file__,
                              "peer": PEER_NAMES[family], "rows": []}
    out.mkdir(parents=True, exist_ok=True)
    for number, case in enumerate(cases):
        args = inputs(torch, family, case["shape"], seed + number)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", tuneforge_loader.FallbackWarning)
            looked = kernel.lookup(*args)
            result = kernel(*args)
            check = scaled_error(torch, family, result, args)
            del result
            call, base = partial(kernel, *args), partial(ven, *args)
            reps = reps_for(flushed_us(torch, base, flush, 5))
            vendor_us = flushed_us(torch, base, flush, reps)
            loader_us = flushed_us(torch, call, flush, reps)
            loader_s = sustained_us(torch, call)
            vendor_s = sustained_us(torch, base)
            beside = timed_peer(torch, family, peer_of, args, flush, reps, loader_us,
                                loader_s["us"])
        row = {**case, "runs": looked.runs,
               "source_seen": looked.entry["source"] if looked.entry else "fallback",
               "passed": check["rel_err"] <= TOLERANCE and check["max_scaled_err"] <= TOLERANCE,
               **check, "loader_us": loader_us, "vendor_us": vendor_us,
               "x_vendor": vendor_us / loader_us, "loader_sustained_us": loader_s["us"],
               "vendor_sustained_us": vendor_s["us"],
               "x_vendor_sustained": vendor_s["us"] / loader_s["us"],
               "sustained_calls": [loader_s["calls"], vendor_s["calls"]],
               "peer": PEER_NAMES[family], **beside}
        record["rows"].append(row)
        print(f"{row['class']:>6} {text_of(row['shape']):>16} {row['source_seen']:>9} "
              f"{'ok' if row['passed'] else 'WRONG':>5} x vendor {row['x_vendor']:.3f} "
              f"flushed, {row['x_vendor_sustained']:.3f} sustained; x peer "
              f"{row.get('x_peer', math.nan):.3f} / {row.get('x_peer_sustained', math.nan):.3f}"
              f"{' ' + row['peer_error'] if 'peer_error' in row else ''}", flush=True)
        del args, call, base
        record["tuneforge_modules"] = tuneforge_modules()
        (out / "measure.json").write_text(json.dumps(record, indent=1) + "\n")
    if record["tuneforge_modules"]:
        print(f"the measuring process imported tuneforge: {record['tuneforge_modules']}")
        return 1
    return 0


# ---- the report --------------------------------------------------------------------------
def gm(values: list[float]) -> float:
    """The geometric mean (nan of none); the report's process only (``bench.peer_table``
    imports the product's kernels, which the measuring process must not)."""
    from bench.peer_table import geomean

    found = geomean(values)
    return math.nan if found is None else found


def report(found: dict[str, Any], rows: list[dict[str, Any]] | None) -> dict[str, Any]:
    """The per-class geometric means of the loader's speed over the vendor's and over the
    peer's, the peer's over the shapes where it ran and passed its check."""
    summary: dict[str, Any] = {}
    if rows:
        groups = {"in_set": [r for r in rows if r["class"] == "in_set"],
                  "held_out": [r for r in rows if r["class"] != "in_set"],
                  "near": [r for r in rows if r["class"] == "near"],
                  "far": [r for r in rows if r["class"] == "far"]}
        for name, group in groups.items():
            summary[name] = {
                "shapes": len(group), "wrong": sum(not r["passed"] for r in group),
                "gm_x_vendor_sustained": gm([r["x_vendor_sustained"] for r in group]),
                "gm_x_vendor_flushed": gm([r["x_vendor"] for r in group]),
                "gm_x_peer_sustained": gm([r["x_peer_sustained"] for r in group
                                           if "x_peer_sustained" in r and r["peer_passed"]]),
                "gm_x_peer_flushed": gm([r["x_peer"] for r in group
                                         if "x_peer" in r and r["peer_passed"]]),
                "peer_rows": sum("x_peer" in r and r["peer_passed"] for r in group),
                "with_entry": sum(r["source_seen"] != "fallback" for r in group)}
    return summary


def print_report(found: dict[str, Any], rows: list[dict[str, Any]] | None,
                 summary: dict[str, Any]) -> None:
    """The table per shape, then the geometric means."""
    print(f"{found['kernel']}: library of {found['db']} ({found['gpu']}), bundle "
          f"{found['bundle']}, fallback {found['fallback']}")
    print(f"{'class':>6} {'shape':>18} {'dist':>5} {'source':>9} {'ok':>5} {'loader µs':>10} "
          f"{'vendor µs':>10} {'x flushed':>9} {'x sustained':>11} {'x peer f/s':>11}")
    for r in rows or found["cases"]:
        measured = "loader_us" in r
        print(f"{r['class']:>6} {text_of(r['shape']):>18} {r['distance']:>5.2f} "
              f"{r.get('source_seen', r['source']):>9} "
              f"{('ok' if r['passed'] else 'WRONG') if measured else '-':>5} "
              f"{r.get('loader_us', math.nan):>10.1f} {r.get('vendor_us', math.nan):>10.1f} "
              f"{r.get('x_vendor', math.nan):>9.3f} {r.get('x_vendor_sustained', math.nan):>11.3f}"
              f" {r.get('x_peer', math.nan):>5.2f}/{r.get('x_peer_sustained', math.nan):<5.2f}")
    for name, s in summary.items():
        print(f"{name:>8}: {s['shapes']} shapes, {s['with_entry']} with an entry, {s['wrong']} "
              f"wrong; x vendor gm {s['gm_x_vendor_sustained']:.3f} sustained, "
              f"{s['gm_x_vendor_flushed']:.3f} flushed; x {found.get('peer', 'peer')} gm "
              f"{s['gm_x_peer_sustained']:.3f} / {s['gm_x_peer_flushed']:.3f} "
              f"({s['peer_rows']} shapes)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", default="softmax")
    parser.add_argument("--db", type=Path, help="the database of the tuned set")
    parser.add_argument("--tune", help="tune these shapes (as tune --shapes takes them) first")
    parser.add_argument("--budget", type=int, default=120, help="the set's budget (--tune)")
    parser.add_argument("--backend", default="gpu", help="the set's backend (--tune)")
    parser.add_argument("--home", type=Path, help="TUNEFORGE_HOME of the runs (the compile "
                        "cache; default a temporary folder)")
    parser.add_argument("--held-out", type=int, default=16, help="shapes outside the set")
    parser.add_argument("--near-share", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    parser.add_argument("--work", type=Path, help="where the bundle goes (default a "
                        "temporary folder)")
    parser.add_argument("--probe", action="store_true",
                        help="measure the library's picks at the held-out shapes first "
                             "(tuneforge library probe, on --backend), then export")
    parser.add_argument("--no-measure", action="store_true",
                        help="plan and export only (no GPU)")
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--bundle", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure is not None:
        return measure(args.bundle, args.measure, args.out, args.seed)
    if (args.db is None) == (args.tune is None):
        parser.error("give --db (a tuned set's database) or --tune SHAPES")
    sys.path.insert(0, str(ROOT))
    with tempfile.TemporaryDirectory(prefix="tf-held-out-") as tmp:
        home = (args.home or Path(tmp) / "home").resolve()
        args.work = (args.work or Path(tmp)).resolve()
        args.out.mkdir(parents=True, exist_ok=True)
        found = plan(args, home)
        (args.out / "dispatch.json").write_text(
            (Path(found["bundle"]) / "dispatch.json").read_text())
        (args.out / "cases.json").write_text(json.dumps(found["cases"], indent=1) + "\n")
        rows = None
        status = 0
        if not args.no_measure:
            started = time.perf_counter()
            status = subprocess.run(
                [sys.executable, str(Path(__file__).resolve()), "--measure",
                 str(args.out / "cases.json"), "--bundle", found["bundle"], "--out",
                 str(args.out), "--seed", str(args.seed)], cwd=args.work).returncode
            found["measure_s"] = round(time.perf_counter() - started, 2)
            measured = args.out / "measure.json"
            if measured.exists():
                done = json.loads(measured.read_text())
                rows = done["rows"]
                found.update({k: v for k, v in done.items() if k != "rows"})
        summary = report(found, rows)
        record = {**found, "date": time.strftime("%Y-%m-%d"), "rows": rows, "summary": summary}
        (args.out / "held-out.json").write_text(json.dumps(record, indent=1) + "\n")
        print_report(found, rows, summary)
    wrong = sum(s["wrong"] for k, s in summary.items() if k in ("in_set", "held_out"))
    return 1 if status or wrong else 0


if __name__ == "__main__":
    sys.exit(main())
