"""Measure on a GPU the points a family's expert visits, as replay-dataset rows.

    python bench/measure_neighbourhoods.py --shape 4096x4096x4096 --seconds 420 --limit 300 \\
        --out tc-4096.jsonl.gz --merged replay-h200-4096.jsonl.gz
    python bench/measure_neighbourhoods.py --kernel softmax --shape 16384x1024,4096x32768 \\
        --limit 40 --seconds 150 --out softmax-rules.jsonl.gz

Which points (:func:`derive`, no GPU needed; ``--list`` prints them): the expert rule book's
moves (``family.expert_moves`` through the expert policy, local search left out) walked
best-first from the family's baseline, at each of ``--tolerance`` (the GEMM's default 1e-4 and
1e-5, so that both bf16x3 and bf16x6 are offered; other families 1e-4). A point's cost is the
sum of its moves' ranks in the rule book's lists (0: the first move), so the rule book's
preferred path comes first, then each single deviation from it, and so on. Kept: the points the
family keeps (:data:`KEEP`: the GEMM's tensor-core points, the SIMT points on the way there
being the dataset's already; every point of the other families) that the family's dataset has
not measured at the shape. Then the one-step neighbours (every transform) of those points, in
the same order. ``--shape`` takes several shapes, comma-separated: ``--limit`` points each,
measured shape after shape. The rows are the replay dataset's (``core/replay.py``): the compile
block, status, correctness, perf, profile and GPU seconds as the evaluator recorded them. The
GPU work stops at ``--limit`` points a shape or ``--seconds``, whichever comes first; a point
not measured is not written (a replay answers it ``not_measured``). ``--merged`` writes the
family's dataset with the new rows added (a point measured there keeps its row) and the meta
line's domains widened to every value the rows hold; ``bench/merge_replay.py`` merges ``--out``
into the shipped dataset as it merges campaign rows. Prints a table last.
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
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.policies.base import HistoryItem, PolicyContext, key_of  # noqa: E402
from agent.policies.expert import ExpertPolicy  # noqa: E402
from agent.spaces import FullSpace  # noqa: E402
from bench import git_commit  # noqa: E402
from core.evaluation import CompileResult, EvalOptions, Measurement  # noqa: E402
from core.replay import domains_of as replay_domains  # noqa: E402
from kernels import get_family  # noqa: E402
from kernels.base import Dims  # noqa: E402
from kernels.family import KernelFamily  # noqa: E402

ARCH = "sm_90"
#: the family measured by default
GEMM = get_family("gemm_bias_relu")
#: tolerances the GEMM's rule book is walked at (bf16x3 fits the first, only bf16x6 the
#: second); other families are walked at the first
TOLERANCES = (1e-4, 1e-5)
#: rule-book proposals read per point (more than any point has)
RULE_MOVES = 64
#: which points of a family's walk are measured (default: every point)
KEEP: dict[str, Callable[[Any], bool]] = {"gemm_bias_relu": lambda p: bool(p.tf32x3)}
#: the compile figures the walk's incumbents carry (the rule book reads them): the GEMM's
#: tensor-core kernels at their usual 128 registers; the other families' rule books estimate
#: the registers themselves
INCUMBENT_COMPILE: dict[str, dict[str, Any]] = {
    "gemm_bias_relu": {"spill_bytes": 0, "regs_per_thread": 128}}


def keeps(family: KernelFamily, params: Any) -> bool:
    """Whether ``family``'s walk measures ``params`` (:data:`KEEP`)."""
    return KEEP.get(family.name, lambda _p: True)(params)


def tolerances_of(family: KernelFamily) -> tuple[float, ...]:
    """The tolerances ``family``'s rule book is walked at by default."""
    return TOLERANCES if family.name == "gemm_bias_relu" else TOLERANCES[:1]


