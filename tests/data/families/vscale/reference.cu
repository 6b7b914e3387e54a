// The float64 reference: the candidate's signature with its output in double.
extern "C" __global__ void vscale_ref(const float* x, double* y, int n) {
    long j = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (j < n) y[j] = 2.0 * (double)x[j];
}
