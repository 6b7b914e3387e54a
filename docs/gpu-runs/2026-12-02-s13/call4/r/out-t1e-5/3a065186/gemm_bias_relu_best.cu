// {"arch": "sm_90", "avg_us": 1065.136, "backend": "gpu", "campaign_id": "3a065186d98d401bb5e74e7d72dd91eb", "candidate_id": "dec42c12c0a24f71b731bb8977486b9c", "correctness": {"max_scaled_err": 9.865941526099196e-07, "passed": true, "rel_err": 1.0386778716694501e-06, "tolerance": 1e-05}, "gpu": "NVIDIA H200", "iteration": 62, "launch": {"block": [128, 4, 1], "dynamic_smem_bytes": 185344, "grid": [32, 32, 1], "kernel_name": "gemm_bias_relu", "workspace_bytes": 0}, "params": {"block_x": 128, "block_y": 2, "coalesced": true, "interleave": false, "mma_window": 4, "pad": 0, "producers": 2, "reg_m": 1, "reg_n": 1, "smem": true, "stages": 1, "swizzle": 1, "tf32x3": true, "tile_k": 32, "unroll": 1, "vec": 4, "warp_m": 32, "warp_n": 32, "wgmma": 128}, "shape": "4096x4096x4096", "source_sha256": "4f514ec73176c48128a2a3844d30b063a1f1fa3b392a1cffa8e40c6a4f3d539c"}
// tuneforge gemm_bias_relu, 3xTF32 on Hopper's warpgroup tensor cores (wgmma, sm_90a):
// C = relu(A @ B + bias), fp32 in and out, any M, N, K >= 1.
//
// The kernel computes C^T = B^T A^T so that both wgmma operands are legal for TF32, which
// wgmma reads K-major only: the instruction's A operand is a 64 x 8 slice of B^T taken from
// registers (loaded from the raw, row-major B tile in shared memory, any layout will do), its
// B operand is the CTA's A tile (rows of A are K-contiguous) read from shared memory through a
// 128-byte-swizzled descriptor. Each fp32 operand x is split once into big and small: the
// tensor cores read only a TF32 operand's top 19 bits, so x itself is big = trunc_tf32(x), and
// small = tf32(x - big) (the difference is exact, then rounded to nearest) is written beside
// it: for the A tile once per tile by the whole CTA in shared memory, for B's fragments in
// registers. Three products per step (small*big, big*small, big*big); each K-tile's products go
// into fresh accumulators that are then added into fp32 registers (promotion), so long same-sign
// sums carry no accumulation bias.
// params: {"block_x": 128, "block_y": 2, "coalesced": true, "interleave": false, "mma_window": 4, "pad": 0, "producers": 2, "reg_m": 1, "reg_n": 1, "smem": true, "stages": 1, "swizzle": 1, "tf32x3": true, "tile_k": 32, "unroll": 1, "vec": 4, "warp_m": 32, "warp_n": 32, "wgmma": 128}
#include <stdint.h>

#define WGS 2             // warpgroups; each owns 64 columns of C
#define PWG 2                  // producer warpgroups (the copies and the A split)
#define THREADS (128 * (WGS + PWG))
#define CP_THREADS (128 * PWG)         // threads that copy and split: the producers'
#define BM 128                     // rows of C per CTA = the instruction's N
#define BN (64 * WGS)                  // columns of C per CTA
#define BK 32                          // one 128-byte swizzle row of fp32
#define NBUF 4             // stages of A and B as copied
#define NSMALL 3                       // buffers of the A tile's small part, apart from the stages
#define NA 64                     // fp32 accumulators per thread
#define B_LD (BN + 8)                  // row stride of the raw B tile: conflict-free fragments
#define A_BYTES (BM * BK * 4)
#define B_BYTES (BK * B_LD * 4)
#define B_OFF A_BYTES                  // the B tile's offset in a stage
#define STAGE_BYTES (((A_BYTES + B_BYTES) + 1023) / 1024 * 1024)
#define SMALL0 (NBUF * STAGE_BYTES)    // the small-part buffers, after the stages
// where K-tile kt (in stage buf) keeps its A tile's small part, from the aligned base
#define SMALL_AT(buf, kt) (SMALL0 + ((kt) % NSMALL) * A_BYTES)


