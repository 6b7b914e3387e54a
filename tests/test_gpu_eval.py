"""GPU tests: run on the lent GPU (``pytest -m gpu``); skipped where pycuda finds no device.

Figures go to ``$TUNEFORGE_GPU_OUT`` (default a temp dir) as JSON so they can be kept in runs/.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from gpu_support import ILLEGAL, OUT, SPIN, gpu_evaluator, run_script, save
from repo import ROOT

from core.evaluation import EvalOptions
from kernels.base import Action, Candidate, Rejection
from kernels.gemm_bias_relu import FAMILY
from kernels.gemm_bias_relu.shape import Shape
from worker.compile import Compiler
from worker.evaluate import GpuEvaluator

pytestmark = pytest.mark.gpu

BIG = Shape(4096, 4096, 4096)
SHAPES = (Shape(1, 1, 1), Shape(17, 33, 65), Shape(1000, 1002, 999), Shape(4096, 4095, 31))


@pytest.fixture(scope="module")
def evaluator(compiler: Compiler) -> Iterator[GpuEvaluator]:
    yield from gpu_evaluator(compiler, timeout_s=20.0)


def sampled_points(n_random: int = 40) -> list[tuple[str, Any]]:
    """The baseline, every transform with several arguments, and random valid points."""
    base = Candidate(FAMILY.baseline)
    tiled = FAMILY.apply_chain([Action.parse(a) for a in (
        "apply_coalesce(true)", "apply_shared_memory_load(true)")])
    assert isinstance(tiled, Candidate)
    blocked = FAMILY.apply_chain([Action.parse(a) for a in (
        "apply_coalesce(true)", "apply_shared_memory_load(true)", "apply_register_block(8, 4)",
        "apply_vectorize(4)", "apply_fragment_interleave(true)")])
    assert isinstance(blocked, Candidate)
    tensor = FAMILY.apply_chain([Action.parse(a) for a in (
        "apply_tf32x3(true)", "change_block_config(64, 2)")])
    assert isinstance(tensor, Candidate)
    points: list[tuple[str, Any]] = [("baseline", FAMILY.baseline)]
    for spec in FAMILY.transforms:
        for start in (base, tiled, blocked, tensor):
            for action in list(spec.actions())[:6]:
                result = FAMILY.apply(start, action)
                if isinstance(result, Candidate):
                    points.append((str(action), result.params))
    points += [("random", p) for p in FAMILY.sample(random.Random(7), n_random)]
    unique: dict[Any, str] = {}
    for label, p in points:
        unique.setdefault(p, label)
    return [(label, p) for p, label in unique.items()]


def test_sampled_points_correct_on_all_shapes(evaluator: GpuEvaluator) -> None:
    """Baseline + >= 40 valid points incl. every transform, at 4096^3 and the edge shapes."""
    points = sampled_points()
    assert len(points) >= 40
    ev = GpuEvaluator.__new__(GpuEvaluator)
    ev.__dict__.update(evaluator.__dict__)
    ev.options = EvalOptions(edge_shapes=SHAPES, bench=False, timeout_s=60.0)
    futures = [evaluator.compile(p) for _, p in points]
    rows = []
    for i, ((label, params), fut) in enumerate(zip(points, futures, strict=True)):
        compiled = fut.result()
        assert compiled.status == "ok", (label, compiled.error)
        m = ev.measure(params, compiled, shape=BIG, iteration=i, seed=11, verify=False)
        rows.append({"label": label, "params": params.to_dict(), "status": m.status,
                     "cases": [(c["shape"], c["dist"], c["passed"], c["rel_err"],
                                c["max_scaled_err"]) for c in m.correctness["cases"]]
                     if m.correctness else None, "error": m.error})
    passed = sum(r["status"] == "ok" for r in rows)
    save("correctness_sampled_points", {"points": len(rows), "passed": passed, "rows": rows})
    failures = [r for r in rows if r["status"] != "ok"]
    assert not failures, failures[:3]


def test_illegal_address_is_crashed_and_next_candidate_passes(
        evaluator: GpuEvaluator, compiler: Compiler) -> None:
    bad = compiler.compile(ILLEGAL, entry="gemm_bias_relu")
    assert bad.status == "ok", bad.error
    restarts = evaluator.child.restarts
    m = evaluator.measure(FAMILY.baseline, bad, shape=Shape(64, 64, 64), iteration=0, seed=1)
    assert m.status == "crashed", m
    good = evaluator.compile(FAMILY.baseline).result()
    m2 = evaluator.measure(FAMILY.baseline, good, shape=Shape(256, 256, 256), iteration=1, seed=1)
    assert m2.status == "ok", m2
    assert evaluator.child.restarts == restarts + 1
    save("crash", {"crash": m.__dict__, "next": m2.status})


def test_spinning_kernel_is_timeout_and_next_candidate_passes(
        evaluator: GpuEvaluator, compiler: Compiler) -> None:
    spin = compiler.compile(SPIN, entry="gemm_bias_relu")
    assert spin.status == "ok", spin.error
    t0 = time.perf_counter()
    m = evaluator.measure(FAMILY.baseline, spin, shape=Shape(64, 64, 64), iteration=0, seed=1,
                          options=replace(evaluator.options, timeout_s=5.0))
    waited = time.perf_counter() - t0
    assert m.status == "timeout", m
    assert waited < 30
    good = evaluator.compile(FAMILY.baseline).result()
    m2 = evaluator.measure(FAMILY.baseline, good, shape=Shape(256, 256, 256), iteration=1, seed=1)
    assert m2.status == "ok", m2
    save("timeout", {"timeout": m.__dict__, "waited_s": waited, "next": m2.status})


def test_stability_and_full_records(evaluator: GpuEvaluator) -> None:
    """The same kernel measured twice differs by under 1%; the records printed in full."""
    tiled = FAMILY.apply_chain([Action.parse(a) for a in (
        "apply_coalesce(true)", "apply_shared_memory_load(true)", "apply_register_block(8, 8)",
        "apply_vectorize(4)", "apply_tiling(8)", "apply_unroll(4)", "avoid_bank_conflict(4)")])
    assert not isinstance(tiled, Rejection)
    compiled = evaluator.compile(tiled.params).result()
    first = evaluator.measure(tiled.params, compiled, shape=BIG, iteration=0, seed=3)
    second = evaluator.measure(tiled.params, compiled, shape=BIG, iteration=1, seed=4)
    assert first.status == second.status == "ok", (first.error, second.error)
    a, b = first.perf["avg_us"], second.perf["avg_us"]  # type: ignore[index]
    diff = abs(a - b) / min(a, b) * 100
    base_c = evaluator.compile(FAMILY.baseline).result()
    base = evaluator.measure(FAMILY.baseline, base_c, shape=BIG, iteration=2, seed=5)
    save("stability", {"tiled_avg_us": [a, b], "diff_pct": diff,
                       "tiled_record": first.__dict__, "baseline_record": base.__dict__,
                       "device": evaluator.device})
    sys.stdout.write(json.dumps({"baseline": base.__dict__, "tiled": first.__dict__}, indent=1,
                                default=str) + "\n")
    assert diff < 1.0


def test_checker_kernel_matches_numpy(evaluator: GpuEvaluator) -> None:
    """The on-GPU statistics equal the numpy mirror on synthetic outputs."""
    import numpy as np

    from worker.gpu_child import POISON, host_stats

    rng = np.random.default_rng(0)
    ref = np.maximum(rng.standard_normal(10007), 0.0)
    scale = np.abs(rng.standard_normal(10007)) + 1.0
    out = (ref * (1 + 1e-6)).astype(np.float32)
    out[5] = np.nan
    out.view(np.uint32)[17] = POISON
    reply = evaluator.child.request({"op": "stats", "out": out, "ref": ref, "scale": scale}, 30)
    gpu, cpu = reply["stats"], host_stats(out, ref, scale)
    assert gpu["nonfinite"] == cpu["nonfinite"] == 1
    assert gpu["unwritten"] == cpu["unwritten"] == 1
    for key in ("sum_err2", "sum_ref2", "max_abs", "max_scaled"):
        assert gpu[key] == pytest.approx(cpu[key], rel=1e-9), key


def test_checker_calibration_against_cublas() -> None:
    """Passes cuBLAS fp32 and 3xTF32, rejects plain TF32 on normal and mixed inputs."""
    script = ROOT / "bench" / "calibrate_checker.py"
    out = subprocess.run([sys.executable, str(script), "--size", "4096"], capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    save("calibration", result)
    verdict = {(r["arith"], r["dist"]): r["passed"] for r in result["rows"]}
    for dist in ("normal", "uniform", "mixed"):
        assert verdict[("fp32", dist)], dist
        assert verdict[("3xtf32", dist)], dist
    assert not verdict[("tf32", "normal")]
    assert not verdict[("tf32", "mixed")]


def test_full_profile_names_ncu_figures(evaluator: GpuEvaluator) -> None:
    """profile=full adds Nsight Compute's figures, each with its source, or says why not."""
    tiled = FAMILY.apply_chain([Action.parse(a) for a in (
        "apply_coalesce(true)", "apply_shared_memory_load(true)", "apply_register_block(8, 8)",
        "apply_tiling(8)")])
    assert not isinstance(tiled, Rejection)
    compiled = evaluator.compile(tiled.params).result()
    m = evaluator.measure(tiled.params, compiled, shape=Shape(2048, 2048, 2048),
                          iteration=0, seed=9, options=replace(evaluator.options,
                                                               profile="full"))
    assert m.status == "ok", m.error
    profile = m.profile or {}
    save("ncu_profile", profile)
    for name in ("sm_occupancy_pct", "memory_throughput_pct", "sm_busy_pct",
                 "shared_mem_bank_conflicts"):
        assert profile[name] is not None or name in profile["missing"], name
        if profile[name] is not None:
            assert profile["sources"][name] == "ncu"
    assert profile["shared_mem_bank_conflicts"] is not None, profile["missing"]


