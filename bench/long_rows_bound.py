"""What a long-row softmax can reach beside a copy of its bytes: the copy, its read half alone
and its write half alone, timed the same way.

    python bench/long_rows_bound.py --shapes 16x262144,256x262144 --out out/

A softmax row cannot write one output before every value of the row has been read (the max
and the sum need them all), so when a shape's rows all fit in one wave of CTAs the kernel's
time is at least its reading, the rows' exchange of partial (max, sum) and its writing, one
after the other, where a copy overlaps reading and writing throughout. For each shape (fp32,
rows x columns) this times, on one GPU with L2 flushed before every timed launch (CUDA events
around the GPU's work, median of ``--reps``; ``bench/loader_timing.flushed_us``):
``y.copy_(x)`` (both halves overlapped); the read half, a kernel written here that loads every
float4 (four a thread) and stores nothing (``torch.amax`` over the rows beside it, which
torch's reduction, not the memory, holds back); and ``y.fill_(0)``, the write half. It prints
the copy beside read + write and writes ``long_rows_bound.json`` under ``--out``. Run on a GPU
host (torch and cupy); of this repository it imports the timer alone.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import cupy
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.loader_timing import flushed_us  # noqa: E402  (torch passed in; no tuneforge import)

#: the read half: every float4 of ``x`` loaded (four a thread), nothing written
READ_HALF = cupy.RawKernel(r"""
extern "C" __global__ void read_half(const float4* __restrict__ x, long long n4, float* out) {
    const long long i0 = (long long)blockIdx.x * blockDim.x * 4 + threadIdx.x;
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const long long i = i0 + (long long)j * blockDim.x;
        if (i < n4) { const float4 v = __ldg(x + i); s += v.x + v.y + v.z + v.w; }
    }
    if (s == 1.2345678e30f) out[blockIdx.x] = s;  // never taken; the loads cannot be dropped
}
""", "read_half")

#: bytes written between timed launches to push the inputs out of L2 (the H200's is 60 MB)
FLUSH_BYTES = 256 << 20


def measure(rows: int, cols: int, reps: int) -> dict[str, Any]:
    """The three timings of one shape, and what they add up to."""
    x = torch.randn(rows, cols, device="cuda")
    y = torch.empty_like(x)
    flush = torch.empty(FLUSH_BYTES // 4, device="cuda")
    copy = flushed_us(torch, lambda: y.copy_(x), flush, reps)
    read_rows = flushed_us(torch, lambda: torch.amax(x, 1), flush, reps)
    n4 = x.numel() // 4
    blocks = -(-n4 // (256 * 4))
    xs, sink = cupy.from_dlpack(x), cupy.empty(blocks, dtype=cupy.float32)
    read = flushed_us(torch, lambda: READ_HALF((blocks,), (256,), (xs, cupy.int64(n4), sink)),
                      flush, reps)
    write = flushed_us(torch, lambda: y.fill_(0.0), flush, reps)
    return {"shape": f"{rows}x{cols}", "bytes": 2 * x.numel() * 4, "copy_us": round(copy, 2),
            "amax_rows_us": round(read_rows, 2), "read_us": round(read, 2),
            "write_us": round(write, 2),
            "read_plus_write_us": round(read + write, 2),
            "copy_over_read_plus_write": round(copy / (read + write), 3)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default="16x262144,256x262144")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    rows = []
    for text in args.shapes.split(","):
        n_rows, n_cols = (int(v) for v in text.split("x"))
        rows.append(measure(n_rows, n_cols, args.reps))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "long_rows_bound.json").write_text(json.dumps(
        {"gpu": torch.cuda.get_device_name(), "rows": rows}, indent=1))
    print(f"{'shape':>12} {'MB':>6} {'copy us':>8} {'read us':>8} {'write us':>9} "
          f"{'read+write':>11}")
    for r in rows:
        print(f"{r['shape']:>12} {r['bytes'] / 1e6:6.1f} {r['copy_us']:8.2f} {r['read_us']:8.2f} "
              f"{r['write_us']:9.2f} {r['read_plus_write_us']:11.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
