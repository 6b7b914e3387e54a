"""The vendor baseline of a family, timed like a candidate.

Runs as a short-lived process (``python -m worker.vendor --family gemm_bias_relu
4096x4096x4096``) so that torch never enters the evaluation child; prints one JSON line. The
family's ``vendor.module`` defines ``prepare(torch, dims) -> fn``: it allocates the inputs and
returns a function that runs the vendor's operator once (``kernels.family.Vendor``).
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import sys
from collections.abc import Callable
from typing import Any


def measure_torch(prepare: Callable[[Any, dict[str, int]], Callable[[], Any]],
                  dims: dict[str, int], runs: int = 3, target_ms: float = 50.0,
                  sustain_ms: float = 0.0) -> dict[str, Any]:
    """Median of run medians of the function ``prepare`` returns, L2 flushed before each
    launch, CUDA events; with ``sustain_ms`` also the rate of back-to-back calls (no flush)
    over at least that long (``sustained_us``)."""
    import torch

    run_once = prepare(torch, dims)
    dev = torch.device("cuda")
    flush = torch.empty(64 << 20, dtype=torch.float32, device=dev)

    def once() -> float:
        flush.mul_(0.5).add_(1.0)
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
           "runs_us": run_medians, "reps_per_run": reps}
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


def measure(family_name: str, dims_text: str, sustain_ms: float = 0.0) -> dict[str, Any]:
    """The vendor baseline of ``family_name`` at ``dims_text``, or ``{"error": why}``."""
    from kernels import get_family

    family = get_family(family_name)
    dims = family.parse_dims(dims_text)
    if family.vendor is None:
        return {"error": f"the {family.name} family declares no vendor baseline"}
    module = importlib.import_module(family.vendor.module)
    result = measure_torch(module.prepare, dims.as_dict(), sustain_ms=sustain_ms)
    return {"family": family.name, "vendor": family.vendor.name, "shape": str(dims), **result}


def main(argv: list[str] | None = None) -> int:
    """Print one JSON line with ``avg_us`` (or ``error``)."""
    parser = argparse.ArgumentParser(prog="python -m worker.vendor")
    parser.add_argument("--family", required=True, help="kernel family name")
    parser.add_argument("dims", help="the shape, e.g. 4096x4096x4096 or rows=8192,cols=32768")
    parser.add_argument("--sustain-ms", type=float, default=0.0,
                        help="also time back-to-back calls for at least this long")
    args = parser.parse_args(argv)
    try:
        result = measure(args.family, args.dims, args.sustain_ms)
    except Exception as exc:  # no torch, no GPU, bad shape: the caller records null with this
        result = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
