"""Where a kernel's time goes, from Nsight Compute: throughput, pipes and warp stall reasons.

    python bench/ncu_sections.py --params '{"tf32x3": true, "wgmma": 128, ...}' --label wg \\
        [--params ... --label ...] [--shape 4096x4096x4096] [--out DIR]
    python bench/ncu_sections.py --kernel softmax --shape 65536x128 --params '{...}' \\
        --vendor 'regex:softmax'

For each point of ``--kernel``'s family (default ``gemm_bias_relu``): compile it (the family's
arch, ``sm_90a`` for wgmma), then run ``ncu`` with the
SpeedOfLight, ComputeWorkloadAnalysis, MemoryWorkloadAnalysis, Occupancy and WarpStateStats
sections on :mod:`worker.ncu_launch` (the second of two launches), raw page, CSV. Metric names
are matched by pattern, not listed, so that a metric this ncu version names differently is left
out rather than failing the run: the duration, SM and memory throughput, every pipe utilization
over 1 % (the tensor pipe of an HGMMA kernel among them), achieved occupancy, and the warp stall
reasons (cycles per issued instruction, largest first). The campaign's light profile
(``worker/ncu.py``) keeps five fixed figures; this is the deeper look a kernel engineer takes
before changing a kernel's structure. ``--vendor FILTER`` profiles the vendor baseline's own
kernel the same way (``python -m worker.vendor`` under ncu, ``-k FILTER``, the last matching
launch): the same sections beside ours, L2 flushed before each profiled kernel (ncu's default
cache control) as in the protocol. Writes each point's whole CSV under ``--out`` and prints a
table last.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kernels import get_family  # noqa: E402
from kernels.base import Dims, Rejection  # noqa: E402
from kernels.family import KernelFamily  # noqa: E402
from worker.compile import Compiler, compile_candidate  # noqa: E402
from worker.ncu import (  # noqa: E402
    PROJECT_ROOT,
    launch_command,
    launch_spec,
    ncu_env,
    ncu_path,
    number,
    raw_rows,
)

SECTIONS = ("SpeedOfLight", "ComputeWorkloadAnalysis", "MemoryWorkloadAnalysis", "Occupancy",
            "WarpStateStats")
STALL = re.compile(r"^smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio$")
PIPE = re.compile(r"^sm__inst_executed_pipe_(\w+?)\.avg\.pct_of_peak_sustained_active$|"
                  r"^sm__pipe_(\w+?)_cycles_active\.avg\.pct_of_peak_sustained_active$")
#: the duration's unit as ncu writes it (``ns`` on the lent H200, ``nsecond`` in older versions)
TIME_UNIT_US = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3,
                "s": 1e6, "second": 1e6}
HEADLINE = {
    "duration_us": "gpu__time_duration.sum",
    "sm_throughput_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "memory_throughput_pct": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "achieved_occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "dram_read_mb": "dram__bytes_read.sum",
    "dram_write_mb": "dram__bytes_write.sum",
    "regs": "launch__registers_per_thread",
    "grid": "launch__grid_size",
    "block": "launch__block_size",
    "clusters_max_active": "launch__cluster_max_active",
    "sm_active_cycles_min": "sm__cycles_active.min",
    "sm_active_cycles_avg": "sm__cycles_active.avg",
    "sm_active_cycles_max": "sm__cycles_active.max",
}
#: byte units as ncu writes them, in MB
BYTE_UNIT_MB = {"byte": 1e-6, "Kbyte": 1e-3, "Mbyte": 1.0, "Gbyte": 1e3, "KB": 1e-3, "MB": 1.0,
                "GB": 1e3}


def summarize(values: dict[str, str], units: dict[str, str]) -> dict[str, Any]:
    """The headline figures, the busy pipes and the stall reasons of one kernel."""
    out: dict[str, Any] = {}
    for key, metric in HEADLINE.items():
        v = number(values.get(metric, ""))
        unit = units.get(metric, "").strip()
        if v is not None and key == "duration_us":
            v = v * TIME_UNIT_US.get(unit, 1.0)
        elif v is not None and key.endswith("_mb"):
            v = round(v * BYTE_UNIT_MB.get(unit, 1e-6), 2)
        out[key] = v
    pipes = {}
    for metric, text in values.items():
        m = PIPE.match(metric)
        v = number(text)
        if m and v is not None and v > 1.0:
            pipes[m.group(1) or m.group(2)] = round(v, 1)
    out["pipes_pct"] = dict(sorted(pipes.items(), key=lambda kv: -kv[1]))
    stalls = {}
    for metric, text in values.items():
        m = STALL.match(metric)
        v = number(text)
        if m and v is not None and v > 0.0:
            stalls[m.group(1)] = round(v, 3)
    out["stalls_cycles_per_issue"] = dict(sorted(stalls.items(), key=lambda kv: -kv[1]))
    return out


def sm_activity(row: dict[str, Any]) -> str:
    """How evenly the SMs were busy: the mean SM's active cycles against the busiest one's, the
    idlest SM's, and the clusters that fit the GPU at once (a cluster launch leaves the SMs idle
    that its GPCs cannot fill with whole clusters)."""
    lo, avg, hi = (row.get(f"sm_active_cycles_{k}") for k in ("min", "avg", "max"))
    if not hi or avg is None or lo is None:
        return "SM activity: not reported"
    clusters = row.get("clusters_max_active")
    return (f"SM activity: mean {100 * avg / hi:.1f} % of the busiest SM's cycles, idlest "
            f"{100 * lo / hi:.1f} %" + (f"; at most {clusters:.0f} clusters active"
                                         if clusters else ""))


def run_ncu(label: str, kernel_filter: str, program: list[str], out: Path, gpu: str,
            launch_skip: int = 1) -> dict[str, Any]:
    """Profile the last kernel of ``program`` that ``kernel_filter`` matches (skipping the first
    ``launch_skip``); its summary, or why there is none."""
    exe = ncu_path()
    if exe is None:
        return {"label": label, "error": "Nsight Compute (ncu) is not installed here"}
    cmd = [exe, "--clock-control", "none", "--target-processes", "all",
           "-k", kernel_filter, "--launch-skip", str(launch_skip), "--launch-count", "1",
           "--csv", "--page", "raw", *[a for s in SECTIONS for a in ("--section", s)], *program]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=ncu_env(gpu),
                          cwd=str(PROJECT_ROOT))
    (out / f"{label}.csv").write_text(done.stdout)
    try:
        values, units = raw_rows(done.stdout)
    except ValueError:
        why = (done.stderr.strip().splitlines() or ["no output"])[-1][:300]
        return {"label": label, "error": f"ncu failed: {why}"}
    return {"label": label, **summarize(values, units)}


def profile(label: str, family: KernelFamily, params: Any, dims: Dims, compiler: Compiler,
            out: Path, gpu: str) -> dict[str, Any]:
    """Compile and profile one point; its summary (or why there is none)."""
    compiled = compile_candidate(compiler, family, params)
    if compiled.status != "ok" or compiled.cubin_path is None:
        return {"label": label, "error": f"compile {compiled.status}: {compiled.error}"}
    launch = family.launch(params, dims)
    if isinstance(launch, Rejection):
        return {"label": label, "error": launch.message}
    spec = out / f"{label}.spec.json"
    spec.write_text(json.dumps(launch_spec(compiled.cubin_path, launch.kernel_name,
                                           family.signature.resolve(dims), launch.to_dict())))
    row = run_ncu(label, launch.kernel_name, launch_command(str(spec)), out, gpu)
    return {**row, "params": params.to_dict()} if "error" not in row else row


def profile_vendor(family: KernelFamily, dims: Dims, kernel_filter: str, out: Path,
                   gpu: str) -> dict[str, Any]:
    """The vendor baseline's kernel under ncu: ``worker.vendor`` runs it a few hundred times
    (its warm-up and timed runs); the second matching launch is profiled."""
    program = [sys.executable, "-m", "worker.vendor", "--family", family.name, str(dims)]
    label = f"vendor-{family.vendor.name if family.vendor else 'none'}".replace(" ", "_")
    return run_ncu(label[:60], kernel_filter, program, out, gpu)


def main() -> int:
    """Profile every point, print the table last."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--params", action="append", default=[], help="JSON of a point (repeatable)")
    ap.add_argument("--label", action="append", default=[], help="label per --params")
    ap.add_argument("--kernel", default="gemm_bias_relu", help="kernel family")
    ap.add_argument("--shape", default=None, help="the family's shape text (default: its own)")
    ap.add_argument("--vendor", default=None, metavar="FILTER",
                    help="also profile the vendor baseline's kernel matching this ncu -k filter")
    ap.add_argument("--out", type=Path, default=Path("ncu-sections"))
    ap.add_argument("--gpu", default="0")
    ap.add_argument("--cache", type=Path, default=Path("/tmp/tf-cache"))
    args = ap.parse_args()
    if not args.params and not args.vendor:
        ap.error("give at least one --params (or --vendor)")
    family = get_family(args.kernel)
    dims = family.parse_dims(args.shape) if args.shape else family.default_dims
    args.out.mkdir(parents=True, exist_ok=True)
    compiler = Compiler(args.cache, arch="sm_90")
    rows = []
    for i, text in enumerate(args.params):
        label = args.label[i] if i < len(args.label) else f"point{i}"
        rows.append(profile(label, family, family.params_from_dict(json.loads(text)), dims,
                            compiler, args.out, args.gpu))
    if args.vendor:
        rows.append(profile_vendor(family, dims, args.vendor, args.out, args.gpu))
    (args.out / "summary.json").write_text(json.dumps(rows, indent=1) + "\n")
    for r in rows:
        if "error" in r:
            print(f"{r['label']}: {r['error']}")
            continue
        top = list(r["stalls_cycles_per_issue"].items())[:6]
        stalls = ", ".join(f"{k} {v:.2f}" for k, v in top)
        pipes = ", ".join(f"{k} {v:.0f}%" for k, v in list(r["pipes_pct"].items())[:5])
        print(f"{r['label']}: {r['duration_us'] or 0:.1f} us · SM "
              f"{r['sm_throughput_pct'] or 0:.0f}% · memory "
              f"{r['memory_throughput_pct'] or 0:.0f}% · occupancy "
              f"{r['achieved_occupancy_pct'] or 0:.0f}% · {r['regs']} regs · grid "
              f"{r['grid']} x {r['block']} · DRAM {r['dram_read_mb']} MB read, "
              f"{r['dram_write_mb']} MB written\n"
              f"  {sm_activity(r)}\n"
              f"  pipes: {pipes}\n  stalls (cycles per issued instruction): {stalls}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
