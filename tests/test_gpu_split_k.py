"""GPU tests of split-K and shape specialization (``pytest -m gpu tests/test_gpu_split_k.py``).

Correctness against the float64 reference through the evaluation pipeline (NaN-poisoned output and
workspace, the evaluation protocol's pass rule) at several splits and awkward shapes; repeated
launches giving the same bits while another split-K kernel and NaN poison go through the shared
workspace between them; split-K paying where M x N leaves SMs idle; specialized kernels correct at
their shape and refusing another one. Figures go to ``$TUNEFORGE_GPU_OUT`` as JSON."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from dataclasses import replace

import pytest
from gpu_support import OUT, gpu_evaluator, run_script, save

from core.evaluation import CompileResult, EvalOptions
from kernels.base import Rejection
from kernels.gemm_bias_relu import FAMILY, GemmParams
from kernels.gemm_bias_relu.shape import Shape
from worker.compile import Compiler
from worker.evaluate import SUPPORT_SOURCE, GpuEvaluator

pytestmark = pytest.mark.gpu


SKINNY = Shape(256, 256, 65536)
#: K not a multiple of splits x tile, M and N not multiples of any tile, tiny, and 8192x1024x4096
AWKWARD = (Shape(1, 1, 1), Shape(17, 33, 65), Shape(131, 257, 61), Shape(100, 60, 1000),
           Shape(1000, 1002, 999), Shape(8192, 1024, 4096))
#: 16x16 threads, 8x8 register blocks (128x128 tiles); an interleaved double-buffered variant;
#: a narrow-vector strided one; 3xTF32 with 64x128 tiles
SIMT = GemmParams(coalesced=True, smem=True, reg_m=8, reg_n=8, vec=4, pad=4)
SIMT_DB = replace(SIMT, reg_n=4, interleave=True, stages=2, swizzle=4, pad=0)
SIMT_V2 = GemmParams(smem=True, reg_m=2, reg_n=2, vec=2, pad=1, tile_k=8)
TC = GemmParams(tf32x3=True, block_x=64, block_y=2, warp_m=32, warp_n=64, tile_k=32,
                stages=2).canonical()


@pytest.fixture(scope="module")
def evaluator(compiler: Compiler) -> Iterator[GpuEvaluator]:
    yield from gpu_evaluator(compiler, timeout_s=60.0)


def checker(evaluator: GpuEvaluator, edges: tuple[Shape, ...], bench: bool = False
            ) -> GpuEvaluator:
    """The evaluator with other edge shapes (same child)."""
    ev = GpuEvaluator.__new__(GpuEvaluator)
    ev.__dict__.update(evaluator.__dict__)
    ev.options = EvalOptions(edge_shapes=edges, bench=bench, timeout_s=120.0)
    return ev


def compiled_all(evaluator: GpuEvaluator, points: list[GemmParams]) -> list[CompileResult]:
    futures = [evaluator.compile(p) for p in points]
    results = [f.result() for f in futures]
    for p, r in zip(points, results, strict=True):
        assert r.status == "ok", (p, r.error)
    return results


def test_split_k_is_correct_at_every_split_and_awkward_shapes(evaluator: GpuEvaluator) -> None:
    """Every split of the domain on the SIMT kernel, several on the other variants, checked at
    256x256x65536 (all three distributions) and at every awkward shape (the launch gives fewer
    splits where K has fewer tiles)."""
    points = [replace(SIMT, split_k=s) for s in (2, 4, 8, 16, 32)]
    points += [replace(SIMT_DB, split_k=s) for s in (2, 16)]
    points += [replace(SIMT_V2, split_k=s) for s in (2, 8)]
    points += [replace(TC, split_k=s) for s in (2, 4, 16)]
    ev = checker(evaluator, AWKWARD)
    rows = []
    for i, (params, compiled) in enumerate(zip(points, compiled_all(evaluator, points),
                                               strict=True)):
        m = ev.measure(params, compiled, shape=SKINNY, iteration=i, seed=21, verify=True)
        cases = (m.correctness or {}).get("cases") or []
        rows.append({"params": params.to_dict(), "status": m.status, "error": m.error,
                     "cases": [(c["shape"], c["dist"], c["passed"], c["rel_err"],
                                c["max_scaled_err"]) for c in cases]})
        assert m.status == "ok", (params, m.error)
        assert len(cases) == 3 + len(AWKWARD)
    save("split_k_correctness", rows)


def test_split_k_at_issue_8_shape_and_a_long_k(evaluator: GpuEvaluator) -> None:
    """8192x1024x4096 and 512x512x16384 as the campaign shape (every distribution)."""
    points = [replace(SIMT, split_k=2), replace(TC, split_k=4)]
    ev = checker(evaluator, (Shape(17, 33, 65),))
    for i, (params, compiled) in enumerate(zip(points, compiled_all(evaluator, points),
                                               strict=True)):
        for shape in (Shape(8192, 1024, 4096), Shape(512, 512, 16384)):
            m = ev.measure(params, compiled, shape=shape, iteration=i, seed=5, verify=True)
            assert m.status == "ok", (params, shape, m.error)


REPEAT_SCRIPT = textwrap.dedent('''
    import json, sys
    import numpy as np
    from worker.gpu_child import Runtime, cuda, host_stats, judge
    from worker.launch_contract import kernel_format
    spec = json.load(open(sys.argv[1]))
    rt = Runtime()
    rt.setup(open(spec["support"], "rb").read(), open(spec["reference"], "rb").read(),
             spec["reference_kernel"])
    m, n, k = shape = tuple(spec["shape"])
    sig = spec["signature"]
    entries = []
    for e in spec["kernels"]:
        fn = rt.kernel(e["key"], open(e["cubin"], "rb").read(), "gemm_bias_relu", e["launch"],
                       kernel_format(sig, bool(e["launch"].get("workspace_bytes"))))
        entries.append((fn, e["launch"]))
    b = rt.fill_inputs(sig, spec["fills"], 11, spec["reference_launch"])
    ws = max(int(l.get("workspace_bytes") or 0) for _, l in entries)
    rt.workspace(ws)
    rt.sync()
    ref = np.empty(m * n, np.float64); scale = np.empty(m * n, np.float64)
    cuda.memcpy_dtoh(ref, b["C.ref"]); cuda.memcpy_dtoh(scale, b["C.scale"])
    outs = [[] for _ in entries]
    verdicts = []
    for rep in range(4):
        if rep == 2:  # NaN in the whole workspace: nothing may depend on what it held
            rt.poison.prepared_async_call(rt._grid1d(ws // 4), (256, 1, 1), rt.stream, rt.ws,
                                          ws // 4)
        for i, (fn, launch) in enumerate(entries):
            rt.launch(fn, launch, b, sig)
            rt.sync()
            out = np.empty(m * n, np.float32)
            cuda.memcpy_dtoh(out, b["C"])
            outs[i].append(out)
            s = host_stats(out, ref, scale)
            verdicts.append(judge(s["sum_err2"], s["sum_ref2"], s["max_abs"], s["max_scaled"],
                                  s["nonfinite"], s["unwritten"], 1e-4)["passed"])
        # the benchmark's path in between: interleaved, L2 flushed, events around both kernels
        timed = rt.time_launches(entries, b, sig, 5)
    same = [all(np.array_equal(o.view(np.uint32), outs[i][0].view(np.uint32)) for o in outs[i])
            for i in range(len(entries))]
    print(json.dumps({"same_bits": same, "passed": verdicts,
                      "last_times_us": timed}))
    rt.context.pop()
''')


def test_repeated_launches_give_the_same_bits(evaluator: GpuEvaluator,
                                              compiler: Compiler) -> None:
    """Two split-K kernels (different splits and tiles) and a plain one share the workspace,
    launched in turn four times, with the timed path between and the workspace NaN-poisoned
    half way: each kernel's output is bit-identical every time and passes against float64."""
    points = [replace(SIMT, split_k=16), replace(TC, split_k=8), SIMT]
    results = compiled_all(evaluator, points)
    support = compiler.compile(SUPPORT_SOURCE.read_text())
    reference = compiler.compile(FAMILY.reference_source())
    kernels = []
    for params, compiled in zip(points, results, strict=True):
        launch = FAMILY.launch(params, Shape(300, 260, 20000))
        assert not isinstance(launch, Rejection)
        kernels.append({"key": compiled.source_hash, "cubin": compiled.cubin_path,
                        "launch": launch.to_dict()})
    spec = OUT / "split_k_repeat_spec.json"
    OUT.mkdir(parents=True, exist_ok=True)
    shape = Shape(300, 260, 20000)
    spec.write_text(json.dumps({
        "support": support.cubin_path, "reference": reference.cubin_path,
        "reference_kernel": FAMILY.reference_launch(shape).kernel_name,
        "reference_launch": FAMILY.reference_launch(shape).to_dict(),
        "signature": FAMILY.signature.resolve(shape),
        "fills": FAMILY.distributions[0].resolve(FAMILY.signature),
        "shape": [300, 260, 20000], "kernels": kernels}))
    result = run_script(REPEAT_SCRIPT, str(spec))
    save("split_k_repeat", result)
    assert result["same_bits"] == [True, True, True]
    assert all(result["passed"]), result["passed"]
    assert len(result["passed"]) == 4 * len(points)


