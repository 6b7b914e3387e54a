"""Nsight Compute figures for one candidate (``profile: full``), each named by its source.

Runs ``ncu`` on :mod:`worker.ncu_launch`, far slower than a timed launch
(docs/GPU.md#what-each-step-costs), so campaigns profile selectively: every candidate with
``profile=full``, otherwise none.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

#: feedback field -> Nsight Compute metric
METRICS: dict[str, str] = {
    "sm_occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "memory_throughput_pct": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "sm_busy_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "bank_conflicts_ld": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "bank_conflicts_st": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
}
PROJECT_ROOT = Path(__file__).resolve().parent.parent


def ncu_path() -> str | None:
    """The ncu executable, if there is one."""
    return shutil.which("ncu") or (
        "/usr/local/cuda/bin/ncu" if os.path.exists("/usr/local/cuda/bin/ncu") else None)


def launch_spec(cubin_path: str, kernel: str, signature: dict[str, Any],
                launch: dict[str, Any]) -> dict[str, Any]:
    """The spec :mod:`worker.ncu_launch` reads: the cubin, the kernel, the resolved signature
    of the shape (``kernels.family.Signature.resolve``) and the launch (grid, block, dynamic
    smem, workspace)."""
    return {"cubin": cubin_path, "kernel": kernel, "seed": 0, "signature": signature,
            "launch": launch}


def launch_command(spec_path: str) -> list[str]:
    """The :mod:`worker.ncu_launch` program that ``ncu`` profiles, reading ``spec_path``."""
    return [sys.executable, "-m", "worker.ncu_launch", spec_path]


def ncu_env(gpu: str) -> dict[str, str]:
    """The environment ``ncu`` runs the launch program in: one GPU, this project importable."""
    return dict(os.environ, CUDA_VISIBLE_DEVICES=gpu,
                PYTHONPATH=os.pathsep.join([str(PROJECT_ROOT),
                                            os.environ.get("PYTHONPATH", "")]))


def raw_rows(text: str) -> tuple[dict[str, str], dict[str, str]]:
    """(metric -> value, metric -> unit) of the last kernel in ``ncu --csv --page raw``."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    if len(rows) < 3:
        raise ValueError("no profiled kernel in ncu's output")
    header, units, values = rows[0], rows[1], rows[-1]
    return dict(zip(header, values, strict=False)), dict(zip(header, units, strict=False))


def number(text: str) -> float | None:
    """A value of ncu's CSV (thousands separators allowed), or None when it is not a number."""
    try:
        return float(text.replace(",", "").strip())
    except ValueError:
        return None


def parse_raw_csv(text: str) -> dict[str, float]:
    """Metric values from ``ncu --csv --page raw`` output (the last profiled kernel)."""
    values, _units = raw_rows(text)
    out: dict[str, float] = {}
    for metric in METRICS.values():
        v = number(values.get(metric, ""))
        if v is not None:
            out[metric] = v
    return out


def profile_kernel(cubin: bytes, kernel: str, signature: dict[str, Any],
                   launch: dict[str, Any], *, gpu: str = "0",
                   timeout_s: float = 120.0) -> tuple[dict[str, Any], dict[str, str]]:
    """Figures for the feedback's ``profile`` block and, for each missing one, why, of
    ``kernel`` launched with ``launch`` on the buffers of the resolved ``signature``."""
    exe = ncu_path()
    if exe is None:
        return {}, {f: "Nsight Compute (ncu) is not installed here" for f in METRICS}
    with tempfile.TemporaryDirectory(prefix="tf-ncu-") as tmp:
        path = Path(tmp) / "k.cubin"
        path.write_bytes(cubin)
        spec_path = Path(tmp) / "spec.json"
        spec_path.write_text(json.dumps(launch_spec(str(path), kernel, signature, launch)))
        cmd = [exe, "--clock-control", "none", "--target-processes", "all", "-k", kernel,
               "--launch-skip", "1", "--launch-count", "1", "--csv", "--page", "raw",
               "--metrics", ",".join(METRICS.values()), *launch_command(str(spec_path))]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s,
                                  env=ncu_env(gpu), cwd=str(PROJECT_ROOT))
        except subprocess.TimeoutExpired:
            return {}, {f: f"ncu did not finish within {timeout_s:g} s" for f in METRICS}
    try:
        values = parse_raw_csv(done.stdout)
    except ValueError:
        why = (done.stderr.strip().splitlines() or done.stdout.strip().splitlines()
               or ["no output"])[-1][:200]
        return {}, {f: f"ncu failed: {why}" for f in METRICS}
    figures: dict[str, Any] = {}
    missing: dict[str, str] = {}
    for field in ("sm_occupancy_pct", "memory_throughput_pct", "sm_busy_pct"):
        metric = METRICS[field]
        if metric in values:
            figures[field] = round(values[metric], 2)
        else:
            missing[field] = f"ncu did not report {metric}"
    ld, st = METRICS["bank_conflicts_ld"], METRICS["bank_conflicts_st"]
    if ld in values or st in values:
        figures["shared_mem_bank_conflicts"] = int(values.get(ld, 0) + values.get(st, 0))
    else:
        missing["shared_mem_bank_conflicts"] = "ncu did not report the bank-conflict counters"
    return figures, missing
