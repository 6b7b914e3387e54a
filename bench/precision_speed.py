"""The precision-split wgmma kernels against cuBLAS fp32 and three cuBLAS bf16 GEMMs composed.

    python bench/precision_speed.py --shapes 4096x4096x4096,8192x8192x8192 --out out/
    python bench/precision_speed.py --params '{...}' --label mine --out out/

For every (point, shape), in one run on one GPU: correctness at the shape (one distribution:
the tests check the rest) and the protocol's flushed median (L2 flushed before each timed
launch, 3 runs of adaptive repetitions) in the isolated child, then the sustained rate
(back-to-back launches for at least ``--min-ms``). Beside them, each in a process of its own:
cuBLAS fp32 (TF32 off, ``addmm`` + ``relu_``) and the composition a user can write today,
relu(a_hi·b_hi + a_hi·b_lo + a_lo·b_hi + bias) from three cuBLAS bf16 GEMMs with fp32 outputs
(``torch.mm(..., out_dtype=torch.float32)`` where torch has it, else bf16 GEMMs summed in fp32:
the JSON says which; the split of A and B into bf16 parts is made once, outside the timing),
both flushed and sustained. Prints a table, writes ``precision_speed.json`` under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.evaluation import EvalOptions  # noqa: E402
from kernels.gemm_bias_relu import FAMILY, GemmParams  # noqa: E402
from kernels.gemm_bias_relu.shape import Shape  # noqa: E402
from worker.compile import Compiler  # noqa: E402
from worker.evaluate import GpuEvaluator  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
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


def prepare_composition(torch: Any, dims: dict[str, int]) -> Callable[[], Any]:
    """Inputs for ``dims`` split into bf16 parts, and one run of the three-GEMM composition."""
    m, n, k = dims["m"], dims["n"], dims["k"]
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(0)
    a = torch.randn(m, k, device=dev, generator=gen)
    b = torch.randn(k, n, device=dev, generator=gen)
    bias = torch.randn(n, device=dev, generator=gen)
    a_hi = a.to(torch.bfloat16)
    a_lo = (a - a_hi.float()).to(torch.bfloat16)
    b_hi = b.to(torch.bfloat16)
    b_lo = (b - b_hi.float()).to(torch.bfloat16)
    f32 = torch.float32
    try:
        torch.mm(a_hi[:16, :16], b_hi[:16, :16], out_dtype=f32)
        mode = "torch.mm(out_dtype=float32)"
    except (TypeError, RuntimeError):
        mode = "bf16 torch.mm, then .float() sums"
    prepare_composition.mode = mode  # type: ignore[attr-defined]

    if mode.startswith("torch.mm(out_dtype"):
        def once() -> Any:
            y = torch.mm(a_hi, b_hi, out_dtype=f32)
            y += torch.mm(a_hi, b_lo, out_dtype=f32)
            y += torch.mm(a_lo, b_hi, out_dtype=f32)
            return y.add_(bias).relu_()
    else:
        def once() -> Any:
            y = torch.mm(a_hi, b_hi).float()
            y += torch.mm(a_hi, b_lo).float()
            y += torch.mm(a_lo, b_hi).float()
            return y.add_(bias).relu_()
    return once


def composition(shape: Shape, min_ms: float) -> dict[str, Any]:
    """The composition's flushed median and sustained rate, in a process of its own."""
    done = subprocess.run([sys.executable, __file__, "--composition", str(shape),
                           "--min-ms", str(min_ms)], capture_output=True, text=True,
                          timeout=600, cwd=str(ROOT))
    lines = done.stdout.strip().splitlines()
    return json.loads(lines[-1]) if lines else {"error": done.stderr[-300:]}


def cublas(shape: Shape, min_ms: float) -> dict[str, Any]:
    """cuBLAS fp32's flushed median and sustained rate, in a process of its own."""
    done = subprocess.run([sys.executable, "-m", "worker.vendor", "--family", FAMILY.name,
                           str(shape), "--sustain-ms", str(min_ms)], capture_output=True,
                          text=True, timeout=600, cwd=str(ROOT))
    lines = done.stdout.strip().splitlines()
    return json.loads(lines[-1]) if lines else {"error": done.stderr[-300:]}


def _composition_main(shape_text: str, min_ms: float) -> int:
    from worker.vendor import measure_torch

    dims = Shape.parse(shape_text)
    try:
        out = measure_torch(prepare_composition, dims.as_dict(), sustain_ms=min_ms)
        out["mode"] = getattr(prepare_composition, "mode", None)
    except Exception as exc:  # no torch, no GPU: the table says why
        out = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    sys.stdout.write(json.dumps(out) + "\n")
    return 0


def main() -> int:
    """Measure every point at every shape, print the table, write the JSON."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--params", action="append", default=[], help="a point's JSON (repeatable)")
    ap.add_argument("--label", action="append", default=[], help="a label per --params")
    ap.add_argument("--shapes", default="4096x4096x4096,8192x8192x8192")
    ap.add_argument("--min-ms", type=float, default=250.0, help="sustained run length")
    ap.add_argument("--cache", type=Path, default=Path("/tmp/tf-cache"))
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--composition", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.composition:
        return _composition_main(args.composition, args.min_ms)

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
        flops = 2.0 * shape.m * shape.n * shape.k
        for label, params in points:
            comp = futures[label].result()
            row: dict[str, Any] = {"label": label, "shape": str(shape),
                                   "params": params.to_dict(), "compile": comp.status,
                                   "regs": comp.regs_per_thread, "spill_bytes": comp.spill_bytes}
            if comp.status == "ok":
                m = ev.measure(params, comp, shape=shape, iteration=0, seed=11)
                row.update(status=m.status, perf=m.perf, error=m.error,
                           correctness=m.correctness)
                if m.status == "ok":
                    row["sustained"] = ev.sustained(params, comp, shape=shape,
                                                    min_ms=args.min_ms)
            else:
                row.update(status=comp.status, error=comp.error)
            rows.append(row)
            print(f"{shape} {label}: {row.get('status')} "
                  f"{(row.get('perf') or {}).get('avg_us')} us", file=sys.stderr, flush=True)
        baselines[str(shape)] = {"cublas": cublas(shape, args.min_ms),
                                 "composition": composition(shape, args.min_ms),
                                 "flops": flops}
    ev.close()
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "precision_speed.json").write_text(json.dumps(
            {"device": device, "min_ms": args.min_ms, "rows": rows, "baselines": baselines},
            indent=1, default=str))
    print_table(rows, baselines, device, args.min_ms)
    return 0


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


if __name__ == "__main__":
    sys.exit(main())
