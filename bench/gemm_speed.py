"""What the GEMM's speed benchmarks share: the baselines, one kernel's row, the table.

The baselines, each timed in a process of its own on the GPU:

- cuBLAS fp32 (the family's vendor baseline: TF32 off, ``addmm`` + ``relu_``), through
  ``python -m worker.vendor``;
- the composition a user can write today from three cuBLAS bf16 GEMMs with fp32 outputs,
  relu(a_hi·b_hi + a_hi·b_lo + a_lo·b_hi + bias) (``torch.mm(..., out_dtype=torch.float32)``
  where torch has it, else bf16 GEMMs summed in fp32: its ``mode`` says which; the split of A
  and B into bf16 parts is made once, outside the timing), through
  ``python bench/gemm_speed.py --composition SHAPE``.

Both report the protocol's flushed median (``avg_us``: L2 flushed before each launch, median of
3 run medians) and, with ``min_ms``, the sustained rate of back-to-back calls
(``sustained_us``); ``{"error": why}`` where there is no torch or no GPU. A kernel's row
(:func:`speed_row`) holds the same two figures of the kernel, measured by the evaluator's
isolated child; :func:`print_table` sets them side by side.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import loader_timing  # noqa: E402
from kernels.gemm_bias_relu import FAMILY  # noqa: E402
from kernels.gemm_bias_relu.shape import Shape  # noqa: E402
from kernels.gemm_bias_relu.vendor import inputs as vendor_inputs  # noqa: E402

#: how the last prepared composition sums its products (``prepare_composition`` sets it)
_MODE: dict[str, str] = {}


def composition_of(torch: Any, a: Any, b: Any, bias: Any, **how: Any) -> Callable[[], Any]:
    """One run of the three-GEMM composition on ``a``, ``b`` and ``bias``
    (:func:`bench.loader_timing.composition_of`: by default split into bf16 parts once, here;
    ``how`` its keywords); notes its mode."""
    once = loader_timing.composition_of(torch, a, b, bias, **how)
    _MODE["mode"] = once.mode  # type: ignore[attr-defined]
    return once


def prepare_composition(torch: Any, dims: dict[str, int]) -> Callable[[], Any]:
    """Inputs for ``dims`` split into bf16 parts, and one run of the three-GEMM composition."""
    a, b, bias = vendor_inputs(torch, dims)  # the vendor baseline's inputs
    return composition_of(torch, a, b, bias)


def _last_json(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    lines = done.stdout.strip().splitlines()
    if not lines:
        return {"error": done.stderr[-300:] or f"exit status {done.returncode}, no output"}
    found: dict[str, Any] = json.loads(lines[-1])
    return found


def composition(shape: Shape, min_ms: float) -> dict[str, Any]:
    """The composition's flushed median and sustained rate, in a process of its own."""
    return _last_json(subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--composition", str(shape),
         "--min-ms", str(min_ms)], capture_output=True, text=True, timeout=600, cwd=str(ROOT)))


def cublas(shape: Shape, min_ms: float) -> dict[str, Any]:
    """cuBLAS fp32's flushed median and sustained rate, in a process of its own."""
    return _last_json(subprocess.run(
        [sys.executable, "-m", "worker.vendor", "--family", FAMILY.name, str(shape),
         "--sustain-ms", str(min_ms)], capture_output=True, text=True, timeout=600,
        cwd=str(ROOT)))


def baselines(shape: Shape, min_ms: float) -> dict[str, Any]:
    """Both baselines at ``shape`` (``cublas``, ``composition``) and the shape's flops."""
    return {"cublas": cublas(shape, min_ms), "composition": composition(shape, min_ms),
            "flops": 2.0 * shape.m * shape.n * shape.k}


def ratio(theirs: float | None, ours: float | None) -> float | None:
    """Their time over ours (above 1: ours is faster), or None when either is missing."""
    return round(theirs / ours, 3) if theirs and ours else None


