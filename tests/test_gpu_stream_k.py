"""GPU tests of stream-K scheduling (``apply_stream_k``; ``pytest -m gpu
tests/test_gpu_stream_k.py``).

Every variant against the float64 reference through the evaluation pipeline (NaN-poisoned
output and workspace, normal, uniform and mixed-magnitude inputs, the pass rule of DESIGN.md
§4) at shapes where the stream-K geometry differs (:data:`stream_k_points.SK_SHAPES`); the same
launch twice gives the same bits (the fix-up sums in K order); then the 64x128 kernel with and
without stream-K timed in one process, twice each, interleaved, with cuBLAS, at 4096³ and
8192³. Figures go to ``$TUNEFORGE_GPU_OUT``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from frag_prefetch_points import QUADS
from gpu_support import gpu_evaluator, save, time_interleaved
from stream_k_points import SK_SHAPES, STREAM_K, variants

from kernels.base import Shape
from worker.compile import Compiler
from worker.evaluate import EvalOptions, GpuEvaluator

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def evaluator(compiler: Compiler) -> Iterator[GpuEvaluator]:
    yield from gpu_evaluator(compiler, timeout_s=120.0)


def test_every_variant_passes_the_fp32_contract(evaluator: GpuEvaluator) -> None:
    rows = []
    for i, params in enumerate(variants()):
        comp = evaluator.compile(params).result()
        assert comp.status == "ok", (params, comp.error)
        assert comp.spill_bytes == 0, (params, comp.spill_bytes)
        fixed = params.fixed_shape
        shape = fixed or Shape(2048, 2048, 2048)
        edges = () if fixed is not None else SK_SHAPES
        evaluator.options = EvalOptions(edge_shapes=edges, bench=False, timeout_s=180.0)
        m = evaluator.measure(params, comp, shape=shape, iteration=i, seed=41, verify=True)
        cases = list((m.correctness or {}).get("cases") or [])
        rows.append({"params": params.to_dict(), "status": m.status, "error": m.error,
                     "regs": comp.regs_per_thread, "cases": [
                         (c["shape"], c["dist"], c["passed"], c["max_scaled_err"])
                         for c in cases]})
        assert m.status == "ok", (params, m.error)
        assert len(cases) >= len(edges)
        assert all(c["passed"] for c in cases), cases
    save("stream_k_correctness", rows)


def test_timed_beside_the_data_parallel_kernel_and_cublas(evaluator: GpuEvaluator) -> None:
    evaluator.options = EvalOptions(timeout_s=120.0)
    points = {"quads_64x128": QUADS, "stream_k_64x128": STREAM_K}
    for shape in (Shape(4096, 4096, 4096), Shape(8192, 8192, 8192)):
        times = time_interleaved(evaluator, points, shape, f"stream_k_speed_{shape}")
        # a record, not a speed target (those live in bench/): every point ran and was timed
        assert all(len(v) == 2 and min(v) > 0 for v in times.values())
