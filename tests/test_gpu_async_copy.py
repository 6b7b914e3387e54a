"""GPU tests of the SIMT kernel's cp.async pipeline
(``pytest -m gpu tests/test_gpu_async_copy.py``).

Every variant against the float64 reference through the evaluation pipeline (NaN-poisoned output,
normal, uniform and mixed-magnitude inputs, the evaluation protocol's pass rule) at 4096³ and at
awkward edge shapes (partial tiles, K not a multiple of the vector width, a single element); then
the campaign's best SIMT kernel timed register-staged and with cp.async in one process, twice each,
interleaved. Figures go to ``$TUNEFORGE_GPU_OUT``."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest
from async_copy_points import ASYNC, SIMT, variants
from gpu_support import check_fp32_contract, gpu_evaluator, time_interleaved

from kernels.gemm_bias_relu.shape import Shape
from worker.compile import Compiler
from worker.evaluate import GpuEvaluator

pytestmark = pytest.mark.gpu

AWKWARD = (Shape(1, 1, 1), Shape(17, 33, 65), Shape(131, 257, 61), Shape(100, 60, 1000),
           Shape(1000, 1002, 999), Shape(8192, 1024, 4096))


@pytest.fixture(scope="module")
def evaluator(compiler: Compiler) -> Iterator[GpuEvaluator]:
    yield from gpu_evaluator(compiler, timeout_s=120.0)


def test_every_variant_passes_the_fp32_contract(evaluator: GpuEvaluator) -> None:
    check_fp32_contract(evaluator, variants(), Shape(4096, 4096, 4096), AWKWARD, seed=31,
                        name="async_copy_correctness")


def test_timed_beside_the_register_staged_kernel(evaluator: GpuEvaluator) -> None:
    shape = Shape(4096, 4096, 4096)
    points = {"staged": SIMT, "async_3buf": ASYNC, "async_2buf": replace(ASYNC, stages=1)}
    times = time_interleaved(evaluator, points, shape, "async_copy_speed")
    # a record, not a speed target (those live in bench/): both ran and were timed
    assert all(len(v) == 2 and min(v) > 0 for v in times.values())
