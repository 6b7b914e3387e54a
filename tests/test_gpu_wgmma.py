"""GPU tests of the wgmma 3xTF32 kernel and its bf16x3 / bf16x6 precision splits
(``pytest -m gpu tests/test_gpu_wgmma.py``).

Every variant against the float64 reference through the evaluation pipeline (NaN-poisoned output,
normal, uniform and mixed-magnitude inputs, the evaluation protocol's pass rule) at 4096³ and 8192³
and at awkward edge shapes; the error no worse than the mma.sync 3xTF32 kernel's; and the SASS
evidence: HGMMA present, no local-memory traffic. Figures go to ``$TUNEFORGE_GPU_OUT``."""

from __future__ import annotations

import pickle
import re
import shutil
import subprocess
import textwrap
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from bf16_points import (
    BF3,
    BF3_ACCUMULATE,
    BF3_LOCKSTEP,
    BF3_ON_DEMAND,
    BF3_ON_DEMAND_SK,
    BF3_PASS,
    BF3_STAGED,
    BF3_STREAM_K,
    BF3_WIDE,
    BF6,
    bf16_variants,
)
from gpu_support import OUT, check_sustained_two_ways, gpu_evaluator, run_script, save

from core.evaluation import CompileResult, EvalOptions
from kernels.base import LaunchConfig
from kernels.gemm_bias_relu import FAMILY, GemmParams
from kernels.gemm_bias_relu.shape import Shape
from worker.compile import Compiler
from worker.evaluate import GpuEvaluator

pytestmark = pytest.mark.gpu

WG = GemmParams(tf32x3=True, wgmma=128, block_x=128, block_y=2, stages=2).canonical()
TC = GemmParams(tf32x3=True, block_x=64, block_y=2, warp_m=32, warp_n=64, tile_k=32,
                stages=2).canonical()
VARIANTS = [replace(WG, wgmma=n, block_y=w, stages=s)
            for n in (64, 128) for w in (1, 2) for s in (1, 2)]
VARIANTS += [replace(WG, swizzle=4), replace(WG, split_k=4)]
# B^T fragments from global memory straight into registers (no B tile in shared memory)
VARIANTS += [replace(WG, frag_global=True), replace(WG, wgmma=64, block_y=1, frag_global=True),
             replace(WG, frag_global=True, swizzle=4, split_k=4)]
# MMAs in flight across K-tiles, partial sums promoted every 2 or 4 tiles
WINDOW = replace(WG, swizzle=4, mma_window=4)
VARIANTS += [WINDOW, replace(WG, mma_window=2), replace(WG, mma_window=4, stages=1),
             replace(WG, mma_window=4, wgmma=64, block_y=1), replace(WG, mma_window=2, split_k=4)]
# warp-specialized: one or two producer warpgroups copy and split, the consumers run the MMAs
WS = replace(WG, mma_window=4, stages=1, producers=2)
VARIANTS += [replace(WG, mma_window=4, stages=s, producers=n) for s in (1, 2) for n in (1, 2)]
VARIANTS += [replace(WG, mma_window=4, stages=1, producers=2, swizzle=4, split_k=4),
             replace(WG, mma_window=4, stages=1, producers=1, wgmma=64, block_y=1),
             replace(WG, mma_window=2, stages=1, producers=2, block_y=1)]
AWKWARD = (Shape(1, 1, 1), Shape(17, 33, 65), Shape(131, 257, 61), Shape(100, 60, 1000),
           Shape(1000, 1002, 999), Shape(8192, 1024, 4096))


@pytest.fixture(scope="module")
def evaluator(compiler: Compiler) -> Iterator[GpuEvaluator]:
    yield from gpu_evaluator(compiler, timeout_s=120.0)


def checker(evaluator: GpuEvaluator, edges: tuple[Shape, ...]) -> GpuEvaluator:
    ev = GpuEvaluator.__new__(GpuEvaluator)
    ev.__dict__.update(evaluator.__dict__)
    ev.options = EvalOptions(edge_shapes=edges, bench=False, timeout_s=180.0)
    return ev


def compiled_all(evaluator: GpuEvaluator, points: list[GemmParams]) -> list[CompileResult]:
    results = [f.result() for f in [evaluator.compile(p) for p in points]]
    for p, r in zip(points, results, strict=True):
        assert r.status == "ok", (p, r.error)
    return results