def rule_moves(params: Any, shape: Dims, tolerance: float, space: FullSpace,
               family: KernelFamily = GEMM) -> list[Any]:
    """The points the expert's rule book proposes from ``params`` (accepted, nothing else
    tried), in its order."""
    inc = HistoryItem(id="inc", iteration=1, params=params, key=key_of(params), status="ok",
                      avg_us=1000.0, accepted=True,
                      compile=dict(INCUMBENT_COMPILE.get(family.name, {"spill_bytes": 0})))
    ctx = PolicyContext(family=family, space=space, arch=ARCH, incumbent=inc, history=[inc],
                        seed=1, iteration=2, threshold_pct=0.5, shape=shape,
                        tolerance=tolerance)
    return [p.params for p in ExpertPolicy().propose(ctx, RULE_MOVES)
            if not p.reason.startswith("local search")]


def rule_points(shape: Dims, tolerances: Iterable[float] | None = None,
                start: Any | None = None, family: KernelFamily = GEMM
                ) -> Iterator[tuple[Any, int]]:
    """The points the family keeps that the rule book reaches from ``start`` (default the
    baseline), cheapest first, with their cost (the sum of the moves' ranks; ties: fewer
    moves, then the order found)."""
    space = FullSpace(family, ARCH)
    origin = (start or family.baseline).canonical()
    heap: list[tuple[int, int, int, str]] = [(0, 0, 0, key_of(origin))]
    points = {key_of(origin): origin}
    best = {key_of(origin): 0}
    done: set[str] = set()
    order = 1
    walked = tuple(tolerances_of(family) if tolerances is None else tolerances)
    while heap:
        cost, depth, _order, key = heapq.heappop(heap)
        if key in done:
            continue
        done.add(key)
        params = points[key]
        if keeps(family, params):
            yield params, cost
        for tolerance in walked:
            for rank, nxt in enumerate(rule_moves(params, shape, tolerance, space, family)):
                k = key_of(nxt)
                if k in done or best.get(k, 1 << 30) <= cost + rank:
                    continue
                best[k], points[k] = cost + rank, nxt
                heapq.heappush(heap, (cost + rank, depth + 1, order, k))
                order += 1


def neighbours(params: Any, shape: Dims, family: KernelFamily = GEMM) -> list[Any]:
    """Every valid point one transform away from ``params`` (any transform, any argument)."""
    inc = HistoryItem(id="inc", iteration=1, params=params, key=key_of(params), status="ok")
    ctx = PolicyContext(family=family, space=FullSpace(family, ARCH), arch=ARCH, incumbent=inc,
                        history=[inc], seed=1, iteration=2, threshold_pct=0.5, shape=shape)
    return [p for _action, p in ctx.neighbours()]


def derive(shape: Dims, tolerances: Iterable[float] | None = None,
           known: set[str] | None = None, family: KernelFamily = GEMM
           ) -> Iterator[tuple[Any, str]]:
    """The points to measure, in order, each with why (``rule book, cost N`` or ``neighbour
    of #i``): the rule book's points the family keeps, then their neighbours it keeps; none
    twice and none of ``known`` (keys already measured)."""
    seen = set(known or ())
    ruled: list[Any] = []
    for params, cost in rule_points(shape, tolerances, family=family):
        key = key_of(params)
        if key not in seen:
            seen.add(key)
            ruled.append(params)
            yield params, f"rule book, cost {cost}"
    for i, params in enumerate(ruled):
        for near in neighbours(params, shape, family):
            key = key_of(near)
            if keeps(family, near) and key not in seen:
                seen.add(key)
                yield near, f"neighbour of #{i}"


def row_of(params: Any, shape: Dims, compiled: CompileResult,
           measurement: Measurement | None, family: KernelFamily = GEMM) -> dict[str, Any]:
    """One replay-dataset row: the compile block and, when it compiled, what was measured."""
    row: dict[str, Any] = {"params": params.to_dict(), "shape": str(shape),
                           "compile": compiled.summary(family.max_smem_limit(ARCH))}
    if measurement is None:
        row.update(status=compiled.failure_status, error=compiled.error)
        return row
    row.update(status=measurement.status, correctness=measurement.correctness,
               perf=measurement.perf, profile=measurement.profile, error=measurement.error,
               gpu_seconds=round(measurement.gpu_seconds, 4))
    return row


