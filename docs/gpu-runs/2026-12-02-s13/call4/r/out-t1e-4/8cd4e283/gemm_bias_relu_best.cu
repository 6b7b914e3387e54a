// {"arch": "sm_90", "avg_us": 666.912, "backend": "gpu", "campaign_id": "8cd4e28353ae40cc8d4cf705ecec1ff6", "candidate_id": "3ecc8925ad7e46a9bfeef5a038df2f05", "correctness": {"max_scaled_err": 1.2706968185760412e-05, "passed": true, "rel_err": 4.555369325035449e-06, "tolerance": 0.0001}, "gpu": "NVIDIA H200", "iteration": 106, "launch": {"block": [128, 3, 1], "dynamic_smem_bytes": 197632, "grid": [32, 32, 1], "kernel_name": "gemm_bias_relu", "prologue": {"args": ["A", "B", "workspace", "M", "N", "K"], "block": [256, 1, 1], "grid": [4096, 1, 1], "kernel_name": "gemm_bias_relu_split_pass"}, "workspace_bytes": 134217728}, "params": {"bf16_split": 3, "block_x": 128, "block_y": 2, "coalesced": true, "interleave": false, "mma_window": 4, "pad": 0, "producers": 1, "reg_m": 1, "reg_n": 1, "smem": true, "split_pass": true, "stages": 2, "swizzle": 8, "tf32x3": true, "tile_k": 64, "unroll": 1, "vec": 4, "warp_m": 32, "warp_n": 32, "wgmma": 128}, "shape": "4096x4096x4096", "source_sha256": "eed63d634e16b72161e38964c30a72a5d1bd6e98720256065d3ed5c1bc86173b"}
// tuneforge gemm_bias_relu, bf16x3 on Hopper's warpgroup tensor cores (wgmma, sm_90a):
// C = relu(A @ B + bias), fp32 in and out, any M, N, K >= 1.
//
// Each fp32 operand x is split once per tile into bf16 parts, x = hi + lo (each part the
// round-to-nearest bf16 of what the parts before it leave; every difference is exact in fp32),
// and the product is the sum of the 3 largest cross products of the parts, each a
// wgmma m64n128k16 with fp32 accumulation. Both operands come from shared memory, K-major, through
// 128-byte-swizzled descriptors (a 64-deep K tile of bf16 is one 128-byte swizzle row): the A
// tile's rows of A, and B^T's rows (the columns of B), which the splitting threads transpose on
// the way from global memory. The split is made on the way in: fp32 loaded from global memory
// into registers, split, stored as bf16 parts, so shared memory holds the parts only. Each
// window of 4 K-tile(s) accumulates into fresh registers that are then added into the fp32
// accumulators (promotion): long same-sign sums carry no tensor-core accumulation bias.
// params: {"bf16_split": 3, "block_x": 128, "block_y": 2, "coalesced": true, "interleave": false, "mma_window": 4, "pad": 0, "producers": 1, "reg_m": 1, "reg_n": 1, "smem": true, "split_pass": true, "stages": 2, "swizzle": 8, "tf32x3": true, "tile_k": 64, "unroll": 1, "vec": 4, "warp_m": 32, "warp_n": 32, "wgmma": 128}
// split pass: gemm_bias_relu_split_pass (below, launched first) splits every value of A and B once
// into the workspace, block by block in the byte layout of a stage; here the producer thread
// copies a stage's A block and B^T block by two cp.async.bulk on the stage's full-mbarrier, and
// nothing is split or bound-checked on the way in.
#include <stdint.h>

#define WGS 2             // consumer warpgroups; each owns 64 rows of C
#define PWG 1                  // producer warpgroups (the loads and the split)
#define THREADS (128 * (WGS + PWG))
#define CP_THREADS (128 * PWG)         // threads that load and split: the producers'
#define BM (64 * WGS)                  // rows of C per CTA
#define BN 128                     // columns of C per CTA = the instruction's N
#define BK 64                          // one 128-byte swizzle row of bf16
#define PARTS 2                    // bf16 parts of each operand
#define NBUF 3                    // stages of split tiles
#define NA (BN / 2)                    // fp32 accumulators per thread
#define A_PART (BM * BK * 2)           // bytes of one bf16 part of the A tile
#define B_PART (BN * BK * 2)           // bytes of one bf16 part of the B^T tile
#define B_OFF (PARTS * A_PART)         // the B^T parts' offset in a stage
#define STAGE_BYTES ((PARTS * (A_PART + B_PART) + 1023) / 1024 * 1024)
#define A_CPT (BM * 8 / CP_THREADS)    // 16-byte chunks of each A part a thread makes a tile
#define B_CPT (BN * 8 / CP_THREADS)    // and of each B^T part
#define A_BLOCK (PARTS * A_PART)       // bytes of a (row tile, K tile) block of the split pass
#define B_BLOCK (PARTS * B_PART)       // and of a (column tile, K tile) block


