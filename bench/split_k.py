"""Split-K and shape specialization on a GPU: the campaigns' best kernels at every split and
specialized, at shapes whose M x N tiles do (4096³) or do not (skinny, long K) fill the GPU.

    python bench/split_k.py [--shapes 256x256x65536,512x512x16384,8192x1024x4096,4096x4096x4096]

For every (point, shape): correctness at the shape (one distribution) and 17x33x65 (skipped for
a specialized point), then the benchmark in the isolated child (the split-K epilogue inside the
timed events); cuBLAS fp32 (TF32 off) for the shape in the same run. Splits that leave a split
without a K tile at the shape are not measured. Prints a table last and one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.evaluation import EvalOptions  # noqa: E402
from kernels.gemm_bias_relu import DOMAINS, FAMILY, GemmParams  # noqa: E402
from kernels.gemm_bias_relu.shape import Shape  # noqa: E402
from kernels.gemm_bias_relu.validity import check_at_shape  # noqa: E402
from worker.compile import Compiler  # noqa: E402
from worker.evaluate import GpuEvaluator  # noqa: E402

#: the best kernels of the 2026-11-29 campaigns (docs/GPU.md)
POINTS: dict[str, GemmParams] = {
    "tc": GemmParams(tf32x3=True, block_x=64, block_y=2, warp_m=32, warp_n=64, tile_k=32,
                     stages=2, swizzle=4).canonical(),
    "simt": GemmParams(coalesced=True, smem=True, reg_m=8, reg_n=8, vec=4, unroll=2, pad=4,
                       interleave=True, stages=2, swizzle=4).canonical(),
}


def main() -> int:
    """Measure and print."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="256x256x65536,512x512x16384,8192x1024x4096,"
                                        "4096x4096x4096")
    ap.add_argument("--cache", type=Path, default=Path("/tmp/tf-cache"))
    args = ap.parse_args()
    compiler = Compiler(args.cache, arch="sm_90", workers=os.cpu_count() or 4)
    ev = GpuEvaluator(FAMILY, compiler, options=EvalOptions(
        timeout_s=120.0, edge_shapes=(Shape(17, 33, 65),), target_run_ms=15.0),
        vendor_cache=args.cache / "vendor.json")
    rows: list[dict[str, Any]] = []
    for shape_text in args.shapes.split(","):
        shape = Shape.parse(shape_text)
        vendor = ev.vendor_us(shape)
        todo: list[tuple[str, GemmParams]] = []
        for name, base in POINTS.items():
            for split in DOMAINS["split_k"]:
                params = replace(base, split_k=split)
                if check_at_shape(params, shape) is None:
                    todo.append((f"{name} split {split}", params))
            todo.append((f"{name} specialized", replace(
                base, shape_m=shape.m, shape_n=shape.n, shape_k=shape.k)))
        futures = [ev.compile(p) for _, p in todo]
        for (label, params), future in zip(todo, futures, strict=True):
            compiled = future.result()
            m = ev.measure(params, compiled, shape=shape, iteration=0, seed=29)
            perf = m.perf or {}
            launch = FAMILY.launch(params, shape)
            rows.append({
                "label": label, "shape": str(shape), "status": m.status,
                "grid": list(getattr(launch, "grid", [])), "avg_us": perf.get("avg_us"),
                "tflops": perf.get("throughput_tflops"), "spread_pct": perf.get("spread_pct"),
                "vendor_us": vendor,
                "vs_cublas": round(vendor / perf["avg_us"], 3) if vendor and perf else None,
                "rel_err": (m.correctness or {}).get("rel_err"),
                "regs": compiled.regs_per_thread, "spill_bytes": compiled.spill_bytes,
                "params": params.to_dict(), "error": m.error,
            })
    ev.close()
    print(f"{'label':18s} {'shape':16s} {'grid':14s} {'status':7s} {'us':>9s} {'TFLOP/s':>8s} "
          f"{'x cuBLAS':>8s} {'rel err':>9s}")
    for r in rows:
        grid = "x".join(str(g) for g in r["grid"] or [])
        print(f"{r['label']:18s} {r['shape']:16s} {grid:14s} {r['status']:7s} "
              f"{r['avg_us'] or 0:9.1f} {r['tflops'] or 0:8.2f} {r['vs_cublas'] or 0:8.3f} "
              f"{r['rel_err'] or 0:9.2e}")
    print(json.dumps({"device": ev.device.get("name"), "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
