"""What a PyTorch user reaches for instead of a tuning service, checked and timed on one GPU.

    python bench/peers.py --job softmax=16384x1024,8192x8192 \\
        --job gemm_bias_relu=4096x4096x4096 --min-ms 200 --json-out peers.json
    python bench/peers.py --spec examples/transpose --job transpose=8192x8192 --json-out p.json

One process, one GPU, every shape of every ``--job`` in turn. The peers of each family:

- softmax: ``torch.softmax`` (the family's vendor, aten's ``_softmax.out`` into a fixed output,
  timed first and again last: the spread is the run's noise), ``torch.compile`` (Inductor's
  kernel, compiled for the shape, ``dynamic=False``), the Triton kernels of
  :mod:`bench.peer_triton` (``triton``: the textbook choice, one program a row with the row in
  registers and ``num_warps`` by row length, the looped kernel past :data:`ROW_BLOCK_MAX`
  columns; ``triton …``: the neighbouring warp counts and blocks, :func:`softmax_variants`), and
  ``copy``: ``y.copy_(x)``, the same bytes read and written, the memory-bound ceiling;
- gemm_bias_relu: cuBLAS fp32 (``torch.addmm`` + ``relu_``, TF32 off: the vendor, timed first
  and last), three cuBLAS bf16 GEMMs composed (``bench/loader_timing.py``'s
  ``composition_of``): ``cuBLAS bf16x3`` and ``… chained`` on operands split into bf16 parts
  ahead of the timing (their products summed by adds, or in cuBLAS's epilogue), ``cuBLAS
  bf16x3 + split`` splitting its fp32 operands in every call as ours does, and ``compiled
  bf16x3 + split``, that call through ``torch.compile``; and Triton bf16x3
  (``tl.dot(..., input_precision="bf16x3")``, autotuned at the shape);
- transpose (a user's family: ``--spec DIR`` builds it from its spec directory, so that
  ``--job`` can name it by its spec name): ``torch transpose`` (the vendor, ``y.copy_(x.t())``
  into a fixed n x m output: aten's strided copy, what ``x.t().contiguous()`` runs; timed first
  and last), ``torch.compile`` of ``t.t().contiguous()`` (Inductor's tiled kernel, compiled for
  the shape), the tiled kernel of :mod:`bench.peer_triton` (``triton``: 32 x 32 tiles, 4 warps;
  ``triton bMxN wW``: the neighbouring tiles and warps, :func:`transpose_variants`) and
  ``copy``, the same bytes.

``--bundle DIR`` (a bundle of our exported library, ``tuneforge library export``) adds
``tuneforge library`` at each shape its dispatch table has an entry: our kernel called through
the bundle's own loader, as a PyTorch program calls it, checked and timed by this same harness
beside the peers (second, after the vendor).

For each peer at each shape: correctness on fresh random inputs (other seeds than the timed
inputs; outputs poisoned with NaN first where the peer writes a fixed output) against float64
(:func:`softmax_errors`, :func:`gemm_errors`), or for the transpose against the input's
transpose bit for bit (:func:`transpose_errors`, judged at tolerance 0 with no element
unequal); the vendor harness's flushed median
(``worker.vendor.measure_torch``: the evaluation child's own poison and L2-flush kernels before
every timed call, CUDA events, median of 3 run medians) and its sustained rate of back-to-back
calls for at least ``--min-ms``, the faster of a loop of calls and a CUDA graph of them
replayed (``graph_us``: the GPU's rate without the host's per-call cost, which a compiled
function's guards and wrappers add; ``--no-graph``: the loop alone), as the evaluation child
times our candidates. The JSON (``--json-out``) is rewritten after
every shape, so a run cut short keeps what it measured; past ``--deadline-s`` the remaining
shapes are listed as skipped.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.peer_families import (  # noqa: E402
    FAMILIES,
    VENDOR_PEER,
    FamilyPeers,
    Peer,
    Runner,
    check_bundles,
    has_entry,
    library_peer,
    load_library,
    peers_of,
    spec_families,
)
from kernels import get_family  # noqa: E402
from kernels.base import Dims  # noqa: E402
from kernels.family import KernelFamily  # noqa: E402

#: the correctness contract a peer is judged by where its family gives none of its own
#: (:class:`FamilyPeers`' ``tolerance``: the transpose's is 0)
TOLERANCE = 1e-4


# ---- checking and timing --------------------------------------------------------------------
def judge(cases: list[dict[str, Any]], tolerance: float = TOLERANCE) -> dict[str, Any]:
    """The worst of the cases and whether every one passed (finite, every error within
    ``tolerance``, and no element ``unequal`` where a case counts them; a NaN error never
    passes); ``unequal``: the elements that differed, in all, where cases count them."""
    worst_rel = max((c.get("rel_err", math.inf) for c in cases), default=math.inf)
    worst_scaled = max((c.get("max_scaled_err", math.inf) for c in cases), default=math.inf)
    passed = bool(cases) and all(
        c.get("nonfinite", 1) == 0 and c.get("rel_err", math.inf) <= tolerance
        and c.get("max_scaled_err", math.inf) <= tolerance and c.get("unequal", 0) == 0
        for c in cases)
    out = {"passed": passed, "rel_err": worst_rel, "max_scaled_err": worst_scaled,
           "tolerance": tolerance, "cases": cases}
    if any("unequal" in c for c in cases):
        out["unequal"] = sum(int(c.get("unequal", 0)) for c in cases)
    return out


def check_peer(torch: Any, family: FamilyPeers, peer: Peer, runner: Runner,
               checks: Sequence[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """The peer run once on each check's inputs (its outputs poisoned first), judged at the
    family's tolerance (the harness's :data:`TOLERANCE` where it gives none)."""
    cases = []
    for dist, inputs in checks:
        once = runner(inputs)
        for t in getattr(once, "outputs", ()):
            t.fill_(float("nan"))
        y = once()
        if y.is_cuda:
            torch.cuda.synchronize()
        if peer.exact:
            x = next(iter(inputs.values()))
            wrong = int((y != x).sum())
            cases.append({"dist": dist, "rel_err": 0.0 if wrong == 0 else math.inf,
                          "max_scaled_err": 0.0 if wrong == 0 else math.inf,
                          "nonfinite": int((~torch.isfinite(y)).sum()), "unequal": wrong})
        else:
            cases.append({"dist": dist, **family.errors(torch, y, inputs)})
        del y, once
    return judge(cases, TOLERANCE if family.tolerance is None else family.tolerance)


def measure_peer(torch: Any, family: FamilyPeers, peer: Peer, dims: Dims,
                 timing: dict[str, Any], checks: Sequence[tuple[str, dict[str, Any]]], *,
                 min_ms: float, graph: bool) -> dict[str, Any]:
    """One peer at one shape: built, checked, timed flushed and sustained (loop and graph);
    ``error`` where a step failed (what came before it is kept)."""
    from worker.vendor import measure_torch

    entry: dict[str, Any] = {"peer": peer.name, **peer.notes}
    began = time.perf_counter()
    try:
        runner = peer.make(torch, dims)
        entry["build_s"] = round(time.perf_counter() - began, 2)
        entry["correctness"] = check_peer(torch, family, peer, runner, checks)
        once = runner(timing)
        mode = getattr(once, "mode", None)  # how a composition sums its products
        if mode:
            entry["mode"] = mode
        entry.update(measure_torch(lambda _torch, _dims: once, dims.as_dict(),
                                   sustain_ms=min_ms, graph=graph))
        runs = getattr(once, "runs", None)  # what our library's call ran (its loader says)
        if runs:
            entry["runs"] = runs
        if peer.name == "Triton bf16x3":
            from bench import peer_triton

            entry["config"] = peer_triton.gemm_config()
    except Exception as exc:  # a peer that cannot build or run is a row with its reason
        entry["error"] = f"{type(exc).__name__}: {exc}"[:400]
    entry["seconds"] = round(time.perf_counter() - began, 2)
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    return entry


def measure_shape(torch: Any, name: str, dims: Dims, *, min_ms: float, graph: bool,
                  compile_mode: str | None, seed: int,
                  library: Peer | None = None) -> dict[str, Any]:
    """Every peer of family ``name`` at ``dims`` (``library`` second, after the vendor), the
    vendor again last (``<vendor> again``)."""
    family = FAMILIES[name]
    timing = family.inputs(torch, dims, seed)
    checks = [(dist, family.inputs(torch, dims, seed + 1 + i, dist))
              for i, dist in enumerate(family.check_dists)]
    peers = family.peers(torch, dims, compile_mode)
    if library is not None:
        peers.insert(1, library)
    results: dict[str, Any] = {}
    for peer in [*peers, peers[0]]:
        key = peer.name if peer.name not in results else f"{peer.name} again"
        results[key] = measure_peer(torch, family, peer, dims, timing, checks, min_ms=min_ms,
                                    graph=graph)
        print(f"peers: {name} {dims} {key}: {results[key].get('avg_us')} us, "
              f"{results[key].get('error') or 'ok'} ({results[key]['seconds']} s)",
              file=sys.stderr, flush=True)
    return {"shape": str(dims), "peers": results}


def parse_jobs(jobs: Sequence[str], specs: Mapping[str, KernelFamily] | None = None
               ) -> list[tuple[str, list[Dims]]]:
    """``family=SHAPE,SHAPE,…`` per job: the family's name and its parsed shapes, in order;
    ``specs``: the user families built from ``--spec`` directories, by spec name. ValueError
    naming ``--job`` on a family without peers, one neither built in nor given by ``--spec``,
    or a bad shape."""
    out = []
    for job in jobs:
        name, sep, shapes = job.partition("=")
        if not sep or name not in FAMILIES:
            raise ValueError(f"--job {job!r}: FAMILY=SHAPE,… with FAMILY one of "
                             f"{', '.join(FAMILIES)}")
        try:
            family = (specs or {}).get(name) or get_family(name)
        except ValueError as exc:
            raise ValueError(f"--job {job!r}: {exc} (a user family: give its spec directory "
                             f"with --spec DIR)") from exc
        try:
            peers_of(name, family)
            dims = [family.parse_dims(s) for s in shapes.split(",") if s.strip()]
        except ValueError as exc:
            raise ValueError(f"--job {job!r}: {exc}") from exc
        if not dims:
            raise ValueError(f"--job {job!r}: no shape")
        out.append((name, dims))
    return out


def device_facts(torch: Any) -> dict[str, Any]:
    """The GPU and the libraries' versions."""
    facts: dict[str, Any] = {"name": torch.cuda.get_device_name(), "torch": torch.__version__,
                             "cuda": torch.version.cuda}
    try:
        import triton

        facts["triton"] = triton.__version__
    except ImportError as exc:
        facts["triton"] = f"missing: {exc}"
    return facts


