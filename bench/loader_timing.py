"""What the loader benches time and check with, on torch alone (nothing of tuneforge, so a
measuring process that must import none of it can use them): the families' inputs, their
``scaled`` check against float64, the vendor's operator, the strongest peer's, and the flushed
and back-to-back timings."""

from __future__ import annotations

import functools
import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

#: the families' correctness tolerance (their ``scaled`` rule)
TOLERANCE = 1e-4


# ---- inputs, references, checks ----------------------------------------------------------
def inputs(torch: Any, family: str, shape: Mapping[str, int], seed: int) -> list[Any]:
    """Fresh normal inputs of ``family`` at ``shape`` on the GPU."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    if family == "softmax":
        return [torch.randn(shape["rows"], shape["cols"], device="cuda", generator=gen)]
    m, n, k = shape["m"], shape["n"], shape["k"]
    return [torch.randn(m, k, device="cuda", generator=gen),
            torch.randn(k, n, device="cuda", generator=gen),
            torch.randn(n, device="cuda", generator=gen)]


def scaled_error(torch: Any, family: str, out: Any, args: Sequence[Any]) -> dict[str, float]:
    """The family's ``scaled`` rule against a float64 reference: the norm-relative error and
    the largest element error over its scale (softmax: ``ref + 1/cols``; GEMM:
    ``Σ|a·b| + |bias|``)."""
    if family == "softmax":
        x = args[0].double()
        ref = torch.softmax(x, -1)
        scale = ref + 1.0 / x.shape[1]
    else:
        a, b, bias = (t.double() for t in args)
        ref = torch.relu(a @ b + bias)
        scale = a.abs() @ b.abs() + bias.abs()
    err = (out.double() - ref).abs()
    finite = bool(torch.isfinite(out).all())
    rel = float(err.norm() / ref.norm()) if float(ref.norm()) > 0 else float(err.norm())
    return {"rel_err": rel if finite else math.inf,
            "max_scaled_err": float((err / scale.clamp_min(1e-30)).max()) if finite
            else math.inf}


def vendor(torch: Any, family: str) -> Callable[..., Any]:
    """The vendor's operator as a user calls it (a fresh output each call)."""
    if family == "softmax":
        return lambda x: torch.softmax(x, -1)

    def gemm(a: Any, b: Any, bias: Any) -> Any:
        torch.backends.cuda.matmul.allow_tf32 = False
        return torch.relu_(torch.addmm(bias, a, b))  # as the family's vendor and the fallback
    return gemm


def bf16_parts(torch: Any, x: Any) -> tuple[Any, Any]:
    """``x`` (fp32) as two bf16 parts, ``hi + lo`` within bf16's rounding of ``x - hi``."""
    hi = x.to(torch.bfloat16)
    return hi, (x - hi.float()).to(torch.bfloat16)


@functools.cache
def _sums(torch: Any, chain: bool) -> tuple[str, Callable[..., Any]]:
    """How this torch sums relu(a_hi·b_hi + a_hi·b_lo + a_lo·b_hi + bias) in fp32 from the
    bf16 parts, and its name: with ``chain``, each product added in cuBLAS's epilogue
    (``torch.addmm(y, …, out_dtype=float32)``, the bias the first product's addend); else,
    or where torch lacks that, ``torch.mm(..., out_dtype=float32)`` outputs summed by adds;
    else bf16 GEMMs widened and summed. Probed on the GPU once a process."""
    f32 = torch.float32

    def chained(a_hi: Any, a_lo: Any, b_hi: Any, b_lo: Any, bias: Any) -> Any:
        y = torch.addmm(bias, a_hi, b_hi, out_dtype=f32)
        y = torch.addmm(y, a_hi, b_lo, out_dtype=f32)
        return torch.addmm(y, a_lo, b_hi, out_dtype=f32).relu_()

    def summed(a_hi: Any, a_lo: Any, b_hi: Any, b_lo: Any, bias: Any) -> Any:
        y = torch.mm(a_hi, b_hi, out_dtype=f32)
        y += torch.mm(a_hi, b_lo, out_dtype=f32)
        y += torch.mm(a_lo, b_hi, out_dtype=f32)
        return y.add_(bias).relu_()

    def widened(a_hi: Any, a_lo: Any, b_hi: Any, b_lo: Any, bias: Any) -> Any:
        y = torch.mm(a_hi, b_hi).float()
        y += torch.mm(a_hi, b_lo).float()
        y += torch.mm(a_lo, b_hi).float()
        return y.add_(bias).relu_()

    ways = [("addmm(out_dtype=float32) chained", chained)] if chain else []
    ways += [("torch.mm(out_dtype=float32)", summed), ("bf16 torch.mm, then .float() sums",
                                                      widened)]
    part = torch.ones(16, 16, device="cuda", dtype=torch.bfloat16)
    bias = torch.ones(16, device="cuda")
    for name, way in ways[:-1]:
        try:
            if float(way(part, part, part, part, bias)[0, 0]) == 49.0:
                return name, way
        except (TypeError, RuntimeError):
            pass
    return ways[-1]