// two fp32 values to a bf16x2 (round to nearest even): x0 in the low half (lower address)
__device__ __forceinline__ uint32_t bf_pack(float x0, float x1) {
    uint32_t d;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(d) : "f"(x1), "f"(x0));
    return d;
}
__device__ __forceinline__ float bf_lo_half(uint32_t d) { return __uint_as_float(d << 16); }
__device__ __forceinline__ float bf_hi_half(uint32_t d) { return __uint_as_float(d & 0xffff0000u); }

__device__ __forceinline__ void bf_st_shared4(uint32_t dst, uint4 v) {
    asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n"
                 :: "r"(dst), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}


// shared-memory matrix descriptor: K-major, 128-byte swizzle, 8-row groups 1024 bytes apart
__device__ __forceinline__ uint64_t bf_desc(uint32_t addr) {
    return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)(16 >> 4) << 16)
         | ((uint64_t)(1024 >> 4) << 32) | (1ull << 62);
}

__device__ __forceinline__ void bf_wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void bf_wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N_>
__device__ __forceinline__ void bf_wg_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(N_) : "memory"); }
__device__ __forceinline__ void bf_proxy_fence() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

__device__ __forceinline__ void bf_mbar_init(uint32_t bar, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void bf_mbar_arrive(uint32_t bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(bar) : "memory");
}

__device__ __forceinline__ void bf_mbar_wait(uint32_t bar, uint32_t parity) {
    uint32_t done;
    do {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, p;\n}\n" : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    } while (!done);
}

__device__ __forceinline__ void bf_mbar_expect_tx(uint32_t bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" :: "r"(bar), "r"(bytes) : "memory");
}

// `bytes` (a multiple of 16) from global memory to shared memory, completing on mbarrier `bar`
__device__ __forceinline__ void bf_bulk_copy(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
                 :: "r"(dst), "l"(src), "r"(bytes), "r"(bar) : "memory");
}


// d (+)= a (64 x 16 bf16, shared memory) * b (16 x BN bf16, shared memory, K-major B^T)
__device__ __forceinline__ void bf_wgmma(float* d, uint64_t a, uint64_t b, int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
        "%64, %65, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(a), "l"(b), "r"(accumulate));
}

// the bf16 parts of eight consecutive fp32 values (k order) as 16-byte chunks, one a part
__device__ __forceinline__ void bf_split8(const float (&x)[8], uint4 (&out)[PARTS]) {
    uint32_t w[PARTS][4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        float r0 = x[2 * i], r1 = x[2 * i + 1];
#pragma unroll
        for (int q = 0; q < PARTS; ++q) {
            const uint32_t h = bf_pack(r0, r1);
            w[q][i] = h;
            if (q + 1 < PARTS) {  // what this part leaves (exact in fp32)
                r0 -= bf_lo_half(h);
                r1 -= bf_hi_half(h);
            }
        }
    }
#pragma unroll
    for (int q = 0; q < PARTS; ++q) out[q] = make_uint4(w[q][0], w[q][1], w[q][2], w[q][3]);
}

