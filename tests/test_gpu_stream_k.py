"""GPU tests of stream-K scheduling (``apply_stream_k``; ``pytest -m gpu
tests/test_gpu_stream_k.py``).

Every variant against the float64 reference through the evaluation pipeline (NaN-poisoned output
and workspace, normal, uniform and mixed-magnitude inputs, the evaluation protocol's pass rule) at
shapes where the stream-K geometry differs (:data:`stream_k_points.SK_SHAPES`); the same launch
twice gives the same bits (the fix-up sums in K order); then the 64x128 kernel with and without
stream-K timed in one process, twice each, interleaved, with cuBLAS, at 4096³ and 8192³. Figures go
to ``$TUNEFORGE_GPU_OUT``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from frag_prefetch_points import QUADS
from gpu_support import check_fp32_contract, gpu_evaluator, time_interleaved
from stream_k_points import SK_SHAPES, STREAM_K, variants

from core.evaluation import EvalOptions
from kernels.gemm_bias_relu.shape import Shape
from worker.compile import Compiler
from worker.evaluate import GpuEvaluator

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def evaluator(compiler: Compiler) -> Iterator[GpuEvaluator]:
    yield from gpu_evaluator(compiler, timeout_s=120.0)


def test_every_variant_passes_the_fp32_contract(evaluator: GpuEvaluator) -> None:
    check_fp32_contract(evaluator, variants(), Shape(2048, 2048, 2048), SK_SHAPES, seed=41,
                        name="stream_k_correctness", no_spills=True)


def test_timed_beside_the_data_parallel_kernel_and_cublas(evaluator: GpuEvaluator) -> None:
    evaluator.options = EvalOptions(timeout_s=120.0)
    points = {"quads_64x128": QUADS, "stream_k_64x128": STREAM_K}
    for shape in (Shape(4096, 4096, 4096), Shape(8192, 8192, 8192)):
        times = time_interleaved(evaluator, points, shape, f"stream_k_speed_{shape}")
        # a record, not a speed target (those live in bench/): every point ran and was timed
        assert all(len(v) == 2 and min(v) > 0 for v in times.values())
