"""softmax's held row beside Triton's row kernel: our best points with and without
``max_first`` and ``ptx_stores``, and Nsight Compute on ours and Triton's at one shape.

    python bench/softmax_gap.py points --out points.json
    python bench/softmax_gap.py rows --out points.json
    python bench/softmax_gap.py ncu --shape 16384x1024 --out DIR [--gpu 0]
    python bench/softmax_gap.py triton --shape 16384x1024 --block 1024 --warps 4

``points`` writes the points to time as ``bench/peer_quality.py --points`` takes them (the
fastest points of the campaigns of 2026-12-04 at 06a5e5c at 65536x128, 32768x512, 16384x1024
and 8192x4096, and Triton's arrangement at 16384x1024, each as it was, with ``max_first``, with
``ptx_stores`` and with both), every one validated first. ``ncu`` profiles, at ``--shape``, the
points of that shape as they were and with both moves (``bench/ncu_sections.py``'s sections and
summary, L2 flushed before the profiled launch, ``--clock-control none``) and Triton's
``softmax_row_kernel`` (one program a row, 4 and 2 warps: this script's ``triton`` mode is the
program ncu runs), then prints a table of the figures that explain a memory-bound kernel: time,
memory throughput, achieved occupancy, registers and the largest warp stall reasons.
``triton`` launches Triton's row kernel a few times (ncu profiles the second).

``rows`` writes, in the same form, the points of ``aligned_rows`` and ``one_pass_grid`` (the
row's head and tail, and the grid-stride loop, taken out): the bases of ``points`` at
65536x128, 32768x512 and 16384x1024 (the 64- and 128-thread rows) and the 8192x4096 control,
each with both earlier moves, then with the head and tail out, with the grid-stride loop out
too, and with both new moves without ``ptx_stores``.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kernels.softmax import FAMILY, SoftmaxParams  # noqa: E402
from kernels.softmax.rules import pow2_at_least  # noqa: E402

P = SoftmaxParams
#: the points the new moves start from, by shape: (label, point); the first of each shape was
#: its fastest in the campaigns or the replay dataset of 2026-12-04 (06a5e5c)
BASES: dict[str, list[tuple[str, SoftmaxParams]]] = {
    "65536x128": [("R8/B64/k4", P(block_threads=64, row_threads=8, vec=4, passes=1, chunks=4))],
    "32768x512": [("R32/B256/k4", P(block_threads=256, row_threads=32, vec=4, passes=1,
                                    chunks=4))],
    "16384x1024": [("R64/B64/k4", P(block_threads=64, row_threads=64, vec=4, passes=1,
                                    chunks=4)),
                   ("R128/B128/k2", P(block_threads=128, row_threads=128, vec=4, passes=1,
                                      chunks=2)),
                   ("R32/B256/k8", P(block_threads=256, row_threads=32, vec=4, passes=1,
                                     chunks=8))],
    "8192x4096": [("R256/B256/k4/m4", P(block_threads=256, row_threads=256, vec=4, passes=1,
                                        chunks=4, min_ctas=4)),
                  ("R256/B256/k4", P(block_threads=256, row_threads=256, vec=4, passes=1,
                                     chunks=4))],
}
#: the variants of a base point: its label's suffix and the fields set
VARIANTS: tuple[tuple[str, dict[str, bool]], ...] = (
    ("", {}), ("+mf", {"max_first": True}), ("+ps", {"ptx_stores": True}),
    ("+mf+ps", {"max_first": True, "ptx_stores": True}))
#: bases that get only the old point and both moves (fewer points to time)
BOTH_ONLY = ("R32/B256/k8", "R256/B256/k4")
#: the variants of ``rows``: with ``max_first`` and ``ptx_stores``, then the row's head and tail
#: out (+al), the grid-stride loop out too (+og), and both without ``ptx_stores`` (with no head
#: the C++ float4 stores stay whole: the held path's SASS is 171 instructions and 22 registers
#: at 128 threads, Triton's count)
ROW_VARIANTS: tuple[tuple[str, dict[str, bool]], ...] = (
    ("+mf+ps", {"max_first": True, "ptx_stores": True}),
    ("+mf+ps+al", {"max_first": True, "ptx_stores": True, "aligned_rows": True}),
    ("+mf+ps+al+og", {"max_first": True, "ptx_stores": True, "aligned_rows": True,
                      "one_pass_grid": True}),
    ("+mf+al+og", {"max_first": True, "aligned_rows": True, "one_pass_grid": True}))
#: bases ``rows`` leaves out (the slowest of their shape)
ROWS_LEFT_OUT = ("R32/B256/k8", "R256/B256/k4/m4")
#: the warp counts of Triton's row kernel under ncu (BLOCK: the power of two at least cols)
TRITON_WARPS = (4, 2)


def gap_points(rows: bool = False) -> list[dict[str, Any]]:
    """Every point to time (``rows``: those of the ``rows`` mode), as ``{"kernel", "label",
    "shape", "params"}``; ValueError naming an invalid one."""
    out: list[dict[str, Any]] = []
    for shape, bases in BASES.items():
        for label, base in bases:
            if rows and label in ROWS_LEFT_OUT:
                continue
            for suffix, fields in ROW_VARIANTS if rows else VARIANTS:
                if not rows and label in BOTH_ONLY and suffix in ("+mf", "+ps"):
                    continue
                point = replace(base, **fields)
                rejection = FAMILY.validate(point)
                if rejection is not None:
                    raise ValueError(f"{shape} {label}{suffix}: {rejection.message}")
                if point.canonical() != point:
                    raise ValueError(f"{shape} {label}{suffix}: not canonical")
                out.append({"kernel": "softmax", "label": f"{label}{suffix}", "shape": shape,
                            "params": point.to_dict()})
    return out


def run_triton(shape: str, block: int, warps: int, launches: int) -> int:
    """Launch Triton's row kernel ``launches`` times at ``shape`` (the program ncu profiles)."""
    import torch

    from bench import peer_triton

    dims = FAMILY.parse_dims(shape)
    x = torch.randn(dims["rows"], dims["cols"], device="cuda", dtype=torch.float32)
    y = torch.empty_like(x)
    for _ in range(launches):
        peer_triton.softmax(x, y, "row", block, warps)
    torch.cuda.synchronize()
    ref = torch.softmax(x.double(), -1)
    err = float((y.double() - ref).abs().max())
    print(f"triton row kernel {shape} BLOCK {block} w{warps}: {launches} launches, max abs "
          f"error {err:.2e}")
    return 0 if err < 1e-5 else 1


