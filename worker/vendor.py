"""The vendor baseline of a family, timed like a candidate.

Runs as a short-lived process (``python -m worker.vendor --family gemm_bias_relu
4096x4096x4096``) so that torch never enters the evaluation child; prints one JSON line. The
family's ``vendor.module`` defines ``prepare(torch, dims) -> fn``: it allocates the inputs and
returns a function that runs the vendor's operator once (``kernels.family.Vendor``); a function
with an ``outputs`` attribute (the tensors it writes) has them poisoned before every timed call,
as the evaluation child poisons a candidate's.
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import sys
from collections.abc import Callable
from typing import Any

#: how the L2 is flushed before each timed call: ``child`` as the evaluation child does
#: (``worker/support.cu``'s ``tf_flush``: one read-modify-write pass, x = 0.5 x + 1, over
#: max(4 x L2, 64 MiB)), the default since 2026-12-02; ``legacy`` as this module did before
#: (two passes, ``mul_`` then ``add_``, over 256 MiB), which leaves the L2 in another state
#: and cost short kernels 1-2 us more than the child's flush (docs/GPU.md, session 12)
FLUSH_MODES = ("child", "legacy")


def measure_torch(prepare: Callable[[Any, dict[str, int]], Callable[[], Any]],
                  dims: dict[str, int], runs: int = 3, target_ms: float = 50.0,
                  sustain_ms: float = 0.0, flush_mode: str = "child",
                  poison: bool = True) -> dict[str, Any]:
    """Median of run medians of the function ``prepare`` returns, L2 flushed before each
    launch (:data:`FLUSH_MODES`), CUDA events; with ``sustain_ms`` also the rate of
    back-to-back calls (no flush) over at least that long (``sustained_us``).

    The function's ``outputs`` attribute (tensors it writes, when it has one) are filled with
    NaN before each flush, as the evaluation child poisons a candidate's outputs: the same
    writes, then the same flush, before every timed call on both sides (``poison=False``
    leaves them out, for comparison)."""
    import torch

    if flush_mode not in FLUSH_MODES:
        raise ValueError(f"flush mode {flush_mode!r}: one of {', '.join(FLUSH_MODES)}")
    run_once = prepare(torch, dims)
    dev = torch.device("cuda")
    if flush_mode == "child":
        l2 = int(getattr(torch.cuda.get_device_properties(dev), "L2_cache_size", 0) or 0)
        flush = torch.ones(max(4 * l2, 64 << 20) // 4, dtype=torch.float32, device=dev)
        two = torch.full((), 2.0, dtype=torch.float32, device=dev)

        def flush_l2() -> None:
            flush.lerp_(two, 0.5)  # one pass: x + 0.5 (2 - x) = 0.5 x + 1, as tf_flush
    else:
        flush = torch.empty(64 << 20, dtype=torch.float32, device=dev)

        def flush_l2() -> None:
            flush.mul_(0.5).add_(1.0)

    outputs = list(getattr(run_once, "outputs", ())) if poison else []

    def once() -> float:
        for t in outputs:  # before the flush, which evicts their lines, as in the child
            t.fill_(float("nan"))
        flush_l2()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run_once()
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end)) * 1000.0

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
        count = int(sustain_ms * 1000 / max(min(run_medians), 1.0)) + 1
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(count):
            run_once()
        end.record()
        end.synchronize()
        total_ms = float(start.elapsed_time(end))
        out.update(sustained_us=total_ms * 1000.0 / count, sustained_launches=count,
                   sustained_ms=round(total_ms, 3))
    return out


def measure(family_name: str, dims_text: str, sustain_ms: float = 0.0,
            flush_mode: str = "child", poison: bool = True) -> dict[str, Any]:
    """The vendor baseline of ``family_name`` at ``dims_text``, or ``{"error": why}``."""
    from kernels import get_family

    family = get_family(family_name)
    dims = family.parse_dims(dims_text)
    if family.vendor is None:
        return {"error": f"the {family.name} family declares no vendor baseline"}
    module = importlib.import_module(family.vendor.module)
    result = measure_torch(module.prepare, dims.as_dict(), sustain_ms=sustain_ms,
                           flush_mode=flush_mode, poison=poison)
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
    args = parser.parse_args(argv)
    try:
        result = measure(args.family, args.dims, args.sustain_ms, args.flush,
                         not args.no_poison)
    except Exception as exc:  # no torch, no GPU, bad shape: the caller records null with this
        result = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
