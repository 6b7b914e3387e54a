"""The hand-picked bulk-copy points of the softmax family, CPU and GPU tests alike, and the
ones ``runs/2026-12-01-7723069/softmax.sh`` times (imports nothing but the family, so that
the GPU test collects on the device machine's lean environment)."""

from __future__ import annotations

from kernels.softmax import SoftmaxParams

P = SoftmaxParams
#: long rows: clusters of 4 or 8 CTAs a row (slices of 16K..32K floats), 4 or 8 pieces;
#: short rows: 8 or 4 threads a row, 32 or 64 rows a CTA staged as one tile (40 registers:
#: six CTAs of 256 threads or three of 512 an SM, 96 or 192 KB staged an SM at 128 columns)
BULK_PICKS: dict[str, SoftmaxParams] = {
    "c4x512": P(block_threads=512, row_threads=512, cluster=4, vec=4, bulk=4, unroll=2),
    "c8x256": P(block_threads=256, row_threads=256, cluster=8, vec=4, bulk=4, unroll=2),
    "c8x512": P(block_threads=512, row_threads=512, cluster=8, vec=4, bulk=4, unroll=2),
    "c8x512p8": P(block_threads=512, row_threads=512, cluster=8, vec=4, bulk=8, unroll=2,
                  store_hint=True),
    "c8x1024p8": P(block_threads=1024, row_threads=1024, cluster=8, vec=4, bulk=8, unroll=2),
    "rt8x256": P(block_threads=256, row_threads=8, vec=4, bulk=1),
    "rt8x512p2": P(block_threads=512, row_threads=8, vec=4, bulk=2),
    "rt4x256p2": P(block_threads=256, row_threads=4, vec=4, bulk=2),
}
#: bulk-copy points that prefetch (apply_prefetch): the long-row plan at 256x262144 (a cluster of
#: 16, 8 float4 a thread, two CTAs an SM), a cluster of 4 at 65536 columns, packed short rows
PREFETCH_PICKS: dict[str, SoftmaxParams] = {
    "c16x512h8": P(block_threads=512, row_threads=512, cluster=16, vec=4, bulk=4, unroll=2,
                   push=True, prefetch=True, chunks=8),
    "c4x512h8": P(block_threads=512, row_threads=512, cluster=4, vec=4, bulk=1, unroll=2,
                  push=True, prefetch=True, chunks=8),
    "rt8x256h4": P(block_threads=256, row_threads=8, vec=4, bulk=1, prefetch=True, chunks=4),
}
#: one-pass points keeping part of the row in shared memory (apply_staged_row), and four CTAs
#: an SM (set_min_ctas): the row of 262144 over clusters of 8 (two CTAs an SM) and of 16 (four),
#: of 131072 over clusters of 4 (their GPU timings: docs/GPU.md)
STAGED_PICKS: dict[str, SoftmaxParams] = {
    "c8x512s8": P(block_threads=512, row_threads=512, cluster=8, vec=4, passes=1, chunks=8,
                  staged=8, push=True, load_hint=1, store_hint=True),
    "c16x256s8m4": P(block_threads=256, row_threads=256, cluster=16, vec=4, passes=1, chunks=8,
                     staged=8, min_ctas=4, push=True, load_hint=1, store_hint=True),
    "c4x512s8": P(block_threads=512, row_threads=512, cluster=4, vec=4, passes=1, chunks=8,
                  staged=8, push=True, load_hint=1, store_hint=True),
}
#: rows over CTAs of a persistent grid meeting through global memory (apply_spread): the row of
#: 262144 over 16 CTAs of 512 threads (two an SM) or of 256 (16 float4 a thread), over 8 CTAs of
#: 1024 (one an SM), over 32 CTAs of 256 (four an SM), and the row of 131072 over 8 CTAs of 512;
#: then pipelined ones (the next row's part in flight during this row's wait): 262144 over 32
#: CTAs of 512 (two an SM) or 256, or 16 of 1024 (one an SM), and 131072 over 16 CTAs of 512
SPREAD_PICKS: dict[str, SoftmaxParams] = {
    "g32x256": P(block_threads=256, row_threads=256, cluster=32, vec=4, passes=1, chunks=8,
                 spread=True, load_hint=1, store_hint=True),
    "g16x512": P(block_threads=512, row_threads=512, cluster=16, vec=4, passes=1, chunks=8,
                 spread=True, load_hint=1, store_hint=True),
    "g16x256": P(block_threads=256, row_threads=256, cluster=16, vec=4, passes=1, chunks=16,
                 spread=True, load_hint=1, store_hint=True),
    "g8x1024": P(block_threads=1024, row_threads=1024, cluster=8, vec=4, passes=1, chunks=8,
                 spread=True, load_hint=1, store_hint=True),
    "g8x512": P(block_threads=512, row_threads=512, cluster=8, vec=4, passes=1, chunks=8,
                spread=True, load_hint=1, store_hint=True),
    # the next row's part loaded ahead (apply_row_pipeline): two rows' 4 float4 a thread
    "g32x512p4": P(block_threads=512, row_threads=512, cluster=32, vec=4, passes=1, chunks=4,
                   spread=True, pipeline=True, min_ctas=2, load_hint=1, store_hint=True),
    "g16x1024p4": P(block_threads=1024, row_threads=1024, cluster=16, vec=4, passes=1,
                    chunks=4, spread=True, pipeline=True, load_hint=1, store_hint=True),
    "g32x256p8": P(block_threads=256, row_threads=256, cluster=32, vec=4, passes=1, chunks=8,
                   spread=True, pipeline=True, load_hint=1, store_hint=True),
    "g16x512p4": P(block_threads=512, row_threads=512, cluster=16, vec=4, passes=1, chunks=4,
                   spread=True, pipeline=True, min_ctas=2, load_hint=1, store_hint=True),
}
