"""The vendor baseline of a family, timed like a candidate.

Runs as a short-lived process (``python -m worker.vendor --family gemm_bias_relu
4096x4096x4096``) so that torch never enters the evaluation child; prints one JSON line. The
family's ``vendor.module`` defines ``prepare(torch, dims) -> fn``: it allocates the inputs and
returns a function that runs the vendor's operator once (``kernels.family.Vendor``); a function
with an ``outputs`` attribute (the tensors it writes) has them poisoned before every timed call,
as the evaluation child poisons a candidate's. The poison and the L2 flush are the child's own
kernels (``worker/support.cu``, loaded by pycuda into torch's context): both sides run the same
launches before every timed call (:data:`FLUSH_MODES`).
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from worker import launch_contract as lc

#: how the L2 is flushed (and the outputs poisoned) before each timed call: ``child`` (the
#: default) runs the evaluation child's own ``tf_poison`` and ``tf_flush`` (``worker/support.cu``,
#: compiled by the project's compiler, loaded by pycuda into torch's context, launched on
#: torch's legacy default stream with the child's grids); ``lerp`` (where pycuda or nvcc is
#: missing) one ``lerp_`` pass of the same arithmetic and bytes and torch's ``fill_``;
#: ``legacy`` two passes, ``mul_`` then ``add_``, over 256 MiB. A flush's access pattern moves
#: the next short kernel's time (docs/GPU.md): both sides must run the same kernels.
FLUSH_MODES = ("child", "lerp", "legacy")
SUPPORT_SOURCE = Path(__file__).with_name("support.cu")


def _support_kernels(torch: Any, dev: Any) -> tuple[Any, Any, int, Any] | None:
    """``(tf_flush, tf_poison, sm_count, context)`` loaded into torch's (primary) context, or
    None where pycuda, nvcc or the compile is missing."""
    try:
        import pycuda.driver as cuda

        from core.settings import get_settings
        from worker.compile import compiler_from_settings
    except ImportError:
        return None
    major, minor = torch.cuda.get_device_capability(dev)
    compiler = compiler_from_settings(get_settings(), arch=f"sm_{major}{minor}")
    try:
        result = compiler.compile(SUPPORT_SOURCE.read_text())
    finally:
        compiler.close()
    if result.status != "ok":
        return None
    cuda.init()
    context = cuda.Device(dev.index or 0).retain_primary_context()
    context.push()
    module = cuda.module_from_buffer(result.cubin())
    flush, poison = module.get_function("tf_flush"), module.get_function("tf_poison")
    flush.prepare("Pq")
    poison.prepare("Pq")
    flush._tf_module = module  # keep the module alive with the functions
    sm_count = int(torch.cuda.get_device_properties(dev).multi_processor_count)
    return flush, poison, sm_count, context


def measure_torch(prepare: Callable[[Any, dict[str, int]], Callable[[], Any]],
                  dims: dict[str, int], runs: int = 3, target_ms: float = 50.0,
                  sustain_ms: float = 0.0, flush_mode: str = "child",
                  poison: bool = True, graph: bool = True) -> dict[str, Any]:
    """Median of run medians of the function ``prepare`` returns, L2 flushed before each
    launch (:data:`FLUSH_MODES`), CUDA events; with ``sustain_ms`` also the rate of
    back-to-back calls (no flush) over at least that long, two ways as the evaluation child
    times a candidate: a loop of calls (``loop_us``) and, with ``graph``, CUDA graphs of them
    replayed (:func:`graph_sustained`, ``graph_us``, checked on its own output; ``graph_error``
    where the calls cannot be captured or the graph computed otherwise than a call).
    ``sustained_us`` is the faster, ``sustained_way`` says which.

    The function's ``outputs`` attribute (tensors it writes, when it has one) are poisoned
    before each flush, as the evaluation child poisons a candidate's outputs: the same writes,
    then the same flush, before every timed call on both sides (``poison=False`` leaves them
    out, for comparison)."""
    import torch

    if flush_mode not in FLUSH_MODES:
        raise ValueError(f"flush mode {flush_mode!r}: one of {', '.join(FLUSH_MODES)}")
    run_once = prepare(torch, dims)
    dev = torch.device("cuda", torch.cuda.current_device())
    if torch.cuda.current_stream(dev).cuda_stream != 0:
        raise RuntimeError("the vendor harness times on torch's legacy default stream")
    l2 = int(getattr(torch.cuda.get_device_properties(dev), "L2_cache_size", 0) or 0)
    outputs = list(getattr(run_once, "outputs", ())) if poison else []
    support = _support_kernels(torch, dev) if flush_mode == "child" else None
    if flush_mode == "child" and support is None:
        flush_mode = "lerp"
    context = None

    def poison_outputs() -> None:
        for t in outputs:
            t.fill_(float("nan"))

    if support is not None:
        flush_fn, poison_fn, sm_count, context = support
        n = lc.flush_elements(l2)
        flush = torch.ones(n, dtype=torch.float32, device=dev)
        block = (lc.FILL_THREADS, 1, 1)

        def poison_outputs() -> None:
            for t in outputs:
                words = t.numel() * t.element_size() // 4
                poison_fn.prepared_async_call(lc.fill_grid(words, sm_count), block, None,
                                              t.data_ptr(), words)

        def flush_l2() -> None:  # the child's tf_flush, on the stream torch times on
            flush_fn.prepared_async_call(lc.fill_grid(n, sm_count), block, None,
                                         flush.data_ptr(), n)
    elif flush_mode == "lerp":
        flush = torch.ones(lc.flush_elements(l2), dtype=torch.float32, device=dev)
        two = torch.full((), 2.0, dtype=torch.float32, device=dev)

        def flush_l2() -> None:
            flush.lerp_(two, 0.5)  # one pass: x + 0.5 (2 - x) = 0.5 x + 1, as tf_flush
    else:
        flush = torch.empty(64 << 20, dtype=torch.float32, device=dev)

        def flush_l2() -> None:
            flush.mul_(0.5).add_(1.0)

    def once() -> float:
        poison_outputs()  # before the flush, which evicts their lines, as in the child
        flush_l2()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run_once()
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end)) * 1000.0

    try:
        once()  # the first call carries the library's set-up (cuBLAS: ~100 ms): it must not size
        # the runs, or every run would be one launch long
        warm = max(once(), once())
        reps = max(1, min(100, int(target_ms * 1000 / warm)))
        run_medians = [statistics.median(once() for _ in range(reps)) for _ in range(runs)]
        out = {"backend": "torch", "version": torch.__version__,
               "device": torch.cuda.get_device_name(), "avg_us": statistics.median(run_medians),
               "runs_us": run_medians, "reps_per_run": reps, "flush": flush_mode,
               "poisoned_outputs": len(outputs)}
        if sustain_ms > 0:
            count, total_ms = lc.run_until(sustain_ms,
                                           lc.sustained_count(sustain_ms, min(run_medians)),
                                           back_to_back(torch, run_once))
            loop_us = total_ms * 1000.0 / count
            out.update(sustained_us=loop_us, sustained_way="loop", loop_us=loop_us,
                       sustained_launches=count, sustained_ms=round(total_ms, 3))
            if graph:
                try:
                    replayed = graph_sustained(torch, run_once, sustain_ms, loop_us)
                except Exception as exc:  # the loop's rate stands; the record says why
                    out["graph_error"] = f"{type(exc).__name__}: {exc}"[:300]
                else:
                    out.update(replayed)
                    if replayed["graph_us"] < loop_us:
                        out.update(sustained_us=replayed["graph_us"], sustained_way="graph")
        return out
    finally:
        if context is not None:  # the primary context pycuda pushed
            context.pop()


def back_to_back(torch: Any, step: Callable[[], Any]) -> Callable[[int], float]:
    """``run(count)``: ``step`` called ``count`` times between two CUDA events on torch's
    current stream, waited for; the milliseconds between the events."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def run(count: int) -> float:
        start.record()
        for _ in range(count):
            step()
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end))
    return run


