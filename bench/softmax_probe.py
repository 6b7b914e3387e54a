"""Probe the softmax family on a GPU, standalone (pycuda + numpy + torch, not the evaluator).

    python bench/softmax_probe.py [--out DIR] [--quick]

Renders a set of the family's points per shape, compiles them with nvcc (``-cubin
-arch=sm_90a``, 16 at a time), checks each on the awkward shapes and every distribution against
a float64 reference (outputs poisoned with NaN first), then times each at the sweep shapes
(CUDA events around each launch, L2 flushed before each, median of the repetitions) beside
``torch.softmax`` and a device-to-device copy of the same bytes (bandwidth = 2 x bytes / time).
A second round tries the cache hints and unroll factors around the best three points of every
shape. Prints a table (GB/s, % of copy, x torch) and writes everything to ``DIR/probe.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kernels.base import Dims, Rejection  # noqa: E402
from kernels.softmax import FAMILY, SoftmaxParams  # noqa: E402

SWEEP = ((65536, 128), (32768, 512), (16384, 1024), (8192, 4096), (8192, 8192), (4096, 32768),
         (2048, 65536), (1024, 131072), (256, 262144), (16, 262144))
EDGE = ((1, 1), (7, 33), (3, 1000003), (1, 4099), (5, 4098), (1, 262147), (64, 100))
TOL = 1e-4
REPS = 15
FLUSH_BYTES = 256 << 20


def candidates(rows: int, cols: int) -> list[SoftmaxParams]:
    """Points worth timing at ``rows x cols``: every row mapping with float4 accesses, the
    one-pass kernel with the fewest chunks that hold the row, the two-pass kernel."""
    out: list[SoftmaxParams] = []
    for r in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024):
        blocks = sorted({b for b in (r, 128, 256, 512) if b >= max(r, 32)})
        clusters = (1, 2, 4, 8) if r >= 128 else (1,)
        for block in blocks:
            for cl in clusters:
                if cl > 1 and block != r:
                    continue
                g = r * cl
                if g * 4 > 2 * max(cols, 4) and not (r == 1 and cols <= 4):
                    continue  # more threads than the row has vectors, twice over
                chunks = 1 << max(0, math.ceil(math.log2(max(1.0, cols / (g * 4)))))
                if chunks <= 32:
                    out.append(SoftmaxParams(block_threads=block, row_threads=r, cluster=cl,
                                             vec=4, passes=1, chunks=chunks))
                if cols / (g * 4) <= 256:  # a thread streams at most 256 float4
                    out.append(SoftmaxParams(block_threads=block, row_threads=r, cluster=cl,
                                             vec=4, passes=2, unroll=4))
    return [p for p in dict.fromkeys(out) if FAMILY.validate(p, "sm_90") is None]


def variants(p: SoftmaxParams) -> list[SoftmaxParams]:
    """The cache hints and unroll factors around ``p``."""
    out = [replace(p, load_hint=lh, store_hint=sh) for lh in (0, 1, 2, 3) for sh in (False, True)]
    if p.passes == 2:
        out += [replace(p, unroll=u) for u in (1, 2, 8)]
    out += [replace(p, vec=2, chunks=min(32, p.chunks * 2)), replace(p, vec=1, chunks=p.chunks)]
    return [q.canonical() for q in dict.fromkeys(out) if FAMILY.validate(q, "sm_90") is None]


def compile_all(points: list[SoftmaxParams], work: Path) -> dict[SoftmaxParams, dict[str, Any]]:
    """nvcc every point (16 at a time); the cubin path and ptxas's figures by point."""
    def one(p: SoftmaxParams) -> tuple[SoftmaxParams, dict[str, Any]]:
        h = FAMILY.source_hash(p)[:16]
        cu, cubin = work / f"{h}.cu", work / f"{h}.cubin"
        cu.write_text(FAMILY.render(p))
        done = subprocess.run(["nvcc", "-cubin", "-arch=sm_90a", "-O3", "-Xptxas", "-v",
                               "-o", str(cubin), str(cu)], capture_output=True, text=True)
        info: dict[str, Any] = {"ok": done.returncode == 0, "cubin": str(cubin)}
        if m := re.search(r"Used (\d+) registers", done.stderr):
            info["regs"] = int(m.group(1))
        if m := re.search(r"(\d+) bytes spill stores", done.stderr):
            info["spill"] = int(m.group(1))
        if not info["ok"]:
            info["error"] = done.stderr[-2000:]
        return p, info
    with ThreadPoolExecutor(16) as pool:
        return dict(pool.map(one, points))


