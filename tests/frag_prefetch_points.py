"""The SIMT points of the fragment-prefetch tests, CPU and GPU alike (imports nothing but the
family, so that the GPU test collects on the device machine's lean environment)."""

from __future__ import annotations

from dataclasses import replace

from async_copy_points import SIMT

from kernels.gemm_bias_relu import GemmParams

#: the campaign's best 8x8 SIMT kernel with the register pipeline
PREFETCH = replace(SIMT, frag_prefetch=True).canonical()
#: 8x16 outputs a thread in 128 threads: the 128x128 tile at 255 registers, where the expert's
#: SIMT moves end
WIDE = replace(PREFETCH, reg_n=16, block_x=8, block_y=16).canonical()


#: 8x8 in 128 threads as a 64x128 tile (three CTAs an SM) with lane quads: the fastest SIMT
#: kernel without stream-K (docs/GPU.md#why-the-gemm-rule-book-is-what-it-is)
QUADS = replace(WIDE, reg_n=8, block_x=16, block_y=8, lane_quads=True).canonical()


#: 64 threads and a 256-wide B tile: more vectors a row than threads, so its tile copy takes the
#: per-vector index arithmetic instead of fixed strides (correct, slow: its staging registers
#: overflow the CTAs an SM that ``min_blocks_per_sm`` asks of ptxas, and it spills)
UNSTRIDED = replace(PREFETCH, block_x=32, block_y=2, reg_m=4, reg_n=8, tile_k=32, vec=2,
                    pad=2).canonical()


def quad_variants() -> list[GemmParams]:
    """Lane quads on 8x8 as 64x128 and 128x64 tiles, on 8x16 and 16x8, on the unpipelined 8x8
    kernel in 256 threads and its uncoalesced form; no padding, float2 in 256 threads, tile 8,
    split-K, a specialized shape."""
    return [QUADS, replace(QUADS, block_x=8, block_y=16), replace(WIDE, lane_quads=True),
            replace(WIDE, reg_m=16, reg_n=8, block_x=16, block_y=8, tile_k=8, lane_quads=True),
            replace(SIMT, lane_quads=True), replace(SIMT, lane_quads=True, coalesced=False),
            replace(QUADS, pad=0), replace(QUADS, vec=2, pad=2, block_y=16),
            replace(QUADS, tile_k=8), replace(QUADS, split_k=4),
            replace(QUADS, shape_m=4096, shape_n=4096, shape_k=4096)]


def variants() -> list[GemmParams]:
    """Both register blocks, 16x8, tile depths 8 and 32, a 128x64 tile, narrow vectors and
    misaligned-row fallbacks, no padding, uncoalesced, split-K, a specialized shape, a tile
    whose copy cannot stride; and the lane-quad points of :func:`quad_variants`."""
    return quad_variants() + [
        PREFETCH, WIDE, replace(WIDE, reg_m=16, reg_n=8, block_x=16, block_y=8),
            replace(WIDE, tile_k=8), replace(PREFETCH, tile_k=32), replace(WIDE, reg_n=8),
            replace(PREFETCH, vec=2, pad=2), replace(PREFETCH, vec=1, pad=1),
            replace(WIDE, pad=0), replace(PREFETCH, coalesced=False),
            replace(WIDE, split_k=4), replace(WIDE, shape_m=4096, shape_n=4096, shape_k=4096),
            UNSTRIDED]
