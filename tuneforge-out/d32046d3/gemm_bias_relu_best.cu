// {"arch": "sm_90", "avg_us": 4114.784, "backend": "replay", "campaign_id": "d32046d3ccf84c7e968a027aee89c233", "candidate_id": "aa43616b461e4afc90d1c7a67d268124", "correctness": {"max_scaled_err": 2.0379647902189167e-06, "passed": true, "rel_err": 1.1447736149645313e-06, "tolerance": 0.0001}, "gpu": "NVIDIA H200", "iteration": 29, "launch": {"block": [16, 16, 1], "dynamic_smem_bytes": 12288, "grid": [64, 32, 1], "kernel_name": "gemm_bias_relu", "workspace_bytes": 0}, "params": {"block_x": 16, "block_y": 16, "coalesced": true, "interleave": false, "pad": 0, "reg_m": 8, "reg_n": 4, "smem": true, "stages": 1, "swizzle": 1, "tf32x3": false, "tile_k": 16, "unroll": 1, "vec": 4, "warp_m": 32, "warp_n": 32}, "shape": "4096x4096x4096", "source_sha256": "19c221bb13561f1911ddec70f02ad99783c78305ee9c853787edf1cbcdf8f4c2"}
// tuneforge gemm_bias_relu: C = relu(A @ B + bias), fp32, row-major.
// A: M x K, B: K x N, bias: N, C: M x N. Correct for any M, N, K >= 1.
// params: {"block_x": 16, "block_y": 16, "coalesced": true, "interleave": false, "pad": 0, "reg_m": 8, "reg_n": 4, "smem": true, "stages": 1, "swizzle": 1, "tf32x3": false, "tile_k": 16, "unroll": 1, "vec": 4, "warp_m": 32, "warp_n": 32}
#include <stdint.h>

#define BX 16
#define BY 16
#define THREADS 256
#define RM 8
#define RN 4
#define BM 128
#define BN 64
#define VEC 4

__device__ __forceinline__ bool tf_aligned(const void* ptr) {
    return (reinterpret_cast<uintptr_t>(ptr) % (4 * VEC)) == 0;
}