def domains_of(rows: Iterable[dict[str, Any]],
               start: dict[str, list[Any]] | None = None,
               family: KernelFamily = GEMM) -> dict[str, list[Any]]:
    """The family's replay domains of ``rows`` (:func:`core.replay.domains_of`)."""
    return replay_domains(family, rows, start)


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
          rows: list[dict[str, Any]], family: KernelFamily = GEMM
          ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``base`` with the new rows added (a point already there at its shape keeps its row), the
    domains widened to every value the rows hold and the merge noted in the meta line."""
    def key(row: dict[str, Any]) -> tuple[str, str]:
        return key_of(family.params_from_dict(row["params"])), row["shape"]

    have = {key(r) for r in base_rows}
    added = [r for r in rows if key(r) not in have]
    merged = base_rows + added
    out = dict(base_meta)
    out["domains"] = domains_of(merged, base_meta.get("domains"), family)
    out["measured"] = len(merged)
    out["merged"] = [*base_meta.get("merged", []), {
        "rows": len(added), "date": meta.get("date"), "commit": meta.get("commit"),
        "gpu": meta.get("gpu"), "method": meta.get("method"), "note": meta.get("note")}]
    return out, merged


def wanted_points(family: KernelFamily, shapes: list[Dims], known_rows: list[dict[str, Any]],
                  tolerances: Iterable[float] | None, limit: int
                  ) -> list[tuple[Any, Dims, str]]:
    """The points to measure at each shape in turn (``limit`` a shape, 0: all), none the
    dataset's rows ``known_rows`` measured at that shape."""
    out: list[tuple[Any, Dims, str]] = []
    for shape in shapes:
        known = {key_of(family.params_from_dict(r["params"])) for r in known_rows
                 if r["shape"] == str(shape)}
        found = 0
        for params, why in derive(shape, tolerances, known, family):
            out.append((params, shape, why))
            found += 1
            if limit and found >= limit:
                break
    return out


