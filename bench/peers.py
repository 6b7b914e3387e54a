"""What a PyTorch user reaches for instead of a tuning service, checked and timed on one GPU.

    python bench/peers.py --job softmax=16384x1024,8192x8192 \\
        --job gemm_bias_relu=4096x4096x4096 --min-ms 200 --json-out peers.json

One process, one GPU, every shape of every ``--job`` in turn. The peers of each family:

- softmax: ``torch.softmax`` (the family's vendor, aten's ``_softmax.out`` into a fixed output,
  timed first and again last: the spread is the run's noise), ``torch.compile`` (Inductor's
  kernel, compiled for the shape, ``dynamic=False``), the Triton kernels of
  :mod:`bench.peer_triton` (``triton``: the textbook choice, one program a row with the row in
  registers and ``num_warps`` by row length, the looped kernel past :data:`ROW_BLOCK_MAX`
  columns; ``triton …``: the neighbouring warp counts and blocks, :func:`softmax_variants`), and
  ``copy``: ``y.copy_(x)``, the same bytes read and written, the memory-bound ceiling;
- gemm_bias_relu: cuBLAS fp32 (``torch.addmm`` + ``relu_``, TF32 off: the vendor, timed first
  and last), cuBLAS bf16x3 (three cuBLAS bf16 GEMMs composed, ``bench/gemm_speed.py``) and
  Triton bf16x3 (``tl.dot(..., input_precision="bf16x3")``, autotuned at the shape).

For each peer at each shape: correctness on fresh random inputs (other seeds than the timed
inputs; outputs poisoned with NaN first where the peer writes a fixed output) against float64
(:func:`softmax_errors`, :func:`gemm_errors`); the vendor harness's flushed median
(``worker.vendor.measure_torch``: the evaluation child's own poison and L2-flush kernels before
every timed call, CUDA events, median of 3 run medians) and its sustained rate of back-to-back
calls for at least ``--min-ms``; then the rate of a CUDA graph of back-to-back calls replayed
for at least ``--min-ms`` (``graph_us``: the GPU's rate without the host's per-call cost, which
a compiled function's guards and wrappers add). The JSON (``--json-out``) is rewritten after
every shape, so a run cut short keeps what it measured; past ``--deadline-s`` the remaining
shapes are listed as skipped.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kernels import get_family  # noqa: E402
from kernels.base import Dims  # noqa: E402

#: the families this module has peers for, and the name of each one's vendor peer
VENDOR_PEER = {"softmax": "torch.softmax", "gemm_bias_relu": "cuBLAS fp32"}
#: the correctness contract every peer is judged by (the families' default tolerance)
TOLERANCE = 1e-4
#: the longest row (columns, a power of two) the textbook Triton softmax holds in registers
ROW_BLOCK_MAX = 32768
#: a CUDA graph of back-to-back calls spans about this long (ms), replayed for ``--min-ms``
GRAPH_SPAN_MS = 20.0
#: at most this many calls in one graph, and this many bytes of outputs a graph may allocate
GRAPH_MAX_CALLS = 2000
GRAPH_MAX_OUTPUT_BYTES = 8 << 30

Runner = Callable[[dict[str, Any]], Callable[[], Any]]


@dataclass(frozen=True)
class Peer:
    """One peer: ``make(torch, dims)`` builds it for a shape (compiles, tunes) and returns a
    runner; ``runner(inputs)`` returns a function that runs it once on those inputs and returns
    its output (with an ``outputs`` attribute when it writes fixed tensors, poisoned before
    each check and each timed call); ``exact``: its output must equal its input (a copy)."""

    name: str
    make: Callable[[Any, Dims], Runner]
    exact: bool = False
    notes: dict[str, Any] = field(default_factory=dict)


def next_pow2(n: int) -> int:
    """The smallest power of two at least ``n`` (1 for ``n`` <= 1)."""
    return 1 << max(0, (n - 1).bit_length())


def textbook_warps(block: int) -> int:
    """The fused-softmax tutorial's warps for a row block: 4, 8 from 2048 columns, 16 from
    4096."""
    return 16 if block >= 4096 else 8 if block >= 2048 else 4


def softmax_variants(cols: int) -> list[tuple[str, str, int, int]]:
    """The Triton softmax launches timed at rows of ``cols``, as ``(name, kind, block,
    num_warps)``: first ``triton``, the textbook choice (the row in registers with
    :func:`textbook_warps`, or past :data:`ROW_BLOCK_MAX` columns the looped kernel in blocks
    of 4096 with 8 warps), then its neighbours (half and twice the warps; the looped kernel in
    blocks of 2048 and 8192, and beside the row kernel from 8192 columns)."""
    block = next_pow2(cols)
    loops = [("loop", 4096, 8), ("loop", 2048, 4), ("loop", 8192, 16)]
    if block <= ROW_BLOCK_MAX:
        warps = textbook_warps(block)
        plans = [("row", block, warps)]
        plans += [("row", block, w) for w in (warps // 2, warps * 2) if 1 <= w <= 32]
        if block >= 8192:
            plans.append(loops[0])
    else:
        plans = loops
    out = []
    for i, (kind, blk, warps) in enumerate(plans):
        name = "triton" if i == 0 else (f"triton row w{warps}" if kind == "row"
                                        else f"triton loop b{blk} w{warps}")
        out.append((name, kind, blk, warps))
    return out


# ---- softmax --------------------------------------------------------------------------------
def softmax_inputs(torch: Any, dims: Dims, seed: int, dist: str = "normal",
                   device: str = "cuda") -> dict[str, Any]:
    """``x`` (rows x cols fp32 on ``device``): ``normal`` N(0, 1), or ``large`` uniform in
    (-1e4, 1e4) (one entry a row carries it)."""
    gen = torch.Generator(device=device).manual_seed(seed)
    shape = (dims["rows"], dims["cols"])
    if dist == "large":
        x = torch.rand(shape, device=device, generator=gen).mul_(2.0).sub_(1.0).mul_(1e4)
    else:
        x = torch.randn(shape, device=device, generator=gen)
    return {"x": x}


def softmax_errors(torch: Any, y: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """``y`` against the float64 softmax of ``inputs["x"]``: norm-relative error, the largest
    ``|y - ref| / (ref + 1/cols)`` (the family's scaled rule) and the non-finite count."""
    x = inputs["x"]
    ref = torch.softmax(x.double(), -1)
    diff = y.double() - ref
    rel = float(diff.norm() / ref.norm())
    scaled = diff.abs_().div_(ref.add_(1.0 / x.shape[1]))
    return {"rel_err": rel, "max_scaled_err": float(scaled.max()),
            "nonfinite": int((~torch.isfinite(y)).sum())}


def softmax_peers(torch: Any, dims: Dims, compile_mode: str | None) -> list[Peer]:
    """The softmax peers at ``dims`` (the vendor first)."""

    def vendor(torch: Any, dims: Dims) -> Runner:
        def runner(inputs: dict[str, Any]) -> Callable[[], Any]:
            x = inputs["x"]
            y = torch.empty_like(x)

            def once() -> Any:
                return torch.ops.aten._softmax.out(x, -1, False, out=y)

            once.outputs = [y]  # type: ignore[attr-defined]
            return once
        return runner

    def compiled(torch: Any, dims: Dims) -> Runner:
        torch._dynamo.reset()  # each shape compiled afresh: no recompile limit, no dynamic dims
        fn = torch.compile(lambda t: t.softmax(-1), dynamic=False, mode=compile_mode)

        def runner(inputs: dict[str, Any]) -> Callable[[], Any]:
            x = inputs["x"]
            return lambda: fn(x)
        return runner

    def triton_peer(kind: str, block: int, warps: int) -> Callable[[Any, Dims], Runner]:
        def make(torch: Any, dims: Dims) -> Runner:
            from bench import peer_triton

            def runner(inputs: dict[str, Any]) -> Callable[[], Any]:
                x = inputs["x"]
                y = torch.empty_like(x)

                def once() -> Any:
                    return peer_triton.softmax(x, y, kind, block, warps)

                once.outputs = [y]  # type: ignore[attr-defined]
                return once
            return runner
        return make

    def copy(torch: Any, dims: Dims) -> Runner:
        def runner(inputs: dict[str, Any]) -> Callable[[], Any]:
            x = inputs["x"]
            y = torch.empty_like(x)

            def once() -> Any:
                return y.copy_(x)

            once.outputs = [y]  # type: ignore[attr-defined]
            return once
        return runner

    peers = [Peer("torch.softmax", vendor),
             Peer("torch.compile", compiled, notes={"mode": compile_mode or "default"})]
    peers += [Peer(name, triton_peer(kind, block, warps),
                   notes={"kind": kind, "block": block, "num_warps": warps})
              for name, kind, block, warps in softmax_variants(dims["cols"])]
    peers.append(Peer("copy", copy, exact=True))
    return peers


# ---- the GEMM -------------------------------------------------------------------------------
def gemm_inputs(torch: Any, dims: Dims, seed: int, dist: str = "normal",
                device: str = "cuda") -> dict[str, Any]:
    """``a`` (M x K), ``b`` (K x N), ``bias`` (N), normal, fp32 on ``device``."""
    gen = torch.Generator(device=device).manual_seed(seed)
    m, n, k = dims["m"], dims["n"], dims["k"]
    return {"a": torch.randn(m, k, device=device, generator=gen),
            "b": torch.randn(k, n, device=device, generator=gen),
            "bias": torch.randn(n, device=device, generator=gen)}


def gemm_errors(torch: Any, y: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """``y`` against relu(a @ b + bias) in float64: norm-relative error, the largest error over
    ``Σ|a·b| + |bias|`` (the family's contract) and the non-finite count."""
    a, b, bias = (inputs[k].double() for k in ("a", "b", "bias"))
    ref = torch.relu(a @ b + bias)
    scale = a.abs() @ b.abs() + bias.abs()
    diff = y.double() - ref
    rel = float(diff.norm() / ref.norm())
    return {"rel_err": rel, "max_scaled_err": float(diff.abs_().div_(scale).max()),
            "nonfinite": int((~torch.isfinite(y)).sum())}


def gemm_peers(torch: Any, dims: Dims, compile_mode: str | None) -> list[Peer]:
    """The GEMM peers at ``dims`` (the vendor first)."""

    def vendor(torch: Any, dims: Dims) -> Runner:
        def runner(inputs: dict[str, Any]) -> Callable[[], Any]:
            a, b, bias = inputs["a"], inputs["b"], inputs["bias"]
            y = torch.empty(a.shape[0], b.shape[1], device=a.device)

            def once() -> Any:
                return torch.addmm(bias, a, b, out=y).relu_()

            once.outputs = [y]  # type: ignore[attr-defined]
            return once
        return runner

    def composition(torch: Any, dims: Dims) -> Runner:
        from bench.gemm_speed import composition_of

        def runner(inputs: dict[str, Any]) -> Callable[[], Any]:
            return composition_of(torch, inputs["a"], inputs["b"], inputs["bias"])
        return runner

    def triton_gemm(torch: Any, dims: Dims) -> Runner:
        from bench import peer_triton

        def runner(inputs: dict[str, Any]) -> Callable[[], Any]:
            a, b, bias = inputs["a"], inputs["b"], inputs["bias"]
            y = torch.empty(a.shape[0], b.shape[1], device=a.device)

            def once() -> Any:
                return peer_triton.gemm_bf16x3(a, b, bias, y)

            once.outputs = [y]  # type: ignore[attr-defined]
            return once
        return runner

    return [Peer("cuBLAS fp32", vendor), Peer("cuBLAS bf16x3", composition),
            Peer("Triton bf16x3", triton_gemm)]


@dataclass(frozen=True)
class FamilyPeers:
    """What the harness needs of a family: its inputs, its float64 check, its peers and the
    input distributions each peer is checked on."""

    inputs: Callable[..., dict[str, Any]]
    errors: Callable[[Any, Any, dict[str, Any]], dict[str, Any]]
    peers: Callable[[Any, Dims, str | None], list[Peer]]
    check_dists: tuple[str, ...]


FAMILIES = {
    "softmax": FamilyPeers(softmax_inputs, softmax_errors, softmax_peers, ("normal", "large")),
    "gemm_bias_relu": FamilyPeers(gemm_inputs, gemm_errors, gemm_peers, ("normal",)),
}


# ---- checking and timing --------------------------------------------------------------------
def judge(cases: list[dict[str, Any]], tolerance: float = TOLERANCE) -> dict[str, Any]:
    """The worst of the cases and whether every one passed (finite, every error within
    ``tolerance``; a NaN error never passes)."""
    worst_rel = max((c.get("rel_err", math.inf) for c in cases), default=math.inf)
    worst_scaled = max((c.get("max_scaled_err", math.inf) for c in cases), default=math.inf)
    passed = bool(cases) and all(
        c.get("nonfinite", 1) == 0 and c.get("rel_err", math.inf) <= tolerance
        and c.get("max_scaled_err", math.inf) <= tolerance for c in cases)
    return {"passed": passed, "rel_err": worst_rel, "max_scaled_err": worst_scaled,
            "tolerance": tolerance, "cases": cases}


def check_peer(torch: Any, family: FamilyPeers, peer: Peer, runner: Runner,
               checks: Sequence[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """The peer run once on each check's inputs (its outputs poisoned first), judged."""
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
    return judge(cases)


def graph_sustained(torch: Any, once: Callable[[], Any], min_ms: float, per_call_us: float,
                    output_bytes: int) -> dict[str, Any]:
    """The rate of ``once`` in CUDA graphs of back-to-back calls replayed for at least
    ``min_ms``: ``graph_us`` a call, the calls in one graph and in all, the milliseconds."""
    calls = max(1, min(GRAPH_MAX_CALLS, math.ceil(GRAPH_SPAN_MS * 1000.0 / max(per_call_us, 1.0)),
                       GRAPH_MAX_OUTPUT_BYTES // max(output_bytes, 1)))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            once()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            once()
    graph.replay()
    torch.cuda.synchronize()
    replays = max(1, math.ceil(min_ms * 1000.0 / (calls * max(per_call_us, 1.0))))
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(3):  # again, longer, when the estimate that sized it fell short
        start.record()
        for _ in range(replays):
            graph.replay()
        end.record()
        end.synchronize()
        total_ms = float(start.elapsed_time(end))
        if total_ms >= min_ms:
            break
        replays = math.ceil(replays * 1.05 * min_ms / max(total_ms, 1e-3))
    del graph
    return {"graph_us": total_ms * 1000.0 / (replays * calls), "graph_calls": calls,
            "graph_replays": replays, "graph_ms": round(total_ms, 3)}


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
        entry.update(measure_torch(lambda _torch, _dims: once, dims.as_dict(),
                                   sustain_ms=min_ms))
        if peer.name == "Triton bf16x3":
            from bench import peer_triton

            entry["config"] = peer_triton.gemm_config()
        if graph:
            out = once()
            nbytes = int(out.numel() * out.element_size())
            del out
            try:
                entry.update(graph_sustained(torch, once, min_ms, entry["avg_us"], nbytes))
            except Exception as exc:  # the loop's sustained rate stands; the table says why
                entry["graph_error"] = f"{type(exc).__name__}: {exc}"[:300]
    except Exception as exc:  # a peer that cannot build or run is a row with its reason
        entry["error"] = f"{type(exc).__name__}: {exc}"[:400]
    entry["seconds"] = round(time.perf_counter() - began, 2)
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    return entry


def measure_shape(torch: Any, name: str, dims: Dims, *, min_ms: float, graph: bool,
                  compile_mode: str | None, seed: int) -> dict[str, Any]:
    """Every peer of family ``name`` at ``dims``, the vendor again last (``<vendor> again``)."""
    family = FAMILIES[name]
    timing = family.inputs(torch, dims, seed)
    checks = [(dist, family.inputs(torch, dims, seed + 1 + i, dist))
              for i, dist in enumerate(family.check_dists)]
    peers = family.peers(torch, dims, compile_mode)
    results: dict[str, Any] = {}
    for peer in [*peers, peers[0]]:
        key = peer.name if peer.name not in results else f"{peer.name} again"
        results[key] = measure_peer(torch, family, peer, dims, timing, checks, min_ms=min_ms,
                                    graph=graph)
        print(f"peers: {name} {dims} {key}: {results[key].get('avg_us')} us, "
              f"{results[key].get('error') or 'ok'} ({results[key]['seconds']} s)",
              file=sys.stderr, flush=True)
    return {"shape": str(dims), "peers": results}


def parse_jobs(jobs: Sequence[str]) -> list[tuple[str, list[Dims]]]:
    """``family=SHAPE,SHAPE,…`` per job: the family's name and its parsed shapes, in order;
    ValueError naming ``--job`` on a family without peers or a bad shape."""
    out = []
    for job in jobs:
        name, sep, shapes = job.partition("=")
        if not sep or name not in FAMILIES:
            raise ValueError(f"--job {job!r}: FAMILY=SHAPE,… with FAMILY one of "
                             f"{', '.join(FAMILIES)}")
        family = get_family(name)
        try:
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
    ap.add_argument("--min-ms", type=float, default=200.0, help="sustained run length")
    ap.add_argument("--json-out", type=Path, required=True)
    ap.add_argument("--deadline-s", type=float, default=0.0,
                    help="skip the shapes left after this many seconds (0: never)")
    ap.add_argument("--no-graph", action="store_true", help="no CUDA-graph sustained rate")
    ap.add_argument("--compile-mode", default=None, help="torch.compile's mode (default: none)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    try:
        jobs = parse_jobs(args.job)
    except ValueError as exc:
        ap.error(str(exc))
    began = time.monotonic()
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    record: dict[str, Any] = {"device": device_facts(torch), "min_ms": args.min_ms,
                              "tolerance": TOLERANCE, "families": {}}
    for name, shapes in jobs:
        fam = record["families"].setdefault(name, {"vendor": VENDOR_PEER[name], "shapes": {}})
        for dims in shapes:
            if args.deadline_s and time.monotonic() - began > args.deadline_s:
                fam["shapes"][str(dims)] = {"shape": str(dims), "skipped": "deadline"}
            else:
                fam["shapes"][str(dims)] = measure_shape(
                    torch, name, dims, min_ms=args.min_ms, graph=not args.no_graph,
                    compile_mode=args.compile_mode, seed=args.seed)
            record["seconds"] = round(time.monotonic() - began, 1)
            args.json_out.parent.mkdir(parents=True, exist_ok=True)
            args.json_out.write_text(json.dumps(record, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
