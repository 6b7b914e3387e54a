// Tiled fp32 transpose: out[j * m + i] = in[i * n + j] for an m x n row-major input.
// The tunables arrive as #define lines (template "macros"):
//   tile_x, tile_y  the input tile a CTA moves at a time (columns x rows)
//   vec             floats a thread moves per access (1, 2, 4: float2/float4 where aligned)
//   rows            accesses a thread makes per tile (tile_x * tile_y / (vec * rows) threads)
//   use_smem        stage the tile in shared memory so that writes are coalesced too
//   pad             floats added to each shared-memory row (bank conflicts of the column reads)
//   tiles           tiles a CTA moves, one after the other along the rows
#include "vec_access.cuh"

#define TF_THREADS ((tile_x / vec) * (tile_y / rows))
#define TF_READ_VECS_PER_ROW (tile_x / vec)
#define TF_WRITE_VECS_PER_ROW (tile_y / vec)

extern "C" __global__ void __launch_bounds__(TF_THREADS) transpose(
    const float* __restrict__ in, float* __restrict__ out, int m, int n)
{
#if use_smem
    __shared__ float tile[tile_y][tile_x + pad];
#endif
    const int t = threadIdx.y * (tile_x / vec) + threadIdx.x;
    const int j0 = blockIdx.x * tile_x;
    const bool rows_aligned = (n % vec) == 0;
    const bool cols_aligned = (m % vec) == 0;  // output rows start vector-aligned
    for (int k = 0; k < tiles; ++k) {
        const long long i0 = ((long long)blockIdx.y * tiles + k) * tile_y;
        if (i0 >= m) break;
#pragma unroll
        for (int r = 0; r < rows; ++r) {
            const int v = t + r * TF_THREADS;
            const int ti = v / TF_READ_VECS_PER_ROW;
            const int tj = (v % TF_READ_VECS_PER_ROW) * vec;
            const long long i = i0 + ti;
            const int j = j0 + tj;
            float x[vec];
            if (i < m) {
                tf_load<vec>(x, in + i * n, j, n, rows_aligned);
            } else {
#pragma unroll
                for (int e = 0; e < vec; ++e) x[e] = 0.0f;
            }
#if use_smem
#pragma unroll
            for (int e = 0; e < vec; ++e) tile[ti][tj + e] = x[e];
#else
            if (i < m) {
#pragma unroll
                for (int e = 0; e < vec; ++e)
                    if (j + e < n) out[(long long)(j + e) * m + i] = x[e];
            }
#endif
        }
#if use_smem
        __syncthreads();
#pragma unroll
        for (int r = 0; r < rows; ++r) {
            const int v = t + r * TF_THREADS;
            const int tj = v / TF_WRITE_VECS_PER_ROW;          // output row within the tile
            const int ti = (v % TF_WRITE_VECS_PER_ROW) * vec;  // output column within the tile
            const int j = j0 + tj;
            if (j < n) {
                float y[vec];
#pragma unroll
                for (int e = 0; e < vec; ++e) y[e] = tile[ti + e][tj];
                tf_store<vec>(y, out + (long long)j * m, i0 + ti, m, cols_aligned);
            }
        }
        __syncthreads();
#endif
    }
}