def label(p: SoftmaxParams) -> str:
    """Short name of a point."""
    s = f"R{p.row_threads}/B{p.block_threads}"
    s += f"/C{p.cluster}" if p.cluster > 1 else ""
    s += f"/v{p.vec}/p{p.passes}"
    s += f"/k{p.chunks}" if p.passes == 1 else f"/u{p.unroll}"
    if p.load_hint or p.store_hint:
        s += f"/h{p.load_hint}{'s' if p.store_hint else ''}"
    return s


def main() -> int:  # noqa: C901, PLR0915 - one straight script
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    ap.add_argument("--quick", action="store_true", help="three shapes, few points")
    ap.add_argument("--budget-s", type=float, default=330.0,
                    help="past this many seconds: no second round, the table of what was timed")
    args = ap.parse_args()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)

    import numpy as np
    import torch

    torch.cuda.init()
    torch.zeros(1, device="cuda")
    import pycuda.driver as cuda

    cuda.init()
    ctx = cuda.Device(0).retain_primary_context()
    ctx.push()
    props = torch.cuda.get_device_properties(0)
    started = time.time()
    sweep = SWEEP[:3] if args.quick else SWEEP

    per_shape = {s: candidates(*s) for s in sweep}
    if args.quick:
        per_shape = {s: v[:6] for s, v in per_shape.items()}
    points = list(dict.fromkeys([FAMILY.baseline, *(p for v in per_shape.values() for p in v)]))
    work = Path(tempfile.mkdtemp())
    built = compile_all(points, work)
    print(f"compiled {len(points)} points in {time.time() - started:.1f} s", flush=True)
    modules: dict[str, Any] = {}

    def kernel(p: SoftmaxParams) -> Any:
        info = built[p]
        if info["cubin"] not in modules:
            modules[info["cubin"]] = cuda.module_from_file(info["cubin"]).get_function("softmax")
        return modules[info["cubin"]]

    def launch(p: SoftmaxParams, x: Any, y: Any, rows: int, cols: int) -> None:
        cfg = FAMILY.launch(p, Dims({"rows": rows, "cols": cols}))
        assert not isinstance(cfg, Rejection), cfg
        kernel(p)(np.uintp(x.data_ptr()), np.uintp(y.data_ptr()), np.int32(rows),
                  np.int32(cols), grid=cfg.grid, block=cfg.block)

    gen = torch.Generator(device="cuda")

    def fill(dist: str, rows: int, cols: int, seed: int) -> Any:
        gen.manual_seed(seed)
        if dist == "normal":
            return torch.randn(rows, cols, device="cuda", generator=gen)
        if dist == "large":
            return (torch.rand(rows, cols, device="cuda", generator=gen) * 2 - 1) * 1e4
        if dist == "constant":
            return torch.full((rows, cols), 3.0, device="cuda")
        x = torch.randn(rows, cols, device="cuda", generator=gen)
        mask = torch.rand(rows, cols, device="cuda", generator=gen) < 0.125
        mask[torch.arange(rows, device="cuda"), torch.arange(rows, device="cuda") % cols] = False
        return x.masked_fill(mask, float("-inf"))

    def check(p: SoftmaxParams, rows: int, cols: int, dist: str, seed: int,
              offset: int = 0) -> dict[str, Any]:
        base = torch.empty(rows * cols + offset, device="cuda")
        base[offset:] = fill(dist, rows, cols, seed).view(-1)
        x = base[offset:].view(rows, cols)        # offset 1: x and y aligned differently
        y = torch.full((rows * cols + 1,), float("nan"), device="cuda")[:rows * cols]
        launch(p, x, y, rows, cols)
        torch.cuda.synchronize()
        y = y.view(rows, cols).double()
        ref = torch.softmax(x.double(), -1)
        n = (x > float("-inf")).sum(-1, keepdim=True).clamp(min=1).double()
        scale = ref + 1.0 / n
        finite = bool(torch.isfinite(y).all())
        scaled = float(((y - ref).abs() / scale).max()) if finite else math.inf
        norm = float((y - ref).norm() / ref.norm()) if finite else math.inf
        zeros_ok = bool((y[x == float("-inf")] == 0).all()) if finite else False
        ok = finite and zeros_ok and scaled <= TOL and norm <= TOL
        return {"shape": f"{rows}x{cols}", "dist": dist, "offset": offset, "ok": ok,
                "scaled": scaled, "norm": norm, "finite": finite, "zeros": zeros_ok}

    def check_shapes(p: SoftmaxParams) -> list[tuple[int, int]]:
        shapes = list(EDGE)
        if p.passes == 1:
            shapes += [(3, max(1, p.capacity - 3)), (2, p.capacity + p.vec + 1)]
        shapes.append((2 * p.rows_per_cta + 1, 67))
        return shapes

    flush = torch.empty(FLUSH_BYTES // 4, device="cuda")

    def timed(fn: Any, reps: int = REPS) -> float:
        fn()
        fn()
        times = []
        for _ in range(reps):
            flush.fill_(1.0)
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b) * 1e3)
        return statistics.median(times)

    results: dict[str, Any] = {"device": props.name, "sm_count": props.multi_processor_count,
                               "torch": torch.__version__, "nvcc": subprocess.run(
                                   ["nvcc", "--version"], capture_output=True,
                                   text=True).stdout.strip().splitlines()[-1],
                               "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                               "compile": {label(p): {k: v for k, v in i.items() if k != "cubin"}
                                           for p, i in built.items()},
                               "checks": {}, "shapes": {}}
    failed: set[SoftmaxParams] = {p for p, i in built.items() if not i["ok"]}

    def verify(p: SoftmaxParams) -> bool:
        if p in failed:
            return False
        rows = []
        for i, (r, c) in enumerate(check_shapes(p)):
            # every distribution up to a few thousand columns; normal and -inf past that
            dists = ("normal", "large", "neg_inf", "constant") if c <= 4099 else (
                "normal", "neg_inf")
            for dist in dists:
                rows.append(check(p, r, c, dist, seed=100 + i))
        rows.append(check(p, 5, 4098, "normal", seed=7, offset=1))
        bad = [row for row in rows if not row["ok"]]
        results["checks"][label(p)] = {"cases": len(rows), "failed": bad,
                                      "worst_scaled": max(r["scaled"] for r in rows),
                                      "worst_norm": max(r["norm"] for r in rows)}
        if bad:
            failed.add(p)
            print(f"  FAIL {label(p)}: {bad[:2]}", flush=True)
        return not bad

    for p in points:
        verify(p)
    print(f"checked {len(points)} points, {len(failed)} failed, "
          f"{time.time() - started:.1f} s", flush=True)

    def time_shape(rows: int, cols: int, pts: list[SoftmaxParams], entry: dict[str, Any]) -> None:
        x = torch.randn(rows, cols, device="cuda")
        y = torch.empty_like(x)
        ref = torch.softmax(x.double(), -1)
        for p in pts:
            if p in failed or label(p) in entry["points"]:
                continue
            y.fill_(float("nan"))
            launch(p, x, y, rows, cols)
            torch.cuda.synchronize()
            err = float(((y.double() - ref).abs() / (ref + 1.0 / cols)).max())
            us = timed(lambda p=p: launch(p, x, y, rows, cols))
            entry["points"][label(p)] = {"us": us, "err": err, "params": p.to_dict(),
                                        "regs": built[p].get("regs")}

    def time_again(p: SoftmaxParams, rows: int, cols: int) -> float:
        xb = torch.randn(rows, cols, device="cuda")
        yb = torch.empty_like(xb)
        return timed(lambda: launch(p, xb, yb, rows, cols))

    for rows, cols in sweep:
        key = f"{rows}x{cols}"
        x = torch.randn(rows, cols, device="cuda")
        y = torch.empty_like(x)
        nbytes = x.numel() * 4
        entry: dict[str, Any] = {"bytes": 2 * nbytes, "points": {}}
        entry["copy_us"] = timed(lambda x=x, y=y, n=nbytes: cuda.memcpy_dtod(y.data_ptr(),
                                                                         x.data_ptr(), n))
        entry["torch_us"] = timed(lambda x=x: torch.softmax(x, -1))
        entry["copy_us_again"] = timed(lambda x=x, y=y, n=nbytes: cuda.memcpy_dtod(
            y.data_ptr(), x.data_ptr(), n))
        del x, y
        pts = per_shape[(rows, cols)]
        if rows >= 16384:
            pts = [FAMILY.baseline, *pts]
        time_shape(rows, cols, pts, entry)
        # round two: hints, unroll and widths around the best three (while time is left)
        best = sorted(entry["points"].items(), key=lambda kv: kv[1]["us"])[:3]
        if time.time() - started > args.budget_s:
            best = []
        more = [q for _, e in best for q in variants(SoftmaxParams(**e["params"]))]
        more = [q for q in dict.fromkeys(more) if q not in built]
        if more:
            built.update(compile_all(more, work))
            for q in more:
                verify(q)
            time_shape(rows, cols, more, entry)
        top = min(entry["points"].items(), key=lambda kv: kv[1]["us"])
        entry["best"] = top[0]
        entry["best_us_again"] = time_again(SoftmaxParams(**top[1]["params"]), rows, cols)
        results["shapes"][key] = entry
        gbs = entry["bytes"] / top[1]["us"] / 1e3
        copy = entry["bytes"] / entry["copy_us"] / 1e3
        print(f"{key:>12} best {top[0]:<28} {top[1]['us']:9.1f} us {gbs:7.0f} GB/s "
              f"{100 * gbs / copy:5.1f}% copy  x{entry['torch_us'] / top[1]['us']:.2f} torch  "
              f"({time.time() - started:.0f} s)", flush=True)
        (out_dir / "probe.json").write_text(json.dumps(results, indent=1))

    print()
    print(f"{results['device']}, {results['nvcc']}, torch {results['torch']}, {results['date']}")
    print(f"{'shape':>12} {'copy GB/s':>9} {'torch GB/s':>10} {'best GB/s':>9} {'% copy':>6} "
          f"{'x torch':>7}  best point")
    ratios = []
    for key, e in results["shapes"].items():
        us = e["points"][e["best"]]["us"]
        copy, tor, best = (e["bytes"] / t / 1e3 for t in (e["copy_us"], e["torch_us"], us))
        ratios.append(e["torch_us"] / us)
        print(f"{key:>12} {copy:9.0f} {tor:10.0f} {best:9.0f} {100 * best / copy:6.1f} "
              f"{e['torch_us'] / us:7.2f}  {e['best']}")
    print(f"geometric mean x torch: {math.exp(sum(map(math.log, ratios)) / len(ratios)):.3f}; "
          f"{len(failed)} points failed a check")
    for p in sorted(failed, key=label):
        print("  failed:", label(p), (results["checks"].get(label(p)) or {}).get("failed", [])[:1]
              or built[p].get("error", "")[-300:])
    (out_dir / "probe.json").write_text(json.dumps(results, indent=1))
    ctx.pop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