FILL_SCRIPT = """
import json, sys
import numpy as np
from worker.gpu_child import Runtime, cuda
spec = json.load(open(sys.argv[1]))
rt = Runtime()
rt.setup(open(spec["support"], "rb").read(), open(spec["reference"], "rb").read(),
         spec["reference_kernel"])
n = 1 << 20
sig = {"buffers": [{"name": "x", "dtype": "float32", "role": "in", "count": n},
                   {"name": "y", "dtype": "float32", "role": "in", "count": n},
                   {"name": "z", "dtype": "float32", "role": "out", "count": 1}],
       "scalars": []}
b = rt.fill_inputs(sig, [{"kind": "normal_neg_inf", "scale": 1.0},
                         {"kind": "constant", "scale": 3.0}], 5)
rt.sync()
x = np.empty(n, np.float32); y = np.empty(n, np.float32)
cuda.memcpy_dtoh(x, b["x"]); cuda.memcpy_dtoh(y, b["y"])
neg = np.isneginf(x)
print(json.dumps({"neg_inf_fraction": float(neg.mean()),
                  "neg_inf_at_multiples_of_8": int(neg[::8].sum()),
                  "finite_std": float(x[~neg].std()),
                  "other_nonfinite": int((~np.isfinite(x) & ~neg).sum()),
                  "constant_values": sorted(set(float(v) for v in y)),
                  "copy": rt.copy, "info_copy_gbs": rt.info()["copy_gbs"]}))
rt.context.pop()
"""


