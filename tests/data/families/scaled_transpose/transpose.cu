extern "C" __global__ void scaled_transpose(const float* __restrict__ in, float* __restrict__ out, int R, int C)
{
    __shared__ float tile[TILE][TILE + PAD];
    int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
    if (x < C && y < R) tile[threadIdx.y][threadIdx.x] = 2.0f * in[(size_t)y * C + x];
    __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x; y = blockIdx.x * TILE + threadIdx.y;
    if (x < R && y < C) out[(size_t)y * R + x] = tile[threadIdx.x][threadIdx.y];
}

extern "C" __global__ void scaled_transpose_ref(const float* in, float* out, int R, int C)
{
    __shared__ float tile[TILE][TILE + PAD];
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (size_t)R * C) { size_t r = i / C, c = i % C; out[c * R + r] = 2.0f * in[i]; }
    (void)tile;
}