extern "C" __global__ void __launch_bounds__(THREADS, 1)
gemm_bias_relu(const float* __restrict__ A, const float* __restrict__ B,
               const float* __restrict__ bias, float* __restrict__ C,
               int M, int N, int K, const unsigned char* __restrict__ W)
{
    extern __shared__ __align__(16) unsigned char bf_smem_raw[];
    // the swizzle pattern is anchored at 1024-byte boundaries: align the stages (the launch
    // asks for 1 KB more than the stages need)
    const uint32_t smem0 = (static_cast<uint32_t>(__cvta_generic_to_shared(bf_smem_raw)) + 1023u)
                           & ~1023u;
    const uint64_t desc0 = bf_desc(smem0);
    auto desc_at = [&](uint32_t addr) -> uint64_t { return desc0 + ((addr - smem0) >> 4); };
    __shared__ __align__(8) uint64_t bf_bars[2 * NBUF];  // full[0, NBUF), empty[NBUF, 2 NBUF)
    const uint32_t bars = static_cast<uint32_t>(__cvta_generic_to_shared(bf_bars));
    const int tid = threadIdx.y * 128 + threadIdx.x;
    const int wg = threadIdx.y - PWG;  // the warpgroup's 64 rows of C (< 0: a producer)
    const int warp = threadIdx.x / 32;   // warp within its warpgroup
    const int lane = threadIdx.x % 32;
    int tile_m, tile_n;
    {
        const int pid = blockIdx.y * gridDim.x + blockIdx.x;
        const int group_blocks = 8 * gridDim.x;
        const int first_m = (pid / group_blocks) * 8;
        const int group_m = min((int)gridDim.y - first_m, 8);
        tile_m = first_m + (pid % group_blocks) % group_m;
        tile_n = (pid % group_blocks) / group_m;
    }
    const int block_row = tile_m * BM;
    const int block_col = tile_n * BN;

    const int ktiles = (K + BK - 1) / BK;

    float acc[NA];
#pragma unroll
    for (int i = 0; i < NA; ++i) acc[i] = 0.0f;
    float part[NA];
#pragma unroll
    for (int i = 0; i < NA; ++i) part[i] = 0.0f;

    // warp-specialized: the producer warpgroups load and split tile t into stage t % NBUF, then
    // arrive on full[stage]; each consumer warp arrives on empty[stage] once the MMAs that read
    // it have retired. No CTA-wide barrier after this one.
    if (tid == 0) {
#pragma unroll
        for (int s = 0; s < NBUF; ++s) {
            bf_mbar_init(bars + 8 * s, 1);                   // the copying thread, + bytes
            bf_mbar_init(bars + 8 * (NBUF + s), 4 * WGS);    // one lane per consumer warp
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    if (wg < 0) {
        if (tid == 0) {  // one thread copies every stage: two bulk copies on its full-mbarrier
            const int kt_all = (K + BK - 1) / BK;
            const unsigned char* a_src = W + (size_t)(block_row / BM) * kt_all * A_BLOCK;
            const unsigned char* b_src = W + (size_t)((M + BM - 1) / BM) * kt_all * A_BLOCK
                                           + (size_t)(block_col / BN) * kt_all * B_BLOCK;
            for (int t = 0; t < ktiles; ++t) {
                // stage t % NBUF was last read by tile t - NBUF: wait for its release
                if (t >= NBUF) bf_mbar_wait(bars + 8 * (NBUF + t % NBUF), ((t / NBUF) - 1) & 1);
                const uint32_t full = bars + 8 * (t % NBUF);
                const uint32_t stage = smem0 + (t % NBUF) * STAGE_BYTES;
                bf_mbar_expect_tx(full, A_BLOCK + B_BLOCK);
                bf_bulk_copy(stage, a_src + (size_t)t * A_BLOCK, A_BLOCK, full);
                bf_bulk_copy(stage + B_OFF, b_src + (size_t)t * B_BLOCK, B_BLOCK, full);
            }
        }
        return;
    }

    // this warpgroup's rows of the A parts, and the B^T parts: descriptors of a stage
    auto mmas = [&](int buf, bool fresh) {
        const uint32_t stage = smem0 + buf * STAGE_BYTES;
        const uint64_t a0 = desc_at(stage + wg * (64 * 128));
        const uint64_t b0 = desc_at(stage + B_OFF);
        bf_wg_fence();
#pragma unroll
        for (int s = 0; s < BK / 16; ++s) {  // k16 steps: + 32 bytes each
            bf_wgmma(part, a0 + 1 * (A_PART >> 4) + 2 * s, b0 + 0 * (B_PART >> 4) + 2 * s,
                     !(fresh && s == 0));
            bf_wgmma(part, a0 + 0 * (A_PART >> 4) + 2 * s, b0 + 1 * (B_PART >> 4) + 2 * s,
                     1);
            bf_wgmma(part, a0 + 0 * (A_PART >> 4) + 2 * s, b0 + 0 * (B_PART >> 4) + 2 * s,
                     1);
        }
        bf_wg_commit();
    };
    auto release = [&](int kt) {
        __syncwarp();
        if (lane == 0) bf_mbar_arrive(bars + 8 * (NBUF + kt % NBUF));
    };
    // one K-tile; `fresh` (a window's first tile) and `last` (its last) are constants wherever
    // it is called, so the code between promotions is straight-line and ptxas never has to
    // retire the MMAs in flight at a branch or a loop's back edge
    auto tile = [&](int kt, bool fresh, bool last) {
        bf_mbar_wait(bars + 8 * (kt % NBUF), (kt / NBUF) & 1);  // split and stored
        mmas(kt % NBUF, fresh);
        if (last) {
            bf_wg_wait<0>();
            if (!fresh) release(kt - 1);
            release(kt);
#pragma unroll
            for (int i = 0; i < NA; ++i) {  // promotion: the window's tensor-core sums into fp32
                asm volatile("" : "+f"(part[i]) :: "memory");
                acc[i] += part[i];
            }
        } else {
            bf_wg_wait<1>();  // tile kt - 1's MMAs have retired
            if (!fresh) release(kt - 1);
        }
    };
    constexpr int WINDOW = 4;
    int kt = 0;
    for (; kt + WINDOW <= ktiles; kt += WINDOW) {
#pragma unroll
        for (int t = 0; t < WINDOW; ++t) tile(kt + t, t == 0, t == WINDOW - 1);
    }
    for (; kt < ktiles; ++kt) tile(kt, true, true);  // the last ktiles % W tiles: one at a time

    // accumulator i = 4j + 2h + e holds C[block_row + 64 wg + 16 warp + group + 8h][block_col + 8j + 2 tig + e]
    const int row0 = block_row + wg * 64 + warp * 16 + (lane >> 2);
    const int col0 = block_col + 2 * (lane & 3);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int row = row0 + 8 * h;
        if (row >= M) continue;
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const int col = col0 + 8 * j + e;
                if (col >= N) continue;
                C[(size_t)row * N + col] = fmaxf(acc[4 * j + 2 * h + e] + bias[col], 0.0f);
            }
        }
    }
}

