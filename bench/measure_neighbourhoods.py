"""Measure on a GPU the tensor-core points the GEMM expert visits, as replay-dataset rows.

    python bench/measure_neighbourhoods.py --shape 4096x4096x4096 --seconds 420 --limit 300 \\
        --out tc-4096.jsonl.gz --merged replay-h200-4096.jsonl.gz

Which points (:func:`derive`, no GPU needed; ``--list`` prints them): the expert rule book's
moves (``FAMILY.expert_moves`` through the expert policy, local search left out) walked
best-first from the family's baseline, at each of ``--tolerance`` (default 1e-4 and 1e-5, so
that both bf16x3 and bf16x6 are offered). A point's cost is the sum of its moves' ranks in the
rule book's lists (0: the first move), so the rule book's preferred path comes first, then
each single deviation from it, and so on; only the tensor-core points are kept (the SIMT points
on the way there are the dataset's already). Then the one-step neighbours (every transform) of
those points, in the same order. The rows are the replay dataset's (``core/replay.py``): the
compile block, status, correctness, perf, profile and GPU seconds as the evaluator recorded
them. The GPU work stops at ``--limit`` points or ``--seconds``, whichever comes first; a point
not measured is not written (a replay answers it ``not_measured``). ``--merged`` writes the
family's dataset with the new rows added (a point measured there keeps its row) and the meta
line's domains widened to every value the rows hold. Prints a table last.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import heapq
import json
import os
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.policies.base import HistoryItem, PolicyContext, key_of  # noqa: E402
from agent.policies.expert import ExpertPolicy  # noqa: E402
from agent.spaces import FullSpace  # noqa: E402
from bench import git_commit  # noqa: E402
from core.evaluation import CompileResult, EvalOptions, Measurement  # noqa: E402
from core.replay import domains_of as replay_domains  # noqa: E402
from kernels.gemm_bias_relu import FAMILY, GemmParams  # noqa: E402
from kernels.gemm_bias_relu.shape import Shape  # noqa: E402

ARCH = "sm_90"
#: tolerances the rule book is walked at (bf16x3 fits the first, only bf16x6 the second)
TOLERANCES = (1e-4, 1e-5)
#: rule-book proposals read per point (more than any point has)
RULE_MOVES = 64


def rule_moves(params: GemmParams, shape: Shape, tolerance: float,
               space: FullSpace) -> list[GemmParams]:
    """The points the expert's rule book proposes from ``params`` (accepted, nothing else
    tried), in its order."""
    inc = HistoryItem(id="inc", iteration=1, params=params, key=key_of(params), status="ok",
                      avg_us=1000.0, accepted=True,
                      compile={"spill_bytes": 0, "regs_per_thread": 128})
    ctx = PolicyContext(family=FAMILY, space=space, arch=ARCH, incumbent=inc, history=[inc],
                        seed=1, iteration=2, threshold_pct=0.5, shape=shape,
                        tolerance=tolerance)
    return [p.params for p in ExpertPolicy().propose(ctx, RULE_MOVES)
            if not p.reason.startswith("local search")]


def rule_points(shape: Shape, tolerances: Iterable[float] = TOLERANCES,
                start: GemmParams | None = None) -> Iterator[tuple[GemmParams, int]]:
    """Tensor-core points the rule book reaches from ``start`` (default the baseline), cheapest
    first, with their cost (the sum of the moves' ranks; ties: fewer moves, then the order
    found)."""
    space = FullSpace(FAMILY, ARCH)
    origin = (start or FAMILY.baseline).canonical()
    heap: list[tuple[int, int, int, str]] = [(0, 0, 0, key_of(origin))]
    points = {key_of(origin): origin}
    best = {key_of(origin): 0}
    done: set[str] = set()
    order = 1
    while heap:
        cost, depth, _order, key = heapq.heappop(heap)
        if key in done:
            continue
        done.add(key)
        params = points[key]
        if params.tf32x3:
            yield params, cost
        for tolerance in tolerances:
            for rank, nxt in enumerate(rule_moves(params, shape, tolerance, space)):
                k = key_of(nxt)
                if k in done or best.get(k, 1 << 30) <= cost + rank:
                    continue
                best[k], points[k] = cost + rank, nxt
                heapq.heappush(heap, (cost + rank, depth + 1, order, k))
                order += 1


def neighbours(params: GemmParams, shape: Shape) -> list[GemmParams]:
    """Every valid point one transform away from ``params`` (any transform, any argument)."""
    inc = HistoryItem(id="inc", iteration=1, params=params, key=key_of(params), status="ok")
    ctx = PolicyContext(family=FAMILY, space=FullSpace(FAMILY, ARCH), arch=ARCH, incumbent=inc,
                        history=[inc], seed=1, iteration=2, threshold_pct=0.5, shape=shape)
    return [p for _action, p in ctx.neighbours()]


def derive(shape: Shape, tolerances: Iterable[float] = TOLERANCES,
           known: set[str] | None = None) -> Iterator[tuple[GemmParams, str]]:
    """The points to measure, in order, each with why (``rule book, cost N`` or ``neighbour
    of #i``): the rule book's tensor-core points, then their tensor-core neighbours; none
    twice and none of ``known`` (keys already measured)."""
    seen = set(known or ())
    ruled: list[GemmParams] = []
    for params, cost in rule_points(shape, tolerances):
        key = key_of(params)
        if key not in seen:
            seen.add(key)
            ruled.append(params)
            yield params, f"rule book, cost {cost}"
    for i, params in enumerate(ruled):
        for near in neighbours(params, shape):
            key = key_of(near)
            if near.tf32x3 and key not in seen:
                seen.add(key)
                yield near, f"neighbour of #{i}"


def row_of(params: GemmParams, shape: Shape, compiled: CompileResult,
           measurement: Measurement | None) -> dict[str, Any]:
    """One replay-dataset row: the compile block and, when it compiled, what was measured."""
    row: dict[str, Any] = {"params": params.to_dict(), "shape": str(shape),
                           "compile": compiled.summary(FAMILY.max_smem_limit(ARCH))}
    if measurement is None:
        row.update(status=compiled.failure_status, error=compiled.error)
        return row
    row.update(status=measurement.status, correctness=measurement.correctness,
               perf=measurement.perf, profile=measurement.profile, error=measurement.error,
               gpu_seconds=round(measurement.gpu_seconds, 4))
    return row


def domains_of(rows: Iterable[dict[str, Any]],
               start: dict[str, list[Any]] | None = None) -> dict[str, list[Any]]:
    """The GEMM's replay domains of ``rows`` (:func:`core.replay.domains_of`)."""
    return replay_domains(FAMILY, rows, start)


def read_dataset(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A dataset's meta line and rows."""
    opener = gzip.open if path.suffix == ".gz" else open
    meta: dict[str, Any] = {}
    rows: list[dict[str, Any]] = []
    with opener(path, "rt") as fh:
        for line in fh:
            if line.strip():
                row = json.loads(line)
                if row.get("kind") == "meta":
                    meta = row
                else:
                    rows.append(row)
    return meta, rows


def write_dataset(path: Path, meta: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    """A dataset file: the meta line, then one row a line (gzip when the name ends ``.gz``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wt") as fh:
        fh.write(json.dumps(meta) + "\n")
        for row in rows:
            fh.write(json.dumps(row) + "\n")


def merge(base_meta: dict[str, Any], base_rows: list[dict[str, Any]], meta: dict[str, Any],
          rows: list[dict[str, Any]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``base`` with the new rows added (a point already there at its shape keeps its row), the
    domains widened to every value the rows hold and the merge noted in the meta line."""
    def key(row: dict[str, Any]) -> tuple[str, str]:
        return key_of(FAMILY.params_from_dict(row["params"])), row["shape"]

    have = {key(r) for r in base_rows}
    added = [r for r in rows if key(r) not in have]
    merged = base_rows + added
    out = dict(base_meta)
    out["domains"] = domains_of(merged, base_meta.get("domains"))
    out["measured"] = len(merged)
    out["merged"] = [*base_meta.get("merged", []), {
        "rows": len(added), "date": meta.get("date"), "commit": meta.get("commit"),
        "gpu": meta.get("gpu"), "method": meta.get("method"), "note": meta.get("note")}]
    return out, merged


def main() -> int:
    """Derive, measure, write, print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", default="4096x4096x4096")
    ap.add_argument("--tolerance", type=float, action="append", default=None,
                    help=f"walk the rule book at this tolerance (repeatable; default "
                         f"{', '.join(map(str, TOLERANCES))})")
    ap.add_argument("--limit", type=int, default=0, help="measure at most N points (0: all)")
    ap.add_argument("--seconds", type=float, default=420.0,
                    help="stop starting measurements after this many seconds")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--out", type=Path, help="the new rows as a dataset")
    ap.add_argument("--merged", type=Path, help="the family's dataset with the new rows added")
    ap.add_argument("--list", action="store_true", help="print the points in order, measure none")
    ap.add_argument("--cache", type=Path, default=Path("/tmp/tf-cache"))
    ap.add_argument("--commit", default=os.environ.get("TUNEFORGE_COMMIT") or git_commit())
    args = ap.parse_args()

    t_start = time.perf_counter()
    shape = Shape.parse(args.shape)
    base_meta, base_rows = read_dataset(FAMILY.replay_datasets()[0])
    known = {key_of(FAMILY.params_from_dict(r["params"])) for r in base_rows
             if r["shape"] == str(shape)}
    wanted: list[tuple[GemmParams, str]] = []
    for item in derive(shape, tuple(args.tolerance or TOLERANCES), known):
        wanted.append(item)
        if args.limit and len(wanted) >= args.limit:
            break
    print(f"{len(wanted)} points derived in {time.perf_counter() - t_start:.1f} s",
          file=sys.stderr, flush=True)
    if args.list:
        for i, (params, why) in enumerate(wanted):
            print(f"{i:4d} {why:22s} {json.dumps(params.to_dict(), sort_keys=True)}")
        return 0
    if args.out is None:
        ap.error("--out is required unless --list")

    from worker.compile import Compiler
    from worker.evaluate import GpuEvaluator

    compiler = Compiler(args.cache, arch=ARCH, workers=os.cpu_count() or 4)
    evaluator = GpuEvaluator(FAMILY, compiler, options=EvalOptions(timeout_s=30.0),
                             vendor_cache=args.cache / "vendor.json")
    vendor_us = evaluator.vendor_us(shape)
    futures = [evaluator.compile(p) for p, _why in wanted]
    t_measure = time.perf_counter()
    rows: list[dict[str, Any]] = []
    gpu_busy = 0.0
    for i, ((params, why), future) in enumerate(zip(wanted, futures, strict=True)):
        if time.perf_counter() - t_start > args.seconds:
            break
        compiled = future.result()
        m = (evaluator.measure(params, compiled, shape=shape, iteration=i, seed=args.seed)
             if compiled.status == "ok" else None)
        gpu_busy += m.gpu_seconds if m else 0.0
        rows.append({**row_of(params, shape, compiled, m), "derived": why})
        print(f"{i:4d} {why:22s} {rows[-1]['status']}", file=sys.stderr, flush=True)
    for future in futures[len(rows):]:
        future.cancel()
    evaluator.close()
    meta = {
        "kind": "meta", "family": FAMILY.name, "shape": str(shape),
        "gpu": evaluator.device.get("name"), "device": evaluator.device,
        "driver": evaluator.device.get("driver_version"), "date": dt.date.today().isoformat(),
        "commit": args.commit, "vendor_us": {str(shape): vendor_us},
        "domains": domains_of(rows), "derived": len(wanted), "measured": len(rows),
        "measure_seconds": round(time.perf_counter() - t_measure, 1),
        "gpu_busy_seconds": round(gpu_busy, 1), "seed": args.seed,
        "method": "the tensor-core points the expert's rule book visits and their one-step "
                  "neighbours (bench/measure_neighbourhoods.py), in order until the limit: "
                  "correctness on fresh seeded inputs plus the edge shapes, then 3 runs of "
                  "adaptive repetitions, L2 flushed, CUDA events, median of run medians",
        "note": f"--limit {args.limit} --seconds {args.seconds:g}",
    }
    write_dataset(args.out, meta, rows)
    if args.merged is not None:
        write_dataset(args.merged, *merge(base_meta, base_rows, meta, rows))
    print_table(rows, len(wanted), vendor_us)
    return 0


def print_table(rows: list[dict[str, Any]], derived: int, vendor_us: float | None) -> None:
    """Statuses, the fastest correct points and their ratio to cuBLAS."""
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    print(f"\n{'points measured':20s} {len(rows)} of {derived} derived")
    print(f"{'statuses':20s} {json.dumps(counts)}")
    ok = sorted((r for r in rows if r["status"] == "ok" and r.get("perf")),
                key=lambda r: r["perf"]["avg_us"])
    for r in ok[:8]:
        us = r["perf"]["avg_us"]
        x = f"{vendor_us / us:.2f}x cuBLAS" if vendor_us else ""
        print(f"  {us:9.1f} us {x:14s} {r['derived']:22s} {json.dumps(r['params'])}")


if __name__ == "__main__":
    sys.exit(main())