def main(argv: list[str] | None = None) -> int:
    """Measure every job's peers, rewriting ``--json-out`` after every shape."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--job", action="append", default=[], required=True,
                    help="FAMILY=SHAPE,SHAPE,... (repeatable)")
    ap.add_argument("--spec", action="append", type=Path, default=[],
                    help="a user family's spec directory (repeatable): built here, so that "
                         "--job can name it by its spec name")
    ap.add_argument("--min-ms", type=float, default=200.0, help="sustained run length")
    ap.add_argument("--json-out", type=Path, required=True)
    ap.add_argument("--deadline-s", type=float, default=0.0,
                    help="skip the shapes left after this many seconds (0: never)")
    ap.add_argument("--no-graph", action="store_true", help="no CUDA-graph sustained rate")
    ap.add_argument("--compile-mode", default=None, help="torch.compile's mode (default: none)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bundle", action="append", type=Path, default=[],
                    help="a bundle of our exported library (repeatable, one a family): its "
                         "kernels timed beside the peers at the shapes it has an entry")
    args = ap.parse_args(argv)
    try:
        jobs = parse_jobs(args.job, spec_families(args.spec))
        bundles = check_bundles(args.bundle, [name for name, _ in jobs])
    except ValueError as exc:
        ap.error(str(exc))
    began = time.monotonic()
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    record: dict[str, Any] = {"device": device_facts(torch), "min_ms": args.min_ms,
                              "tolerance": TOLERANCE, "families": {}}
    for name, shapes in jobs:
        kernel = load_library(bundles[name], name) if name in bundles else None
        tolerance = FAMILIES[name].tolerance
        fam = record["families"].setdefault(name, {
            "vendor": VENDOR_PEER[name], "shapes": {},
            "tolerance": TOLERANCE if tolerance is None else tolerance})
        for dims in shapes:
            if args.deadline_s and time.monotonic() - began > args.deadline_s:
                fam["shapes"][str(dims)] = {"shape": str(dims), "skipped": "deadline"}
            else:
                library = (library_peer(kernel, bundles[name])
                           if kernel is not None and has_entry(kernel, dims) else None)
                fam["shapes"][str(dims)] = measure_shape(
                    torch, name, dims, min_ms=args.min_ms, graph=not args.no_graph,
                    compile_mode=args.compile_mode, seed=args.seed, library=library)
            record["seconds"] = round(time.monotonic() - began, 1)
            args.json_out.parent.mkdir(parents=True, exist_ok=True)
            args.json_out.write_text(json.dumps(record, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