def speed_row(ev: Any, label: str, params: Any, compiled: Any, shape: Shape, *,
              min_ms: float, verify: bool = False, seed: int = 11) -> dict[str, Any]:
    """One kernel at ``shape`` through the evaluator ``ev``: correctness (every distribution
    with ``verify``, else one), the flushed median, then, when it passed, the sustained rate of
    back-to-back launches over at least ``min_ms``."""
    row: dict[str, Any] = {"label": label, "shape": str(shape), "params": params.to_dict(),
                           "compile": compiled.status, "regs": compiled.regs_per_thread,
                           "spill_bytes": compiled.spill_bytes}
    if compiled.status != "ok":
        row.update(status=compiled.status, error=compiled.error)
        return row
    m = ev.measure(params, compiled, shape=shape, iteration=0, seed=seed, verify=verify)
    row.update(status=m.status, perf=m.perf, error=m.error, correctness=m.correctness)
    if m.status == "ok":
        row["sustained"] = ev.sustained(params, compiled, shape=shape, min_ms=min_ms)
    return row


def _x(base: dict[str, Any], key: str, us: float | None) -> str:
    value = base.get(key)
    return f"{value / us:6.2f}" if value and us else "     -"


def print_table(rows: list[dict[str, Any]], baselines: dict[str, dict[str, Any]],
                device: dict[str, Any], min_ms: float) -> None:
    """The short table: flushed and sustained, against cuBLAS fp32 and the composition."""
    print(f"\n{device.get('name')} · flushed median / sustained (>= {min_ms:g} ms) · "
          "x = their time / ours")
    for shape, base in baselines.items():
        cb, co = base["cublas"], base["composition"]
        tf = base["flops"] / 1e6
        print(f"{shape}: cuBLAS fp32 {cb.get('avg_us') or cb.get('error')} / "
              f"{cb.get('sustained_us')} us; 3xbf16 composition ({co.get('mode')}) "
              f"{co.get('avg_us') or co.get('error')} / {co.get('sustained_us')} us")
        print(f"  {'kernel':28s} {'us':>9s} {'TFLOP/s':>8s} {'xcuBLAS':>7s} {'xcomp':>6s} "
              f"{'sus us':>9s} {'xcuBLAS':>7s} {'xcomp':>6s} {'err':>8s} regs")
        for r in rows:
            if r["shape"] != shape:
                continue
            perf, sus = r.get("perf") or {}, r.get("sustained") or {}
            us, sus_us = perf.get("avg_us"), sus.get("us_per_launch")
            if not us:
                print(f"  {r['label'][:28]:28s} {r.get('status')}: {(r.get('error') or '')[:70]}")
                continue
            corr = r.get("correctness") or {}
            err = max(corr.get("rel_err") or 0.0, corr.get("max_scaled_err") or 0.0)
            print(f"  {r['label'][:28]:28s} {us:9.1f} {tf / us:8.1f} {_x(cb, 'avg_us', us):>7s} "
                  f"{_x(co, 'avg_us', us)} {sus_us or 0:9.1f} "
                  f"{_x(cb, 'sustained_us', sus_us):>7s} {_x(co, 'sustained_us', sus_us)} "
                  f"{err:8.1e} {r.get('regs')}")


def main(argv: list[str] | None = None) -> int:
    """``--composition SHAPE``: time the composition, print one JSON line."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--composition", required=True, help="the shape, e.g. 4096x4096x4096")
    ap.add_argument("--min-ms", type=float, default=0.0, help="sustained run length")
    args = ap.parse_args(argv)
    try:
        from worker.vendor import measure_torch

        dims = Shape.parse(args.composition)
        out = measure_torch(prepare_composition, dims.as_dict(), sustain_ms=args.min_ms)
        out["mode"] = _MODE.get("mode")
    except Exception as exc:  # no torch, no GPU: the table says why
        out = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    sys.stdout.write(json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