// the tensor cores read a TF32 operand's top 19 bits and ignore the rest: the fp32 value itself
// serves as big = trunc_tf32(x), and small = tf32(x - big) (exact difference, then rounded to
// nearest, ties away) is the only part that has to be made. The rounding is one integer add of
// half a TF32 ulp (0x1000) to the difference's bits, the truncation the tensor cores' own: the
// operand they read is cvt.rna.tf32.f32's, bit for bit, in three instructions instead of the
// six of cvt.rna's emulation (its NaN/inf checks: x - big is NaN for an infinite or NaN x either
// way, and a difference is never near the top of the range)
__device__ __forceinline__ float tf_small(float x) {
    return __uint_as_float(
        __float_as_uint(x - __uint_as_float(__float_as_uint(x) & 0xffffe000u)) + 0x1000u);
}

__device__ __forceinline__ void tf_cp_async16(uint32_t dst, const float* gmem) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(dst), "l"(gmem));
}

__device__ __forceinline__ void tf_cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }

template <int N_>
__device__ __forceinline__ void tf_cp_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(N_)); }

__device__ __forceinline__ void tf_st_shared4(uint32_t dst, float4 v) {
    asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};\n"
                 :: "r"(dst), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w) : "memory");
}

__device__ __forceinline__ float4 tf_ld_shared4(uint32_t src) {
    float4 v;
    asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(src) : "memory");
    return v;
}

__device__ __forceinline__ float tf_ld_shared(uint32_t src) {
    float v;
    asm volatile("ld.shared.f32 %0, [%1];\n" : "=f"(v) : "r"(src) : "memory");
    return v;
}

// shared-memory matrix descriptor: K-major, 128-byte swizzle, 8-row groups 1024 bytes apart
__device__ __forceinline__ uint64_t tf_desc(uint32_t addr) {
    return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)(16 >> 4) << 16)
         | ((uint64_t)(1024 >> 4) << 32) | (1ull << 62);
}

__device__ __forceinline__ void tf_wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void tf_wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N_>
__device__ __forceinline__ void tf_wg_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(N_) : "memory"); }
__device__ __forceinline__ void tf_proxy_fence() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

__device__ __forceinline__ void tf_mbar_init(uint32_t bar, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void tf_mbar_arrive(uint32_t bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(bar) : "memory");
}

__device__ __forceinline__ void tf_mbar_wait(uint32_t bar, uint32_t parity) {
    uint32_t done;
    do {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, p;\n}\n" : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    } while (!done);
}

// d (+)= a (64 x 8 TF32 from registers) * b (8 x BM TF32 from shared memory)
__device__ __forceinline__ void tf_wgmma(float* d, const uint32_t* a, uint64_t b, int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
        "{%64, %65, %66, %67}, %68, p, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate));
}

