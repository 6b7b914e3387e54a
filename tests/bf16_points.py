"""The bf16 split kernels the CPU and GPU tests share: every tile, both pipelines (lockstep and
warp-specialized with one or two producer warpgroups, loading into registers or staging by
cp.async, or copying the stages a split pass wrote or the GEMM split on demand, one tile a CTA
or stream-K), windows, stages, swizzle, split-K and a specialized shape, for bf16x3 and
bf16x6."""

from __future__ import annotations

from dataclasses import replace

from kernels.gemm_bias_relu import GemmParams

#: the best-guess bf16x3 kernel: 128 x 128 tiles, two consumer and two producer warpgroups
BF3 = GemmParams(tf32x3=True, wgmma=128, block_x=128, block_y=2, stages=2, mma_window=4,
                 producers=2, bf16_split=3).canonical()
#: the same tile in lockstep (every warpgroup splits and runs MMAs)
BF3_LOCKSTEP = replace(BF3, producers=0, stages=1).canonical()
#: warp-specialized with staged producers: each fp32 tile copied one ahead by cp.async into a
#: staging buffer, split from there (a whole tile in flight, not a register batch)
BF3_STAGED = replace(BF3, stages=1, async_copy=True).canonical()
#: bf16x6 with one producer (three parts: two stages of 96 KB)
BF6 = replace(BF3, bf16_split=6, producers=1, stages=1).canonical()
#: the split pass: both operands split once before the GEMM, whose one producer thread copies
#: whole stages by cp.async.bulk
BF3_PASS = replace(BF3, producers=1, split_pass=True).canonical()
#: the same in clusters of two CTAs along N, each copying half the shared A block multicast
BF3_CLUSTER = replace(BF3_PASS, pass_cluster=2).canonical()
#: the split pass's blocks made by the GEMM's own producer warps, on demand (no pass kernel)
BF3_ON_DEMAND = replace(BF3_PASS, split_on_demand=True).canonical()
#: the two scheduled stream-K: the tiles past the whole waves shared by every SM's CTA, each a
#: run of K tiles over whole and part tiles, the parts summed by the fix-up
BF3_STREAM_K = replace(BF3_PASS, stream_k=1).canonical()
BF3_ON_DEMAND_SK = replace(BF3_ON_DEMAND, stream_k=1).canonical()
#: the pass's point accumulating in its MMAs (no window of partial sums), and its 128 x 256
#: tiles (two stages of 96 KB)
BF3_ACCUMULATE = replace(BF3_PASS, mma_accumulate=True).canonical()
BF3_WIDE = replace(BF3_ACCUMULATE, wgmma=256, stages=1).canonical()


def bf16_variants() -> list[GemmParams]:
    """Every bf16 split variant the tests compile and run (all valid)."""
    out = [replace(BF3, wgmma=n, block_y=w) for n in (64, 128) for w in (1, 2)]
    out += [replace(BF3, producers=1), replace(BF3, stages=1), replace(BF3, mma_window=2),
            replace(BF3, producers=1, block_y=1), replace(BF3, producers=2, block_y=1, wgmma=64)]
    out += [BF3_LOCKSTEP, replace(BF3_LOCKSTEP, mma_window=1),
            replace(BF3_LOCKSTEP, wgmma=64, block_y=1, stages=2),
            replace(BF3_LOCKSTEP, block_y=1, stages=2, mma_window=2)]
    out += [replace(BF3, swizzle=4), replace(BF3, split_k=4), replace(BF3_LOCKSTEP, split_k=4),
            replace(BF3, shape_m=4096, shape_n=4096, shape_k=4096)]
    out += [BF3_STAGED, replace(BF3_STAGED, producers=1), replace(BF3_STAGED, block_y=1),
            replace(BF3_STAGED, wgmma=64), replace(BF3_STAGED, split_k=4),
            replace(BF3_STAGED, bf16_split=6, block_y=1),
            replace(BF3_STAGED, shape_m=4096, shape_n=4096, shape_k=4096)]
    out += [BF6, replace(BF6, producers=2), replace(BF6, block_y=1),
            replace(BF6, producers=0, wgmma=64, block_y=1, stages=1),
            replace(BF6, producers=0, wgmma=64, block_y=2, stages=1),
            replace(BF6, swizzle=4, split_k=4)]
    out += [BF3_PASS, replace(BF3_PASS, stages=1), replace(BF3_PASS, block_y=1),
            replace(BF3_PASS, wgmma=64), replace(BF3_PASS, mma_window=2),
            replace(BF3_PASS, swizzle=4), replace(BF3_PASS, bf16_split=6, stages=1),
            replace(BF3_PASS, shape_m=4096, shape_n=4096, shape_k=4096)]
    out += [BF3_CLUSTER, replace(BF3_CLUSTER, swizzle=4), replace(BF3_CLUSTER, stages=1),
            replace(BF3_CLUSTER, block_y=1, wgmma=64), replace(BF3_CLUSTER, bf16_split=6, stages=1)]
    out += [BF3_ON_DEMAND, replace(BF3_ON_DEMAND, stages=1), replace(BF3_ON_DEMAND, block_y=1),
            replace(BF3_ON_DEMAND, wgmma=64), replace(BF3_ON_DEMAND, block_y=1, wgmma=64),
            replace(BF3_ON_DEMAND, swizzle=8), replace(BF3_ON_DEMAND, bf16_split=6, stages=1),
            replace(BF3_ON_DEMAND, shape_m=4096, shape_n=4096, shape_k=4096),
            replace(BF3_ON_DEMAND, producers=2), replace(BF3_ON_DEMAND, producers=2, swizzle=8)]
    out += [BF3_STREAM_K, replace(BF3_STREAM_K, stream_k=2, block_y=1, wgmma=64),
            replace(BF3_STREAM_K, bf16_split=6, stages=1), replace(BF3_STREAM_K, swizzle=8),
            BF3_ON_DEMAND_SK, replace(BF3_ON_DEMAND_SK, swizzle=8),
            replace(BF3_ON_DEMAND_SK, block_y=1, wgmma=64),
            replace(BF3_ON_DEMAND_SK, producers=2, stream_k=2),
            replace(BF3_STREAM_K, shape_m=4096, shape_n=4096, shape_k=4096),
            replace(BF3_ON_DEMAND_SK, shape_m=4096, shape_n=4096, shape_k=4096)]
    out += [BF3_ACCUMULATE, replace(BF3_ACCUMULATE, block_y=1, wgmma=64),
            replace(BF3_ACCUMULATE, bf16_split=6, stages=1), replace(BF3_ACCUMULATE, stream_k=1),
            BF3_WIDE, replace(BF3_WIDE, swizzle=8), replace(BF3_WIDE, block_y=1),
            replace(BF3_WIDE, stream_k=1),
            replace(BF3_WIDE, shape_m=4096, shape_n=4096, shape_k=4096),
            replace(BF3_ON_DEMAND, mma_accumulate=True)]
    return list(dict.fromkeys(p.canonical() for p in out))
