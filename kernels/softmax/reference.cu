// tuneforge softmax reference semantics, in float64.
// ref[i,j]   = exp(x[i,j] - max_j x[i,:]) / sum_j exp(x[i,j] - max_j x[i,:])
// scale[i,j] = ref[i,j] + 1 / n_i, n_i = entries of row i above -inf (the uniform level):
//              relative error for probabilities above the uniform level, absolute error at the
//              1/n level below it. A -inf entry gives exactly 0.
// Any rows, cols >= 1. One 256-thread CTA a row, grid-stride over rows.
#define RTHREADS 256

extern "C" __global__ void __launch_bounds__(RTHREADS)
reference_softmax(const float* __restrict__ x, double* __restrict__ ref,
                  double* __restrict__ scale, int rows, int cols)
{
    __shared__ double red[RTHREADS];
    __shared__ int cnt[RTHREADS];
    const int tid = threadIdx.x;
    for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
        const float* xr = x + (size_t)row * cols;
        double m = -INFINITY;
        int finite = 0;
        for (int j = tid; j < cols; j += RTHREADS) {
            const double v = (double)xr[j];
            m = fmax(m, v);
            finite += v > -INFINITY;
        }
        red[tid] = m;
        cnt[tid] = finite;
        __syncthreads();
        for (int o = RTHREADS / 2; o > 0; o >>= 1) {
            if (tid < o) {
                red[tid] = fmax(red[tid], red[tid + o]);
                cnt[tid] += cnt[tid + o];
            }
            __syncthreads();
        }
        m = red[0];
        finite = cnt[0];
        __syncthreads();
        double s = 0.0;
        for (int j = tid; j < cols; j += RTHREADS) s += exp((double)xr[j] - m);
        red[tid] = s;
        __syncthreads();
        for (int o = RTHREADS / 2; o > 0; o >>= 1) {
            if (tid < o) red[tid] += red[tid + o];
            __syncthreads();
        }
        s = red[0];
        __syncthreads();
        const double floor = 1.0 / (double)(finite > 0 ? finite : cols);
        for (int j = tid; j < cols; j += RTHREADS) {
            const double r = exp((double)xr[j] - m) / s;
            ref[(size_t)row * cols + j] = r;
            scale[(size_t)row * cols + j] = r + floor;
        }
    }
}
