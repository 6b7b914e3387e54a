"""Where a kernel's time goes, from Nsight Compute: throughput, pipes and warp stall reasons.

    python bench/ncu_sections.py --params '{"tf32x3": true, "wgmma": 128, ...}' --label wg \\
        [--params ... --label ...] [--shape 4096x4096x4096] [--out DIR]

For each point: compile it (the family's arch, ``sm_90a`` for wgmma), then run ``ncu`` with the
SpeedOfLight, ComputeWorkloadAnalysis, MemoryWorkloadAnalysis, Occupancy and WarpStateStats
sections on :mod:`worker.ncu_launch` (the second of two launches), raw page, CSV. Metric names
are matched by pattern, not listed, so that a metric this ncu version names differently is left
out rather than failing the run: the duration, SM and memory throughput, every pipe utilization
over 1 % (the tensor pipe of an HGMMA kernel among them), achieved occupancy, and the warp stall
reasons (cycles per issued instruction, largest first). The campaign's light profile
(``worker/ncu.py``) keeps five fixed figures; this is the deeper look a kernel engineer takes
before changing a kernel's structure. Writes each point's whole CSV under ``--out`` and prints a
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

from kernels.base import Rejection  # noqa: E402
from kernels.gemm_bias_relu import FAMILY  # noqa: E402
from kernels.gemm_bias_relu.shape import Shape  # noqa: E402
from worker.compile import Compiler, compile_candidate  # noqa: E402
from worker.ncu import (  # noqa: E402
    PROJECT_ROOT,
    launch_command,
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
}


def summarize(values: dict[str, str], units: dict[str, str]) -> dict[str, Any]:
    """The headline figures, the busy pipes and the stall reasons of one kernel."""
    out: dict[str, Any] = {}
    for key, metric in HEADLINE.items():
        v = number(values.get(metric, ""))
        if v is not None and key == "duration_us":
            unit = units.get(metric, "").strip()
            v = v * TIME_UNIT_US.get(unit, 1.0)
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


def profile(label: str, params: Any, shape: Shape, compiler: Compiler, out: Path,
            gpu: str) -> dict[str, Any]:
    """Compile and profile one point; its summary (or why there is none)."""
    compiled = compile_candidate(compiler, FAMILY, params)
    if compiled.status != "ok" or compiled.cubin_path is None:
        return {"label": label, "error": f"compile {compiled.status}: {compiled.error}"}
    launch = FAMILY.launch(params, shape)
    if isinstance(launch, Rejection):
        return {"label": label, "error": launch.message}
    exe = ncu_path()
    if exe is None:
        return {"label": label, "error": "Nsight Compute (ncu) is not installed here"}
    cmd = [exe, "--clock-control", "none", "--target-processes", "all",
           "-k", launch.kernel_name, "--launch-skip", "1", "--launch-count", "1",
           "--csv", "--page", "raw", *[a for s in SECTIONS for a in ("--section", s)],
           *launch_command(compiled.cubin_path, launch.kernel_name,
                           (shape.m, shape.n, shape.k), launch.to_dict())]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=ncu_env(gpu),
                          cwd=str(PROJECT_ROOT))
    (out / f"{label}.csv").write_text(done.stdout)
    try:
        values, units = raw_rows(done.stdout)
    except ValueError:
        why = (done.stderr.strip().splitlines() or ["no output"])[-1][:300]
        return {"label": label, "error": f"ncu failed: {why}"}
    return {"label": label, "params": params.to_dict(), "regs": compiled.regs_per_thread,
            **summarize(values, units)}


def main() -> int:
    """Profile every point, print the table last."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--params", action="append", default=[], help="JSON of a point (repeatable)")
    ap.add_argument("--label", action="append", default=[], help="label per --params")
    ap.add_argument("--shape", default="4096x4096x4096")
    ap.add_argument("--out", type=Path, default=Path("ncu-sections"))
    ap.add_argument("--gpu", default="0")
    ap.add_argument("--cache", type=Path, default=Path("/tmp/tf-cache"))
    args = ap.parse_args()
    if not args.params:
        ap.error("give at least one --params")
    shape = Shape.parse(args.shape)
    args.out.mkdir(parents=True, exist_ok=True)
    compiler = Compiler(args.cache, arch="sm_90")
    rows = []
    for i, text in enumerate(args.params):
        label = args.label[i] if i < len(args.label) else f"point{i}"
        rows.append(profile(label, FAMILY.params_from_dict(json.loads(text)), shape, compiler,
                            args.out, args.gpu))
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
              f"{r['achieved_occupancy_pct'] or 0:.0f}% · {r['regs']} regs\n"
              f"  pipes: {pipes}\n  stalls (cycles per issued instruction): {stalls}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
