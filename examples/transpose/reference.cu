// The transpose's reference: the candidate's signature, the output in float64 (the family's
// reference.outputs_dtype), one thread an element in a grid-stride loop.
extern "C" __global__ void transpose_reference(const float* __restrict__ in,
                                               double* __restrict__ out, int m, int n)
{
    const long long total = (long long)m * n;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
         e += (long long)gridDim.x * blockDim.x) {
        const long long i = e / n, j = e % n;
        out[j * m + i] = (double)in[e];
    }
}
