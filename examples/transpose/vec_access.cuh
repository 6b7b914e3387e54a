// Vector loads and stores of `vec` consecutive floats of a row, with a scalar fallback for a
// row that is not vector-aligned or a vector that crosses the row's end.
#pragma once

template <int V>
__device__ __forceinline__ void tf_load(float* x, const float* __restrict__ row, long long j,
                                        long long len, bool aligned)
{
    if (V == 4 && aligned && j + 4 <= len) {
        const float4 q = *reinterpret_cast<const float4*>(row + j);
        x[0] = q.x; x[1] = q.y; x[2] = q.z; x[3] = q.w;
        return;
    }
    if (V == 2 && aligned && j + 2 <= len) {
        const float2 q = *reinterpret_cast<const float2*>(row + j);
        x[0] = q.x; x[1] = q.y;
        return;
    }
#pragma unroll
    for (int e = 0; e < V; ++e) x[e] = (j + e < len) ? row[j + e] : 0.0f;
}

template <int V>
__device__ __forceinline__ void tf_store(const float* y, float* __restrict__ row, long long i,
                                         long long len, bool aligned)
{
    if (V == 4 && aligned && i + 4 <= len) {
        *reinterpret_cast<float4*>(row + i) = make_float4(y[0], y[1], y[2], y[3]);
        return;
    }
    if (V == 2 && aligned && i + 2 <= len) {
        *reinterpret_cast<float2*>(row + i) = make_float2(y[0], y[1]);
        return;
    }
#pragma unroll
    for (int e = 0; e < V; ++e)
        if (i + e < len) row[i + e] = y[e];
}
