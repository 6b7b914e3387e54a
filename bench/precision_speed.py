"""The precision-split wgmma kernels against cuBLAS fp32 and three cuBLAS bf16 GEMMs composed.

    python bench/precision_speed.py --shapes 4096x4096x4096,8192x8192x8192 --out out/
    python bench/precision_speed.py --params '{...}' --label mine --out out/

For every (point, shape), in one run on one GPU: correctness at the shape (one distribution:
the tests check the rest) and the protocol's flushed median (L2 flushed before each timed
launch, 3 runs of adaptive repetitions) in the isolated child, then the sustained rate
(back-to-back launches for at least ``--min-ms``). Beside them, each in a process of its own:
cuBLAS fp32 (TF32 off, ``addmm`` + ``relu_``) and the composition a user can write today,
relu(a_hi·b_hi + a_hi·b_lo + a_lo·b_hi + bias) from three cuBLAS bf16 GEMMs with fp32 outputs
(``bench/gemm_speed.py``), both flushed and sustained. Prints a table, writes
``precision_speed.json`` under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.gemm_speed import baselines as measure_baselines  # noqa: E402
from bench.gemm_speed import print_table, speed_row  # noqa: E402
from core.evaluation import EvalOptions  # noqa: E402
from kernels.gemm_bias_relu import FAMILY, GemmParams  # noqa: E402
from kernels.gemm_bias_relu.shape import Shape  # noqa: E402
from worker.compile import Compiler  # noqa: E402
from worker.evaluate import GpuEvaluator  # noqa: E402

_WS = {"tf32x3": True, "wgmma": 128, "block_x": 128, "block_y": 2, "mma_window": 4}
#: the points timed by default: the tf32x3 campaign best and the bf16 candidates
DEFAULT_POINTS: list[tuple[str, dict[str, Any]]] = [
    ("tf32x3 ws2 (campaign best)", {**_WS, "stages": 1, "producers": 2}),
    ("bf16x3 ws2 st2", {**_WS, "stages": 2, "producers": 2, "bf16_split": 3}),
    ("bf16x3 ws2 st1", {**_WS, "stages": 1, "producers": 2, "bf16_split": 3}),
    ("bf16x3 ws2 st2 swz4", {**_WS, "stages": 2, "producers": 2, "bf16_split": 3, "swizzle": 4}),
    ("bf16x3 ws1 st2", {**_WS, "stages": 2, "producers": 1, "bf16_split": 3}),
    ("bf16x3 ws2 staged", {**_WS, "stages": 1, "producers": 2, "bf16_split": 3,
                           "async_copy": True}),
    ("bf16x3 ws1 staged", {**_WS, "stages": 1, "producers": 1, "bf16_split": 3,
                           "async_copy": True}),
    ("bf16x3 ws2 staged swz4", {**_WS, "stages": 1, "producers": 2, "bf16_split": 3,
                                "async_copy": True, "swizzle": 4}),
    ("bf16x3 lockstep", {**_WS, "stages": 1, "bf16_split": 3}),
    ("bf16x3 lockstep w1", {**_WS, "stages": 1, "mma_window": 1, "bf16_split": 3}),
    ("bf16x6 ws1", {**_WS, "stages": 1, "producers": 1, "bf16_split": 6}),
]


def main() -> int:
    """Measure every point at every shape, print the table, write the JSON."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--params", action="append", default=[], help="a point's JSON (repeatable)")
    ap.add_argument("--label", action="append", default=[], help="a label per --params")
    ap.add_argument("--shapes", default="4096x4096x4096,8192x8192x8192")
    ap.add_argument("--min-ms", type=float, default=250.0, help="sustained run length")
    ap.add_argument("--cache", type=Path, default=Path("/tmp/tf-cache"))
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()

    points = [(label, GemmParams.from_dict(d).canonical()) for label, d in DEFAULT_POINTS]
    if args.params:
        points = [(args.label[i] if i < len(args.label) else f"point {i}",
                   FAMILY.params_from_dict(json.loads(t))) for i, t in enumerate(args.params)]
    shapes = [Shape.parse(s) for s in args.shapes.split(",") if s.strip()]
    compiler = Compiler(args.cache, arch="sm_90", workers=os.cpu_count() or 4)
    ev = GpuEvaluator(FAMILY, compiler, options=EvalOptions(timeout_s=120.0, edge_shapes=()))
    device = ev.device
    futures = {label: ev.compile(p) for label, p in points}
    rows: list[dict[str, Any]] = []
    baselines: dict[str, dict[str, Any]] = {}
    for shape in shapes:
        for label, params in points:
            row = speed_row(ev, label, params, futures[label].result(), shape,
                            min_ms=args.min_ms)
            rows.append(row)
            print(f"{shape} {label}: {row.get('status')} "
                  f"{(row.get('perf') or {}).get('avg_us')} us", file=sys.stderr, flush=True)
        baselines[str(shape)] = measure_baselines(shape, args.min_ms)
    ev.close()
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "precision_speed.json").write_text(json.dumps(
            {"device": device, "min_ms": args.min_ms, "rows": rows, "baselines": baselines},
            indent=1, default=str))
    print_table(rows, baselines, device, args.min_ms)
    return 0


if __name__ == "__main__":
    sys.exit(main())