def cases_of(m: object) -> list[dict]:
    return list((getattr(m, "correctness", None) or {}).get("cases") or [])


def test_every_variant_passes_the_fp32_contract(evaluator: GpuEvaluator) -> None:
    """Each variant at 4096³ (three input distributions) plus the awkward shapes; three of them
    at 8192³ as well; the mma.sync 3xTF32 kernel beside them for the error comparison."""
    points = [*VARIANTS, TC]
    compiled = compiled_all(evaluator, points)
    ev = checker(evaluator, AWKWARD)
    rows = []
    worst: dict[str, float] = {}
    for i, (params, comp) in enumerate(zip(points, compiled, strict=True)):
        shapes = [Shape(4096, 4096, 4096)]
        if params in (WG, TC, replace(WG, frag_global=True), WINDOW, WS):
            shapes.append(Shape(8192, 8192, 8192))
        for shape in shapes:
            m = ev.measure(params, comp, shape=shape, iteration=i, seed=29, verify=True)
            cases = cases_of(m)
            rows.append({"params": params.to_dict(), "shape": str(shape), "status": m.status,
                         "error": m.error, "regs": comp.regs_per_thread,
                         "spill_bytes": comp.spill_bytes,
                         "cases": [(c["shape"], c["dist"], c["passed"], c["rel_err"],
                                    c["max_scaled_err"]) for c in cases]})
            assert m.status == "ok", (params, shape, m.error)
            assert len(cases) == 3 + len(AWKWARD)
            label = "wgmma" if params.wgmma else "mma"
            for c in cases:
                worst[label] = max(worst.get(label, 0.0), float(c["max_scaled_err"]))
    save("wgmma_correctness", {"rows": rows, "worst_max_scaled_err": worst})
    # same split, same promotion: the wgmma kernel's error is of the mma.sync kernel's order
    assert worst["wgmma"] <= 4 * worst["mma"] + 1e-7, worst


def test_sass_has_hgmma_and_no_local_memory(evaluator: GpuEvaluator) -> None:
    tool = shutil.which("cuobjdump")
    if tool is None:
        pytest.skip("cuobjdump is not on PATH")
    rows = {}
    for params, comp in zip(VARIANTS, compiled_all(evaluator, VARIANTS), strict=True):
        assert comp.cubin_path is not None
        sass = subprocess.run([tool, "-sass", comp.cubin_path], capture_output=True, text=True,
                              check=True).stdout
        counts = {op: len(re.findall(rf"\b{op}\b", sass))
                  for op in ("HGMMA", "HMMA", "LDL", "STL", "FFMA", "BAR")}
        rows[FAMILY.source_hash(params)[:12]] = {"params": params.to_dict(), **counts,
                                                 "regs": comp.regs_per_thread}
        assert counts["HGMMA"] > 0, counts
        assert counts["LDL"] == counts["STL"] == 0, counts
    save("wgmma_sass", rows)


# -- the bf16 precision splits (tests/bf16_points.py) ----------------------------------------
#: the bound on the worst element error / Σ|a·b| of bf16x3 on the three distributions
BF16X3_WORST_SCALED = 3e-5
#: the kernels whose MMAs accumulate into the fp32 sums (``mma_accumulate``): the tensor pipe's
#: fp32 accumulation rounds its addends short, a bias that grows with K on same-signed inputs
#: (the uniform distribution: 5.8e-6 of Σ|a·b| a 1024 of K at 4096³, 6.5e-6 at 8192³, H200,
#: 2026-12-05); bound: this a unit of K, and never under bf16x3's
ACCUMULATING_SCALED_PER_K = 8e-6 / 1024


