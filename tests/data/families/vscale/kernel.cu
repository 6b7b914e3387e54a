// y = 2 x: each thread of a BLOCK-thread CTA scales ITEMS elements, BLOCK apart (coalesced).
extern "C" __global__ void vscale(const float* __restrict__ x, float* __restrict__ y, int n) {
    long base = (long)blockIdx.x * BLOCK * ITEMS + threadIdx.x;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        long j = base + (long)i * BLOCK;
        if (j < n) y[j] = 2.0f * x[j];
    }
}