def table(rows: list[dict[str, Any]]) -> str:
    """One line a kernel: time, memory throughput, occupancy, registers, the top stall
    reasons."""
    lines = [f"{'kernel':<20} {'us':>6} {'mem %':>6} {'occ %':>6} "
             f"{'regs':>4}  stalls (cycles per issued instruction)"]
    for r in rows:
        if "error" in r:
            lines.append(f"{r['label']:<20} {r['error']}")
            continue
        stalls = ", ".join(f"{k} {v:.2f}"
                           for k, v in list(r["stalls_cycles_per_issue"].items())[:4])
        lines.append(f"{r['label']:<20} {r['duration_us'] or 0:6.1f} "
                     f"{r['memory_throughput_pct'] or 0:6.1f} "
                     f"{r['achieved_occupancy_pct'] or 0:6.1f} {r['regs'] or 0:4.0f}  {stalls}")
    return "\n".join(lines)


def profile_all(shape: str, out: Path, gpu: str, cache: Path) -> int:
    """ncu on our points at ``shape`` and on Triton's row kernel; the table, ``summary.json``."""
    from bench.ncu_sections import profile, run_ncu
    from kernels import get_family
    from worker.compile import Compiler

    family = get_family("softmax")
    dims = family.parse_dims(shape)
    out.mkdir(parents=True, exist_ok=True)
    compiler = Compiler(cache, arch="sm_90")
    rows: list[dict[str, Any]] = []
    for entry in gap_points():
        base, _, moves = entry["label"].partition("+")
        if entry["shape"] != shape or base in BOTH_ONLY or moves not in ("", "mf+ps"):
            continue
        label = entry["label"].replace("/", "-")
        rows.append(profile(label, family, family.params_from_dict(entry["params"]), dims,
                            compiler, out, gpu))
        print(table(rows[-1:]).splitlines()[-1], flush=True)
    block = pow2_at_least(dims["cols"])
    for warps in TRITON_WARPS:
        program = [sys.executable, str(Path(__file__).resolve()), "triton", "--shape", shape,
                   "--block", str(block), "--warps", str(warps), "--launches", "3"]
        rows.append(run_ncu(f"triton-w{warps}", "regex:softmax_row_kernel", program, out, gpu))
        print(table(rows[-1:]).splitlines()[-1], flush=True)
    (out / "summary.json").write_text(json.dumps(rows, indent=1) + "\n")
    print(f"\nNsight Compute at {shape} (L2 flushed, clocks uncontrolled):")
    print(table(rows))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    pts = sub.add_parser("points", help="write the points for bench/peer_quality.py --points")
    pts.add_argument("--out", type=Path, required=True)
    rws = sub.add_parser("rows", help="write the aligned_rows / one_pass_grid points")
    rws.add_argument("--out", type=Path, required=True)
    prof = sub.add_parser("ncu", help="Nsight Compute on ours and Triton's at one shape")
    prof.add_argument("--shape", default="16384x1024")
    prof.add_argument("--out", type=Path, required=True)
    prof.add_argument("--gpu", default="0")
    prof.add_argument("--cache", type=Path, default=Path("/tmp/tf-cache"))
    tri = sub.add_parser("triton", help="launch Triton's row kernel (the program ncu runs)")
    tri.add_argument("--shape", default="16384x1024")
    tri.add_argument("--block", type=int, default=1024)
    tri.add_argument("--warps", type=int, default=4)
    tri.add_argument("--launches", type=int, default=3)
    args = ap.parse_args(argv)
    if args.mode in ("points", "rows"):
        entries = gap_points(rows=args.mode == "rows")
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(entries, indent=1) + "\n")
        print(f"{len(entries)} points at {len({e['shape'] for e in entries})} shapes")
        return 0
    if args.mode == "ncu":
        return profile_all(args.shape, args.out, args.gpu, args.cache)
    return run_triton(args.shape, args.block, args.warps, args.launches)


if __name__ == "__main__":
    sys.exit(main())