def main() -> int:
    """Derive, measure, write, print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernel", default=GEMM.name, help="the family (default: the GEMM)")
    ap.add_argument("--shape", default="",
                    help="shape(s), comma-separated (default: the GEMM's 4096x4096x4096)")
    ap.add_argument("--tolerance", type=float, action="append", default=None,
                    help=f"walk the rule book at this tolerance (repeatable; default "
                         f"{', '.join(map(str, TOLERANCES))} for the GEMM, else "
                         f"{TOLERANCES[0]})")
    ap.add_argument("--limit", type=int, default=0,
                    help="measure at most N points a shape (0: all)")
    ap.add_argument("--seconds", type=float, default=420.0,
                    help="stop starting measurements this many seconds after the first "
                         "(the vendor's timing and the compiler's start not counted)")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--out", type=Path, help="the new rows as a dataset")
    ap.add_argument("--merged", type=Path, help="the family's dataset with the new rows added")
    ap.add_argument("--list", action="store_true", help="print the points in order, measure none")
    ap.add_argument("--cache", type=Path, default=Path("/tmp/tf-cache"))
    ap.add_argument("--commit", default=os.environ.get("TUNEFORGE_COMMIT") or git_commit())
    args = ap.parse_args()

    t_start = time.perf_counter()
    family = get_family(args.kernel)
    try:
        shapes = [family.parse_dims(t.strip()) for t in
                  (args.shape or ("4096x4096x4096" if family is GEMM else "")).split(",")
                  if t.strip()]
    except ValueError as exc:
        ap.error(f"--shape: {exc}")
    if not shapes:
        ap.error(f"--shape: give the {family.name} shape(s) to measure at")
    base_meta, base_rows = read_dataset(family.replay_datasets()[0])
    wanted = wanted_points(family, shapes, base_rows, args.tolerance, args.limit)
    print(f"{len(wanted)} points derived in {time.perf_counter() - t_start:.1f} s",
          file=sys.stderr, flush=True)
    if args.list:
        for i, (params, shape, why) in enumerate(wanted):
            print(f"{i:4d} {shape!s:>16s} {why:22s} {json.dumps(params.to_dict(), sort_keys=True)}")
        return 0
    if args.out is None:
        ap.error("--out is required unless --list")

    from worker.compile import Compiler
    from worker.evaluate import GpuEvaluator

    compiler = Compiler(args.cache / family.name, arch=ARCH, workers=os.cpu_count() or 4)
    evaluator = GpuEvaluator(family, compiler, options=EvalOptions(timeout_s=30.0),
                             vendor_cache=args.cache / f"vendor-{family.name}.json")
    vendor_us = {str(shape): evaluator.vendor_us(shape) for shape in shapes}
    futures = [evaluator.compile(p) for p, _shape, _why in wanted]
    t_measure = time.perf_counter()
    rows: list[dict[str, Any]] = []
    gpu_busy = 0.0
    for i, ((params, shape, why), future) in enumerate(zip(wanted, futures, strict=True)):
        if time.perf_counter() - t_measure > args.seconds:
            break
        compiled = future.result()
        m = (evaluator.measure(params, compiled, shape=shape, iteration=i, seed=args.seed)
             if compiled.status == "ok" else None)
        gpu_busy += m.gpu_seconds if m else 0.0
        rows.append({**row_of(params, shape, compiled, m, family), "derived": why})
        print(f"{i:4d} {shape!s:>16s} {why:22s} {rows[-1]['status']}", file=sys.stderr,
              flush=True)
    for future in futures[len(rows):]:
        future.cancel()
    evaluator.close()
    meta = {
        "kind": "meta", "family": family.name, "shape": ",".join(str(d) for d in shapes),
        "shapes": sorted({r["shape"] for r in rows}),
        "gpu": evaluator.device.get("name"), "device": evaluator.device,
        "driver": evaluator.device.get("driver_version"), "date": dt.date.today().isoformat(),
        "commit": args.commit, "vendor_us": vendor_us,
        "domains": domains_of(rows, family=family), "derived": len(wanted),
        "measured": len(rows), "measure_seconds": round(time.perf_counter() - t_measure, 1),
        "gpu_busy_seconds": round(gpu_busy, 1), "seed": args.seed,
        "method": "the points the expert's rule book visits from the baseline and their "
                  "one-step neighbours (bench/measure_neighbourhoods.py), in order until the "
                  "limit: correctness on fresh seeded inputs plus the edge shapes, then 3 runs "
                  "of adaptive repetitions, L2 flushed, CUDA events, median of run medians",
        "note": f"--kernel {family.name} --limit {args.limit} --seconds {args.seconds:g}",
    }
    write_dataset(args.out, meta, rows)
    if args.merged is not None:
        write_dataset(args.merged, *merge(base_meta, base_rows, meta, rows, family))
    for shape in shapes:
        print_table([r for r in rows if r["shape"] == str(shape)],
                    sum(1 for _p, d, _w in wanted if d == shape), vendor_us[str(shape)],
                    family.vendor.name if family.vendor else "vendor", str(shape))
    return 0


def print_table(rows: list[dict[str, Any]], derived: int, vendor_us: float | None,
                vendor: str = "cuBLAS", shape: str = "") -> None:
    """Statuses, the fastest correct points and their ratio to the vendor."""
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    print(f"\n{shape + ': ' if shape else ''}{'points measured':20s} {len(rows)} of {derived} "
          "derived")
    print(f"{'statuses':20s} {json.dumps(counts)}")
    ok = sorted((r for r in rows if r["status"] == "ok" and r.get("perf")),
                key=lambda r: r["perf"]["avg_us"])
    for r in ok[:8]:
        us = r["perf"]["avg_us"]
        x = f"{vendor_us / us:.2f}x {vendor}" if vendor_us else ""
        print(f"  {us:9.1f} us {x:14s} {r['derived']:22s} {json.dumps(r['params'])}")


if __name__ == "__main__":
    sys.exit(main())
