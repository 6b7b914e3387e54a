"""GPU tests of the SIMT kernel's register pipeline (``apply_fragment_prefetch``), its 8x16 /
16x8 register blocks and lane quads (``pytest -m gpu tests/test_gpu_frag_prefetch.py``).

Every variant against the float64 reference through the evaluation pipeline (NaN-poisoned output,
normal, uniform and mixed-magnitude inputs, the evaluation protocol's pass rule) at 4096³ and at
awkward edge shapes (partial tiles and CTAs, K not a multiple of the tile, misaligned rows, a
single element); then the 8x8 kernel without and with the pipeline, the 8x16 one and 8x8 in 128
threads with lane quads timed in one process, twice each, interleaved, with cuBLAS. Figures go to
``$TUNEFORGE_GPU_OUT``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from async_copy_points import SIMT
from frag_prefetch_points import PREFETCH, QUADS, WIDE, variants
from gpu_support import check_fp32_contract, gpu_evaluator, time_interleaved

from core.evaluation import EvalOptions
from kernels.gemm_bias_relu.shape import Shape
from worker.compile import Compiler
from worker.evaluate import GpuEvaluator

pytestmark = pytest.mark.gpu

AWKWARD = (Shape(1, 1, 1), Shape(17, 33, 65), Shape(131, 257, 61), Shape(100, 60, 1000),
           Shape(1000, 1002, 999), Shape(4096, 4095, 31), Shape(8192, 1024, 4096))


@pytest.fixture(scope="module")
def evaluator(compiler: Compiler) -> Iterator[GpuEvaluator]:
    yield from gpu_evaluator(compiler, timeout_s=120.0)


def test_every_variant_passes_the_fp32_contract(evaluator: GpuEvaluator) -> None:
    check_fp32_contract(evaluator, variants(), Shape(4096, 4096, 4096), AWKWARD, seed=37,
                        name="frag_prefetch_correctness")


def test_timed_beside_the_unpipelined_kernel_and_cublas(evaluator: GpuEvaluator) -> None:
    evaluator.options = EvalOptions(timeout_s=120.0)
    shape = Shape(4096, 4096, 4096)
    points = {"simt_8x8": SIMT, "prefetch_8x8": PREFETCH, "prefetch_8x16": WIDE,
              "quads_8x8_64x128": QUADS}
    times = time_interleaved(evaluator, points, shape, "frag_prefetch_speed")
    # a record, not a speed target (those live in bench/): every point ran and was timed
    assert all(len(v) == 2 and min(v) > 0 for v in times.values())
