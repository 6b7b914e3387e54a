"""The SIMT points of the fragment-prefetch tests, CPU and GPU alike (imports nothing but the
family, so that the GPU test collects on the device machine's lean environment)."""

from __future__ import annotations

from dataclasses import replace

from async_copy_points import SIMT

from kernels.gemm_bias_relu import GemmParams

#: the campaign's best 8x8 SIMT kernel with the register pipeline
PREFETCH = replace(SIMT, frag_prefetch=True).canonical()
#: 8x16 outputs a thread in 128 threads: the 128x128 tile at 255 registers (0.937x cuBLAS on
#: the H200, docs/GPU.md 2026-12-01), where the expert's SIMT moves end
WIDE = replace(PREFETCH, reg_n=16, block_x=8, block_y=16).canonical()


def variants() -> list[GemmParams]:
    """Both register blocks, 16x8, tile depths 8 and 32, a 128x64 tile, narrow vectors and
    misaligned-row fallbacks, no padding, uncoalesced, split-K, a specialized shape."""
    return [PREFETCH, WIDE, replace(WIDE, reg_m=16, reg_n=8, block_x=16, block_y=8),
            replace(WIDE, tile_k=8), replace(PREFETCH, tile_k=32), replace(WIDE, reg_n=8),
            replace(PREFETCH, vec=2, pad=2), replace(PREFETCH, vec=1, pad=1),
            replace(WIDE, pad=0), replace(PREFETCH, coalesced=False),
            replace(WIDE, split_k=4), replace(WIDE, shape_m=4096, shape_n=4096, shape_k=4096)]
