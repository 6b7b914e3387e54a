// {"arch": "sm_90", "avg_us": 2765.664, "backend": "gpu", "campaign_id": "d5d40d71c8814dcebdf1621d4302cbf6", "candidate_id": "f7a8630c85ac4763a0d60a69e98c2e32", "correctness": {"max_scaled_err": 5.859153944953487e-07, "passed": true, "rel_err": 3.175738278777722e-07, "tolerance": 0.0001}, "gpu": "NVIDIA H200", "iteration": 60, "launch": {"block": [32, 4, 1], "dynamic_smem_bytes": 82944, "grid": [64, 32, 1], "kernel_name": "gemm_bias_relu", "workspace_bytes": 0}, "params": {"block_x": 32, "block_y": 4, "coalesced": true, "interleave": false, "pad": 0, "reg_m": 1, "reg_n": 1, "smem": true, "stages": 2, "swizzle": 1, "tf32x3": true, "tile_k": 32, "unroll": 1, "vec": 4, "warp_m": 32, "warp_n": 64}, "shape": "4096x4096x4096", "source_sha256": "2cb920e3585409137300d70a70682dd8c7cc3e4e5432c623043898898000f423"}
// tuneforge gemm_bias_relu, 3xTF32 tensor-core path: C = relu(A @ B + bias), fp32 in and out.
// Each fp32 operand x is split into big = tf32(x) and small = tf32(x - big); a*b is computed as
// a_small*b_big + a_big*b_small + a_big*b_big with mma.sync m16n8k8 TF32 (fp32 accumulate).
// The tensor cores' partial sums of each K-tile are added into fp32 registers (promotion), so
// long same-sign sums carry no accumulation bias. Any M, N, K >= 1.
// params: {"block_x": 32, "block_y": 4, "coalesced": true, "interleave": false, "pad": 0, "reg_m": 1, "reg_n": 1, "smem": true, "stages": 2, "swizzle": 1, "tf32x3": true, "tile_k": 32, "unroll": 1, "vec": 4, "warp_m": 32, "warp_n": 64}
#include <stdint.h>

#define THREADS 128
#define BM 128
#define BN 64
#define BK 32
#define WM 32
#define WN 64
#define WARPS_N 1
#define MT (WM / 16)
#define NT (WN / 8)
#define NBUF 3
#define A_LD (BK + 4)   // row stride of the A tile: conflict-free fragment reads
#define B_LD (BN + 8)   // row stride of the B tile: conflict-free fragment reads
#define STAGE (BM * A_LD + BK * B_LD)


__device__ __forceinline__ uint32_t tf_tf32(float x) {
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
}

__device__ __forceinline__ void tf_split(float x, uint32_t& big, uint32_t& small) {
    big = tf_tf32(x);
    small = tf_tf32(x - __uint_as_float(big));
}

__device__ __forceinline__ void tf_mma(float* d, const uint32_t* a, const uint32_t* b) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ void tf_cp_async16(float* smem, const float* gmem) {
    const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(s), "l"(gmem));
}

__device__ __forceinline__ void tf_cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }

template <int N_>
__device__ __forceinline__ void tf_cp_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(N_)); }

