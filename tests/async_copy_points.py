"""The SIMT points the cp.async tests use, CPU and GPU alike (imports nothing but the family,
so that the GPU test collects on the device machine's lean environment)."""

from __future__ import annotations

from dataclasses import replace

from kernels.gemm_bias_relu import GemmParams

#: the best SIMT kernel of the H200 campaign (docs/GPU.md, 0.874x cuBLAS), register-staged
SIMT = GemmParams(block_x=16, block_y=16, coalesced=True, smem=True, tile_k=16, reg_m=8,
                  reg_n=8, vec=4, unroll=2, pad=4, interleave=True, stages=2,
                  swizzle=4).canonical()
ASYNC = replace(SIMT, async_copy=True)


def variants() -> list[GemmParams]:
    """Two and three buffers, narrow vectors, other tiles, split-K, a specialized shape."""
    return [ASYNC, replace(ASYNC, stages=1), replace(ASYNC, interleave=False, pad=0),
            replace(ASYNC, vec=2, pad=2), replace(ASYNC, vec=1, pad=1),
            replace(ASYNC, tile_k=32, stages=1), replace(ASYNC, tile_k=8),
            replace(ASYNC, reg_m=4, reg_n=4), replace(ASYNC, coalesced=False),
            replace(ASYNC, split_k=4), replace(ASYNC, shape_m=4096, shape_n=4096, shape_k=4096)]