def test_split_k_pays_where_the_grid_leaves_sms_idle(evaluator: GpuEvaluator) -> None:
    """256x256x65536 with 128x128 tiles is 4 CTAs on 132 SMs: 16 splits (64 CTAs) must be
    much faster, timed with the reduction inside the events, interleaved with the unsplit one."""
    split, plain = replace(SIMT, split_k=16), SIMT
    c_split, c_plain = compiled_all(evaluator, [split, plain])
    ev = checker(evaluator, (Shape(17, 33, 65),), bench=True)
    m = ev.measure(split, c_split, shape=SKINNY, iteration=0, seed=3, incumbent=(plain, c_plain))
    assert m.status == "ok", m.error
    assert m.perf is not None
    assert m.incumbent_runs_us is not None
    split_us = m.perf["avg_us"]
    plain_us = sorted(m.incumbent_runs_us)[len(m.incumbent_runs_us) // 2]
    save("split_k_speed", {"shape": str(SKINNY), "split16_us": split_us, "plain_us": plain_us,
                           "speedup": plain_us / split_us, "perf": m.perf})
    assert plain_us / split_us > 2.0, (split_us, plain_us)


def test_specialized_kernels_are_correct_at_their_shape(evaluator: GpuEvaluator) -> None:
    rows = []
    for shape in (Shape(17, 33, 65), Shape(1000, 1002, 999), SKINNY):
        def fixed(p: GemmParams, s: Shape = shape) -> GemmParams:
            return replace(p, shape_m=s.m, shape_n=s.n, shape_k=s.k)

        points = [fixed(FAMILY.baseline), fixed(SIMT), fixed(SIMT_DB), fixed(TC)]
        if shape == SKINNY:
            points += [fixed(replace(SIMT, split_k=16)), fixed(replace(TC, split_k=8))]
        for i, (params, compiled) in enumerate(zip(points, compiled_all(evaluator, points),
                                                   strict=True)):
            m = checker(evaluator, ()).measure(params, compiled, shape=shape, iteration=i,
                                               seed=8)
            cases = (m.correctness or {}).get("cases") or []
            rows.append({"params": params.to_dict(), "status": m.status, "error": m.error})
            assert m.status == "ok", (params, m.error)
            assert {c["dist"] for c in cases} == {"normal", "uniform", "mixed"}
            assert {tuple(c["shape"]) for c in cases} == {(shape.m, shape.n, shape.k)}
    save("specialized_correctness", rows)


def test_a_specialized_kernel_refuses_another_shape(evaluator: GpuEvaluator) -> None:
    """The host refuses it before any launch; forced onto the GPU at another shape anyway (the
    generic launch configuration sent to the child by hand), the kernel traps: crashed, never
    a wrong answer passed off as right. The next candidate runs in a fresh child."""
    shape = Shape(17, 33, 65)
    params = replace(SIMT, shape_m=shape.m, shape_n=shape.n, shape_k=shape.k)
    (compiled,) = compiled_all(evaluator, [params])
    other = Shape(18, 33, 65)
    m = evaluator.measure(params, compiled, shape=other, iteration=0, seed=1)
    assert m.status == "rejected"
    assert "shape_mismatch" in (m.error or "")
    launch = FAMILY.launch(SIMT, other)
    assert not isinstance(launch, Rejection)
    restarts = evaluator.child.restarts
    reply = evaluator.child.request({
        "op": "evaluate", "tol": 1e-4, "stop_on_failure": True, "bench": None,
        "checks": [{"shape": list(other.values_tuple()), "dist": "normal",
                    "signature": FAMILY.signature.resolve(other),
                    "fills": FAMILY.distributions[0].resolve(FAMILY.signature),
                    "launch": launch.to_dict(),
                    "reference_launch": FAMILY.reference_launch(other).to_dict(), "seed": 1}],
        "candidate": {"key": compiled.source_hash, "cubin": compiled.cubin(),
                      "kernel": FAMILY.name},
    }, 60)
    save("specialized_refusal", {"host": m.error, "forced": reply})
    assert reply["status"] == "crashed", reply
    assert evaluator.child.restarts == restarts + 1
    (good,) = compiled_all(evaluator, [SIMT])
    again = evaluator.measure(SIMT, good, shape=other, iteration=1, seed=1)
    assert again.status == "ok", again.error