extern "C" __global__ void __launch_bounds__(THREADS)
gemm_bias_relu(const float* __restrict__ A, const float* __restrict__ B,
               const float* __restrict__ bias, float* __restrict__ C,
               int M, int N, int K)
{
    extern __shared__ __align__(16) float tf_smem[];
    const int tid = threadIdx.y * blockDim.x + threadIdx.x;
    const int warp = tid / 32;
    const int lane = tid % 32;
    const int group = lane >> 2;  // groupID of the mma fragment layouts
    const int tig = lane & 3;     // threadID_in_group
    const int warp_row = (warp / WARPS_N) * WM;
    const int warp_col = (warp % WARPS_N) * WN;
    const int block_row = blockIdx.y * BM;
    const int block_col = blockIdx.x * BN;
    const bool a_vec = (K % 4) == 0 && (reinterpret_cast<uintptr_t>(A) % 16) == 0;
    const bool b_vec = (N % 4) == 0 && (reinterpret_cast<uintptr_t>(B) % 16) == 0;

    // one K-tile into buffer `buf`: 16-byte cp.async where aligned and inside the matrices,
    // zero-filled scalar stores at the edges
    auto load_stage = [&](int buf, int k0) {
        float* As = tf_smem + buf * STAGE;
        float* Bs = As + BM * A_LD;
        constexpr int A_CHUNKS = BM * BK / 4;
#pragma unroll
        for (int it = 0; it < (A_CHUNKS + THREADS - 1) / THREADS; ++it) {
            const int c = it * THREADS + tid;
            if (A_CHUNKS % THREADS == 0 || c < A_CHUNKS) {
                const int r = c / (BK / 4);
                const int kc = (c % (BK / 4)) * 4;
                const int gr = block_row + r;
                const int gk = k0 + kc;
                float* dst = As + r * A_LD + kc;
                if (a_vec && gr < M && gk + 4 <= K) {
                    tf_cp_async16(dst, A + (size_t)gr * K + gk);
                } else {
#pragma unroll
                    for (int e = 0; e < 4; ++e)
                        dst[e] = (gr < M && gk + e < K) ? A[(size_t)gr * K + gk + e] : 0.0f;
                }
            }
        }
        constexpr int B_CHUNKS = BK * BN / 4;
#pragma unroll
        for (int it = 0; it < (B_CHUNKS + THREADS - 1) / THREADS; ++it) {
            const int c = it * THREADS + tid;
            if (B_CHUNKS % THREADS == 0 || c < B_CHUNKS) {
                const int r = c / (BN / 4);
                const int nc = (c % (BN / 4)) * 4;
                const int gk = k0 + r;
                const int gn = block_col + nc;
                float* dst = Bs + r * B_LD + nc;
                if (b_vec && gk < K && gn + 4 <= N) {
                    tf_cp_async16(dst, B + (size_t)gk * N + gn);
                } else {
#pragma unroll
                    for (int e = 0; e < 4; ++e)
                        dst[e] = (gk < K && gn + e < N) ? B[(size_t)gk * N + gn + e] : 0.0f;
                }
            }
        }
    };

    float acc[MT][NT][4];
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

    const int ktiles = (K + BK - 1) / BK;
#pragma unroll
    for (int s = 0; s < NBUF - 1; ++s) {
        if (s < ktiles) load_stage(s, s * BK);
        tf_cp_commit();
    }
    for (int kt = 0; kt < ktiles; ++kt) {
        tf_cp_wait<NBUF - 2>();
        __syncthreads();  // tile kt visible; everyone is done with the buffer refilled next
        if (kt + NBUF - 1 < ktiles) load_stage((kt + NBUF - 1) % NBUF, (kt + NBUF - 1) * BK);
        tf_cp_commit();
        const float* As = tf_smem + (kt % NBUF) * STAGE;
        const float* Bs = As + BM * A_LD;
        float part[MT][NT][4];
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
            for (int j = 0; j < NT; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) part[i][j][e] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < BK; kk += 8) {
            uint32_t a_big[MT][4], a_small[MT][4];
            uint32_t b_big[NT][2], b_small[NT][2];
#pragma unroll
            for (int i = 0; i < MT; ++i) {
                const float* a = As + (warp_row + i * 16 + group) * A_LD + kk + tig;
                tf_split(a[0], a_big[i][0], a_small[i][0]);
                tf_split(a[8 * A_LD], a_big[i][1], a_small[i][1]);
                tf_split(a[4], a_big[i][2], a_small[i][2]);
                tf_split(a[8 * A_LD + 4], a_big[i][3], a_small[i][3]);
            }
#pragma unroll
            for (int j = 0; j < NT; ++j) {
                const float* b = Bs + (kk + tig) * B_LD + warp_col + j * 8 + group;
                tf_split(b[0], b_big[j][0], b_small[j][0]);
                tf_split(b[4 * B_LD], b_big[j][1], b_small[j][1]);
            }
#pragma unroll
            for (int i = 0; i < MT; ++i)
#pragma unroll
                for (int j = 0; j < NT; ++j) {
                    tf_mma(part[i][j], a_small[i], b_big[j]);
                    tf_mma(part[i][j], a_big[i], b_small[j]);
                    tf_mma(part[i][j], a_big[i], b_big[j]);
                }
        }
#pragma unroll
        for (int i = 0; i < MT; ++i)  // promotion: tensor-core partial sums into fp32 registers
#pragma unroll
            for (int j = 0; j < NT; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) acc[i][j][e] += part[i][j][e];
    }
    tf_cp_wait<0>();

    // epilogue: bias, ReLU; float2 stores where the row allows it
    const bool c_vec = (N % 2) == 0 && (reinterpret_cast<uintptr_t>(C) % 8) == 0;
#pragma unroll
    for (int i = 0; i < MT; ++i) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int row = block_row + warp_row + i * 16 + group + half * 8;
            if (row >= M) continue;
            float* c_row = C + (size_t)row * N;
#pragma unroll
            for (int j = 0; j < NT; ++j) {
                const int col = block_col + warp_col + j * 8 + 2 * tig;
                const float v0 = acc[i][j][2 * half];
                const float v1 = acc[i][j][2 * half + 1];
                if (c_vec && col + 2 <= N) {
                    float2 o;
                    o.x = fmaxf(v0 + bias[col], 0.0f);
                    o.y = fmaxf(v1 + bias[col + 1], 0.0f);
                    *reinterpret_cast<float2*>(c_row + col) = o;
                } else {
                    if (col < N) c_row[col] = fmaxf(v0 + bias[col], 0.0f);
                    if (col + 1 < N) c_row[col + 1] = fmaxf(v1 + bias[col + 1], 0.0f);
                }
            }
        }
    }
}