extern "C" __global__ void __launch_bounds__(THREADS)
gemm_bias_relu(const float* __restrict__ A, const float* __restrict__ B,
               const float* __restrict__ bias, float* __restrict__ C,
               int M, int N, int K)
{
    // threadIdx.x runs along N: a warp reads B and writes C contiguously.
    const int tn = threadIdx.x;
    const int tm = threadIdx.y;
    const int block_row = blockIdx.y * BM;
    const int block_col = blockIdx.x * BN;
    const int row0 = block_row + tm * RM;
    const int col0 = block_col + tn * RN;
#define A_OFF(i) (tm * RM + (i))
#define B_OFF(j) (tn * RN + (j))

    float acc[RM][RN];
#pragma unroll
    for (int i = 0; i < RM; ++i)
#pragma unroll
        for (int j = 0; j < RN; ++j) acc[i][j] = 0.0f;

    // ---- shared-memory path: A and B tiles staged, BK = 16 deep ----------------
#define BK 16
#define PAD 0
#define AS_LD (BM + PAD)
#define BS_LD (BN + PAD)
    extern __shared__ __align__(16) float tf_smem[];
    constexpr int STAGE = BK * (AS_LD + BS_LD);  // floats per shared-memory stage
    const int tid = threadIdx.y * BX + threadIdx.x;
    const bool a_vec = VEC > 1 && (K % VEC) == 0 && tf_aligned(A);
    const bool b_vec = VEC > 1 && (N % VEC) == 0 && tf_aligned(B);
    constexpr int A_VECS = BM * BK / VEC;
    constexpr int B_VECS = BK * BN / VEC;
    constexpr int A_IT = (A_VECS + THREADS - 1) / THREADS;
    constexpr int B_IT = (B_VECS + THREADS - 1) / THREADS;
    float ta[A_IT][VEC];
    float tb[B_IT][VEC];

    // global -> registers (zero outside the matrices; scalar where a vector would straddle
    // an edge or a misaligned row)
    auto load_tile = [&](int k0) {
#pragma unroll
        for (int it = 0; it < A_IT; ++it) {
            const int v = it * THREADS + tid;
            if (A_VECS % THREADS == 0 || v < A_VECS) {
                const int r = v / (BK / VEC);
                const int c = (v % (BK / VEC)) * VEC;
                const int gr = block_row + r;
                const int gc = k0 + c;
                if (a_vec && gr < M && gc + VEC <= K) {
                    { const float4 t_ = *reinterpret_cast<const float4*>(A + (size_t)gr * K + gc); ta[it][0] = t_.x; ta[it][1] = t_.y; ta[it][2] = t_.z; ta[it][3] = t_.w; }
                } else {
#pragma unroll
                    for (int e = 0; e < VEC; ++e)
                        ta[it][e] = (gr < M && gc + e < K) ? A[(size_t)gr * K + gc + e] : 0.0f;
                }
            }
        }
#pragma unroll
        for (int it = 0; it < B_IT; ++it) {
            const int v = it * THREADS + tid;
            if (B_VECS % THREADS == 0 || v < B_VECS) {
                const int r = v / (BN / VEC);
                const int c = (v % (BN / VEC)) * VEC;
                const int gr = k0 + r;
                const int gc = block_col + c;
                if (b_vec && gr < K && gc + VEC <= N) {
                    { const float4 t_ = *reinterpret_cast<const float4*>(B + (size_t)gr * N + gc); tb[it][0] = t_.x; tb[it][1] = t_.y; tb[it][2] = t_.z; tb[it][3] = t_.w; }
                } else {
#pragma unroll
                    for (int e = 0; e < VEC; ++e)
                        tb[it][e] = (gr < K && gc + e < N) ? B[(size_t)gr * N + gc + e] : 0.0f;
                }
            }
        }
    };
    // registers -> shared memory (A transposed: As[k][m])
    auto store_tile = [&](float* stage) {
        float* As = stage;
        float* Bs = stage + BK * AS_LD;
#pragma unroll
        for (int it = 0; it < A_IT; ++it) {
            const int v = it * THREADS + tid;
            if (A_VECS % THREADS == 0 || v < A_VECS) {
                const int r = v / (BK / VEC);
                const int c = (v % (BK / VEC)) * VEC;
#pragma unroll
                for (int e = 0; e < VEC; ++e) As[(c + e) * AS_LD + r] = ta[it][e];
            }
        }
#pragma unroll
        for (int it = 0; it < B_IT; ++it) {
            const int v = it * THREADS + tid;
            if (B_VECS % THREADS == 0 || v < B_VECS) {
                const int r = v / (BN / VEC);
                const int c = (v % (BN / VEC)) * VEC;
                *reinterpret_cast<float4*>(&Bs[r * BS_LD + c]) =
                    make_float4(tb[it][0], tb[it][1], tb[it][2], tb[it][3]);
            }
        }
    };
    auto compute_tile = [&](const float* stage) {
        const float* As = stage;
        const float* Bs = stage + BK * AS_LD;
#pragma unroll 1
        for (int kk = 0; kk < BK; ++kk) {
            float a[RM];
            float b[RN];
#pragma unroll
            for (int i = 0; i < RM; i += 4) {
                const float4 t4 = *reinterpret_cast<const float4*>(&As[kk * AS_LD + A_OFF(i)]);
                a[i] = t4.x; a[i + 1] = t4.y; a[i + 2] = t4.z; a[i + 3] = t4.w;
            }
#pragma unroll
            for (int j = 0; j < RN; j += 4) {
                const float4 t4 = *reinterpret_cast<const float4*>(&Bs[kk * BS_LD + B_OFF(j)]);
                b[j] = t4.x; b[j + 1] = t4.y; b[j + 2] = t4.z; b[j + 3] = t4.w;
            }
#pragma unroll
            for (int i = 0; i < RM; ++i)
#pragma unroll
                for (int j = 0; j < RN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
    };

    for (int k0 = 0; k0 < K; k0 += BK) {
        load_tile(k0);
        store_tile(tf_smem);
        __syncthreads();
        compute_tile(tf_smem);
        __syncthreads();
    }

    // ---- epilogue: bias, ReLU, store (vector stores only where aligned and in bounds) --------
    const bool c_vec = (N % VEC) == 0 && tf_aligned(C) && tf_aligned(bias);
#pragma unroll
    for (int i = 0; i < RM; ++i) {
        const int row = block_row + A_OFF(i);
        if (row >= M) break;
        float* c_row = C + (size_t)row * N;
#pragma unroll
        for (int j = 0; j < RN; j += VEC) {
            const int col = block_col + B_OFF(j);
            if (c_vec && col + VEC <= N) {
                float bv[VEC];
                { const float4 t_ = *reinterpret_cast<const float4*>(bias + col); bv[0] = t_.x; bv[1] = t_.y; bv[2] = t_.z; bv[3] = t_.w; }
                float4 o;
                o.x = fmaxf(acc[i][j] + bv[0], 0.0f);
                o.y = fmaxf(acc[i][j + 1] + bv[1], 0.0f);
                o.z = fmaxf(acc[i][j + 2] + bv[2], 0.0f);
                o.w = fmaxf(acc[i][j + 3] + bv[3], 0.0f);
                *reinterpret_cast<float4*>(c_row + col) = o;
            } else {
#pragma unroll
                for (int e = 0; e < VEC; ++e)
                    if (col + e < N) c_row[col + e] = fmaxf(acc[i][j + e] + bias[col + e], 0.0f);
            }
        }
    }
}