// The split pass, launched before gemm_bias_relu on the same stream: every value of A and B
// split once into its bf16 parts, written to the workspace in the byte layout of a stage.
// Workspace: A's blocks, one per (row tile rt, K tile kt) at (rt * KT + kt) * A_BLOCK, then
// B^T's, one per (column tile ct, K tile kt) at B_REGION + (ct * KT + kt) * B_BLOCK; a block is
// its PARTS parts one after the other, a part 64 k-values (one 128-byte swizzle row) for each of
// its BM rows of A or BN columns of B, chunk c of row r at r * 128 + ((c ^ (r & 7)) << 4). Past
// M, N or K a block holds zeros, so the GEMM copies whole blocks and never checks a bound.
// One CTA a block; eight threads write one 128-byte row (coalesced), and B's tile goes through
// shared memory to be read down its columns.
#define SP_THREADS 256

extern "C" __global__ void __launch_bounds__(SP_THREADS)
gemm_bias_relu_split_pass(const float* __restrict__ A, const float* __restrict__ B,
               unsigned char* __restrict__ W, int M, int N, int K)
{
    __shared__ float b_tile[BK][BN + 1];  // B's 64 x BN fp32 tile (+1: column reads spread)
    const int KT = (K + BK - 1) / BK;
    const long long a_blocks = (long long)((M + BM - 1) / BM) * KT;
    const long long blk = blockIdx.x;
    if (blk < a_blocks) {
        const int rt = (int)(blk / KT), kt = (int)(blk % KT);
        unsigned char* const out = W + (size_t)blk * A_BLOCK;
        const bool vec = (K % 4) == 0 && (reinterpret_cast<uintptr_t>(A) % 16) == 0;
        for (int c = threadIdx.x; c < BM * 8; c += SP_THREADS) {
            const int r = c / 8, ch = c % 8;
            const int gr = rt * BM + r, gk = kt * BK + ch * 8;
            float x[8];
            const float* src = A + (size_t)gr * K + gk;
            if (vec && gr < M && gk + 8 <= K) {
                const float4 v0 = __ldg(reinterpret_cast<const float4*>(src));
                const float4 v1 = __ldg(reinterpret_cast<const float4*>(src) + 1);
                x[0] = v0.x; x[1] = v0.y; x[2] = v0.z; x[3] = v0.w;
                x[4] = v1.x; x[5] = v1.y; x[6] = v1.z; x[7] = v1.w;
            } else {
#pragma unroll
                for (int j = 0; j < 8; ++j) x[j] = (gr < M && gk + j < K) ? __ldg(src + j) : 0.0f;
            }
            uint4 parts[PARTS];
            bf_split8(x, parts);
            const uint32_t off = r * 128 + ((ch ^ (r & 7)) << 4);
#pragma unroll
            for (int q = 0; q < PARTS; ++q)
                *reinterpret_cast<uint4*>(out + q * A_PART + off) = parts[q];
        }
        return;
    }
    const long long bblk = blk - a_blocks;
    const int ct = (int)(bblk / KT), kt = (int)(bblk % KT);
    for (int i = threadIdx.x; i < BK * BN; i += SP_THREADS) {  // a warp reads 32 floats of a row
        const int k = i / BN, n = i % BN;
        const int gk = kt * BK + k, gn = ct * BN + n;
        b_tile[k][n] = (gk < K && gn < N) ? __ldg(B + (size_t)gk * N + gn) : 0.0f;
    }
    __syncthreads();
    unsigned char* const out = W + (size_t)a_blocks * A_BLOCK + (size_t)bblk * B_BLOCK;
    for (int c = threadIdx.x; c < BN * 8; c += SP_THREADS) {
        const int n = c / 8, ch = c % 8;
        float x[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) x[j] = b_tile[ch * 8 + j][n];
        uint4 parts[PARTS];
        bf_split8(x, parts);
        const uint32_t off = n * 128 + ((ch ^ (n & 7)) << 4);
#pragma unroll
        for (int q = 0; q < PARTS; ++q)
            *reinterpret_cast<uint4*>(out + q * B_PART + off) = parts[q];
    }
}