extern "C" __global__ void __launch_bounds__(THREADS, 1)
gemm_bias_relu(const float* __restrict__ A, const float* __restrict__ B,
               const float* __restrict__ bias, float* __restrict__ C,
               int M, int N, int K)
{
    extern __shared__ __align__(16) unsigned char tf_smem_raw[];
    // the swizzle pattern is anchored at 1024-byte boundaries: align the stages (the launch
    // asks for 1 KB more than the stages need)
    const uint32_t smem0 = (static_cast<uint32_t>(__cvta_generic_to_shared(tf_smem_raw)) + 1023u)
                           & ~1023u;
    // descriptors differ only in their address field (address >> 4, 14 bits: all of shared
    // memory): made once, then offset by one add per MMA
    const uint64_t desc0 = tf_desc(smem0);
    __shared__ __align__(8) uint64_t tf_bars[2 * NBUF];  // full[0, NBUF), empty[NBUF, 2 NBUF)
    const uint32_t bars = static_cast<uint32_t>(__cvta_generic_to_shared(tf_bars));
    auto desc_at = [&](uint32_t addr) -> uint64_t { return desc0 + ((addr - smem0) >> 4); };
    const int tid = threadIdx.y * 128 + threadIdx.x;
    const int wg = threadIdx.y - PWG;  // the warpgroup's 64 columns of C (< 0: a producer)
    const int warp = threadIdx.x / 32;   // warp within its warpgroup
    const int lane = threadIdx.x % 32;
    const int group = lane >> 2;
    const int tig = lane & 3;
    const int block_row = blockIdx.y * BM;
    const int block_col = blockIdx.x * BN;
    const bool a_vec = (K % 4) == 0 && (reinterpret_cast<uintptr_t>(A) % 16) == 0;
    const bool b_vec = (N % 4) == 0 && (reinterpret_cast<uintptr_t>(B) % 16) == 0;
    // this thread's B^T rows (columns of C): the warpgroup's 64, the warp's 16 of them
    const int n_frag = wg * 64 + warp * 16 + group;

    // one K-tile into stage `buf`: the A tile (BM rows x 32 floats) at its swizzled place and
    // (unless B's fragments come from global memory) the B tile (32 rows x BN floats)
    // row-major; 16-byte cp.async where aligned and inside the matrices, zero-filled scalar
    // loads at the edges
    // a tile wholly inside A and B (every tile of a shape that is a multiple of the tiles, and
    // aligned) is copied without a bound check per chunk
    const bool rows_inside = a_vec && block_row + BM <= M && b_vec && block_col + BN <= N
                             && (long long)M * K < (1ll << 31) && (long long)K * N < (1ll << 31);
    // where this thread's chunks of such a tile are: its first chunk's element offset from the
    // tile's corner (32-bit: the matrices hold fewer than 2^31 elements on that path) and
    // shared-memory offset; its other chunks are whole rows further, at constant strides
    // (CP_THREADS is a multiple of 64, so a chunk's swizzle phase r & 7 is its first chunk's)
    constexpr int A_ITERS = BM * (BK / 4) / CP_THREADS;  // exact: BM * 8 is a multiple
    constexpr int A_ROWS = CP_THREADS / (BK / 4);         // rows between a thread's chunks
    const int a_off0 = (block_row + tid / (BK / 4)) * K + (tid % (BK / 4)) * 4;
    const uint32_t a_dst0 = (tid / (BK / 4)) * (BK * 4) + (((tid % (BK / 4)) ^ ((tid / (BK / 4)) & 7)) << 4);
    constexpr int B_ITERS = BK * BN / 4 / CP_THREADS;  // exact: 8 * BN / CP_THREADS
    constexpr int B_ROWS = CP_THREADS / (BN / 4);
    const int b_off0 = (tid / (BN / 4)) * N + block_col + (tid % (BN / 4)) * 4;
    const uint32_t b_dst0 = B_OFF + ((tid / (BN / 4)) * B_LD + (tid % (BN / 4)) * 4) * 4;
    auto load_stage = [&](int buf, int k0) {
        const uint32_t a_s = smem0 + buf * STAGE_BYTES;
        constexpr int A_CHUNKS = BM * (BK / 4);
        if (rows_inside && k0 + BK <= K) {
            const float* const a_src = A + (k0 + a_off0);
#pragma unroll
            for (int it = 0; it < A_ITERS; ++it)
                tf_cp_async16(a_s + a_dst0 + it * A_ROWS * (BK * 4), a_src + (size_t)it * A_ROWS * K);
            const float* const b_src = B + ((size_t)k0 * N + b_off0);
#pragma unroll
            for (int it = 0; it < B_ITERS; ++it)
                tf_cp_async16(a_s + b_dst0 + it * B_ROWS * (B_LD * 4), b_src + (size_t)it * B_ROWS * N);
            return;
        }
#pragma unroll
        for (int it = 0; it < (A_CHUNKS + CP_THREADS - 1) / CP_THREADS; ++it) {
            const int c = it * CP_THREADS + tid;
            if (A_CHUNKS % CP_THREADS == 0 || c < A_CHUNKS) {
                const int r = c / (BK / 4);
                const int kc = c % (BK / 4);
                const int gr = block_row + r;
                const int gk = k0 + kc * 4;
                const uint32_t dst = a_s + r * (BK * 4) + ((kc ^ (r & 7)) << 4);
                if (a_vec && gr < M && gk + 4 <= K) {
                    tf_cp_async16(dst, A + (size_t)gr * K + gk);
                } else {
                    float4 v;
                    const float* src = A + (size_t)gr * K + gk;
                    v.x = (gr < M && gk + 0 < K) ? src[0] : 0.0f;
                    v.y = (gr < M && gk + 1 < K) ? src[1] : 0.0f;
                    v.z = (gr < M && gk + 2 < K) ? src[2] : 0.0f;
                    v.w = (gr < M && gk + 3 < K) ? src[3] : 0.0f;
                    tf_st_shared4(dst, v);
                }
            }
        }
        const uint32_t b_s = a_s + B_OFF;
        constexpr int B_CHUNKS = BK * BN / 4;
#pragma unroll
        for (int it = 0; it < (B_CHUNKS + CP_THREADS - 1) / CP_THREADS; ++it) {
            const int c = it * CP_THREADS + tid;
            if (B_CHUNKS % CP_THREADS == 0 || c < B_CHUNKS) {
                const int r = c / (BN / 4);
                const int nc = (c % (BN / 4)) * 4;
                const int gk = k0 + r;
                const int gn = block_col + nc;
                const uint32_t dst = b_s + (r * B_LD + nc) * 4;
                if (b_vec && gk < K && gn + 4 <= N) {
                    tf_cp_async16(dst, B + (size_t)gk * N + gn);
                } else {
                    float4 v;
                    const float* src = B + (size_t)gk * N + gn;
                    v.x = (gk < K && gn + 0 < N) ? src[0] : 0.0f;
                    v.y = (gk < K && gn + 1 < N) ? src[1] : 0.0f;
                    v.z = (gk < K && gn + 2 < N) ? src[2] : 0.0f;
                    v.w = (gk < K && gn + 3 < N) ? src[3] : 0.0f;
                    tf_st_shared4(dst, v);
                }
            }
        }
    };

    // split the A tile of stage `buf` (K-tile kt): big is the tile as copied, small goes to
    // SMALL_AT; elementwise, so the swizzled positions carry over. Each thread splits the chunks
    // it copied itself (its own cp.async or stores), so its own copies having landed is enough;
    // then the stores are made visible to the tensor cores' (async proxy) reads
    auto split_own = [&](int buf, int kt) {
        const uint32_t a_s = smem0 + buf * STAGE_BYTES;
        const uint32_t small_s = smem0 + SMALL_AT(buf, kt);
        constexpr int A_CHUNKS = BM * (BK / 4);
#pragma unroll
        for (int it = 0; it < (A_CHUNKS + CP_THREADS - 1) / CP_THREADS; ++it) {
            const int c = it * CP_THREADS + tid;
            if (A_CHUNKS % CP_THREADS == 0 || c < A_CHUNKS) {
                const int r = c / (BK / 4);
                const uint32_t off = r * (BK * 4) + (((c % (BK / 4)) ^ (r & 7)) << 4);
                const float4 x = tf_ld_shared4(a_s + off);
                tf_st_shared4(small_s + off, make_float4(tf_small(x.x), tf_small(x.y),
                                                         tf_small(x.z), tf_small(x.w)));
            }
        }
        tf_proxy_fence();
    };
    // the fragments of k8 step s of the tile whose B part is at b_s: a B^T slice, split in
    // registers (big is the value as loaded)
    auto make_frags = [&](uint32_t (&fb)[4], uint32_t (&fs)[4], uint32_t b_s, int s) {
        const uint32_t row0 = b_s + ((s * 8 + tig) * B_LD + n_frag) * 4;
        const uint32_t row4 = row0 + 4 * B_LD * 4;
        const float x0 = tf_ld_shared(row0), x1 = tf_ld_shared(row0 + 32);
        const float x2 = tf_ld_shared(row4), x3 = tf_ld_shared(row4 + 32);
        fb[0] = __float_as_uint(x0); fs[0] = __float_as_uint(tf_small(x0));
        fb[1] = __float_as_uint(x1); fs[1] = __float_as_uint(tf_small(x1));
        fb[2] = __float_as_uint(x2); fs[2] = __float_as_uint(tf_small(x2));
        fb[3] = __float_as_uint(x3); fs[3] = __float_as_uint(tf_small(x3));
    };

    float acc[NA];
#pragma unroll
    for (int i = 0; i < NA; ++i) acc[i] = 0.0f;
    float part[NA];
#pragma unroll
    for (int i = 0; i < NA; ++i) part[i] = 0.0f;

    const int k_first = 0;
    const int ktiles = (K + BK - 1) / BK;
    // MMAs kept in flight across K-tiles: each k8 step's three MMAs are a commit group with
    // fragment registers of its own; a step's fragments are made while the three groups before
    // it run, so the tensor cores always have six to nine MMAs queued. The partial sums of
    // 4 K-tiles (128 products a sum) are promoted into fp32 at
    // once, the one point where the pipeline drains. A stage is loaded NBUF - 2 tiles
    // ahead: the stage before the current one may still be read by its last groups.
    // With producers the A tiles' small parts go to NSMALL buffers of their own (a small part
    // lives about one tile, a copy NBUF - 2), so a stage holds A and B as copied: one more
    // stage in the same shared memory.
    // each thread splits the A chunks it copied itself (split_own), as soon as its copies have
    // landed: no barrier between the copy and the split; the barrier at the top of the next
    // tile (or the full mbarrier) makes both visible to the MMAs
    // warp-specialized: the producer warpgroup copies tile t and splits tile t - LAG (its own
    // chunks, once they land), then arrives on full[stage]; each consumer warp arrives on
    // empty[stage] once the MMAs that read a stage have retired. No CTA-wide barrier after this
    // one: the consumers' MMAs never wait for a copy or a split that is not their tile's.
    if (tid == 0) {
#pragma unroll
        for (int s = 0; s < NBUF; ++s) {
            tf_mbar_init(bars + 8 * s, CP_THREADS);          // every producer thread
            tf_mbar_init(bars + 8 * (NBUF + s), 4 * WGS);    // one lane per consumer warp
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    if (wg < 0) {
        // registers move to the consumers within what the CTA was given at launch:
        // 256 x 64 + 256 x 192 <= 512 x 128 (a consumer's
        // setmaxnreg.inc waits for registers that only the producers' dec returns)
        asm volatile("setmaxnreg.dec.sync.aligned.u32 64;\n");
        // iteration t copies tile t into stage t % NBUF and splits tile u = t - LAG into small
        // buffer u % 3: both were last read by tile t - NBUF = u - 3, which the consumers must
        // have released first (in the last LAG iterations too, which copy nothing but still
        // split: without that wait the last tiles' splits overwrote a small part still read)
        constexpr int LAG = NBUF - 3;
        for (int t = 0; t < ktiles + LAG; ++t) {
            if (t >= NBUF) tf_mbar_wait(bars + 8 * (NBUF + t % NBUF), ((t / NBUF) - 1) & 1);
            if (t < ktiles) load_stage(t % NBUF, (k_first + t) * BK);
            tf_cp_commit();
            if (t >= LAG) {
                const int u = t - LAG;
                tf_cp_wait<LAG>();  // this thread's copies of tile u have landed
                split_own(u % NBUF, u);
                tf_mbar_arrive(bars + 8 * (u % NBUF));
            }
        }
        tf_cp_wait<0>();
        return;
    }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 192;\n");

    // fragments: one register set per k8 step (big and small halves of the B^T slice), four
    // sets, so that a step's set is rewritten only once the step four groups back has retired
    uint32_t fb[BK / 8][4], fs[BK / 8][4];
    // k8 step s's three MMAs as one commit group
    auto mmas = [&](int s, uint32_t a_s, uint32_t small_s, bool fresh) {
        const uint64_t big = desc_at(a_s) + s * 2;  // + s * 32 bytes
        const uint64_t small = desc_at(small_s) + s * 2;
        tf_wg_fence();
        tf_wgmma(part, fs[s], big, !fresh);
        tf_wgmma(part, fb[s], small, 1);
        tf_wgmma(part, fb[s], big, 1);
        tf_wg_commit();
    };

    // one K-tile; `fresh` (a window's first tile: new partial sums) and `last` (its last tile:
    // retire everything, promote) are constants wherever it is called, so the code between two
    // promotions is straight-line: ptxas sees which MMAs are in flight and never has to retire
    // them at a branch or a loop's back edge (where it would, to move an MMA-defined register)
    auto tile = [&](int kt, bool fresh, bool last) {
        tf_mbar_wait(bars + 8 * (kt % NBUF), (kt / NBUF) & 1);  // copied and split
        const uint32_t a_s = smem0 + (kt % NBUF) * STAGE_BYTES;
        const uint32_t b_s = a_s + B_OFF;
        const uint32_t small_s = smem0 + SMALL_AT(kt % NBUF, kt);
#pragma unroll
        for (int s = 0; s < BK / 8; ++s) {
            // at most three groups left in flight: the one that last read set s has retired
            // (the previous tile's step s; at a window's start nothing is in flight)
            if (!fresh || s > 0) tf_wg_wait<BK / 8 - 1>();
            make_frags(fb[s], fs[s], b_s, s);
            mmas(s, a_s, small_s, fresh && s == 0);
        }
        // tile kt - 1's MMAs have retired (the wait before step 3): its stage is free
        if (kt > 0) {
            __syncwarp();
            if (lane == 0) tf_mbar_arrive(bars + 8 * (NBUF + (kt - 1) % NBUF));
        }
        if (last) {
            tf_wg_wait<0>();
#pragma unroll
            for (int i = 0; i < NA; ++i) {  // promotion: the window's tensor-core sums into fp32
                asm volatile("" : "+f"(part[i]) :: "memory");
                acc[i] += part[i];
            }
        }
    };
    constexpr int WINDOW = 4;
    int kt = 0;
    for (; kt + WINDOW <= ktiles; kt += WINDOW) {
#pragma unroll
        for (int t = 0; t < WINDOW; ++t) tile(kt + t, t == 0, t == WINDOW - 1);
    }
    for (; kt < ktiles; ++kt) tile(kt, true, true);  // the last ktiles % W tiles: one at a time

    // accumulator i = 4j + 2h + e holds C[block_row + 8j + 2 tig + e][block_col + n_frag + 8h]
#pragma unroll
    for (int j = 0; j < BM / 8; ++j) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            const int row = block_row + 8 * j + 2 * tig + e;
            if (row >= M) continue;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int col = block_col + n_frag + 8 * h;
                if (col >= N) continue;
                C[(size_t)row * N + col] = fmaxf(acc[4 * j + 2 * h + e] + bias[col], 0.0f);
            }
        }
    }
}
