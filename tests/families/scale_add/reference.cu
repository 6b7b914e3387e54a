// scale_add's float64 reference: ref = 2 x + 1, scale = 2 |x| + 1 (the rounding's natural size).
extern "C" __global__ void reference_scale_add(const float* __restrict__ x,
                                               double* __restrict__ ref,
                                               double* __restrict__ scale, int n)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        const double v = (double)x[i];
        ref[i] = 2.0 * v + 1.0;
        scale[i] = 2.0 * fabs(v) + 1.0;
    }
}
