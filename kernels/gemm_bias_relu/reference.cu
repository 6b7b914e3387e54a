// tuneforge gemm_bias_relu reference semantics, in float64.
// ref[i,j]   = relu(sum_k A[i,k] * B[k,j] + bias[j])          (float64 accumulation)
// scale[i,j] = sum_k |A[i,k] * B[k,j]| + |bias[j]|            (natural scale of rounding error)
// Any M, N, K >= 1. 16x16 threads, each computing a 4x4 block, 64x64 tiles staged in smem.
#define RT 64
#define RK 16

extern "C" __global__ void __launch_bounds__(256)
reference_gemm_bias_relu(const float* __restrict__ A, const float* __restrict__ B,
                         const float* __restrict__ bias, double* __restrict__ ref,
                         double* __restrict__ scale, int M, int N, int K)
{
    __shared__ double As[RK][RT + 1];
    __shared__ double Bs[RK][RT + 1];
    const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * 16 + tx;
    const int row0 = blockIdx.y * RT, col0 = blockIdx.x * RT;
    double acc[4][4], mag[4][4];
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) { acc[i][j] = 0.0; mag[i][j] = 0.0; }
    for (int k0 = 0; k0 < K; k0 += RK) {
        for (int v = tid; v < RT * RK; v += 256) {
            int r = v / RK, c = v % RK;
            int gr = row0 + r, gc = k0 + c;
            As[c][r] = (gr < M && gc < K) ? (double)A[(size_t)gr * K + gc] : 0.0;
            int br = v / RT, bc = v % RT;
            int gbr = k0 + br, gbc = col0 + bc;
            Bs[br][bc] = (gbr < K && gbc < N) ? (double)B[(size_t)gbr * N + gbc] : 0.0;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < RK; ++kk) {
            double a[4], b[4];
            for (int i = 0; i < 4; ++i) a[i] = As[kk][ty + 16 * i];
            for (int j = 0; j < 4; ++j) b[j] = Bs[kk][tx + 16 * j];
            for (int i = 0; i < 4; ++i)
                for (int j = 0; j < 4; ++j) {
                    const double p = a[i] * b[j];
                    acc[i][j] += p;
                    mag[i][j] += fabs(p);
                }
        }
        __syncthreads();
    }
    for (int i = 0; i < 4; ++i) {
        const int r = row0 + ty + 16 * i;
        if (r >= M) continue;
        for (int j = 0; j < 4; ++j) {
            const int c = col0 + tx + 16 * j;
            if (c >= N) continue;
            const double bv = (double)bias[c];
            const double v = acc[i][j] + bv;
            ref[(size_t)r * N + c] = v > 0.0 ? v : 0.0;
            scale[(size_t)r * N + c] = mag[i][j] + fabs(bv);
        }
    }
}