@pytest.mark.parametrize("split", ["per_tile", "split_pass"])
def test_bf16_splits_pass_the_fp32_contract(evaluator: GpuEvaluator, split: str) -> None:
    """Every bf16x3 and bf16x6 variant at 4096³ (three input distributions) and the awkward
    shapes, the best guesses at 8192³ too; bf16x3 within the 3e-5 worst element error
    over Σ|a·b|, bf16x6 no worse than a tenth of that (it serves tolerances bf16x3 cannot), the
    kernels accumulating in their MMAs within their own bound, which grows with K.
    In two parts: the kernels that split per tile, and those that copy a split pass's
    workspace, made before the GEMM or by it on demand, one tile a CTA or stream-K (at 4096³
    every CTA of the stream-K row holds part tiles; at 8192³ its runs cross tiles)
    (``-k split_pass``)."""
    points = [p for p in bf16_variants() if p.split_pass == (split == "split_pass")]
    compiled = compiled_all(evaluator, points)
    ev = checker(evaluator, AWKWARD)
    # a kernel that hangs (a pipeline's barrier never completing) costs 45 s, not three minutes
    ev.options = replace(ev.options, timeout_s=45.0)
    rows: list[dict[str, Any]] = []
    worst: dict[str, dict[str, float]] = {}
    for i, (params, comp) in enumerate(zip(points, compiled, strict=True)):
        shapes = [Shape(4096, 4096, 4096)]
        if params in (BF3, BF3_LOCKSTEP, BF3_STAGED, BF6, BF3_PASS, BF3_ON_DEMAND,
                      BF3_STREAM_K, BF3_ON_DEMAND_SK, BF3_ACCUMULATE, BF3_WIDE):
            shapes.append(Shape(8192, 8192, 8192))
        for shape in shapes:
            m = ev.measure(params, comp, shape=shape, iteration=i, seed=31, verify=True)
            cases = cases_of(m)
            rows.append({"params": params.to_dict(), "shape": str(shape), "status": m.status,
                         "error": m.error, "regs": comp.regs_per_thread,
                         "spill_bytes": comp.spill_bytes,
                         "cases": [(c["shape"], c["dist"], c["passed"], c["rel_err"],
                                    c["max_scaled_err"]) for c in cases]})
            if params.mma_accumulate:
                rows[-1]["over_accumulating_bound"] = [
                    (c["shape"], c["dist"], c["max_scaled_err"]) for c in cases
                    if c["max_scaled_err"] > max(BF16X3_WORST_SCALED,
                                                 ACCUMULATING_SCALED_PER_K * c["shape"][2])]
                continue
            label = f"bf16x{params.bf16_split}"
            into = worst.setdefault(label, {"rel_err": 0.0, "max_scaled_err": 0.0})
            for c in cases:
                into["rel_err"] = max(into["rel_err"], float(c["rel_err"]))
                into["max_scaled_err"] = max(into["max_scaled_err"], float(c["max_scaled_err"]))
    save(f"bf16_correctness_{split}", {"rows": rows, "worst": worst})
    failed = [(r["params"], r["shape"], r["status"], r["error"]) for r in rows
              if r["status"] != "ok"]
    assert not failed, failed
    # a shape-specialized kernel is checked at its own shape only
    assert all(len(r["cases"]) == 3 + (0 if GemmParams.from_dict(r["params"]).fixed_shape
                                       else len(AWKWARD)) for r in rows)
    assert worst["bf16x3"]["max_scaled_err"] <= BF16X3_WORST_SCALED, worst
    assert worst["bf16x6"]["max_scaled_err"] <= BF16X3_WORST_SCALED / 10, worst
    over = [(r["params"], r["over_accumulating_bound"]) for r in rows
            if r.get("over_accumulating_bound")]
    assert not over, over


def test_bf16_sass_has_bf16_hgmma_and_no_local_memory(evaluator: GpuEvaluator) -> None:
    tool = shutil.which("cuobjdump")
    if tool is None:
        pytest.skip("cuobjdump is not on PATH")
    rows = {}
    points = bf16_variants()
    for params, comp in zip(points, compiled_all(evaluator, points), strict=True):
        assert comp.cubin_path is not None
        sass = subprocess.run([tool, "-sass", comp.cubin_path], capture_output=True, text=True,
                              check=True).stdout
        forms = sorted(set(re.findall(r"HGMMA\.\S+", sass)))
        counts = {op: len(re.findall(rf"\b{op}\b", sass))
                  for op in ("HGMMA", "HMMA", "LDL", "STL", "BAR")}
        rows[FAMILY.source_hash(params)[:12]] = {"params": params.to_dict(), **counts,
                                                 "forms": forms, "regs": comp.regs_per_thread,
                                                 "spill_bytes": comp.spill_bytes}
        assert forms, counts
        assert all(".F32.BF16" in f for f in forms), forms
        assert counts["LDL"] == counts["STL"] == 0, counts
    save("bf16_sass", rows)


