"""What the GPU tests share: where their figures go, the planted fault kernels, the evaluator."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from repo import ROOT

from core.evaluation import EvalOptions
from kernels.gemm_bias_relu import FAMILY, GemmParams
from kernels.gemm_bias_relu.shape import Shape
from worker.compile import Compiler
from worker.evaluate import GpuEvaluator
from worker.gpu_runner import ChildUnavailable

#: read at import: the autouse fixture clears TUNEFORGE_* variables for each test
OUT = Path(os.environ.get("TUNEFORGE_GPU_OUT", "/tmp/tf-gpu-out"))

#: a kernel that writes to an illegal address (the CUDA context is lost)
ILLEGAL = r'''
extern "C" __global__ void gemm_bias_relu(const float* A, const float* B, const float* bias,
                                          float* C, int M, int N, int K)
{ C[(size_t)1 << 38] = A[0]; }
'''
#: a kernel that never returns
SPIN = r'''
extern "C" __global__ void gemm_bias_relu(const float* A, const float* B, const float* bias,
                                          float* C, int M, int N, int K)
{ volatile float* v = C; while (v[0] == v[0] || true) { v[1] = v[0]; } }
'''


def save(name: str, data: Any) -> None:
    """Keep a figure for the run's record (runs/)."""
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{name}.json").write_text(json.dumps(data, indent=1, default=str))


def run_script(script: str, *args: str, gpu: str | None = None) -> Any:
    """``script`` run with ``args`` by this Python in a process of its own (the repository's
    root its working directory and first on ``PYTHONPATH``; ``gpu``, given, its
    ``CUDA_VISIBLE_DEVICES``): it must exit 0; the JSON on its last line of output."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpu
    done = subprocess.run([sys.executable, "-c", script, *args], cwd=str(ROOT),
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def check_sustained_two_ways(got: dict[str, Any], min_ms: float) -> None:
    """What :meth:`GpuEvaluator.sustained` gives, held to its contract: both ways (a loop of
    launches, a CUDA graph of them replayed) ran at least ``min_ms``, the figure given is the
    faster and ``way`` names it, the graph replays whole calls and ran the very launches (not
    faster than half the loop: a graph that lost a kernel, or all of them, would read far
    below), the graph timed computed right when replayed on a correctness case (one that lost
    a launch's prologue or epilogue would not), and the recheck after both passed."""
    assert "error" not in got, got
    assert "graph_error" not in got, got
    loop, graph = got["loop"], got["graph"]
    assert loop["total_ms"] >= min_ms, got
    assert graph["total_ms"] >= min_ms, got
    assert graph["launches"] % graph["calls"] == 0, got
    assert got["us_per_launch"] == min(loop["us_per_launch"], graph["us_per_launch"]), got
    assert got["way"] == ("graph" if graph["us_per_launch"] < loop["us_per_launch"]
                          else "loop"), got
    assert graph["us_per_launch"] >= 0.5 * loop["us_per_launch"], got
    assert graph["recheck"]["passed"], got
    assert graph["recheck"]["after"] == "a graph of sustained launches", got
    assert got["recheck"]["passed"], got


def gpu_evaluator(compiler: Compiler, timeout_s: float) -> Iterator[GpuEvaluator]:
    """A GPU evaluator for a module's tests (skips where there is no GPU evaluation)."""
    try:
        ev = GpuEvaluator(FAMILY, compiler, options=EvalOptions(timeout_s=timeout_s))
    except ChildUnavailable as exc:
        pytest.skip(f"no GPU evaluation here: {exc}")
    yield ev
    ev.child.close()


def time_interleaved(ev: GpuEvaluator, points: dict[str, GemmParams], shape: Shape,
                     name: str) -> dict[str, list[float]]:
    """Compile ``points``, time each twice at ``shape``, interleaved (so that a drift of the
    clock touches them alike), with cuBLAS; save the figures as ``name``; the times by label."""
    compiled = {k: ev.compile(p).result() for k, p in points.items()}
    times: dict[str, list[float]] = {k: [] for k in points}
    for repeat in range(2):
        for label, params in points.items():
            m = ev.measure(params, compiled[label], shape=shape, iteration=repeat, seed=5,
                           verify=False)
            assert m.status == "ok", (label, m.error)
            times[label].append(float((m.perf or {})["avg_us"]))
    save(name, {"shape": str(shape), "avg_us": times, "cublas_us": ev.vendor_us(shape),
                "regs": {k: c.regs_per_thread for k, c in compiled.items()}})
    return times


def check_fp32_contract(ev: GpuEvaluator, points: Iterable[GemmParams], shape: Shape,
                        edges: tuple[Shape, ...], seed: int, name: str,
                        no_spills: bool = False) -> None:
    """Compile each of ``points`` and check it against the float64 reference (verify: every
    input distribution) at ``shape`` and the ``edges`` — a shape-specialized point at its own
    shape only; every case must pass (and, with ``no_spills``, no point spill). The cases go to
    ``name``; ``ev``'s options are restored after."""
    saved = ev.options
    rows = []
    try:
        for i, params in enumerate(points):
            comp = ev.compile(params).result()
            assert comp.status == "ok", (params, comp.error)
            if no_spills:
                assert comp.spill_bytes == 0, (params, comp.spill_bytes)
            fixed = params.fixed_shape
            at, extra = (fixed, ()) if fixed is not None else (shape, edges)
            ev.options = EvalOptions(edge_shapes=extra, bench=False, timeout_s=180.0)
            m = ev.measure(params, comp, shape=at, iteration=i, seed=seed, verify=True)
            cases = list((m.correctness or {}).get("cases") or [])
            rows.append({"params": params.to_dict(), "status": m.status, "error": m.error,
                         "regs": comp.regs_per_thread, "spill_bytes": comp.spill_bytes,
                         "cases": [(c["shape"], c["dist"], c["passed"], c["max_scaled_err"])
                                   for c in cases]})
            assert m.status == "ok", (params, m.error)
            assert len(cases) > len(extra), cases
            assert all(c["passed"] for c in cases), cases
    finally:
        ev.options = saved
    save(name, rows)