#: most bytes of outputs the calls of one CUDA graph may allocate (each call's output may
#: stay in the graph's memory pool)
GRAPH_MAX_OUTPUT_BYTES = 8 << 30


#: the most a graph's output may differ from a call's the usual way (norm-relative): the same
#: operator, which a library may run with another algorithm under capture; a graph that lost or
#: repeated a step, or computed nothing, is far past it
GRAPH_CHECK_TOLERANCE = 1e-3


def graph_sustained(torch: Any, once: Callable[[], Any], min_ms: float, per_call_us: float
                    ) -> dict[str, Any]:
    """The rate of ``once`` in a CUDA graph of back-to-back calls (``lc.graph_calls`` of them,
    fewer where their outputs would pass :data:`GRAPH_MAX_OUTPUT_BYTES`) replayed for at least
    ``min_ms``: ``graph_us`` a call, the calls in one graph, the replays, the milliseconds, and
    ``graph_check`` (:func:`check_graph`: the graph timed, replayed once more on poisoned
    outputs, against a call the usual way). Raises where that check fails, so that the caller
    keeps the loop's rate and says why."""
    out = once()
    nbytes = sum(int(t.numel() * t.element_size()) for t in _tensors(torch, out))
    del out
    calls = lc.graph_calls(per_call_us, min(lc.GRAPH_MAX_CALLS,
                                            GRAPH_MAX_OUTPUT_BYTES // max(nbytes, 1)))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            once()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            last = once()
    graph.replay()
    torch.cuda.synchronize()
    replays, total_ms = lc.run_until(min_ms, lc.graph_replays(min_ms, calls, per_call_us),
                                     back_to_back(torch, graph.replay))
    checked = check_graph(torch, graph, once, _written(torch, once, last))
    if not checked["passed"]:
        raise RuntimeError(f"the graph's output is not a call's: {checked}")
    return {"graph_us": total_ms * 1000.0 / (replays * calls), "graph_calls": calls,
            "graph_replays": replays, "graph_ms": round(total_ms, 3), "graph_check": checked}


def _tensors(torch: Any, value: Any) -> list[Any]:
    """The tensors a call returned (one, or a tuple or list of them)."""
    return [t for t in (value if isinstance(value, (tuple, list)) else [value])
            if isinstance(t, torch.Tensor)]


def _written(torch: Any, once: Callable[[], Any], returned: Any) -> list[Any]:
    """What a call of ``once`` that returned ``returned`` wrote: ``once.outputs`` where it
    keeps its outputs, else the tensors it returned."""
    return list(getattr(once, "outputs", ())) or _tensors(torch, returned)


def check_graph(torch: Any, graph: Any, once: Callable[[], Any], targets: list[Any]
                ) -> dict[str, Any]:
    """``graph`` (captured calls of ``once``) replayed once with ``targets`` (what its last
    captured call wrote, :func:`_written`) poisoned first, against one call of ``once`` the
    usual way: the norm-relative difference of each target (NaN where the
    graph left one unwritten), ``passed`` where every one is within
    :data:`GRAPH_CHECK_TOLERANCE`."""
    if not targets:
        return {"passed": False, "why": "the calls write no tensor the check can read"}
    for t in targets:
        t.fill_(float("nan") if t.is_floating_point() else -1)
    graph.replay()
    torch.cuda.synchronize()
    replayed = [t.clone() for t in targets]
    expected = _written(torch, once, once())
    torch.cuda.synchronize()
    if len(expected) != len(replayed):
        return {"passed": False, "why": f"{len(replayed)} outputs against {len(expected)}"}
    errs = []
    for got, want in zip(replayed, expected, strict=True):
        g, w = got.double(), want.double()
        errs.append(float((g - w).norm() / max(float(w.norm()), 1e-300)))
    worst = max(errs, key=lambda e: math.inf if math.isnan(e) else e)
    return {"passed": all(e <= GRAPH_CHECK_TOLERANCE for e in errs), "rel_err": worst}


def measure(family_name: str, dims_text: str, sustain_ms: float = 0.0,
            flush_mode: str = "child", poison: bool = True, graph: bool = True
            ) -> dict[str, Any]:
    """The vendor baseline of ``family_name`` at ``dims_text``, or ``{"error": why}``."""
    from kernels import get_family

    family = get_family(family_name)
    dims = family.parse_dims(dims_text)
    if family.vendor is None:
        return {"error": f"the {family.name} family declares no vendor baseline"}
    module = importlib.import_module(family.vendor.module)
    result = measure_torch(module.prepare, dims.as_dict(), sustain_ms=sustain_ms,
                           flush_mode=flush_mode, poison=poison, graph=graph)
    return {"family": family.name, "vendor": family.vendor.name, "shape": str(dims), **result}


def main(argv: list[str] | None = None) -> int:
    """Print one JSON line with ``avg_us`` (or ``error``)."""
    parser = argparse.ArgumentParser(prog="python -m worker.vendor")
    parser.add_argument("--family", required=True, help="kernel family name")
    parser.add_argument("dims", help="the shape, e.g. 4096x4096x4096 or rows=8192,cols=32768")
    parser.add_argument("--sustain-ms", type=float, default=0.0,
                        help="also time back-to-back calls for at least this long")
    parser.add_argument("--flush", choices=FLUSH_MODES, default="child",
                        help="how the L2 is flushed before each timed call")
    parser.add_argument("--no-poison", action="store_true",
                        help="do not fill the operator's outputs with NaN before each flush")
    parser.add_argument("--no-graph", action="store_true",
                        help="time the sustained calls in a loop only, not in CUDA graphs too")
    args = parser.parse_args(argv)
    try:
        result = measure(args.family, args.dims, args.sustain_ms, args.flush,
                         not args.no_poison, not args.no_graph)
    except Exception as exc:  # no torch, no GPU, bad shape: the caller records null with this
        result = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