def test_new_fill_kinds_and_the_copy_bandwidth(evaluator: GpuEvaluator, compiler: Compiler
                                                ) -> None:
    """normal_neg_inf puts -inf at ~7/64 of the positions and never at i % 8 == 0; constant
    writes the scale everywhere; the child measured the device-to-device copy rate."""
    from worker.evaluate import SUPPORT_SOURCE

    support = compiler.compile(SUPPORT_SOURCE.read_text())
    reference = compiler.compile(FAMILY.reference_source())
    save("fill_spec", {
        "support": support.cubin_path, "reference": reference.cubin_path,
        "reference_kernel": FAMILY.reference_launch(Shape(1, 1, 1)).kernel_name})
    result = run_script(FILL_SCRIPT, str(OUT / "fill_spec.json"))
    result["evaluator_device"] = {k: evaluator.device.get(k) for k in (
        "name", "copy_gbs", "copy_bytes", "copy_runs", "datasheet_gbs")}
    save("fill_kinds_copy", result)
    assert 0.09 < result["neg_inf_fraction"] < 0.13
    assert result["neg_inf_at_multiples_of_8"] == 0
    assert result["other_nonfinite"] == 0
    assert 0.95 < result["finite_std"] < 1.05
    assert result["constant_values"] == [3.0]
    assert (evaluator.device.get("copy_gbs") or 0.0) > 100.0
    assert evaluator.device["copy_bytes"] == 1 << 30  # an H200 has room for the full copy
    assert evaluator.peak_for(evaluator.family.baseline)[0] is not None  # the FP32 FMA peak