def composition_of(torch: Any, a: Any, b: Any, bias: Any, *, split_each_call: bool = False,
                   chain: bool = False, compiled: bool = False,
                   shared: dict[str, Any] | None = None) -> Callable[[], Any]:
    """One run of the composition a user can write from three cuBLAS bf16 GEMMs with fp32
    outputs, relu(a_hi·b_hi + a_hi·b_lo + a_lo·b_hi + bias), returning its fresh fp32 output.
    ``a`` and ``b`` are split into bf16 parts once, here (the split's time not counted), or
    with ``split_each_call`` in every run, as a call on fp32 operands must (our kernel's
    contract). ``chain`` adds the products in cuBLAS's epilogue where torch can
    (:func:`_sums`); ``compiled`` runs the whole call through ``torch.compile`` (Inductor
    fuses each operand's split into one kernel, and the adds with the bias and the relu; the
    GEMMs stay cuBLAS's), its products summed by adds (torch 2.11's ``addmm`` with
    ``out_dtype`` has no fake-tensor kernel for a 1-D bias, so ``chain`` is not taken
    there), with Inductor's ``emulate_precision_casts`` on (without it the fp32 → bf16 →
    fp32 round trip is folded away, every low part is zero and the error is 2.3e-3 of the
    output's norm); ``shared`` keeps that compiled function for the next call of this one
    (one function for every shape, as :func:`peer` keeps softmax's), else each composition
    compiles its own for its shape (``dynamic=False``: torch would otherwise make the second
    shape's code dynamic, the closures sharing one code object). Its ``mode`` says which of
    these it is."""
    how, sums = _sums(torch, chain and not compiled)
    if split_each_call:
        def call(a: Any, b: Any, bias: Any) -> Any:
            return sums(*bf16_parts(torch, a), *bf16_parts(torch, b), bias)
        fn = call
        if compiled:  # Inductor drops a cast's rounding (lo = 0) unless told to keep it
            import torch._inductor.config as inductor_config

            inductor_config.emulate_precision_casts = True
            if shared is None:  # compiled for this shape alone
                fn = torch.compile(call, dynamic=False)
            else:
                if "gemm_bias_relu" not in shared:
                    shared["gemm_bias_relu"] = torch.compile(call)
                fn = shared["gemm_bias_relu"]

        def once() -> Any:
            return fn(a, b, bias)
        mode = f"{how}, split each call" + (", torch.compile" if compiled else "")
    else:
        parts = (*bf16_parts(torch, a), *bf16_parts(torch, b), bias)

        def once() -> Any:
            return sums(*parts)
        mode = f"{how}, split ahead"
    once.mode = mode  # type: ignore[attr-defined]
    return once


#: what :func:`peer` runs for each family, as its rows name it
PEER_NAMES = {"softmax": "torch.compile",
              "gemm_bias_relu": "torch.compile of cuBLAS bf16x3 composed, split each call"}


def peer(torch: Any, family: str, compiled: dict[str, Any]) -> Callable[..., Callable[[], Any]]:
    """The strongest peer of the peers' run (docs/BENCHMARKS.md) for a program of many shapes:
    ``peer(*args)`` returns one call of it on those inputs. Softmax: ``torch.compile`` of
    ``torch.softmax`` as a user writes it, one compiled function for every shape (torch's
    default: static at the first shape, dynamic once a second one comes; kept in
    ``compiled``); the GEMM: three cuBLAS bf16 GEMMs composed (:func:`composition_of`) on
    the fp32 operands as the loader takes them, split into bf16 parts in every call, through
    ``torch.compile`` (one compiled function for every shape, kept in ``compiled`` too)."""
    if family == "softmax":
        if "softmax" not in compiled:
            compiled["softmax"] = torch.compile(lambda x: torch.softmax(x, -1))
        fn = compiled["softmax"]
        return lambda x: (lambda: fn(x))
    return lambda a, b, bias: composition_of(torch, a, b, bias, split_each_call=True,
                                             compiled=True, shared=compiled)


# ---- timing ------------------------------------------------------------------------------
#: GPU clock cycles the stream sleeps between the L2 flush and a timed call's start event
#: (about 200 µs at the H200's 1.98 GHz): the call's host work is done while the GPU sleeps,
#: so the events time the GPU's work alone, not how far the host lagged behind the flush
HIDE_HOST_CYCLES = 400_000


def flushed_us(torch: Any, fn: Callable[[], Any], flush: Any, reps: int) -> float:
    """Median of ``reps`` calls of ``fn``, the L2 flushed before each, CUDA events around the
    GPU's work (:data:`HIDE_HOST_CYCLES`; the host's time a call is :func:`per_call_us`'s)."""
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        flush.zero_()
        torch.cuda._sleep(HIDE_HOST_CYCLES)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000.0)
    return statistics.median(times)


def _run_us(torch: Any, fn: Callable[[], Any], calls: int) -> float:
    """Wall time a call of one run of ``calls`` back-to-back calls, the GPU idle before and
    finished after."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls * 1e6


def per_call_us(torch: Any, fn: Callable[[], Any], calls: int = 2000) -> float:
    """Wall time a call of ``calls`` back-to-back calls (the best of three runs)."""
    return min(_run_us(torch, fn, calls) for _ in range(3))


def back_to_back_us(torch: Any, fn: Callable[[], Any], min_s: float = 0.2) -> float:
    """Wall time a call of one run of back-to-back calls lasting at least ``min_s`` seconds:
    the number of calls from a short run first, so a call bound by its host time runs as
    long as one bound by the GPU's."""
    estimate = _run_us(torch, fn, 20)
    return _run_us(torch, fn, max(20, math.ceil(min_s * 1e6 / max(estimate, 1.0))))


def interleaved_us(torch: Any, fns: Mapping[str, Callable[[], Any]], rounds: int = 9,
                   calls: int = 1000) -> dict[str, list[float]]:
    """Wall time a call of each of ``fns``, back to back, in ``rounds`` rounds that time every
    one in turn (the order rotating round to round): each one's figure a round, so that a
    difference between two is taken within a round, where the host's speed has not moved."""
    names = list(fns)
    for name in names:
        per_call_us(torch, fns[name], 100)  # warm
    found: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            found[name].append(_run_us(torch, fns[name], calls))
    return found


def reps_for(us: float) -> int:
    """Timed calls at a call of ``us``: more for short ones, at least 5."""
    return int(max(5, min(40, 200_000 / max(us, 1.0))))