@pytest.mark.parametrize(("label", "params"),
                         [("pass", BF3_PASS), ("pass, stream-K", BF3_STREAM_K)])
def test_a_sustained_graph_holds_the_prologue_and_the_epilogue(
        evaluator: GpuEvaluator, label: str, params: GemmParams) -> None:
    """The child's sustained rate of a launch of several kernels, both ways: the split pass
    before the GEMM, and with stream-K the fix-up after it. Such a launch is captured into one
    graph (no ``graph_error``), both ways hold their contract (``check_sustained_two_ways``:
    the graph timed computes right on a correctness case, and so does a launch the usual way
    after both). A graph that lost the pass or the fix-up is not told apart by its time; its
    own check catches it (the test below)."""
    shape = Shape(2048, 2048, 4096)
    launch = FAMILY.launch(params, shape)
    assert isinstance(launch, LaunchConfig), launch
    assert launch.prologue is not None
    assert (launch.epilogue is not None) == bool(params.stream_k)
    compiled = compiled_all(evaluator, [params])[0]
    got = evaluator.sustained(params, compiled, shape=shape, seed=6, min_ms=50.0)
    save(f"bf16_sustained_ways_{label.replace(', ', '_')}", got)
    check_sustained_two_ways(got, 50.0)


#: A child's runtime in this process serving the evaluator's own setup and ``sustain`` requests
#: (pickled in ``argv[1]``), its graphs captured without the launch step ``argv[2]`` (the
#: ``prologue`` or the ``epilogue``): a harness fault that would read faster. The reply, JSON.
LOSES_A_STEP_SCRIPT = textwrap.dedent('''
    import json, pickle, sys
    from worker import gpu_child
    from worker import launch_contract as lc
    setup, request = pickle.load(open(sys.argv[1], "rb"))
    dropped = sys.argv[2]
    rt = gpu_child.Runtime()
    assert gpu_child.handle(rt, setup)["status"] == "ok"
    capturing = []

    class LosesAStep(lc.LaunchGraph):
        def __init__(self, *args):
            capturing.append(True)
            try:
                super().__init__(*args)
            finally:
                capturing.clear()

    launch_of = rt.launch

    def launch(fn, launch, b, signature):
        if capturing:
            assert launch.get(dropped), dropped
            launch = {k: v for k, v in launch.items() if k != dropped}
        launch_of(fn, launch, b, signature)

    rt.launch = launch
    lc.LaunchGraph = LosesAStep
    print(json.dumps(gpu_child.handle(rt, request), default=str))
    rt.context.pop()
''')


@pytest.mark.parametrize("dropped", ["prologue", "epilogue"])
def test_a_sustained_graph_that_lost_a_step_is_caught_by_its_own_check(
        evaluator: GpuEvaluator, dropped: str) -> None:
    """Stream-K's launch (split pass, GEMM, fix-up) sustained by a child whose graphs lose the
    split pass or the fix-up: the loop and the recheck after it, launched whole, pass; the
    graph, replayed on the correctness case, fails, so the evaluator would give no rate."""
    shape = Shape(2048, 2048, 4096)
    compiled = compiled_all(evaluator, [BF3_STREAM_K])[0]
    request = evaluator.sustain_request(BF3_STREAM_K, compiled, shape, seed=6, min_ms=20.0)
    spec = OUT / f"loses_{dropped}.pkl"
    OUT.mkdir(parents=True, exist_ok=True)
    spec.write_bytes(pickle.dumps((evaluator.child.setup_request, request)))
    try:
        reply = run_script(LOSES_A_STEP_SCRIPT, str(spec), dropped, gpu=evaluator.gpu)
    finally:
        spec.unlink()
    save(f"bf16_sustained_graph_loses_{dropped}", reply)
    assert reply["status"] == "ok", reply
    sustained = reply["sustained"]
    assert "graph_error" not in sustained, sustained
    assert reply["recheck"]["passed"], reply
    assert not sustained["graph"]["recheck"]["passed"], sustained
