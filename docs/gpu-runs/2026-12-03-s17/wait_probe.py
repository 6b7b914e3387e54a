"""Does the wait between a CTA's loads and its stores cost 256x262144 its last 10 %, and would
loading the next tile during that wait win it back? Copies of 256 MB in 64 KB tiles (512
threads x 8 float4, as the softmax's best CTA), each after an L2 flush, median of 15:

- plain: one tile a CTA, 4096 CTAs;
- cl16: the same in clusters of 16 (non-portable), no barrier;
- cl16 wait: clusters of 16 meeting at a cluster barrier (relaxed arrive, acquire wait) between
  the loads and the stores, as the softmax waits for the row's (max, sum);
- persistent wait: clusters of 16 on a persistent grid (the resident clusters), each CTA looping
  over its tiles: load, meet, store;
- persistent pipelined: the same, the next tile's loads issued before the meeting (two tiles in
  registers, 64 floats a thread: one CTA an SM).

Every kernel asks for 100 KB of shared memory it does not use, so that two CTAs fit an SM at
most, as the softmax's best (64 registers x 512 threads).

Prints each beside cuMemcpyDtoD of 256 MB and 1 GB; rows to $OUT/wait_probe.json."""
# ruff: noqa: E501 - the CUDA source's lines

import json
import os
import statistics
import sys

import numpy as np
import pycuda.autoinit  # noqa: F401
import pycuda.driver as cuda
from pycuda.compiler import SourceModule

SRC = r"""
#define T 512
#define U 8
__device__ __forceinline__ void meet()
{
    asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
    asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}
__device__ __forceinline__ void load(const float4* x, unsigned t, float4 (&v)[U])
{
    const float4* src = x + (size_t)t * T * U + threadIdx.x;
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = __ldg(src + u * T);
}
__device__ __forceinline__ void store(float4* y, unsigned t, const float4 (&v)[U])
{
    float4* dst = y + (size_t)t * T * U + threadIdx.x;
#pragma unroll
    for (int u = 0; u < U; ++u) __stcs(dst + u * T, v[u]);
}
extern "C" __global__ void __launch_bounds__(T) plain(const float4* x, float4* y, unsigned n)
{ float4 v[U]; load(x, blockIdx.x, v); store(y, blockIdx.x, v); }
extern "C" __global__ void __launch_bounds__(T) __cluster_dims__(16, 1, 1) cl16(const float4* x, float4* y, unsigned n)
{ float4 v[U]; load(x, blockIdx.x, v); store(y, blockIdx.x, v); }
extern "C" __global__ void __launch_bounds__(T) __cluster_dims__(16, 1, 1) cl16_wait(const float4* x, float4* y, unsigned n)
{ float4 v[U]; load(x, blockIdx.x, v); meet(); store(y, blockIdx.x, v); }
extern "C" __global__ void __launch_bounds__(T) __cluster_dims__(16, 1, 1) persistent_wait(const float4* x, float4* y, unsigned n)
{
    for (unsigned t = blockIdx.x; t < n; t += gridDim.x) { float4 v[U]; load(x, t, v); meet(); store(y, t, v); }
}
extern "C" __global__ void __launch_bounds__(T) __cluster_dims__(16, 1, 1) persistent_pipelined(const float4* x, float4* y, unsigned n)
{
    // every CTA of a cluster runs the same iterations (n a multiple of 16, the grid too)
    float4 a[U], b[U];
    unsigned t = blockIdx.x;
    if (t < n) load(x, t, a);
    for (; t < n; t += 2 * gridDim.x) {
        const unsigned t1 = t + gridDim.x;
        if (t1 < n) load(x, t1, b);
        meet();
        store(y, t, a);
        if (t1 >= n) break;
        const unsigned t2 = t1 + gridDim.x;
        if (t2 < n) load(x, t2, a);
        meet();
        store(y, t1, b);
    }
}
"""

module = SourceModule(SRC, no_extern_c=True, arch="sm_90a", options=["-O3"])
n = 256 * 262144
big = 1 << 28
x = cuda.mem_alloc(big * 4)
y = cuda.mem_alloc(big * 4)
cuda.memcpy_htod(x, np.random.default_rng(1).standard_normal(n, dtype=np.float32))
flush = cuda.mem_alloc(128 << 20)
tiles = n // (512 * 8 * 4)
#: unused dynamic shared memory that holds every kernel to two CTAs an SM, as the softmax's best
#: (64 registers x 512 threads); the pipelined one is held to one by its registers
SMEM = 100 * 1024


def median_us(launch, reps: int = 15) -> float:
    launch()
    times = []
    for _ in range(reps):
        cuda.memset_d32(flush, 0, (128 << 20) // 4)
        a, b = cuda.Event(), cuda.Event()
        a.record()
        launch()
        b.record()
        b.synchronize()
        times.append(b.time_since(a) * 1000.0)
    return statistics.median(times)


sys.path.insert(0, os.getcwd())
from worker import launch_contract as lc  # noqa: E402

copy_1g = median_us(lambda: cuda.memcpy_dtod(y, x, big * 4))
copy_256 = median_us(lambda: cuda.memcpy_dtod(y, x, n * 4))
rate = 2 * big * 4 / copy_1g / 1e3
from pycuda.compiler import compile as nvcc_compile  # noqa: E402

image = nvcc_compile(SRC, no_extern_c=True, arch="sm_90a", options=["-O3"])
rows = []
for name in ("plain", "cl16", "cl16_wait", "persistent_wait", "persistent_pipelined"):
    fn = module.get_function(name)
    launch = {"kernel_name": name, "grid": [tiles, 1, 1], "block": [512, 1, 1],
              "dynamic_smem_bytes": SMEM, "cluster_size": 16 if name != "plain" else 1,
              "persistent": name.startswith("persistent")}
    lc.configure(cuda, fn, launch, image)
    grid = lc.grid(fn, launch)
    us = median_us(lambda fn=fn, grid=grid: fn(x, y, np.uint32(tiles), grid=grid, block=(512, 1, 1),
                                               shared=SMEM))
    got = np.empty(n, np.float32)
    cuda.memcpy_dtoh(got, y)
    exact = bool((got == np.random.default_rng(1).standard_normal(n, dtype=np.float32)).all())
    cuda.memset_d32(y, 0, n)
    rows.append({"kernel": name, "grid": grid[0], "regs": fn.num_regs, "us": round(us, 2),
                 "pct_of_1g_copy": round(100 * 2 * n * 4 / us / 1e3 / rate, 1), "exact": exact})
with open(os.path.join(os.environ.get("OUT", "."), "wait_probe.json"), "w") as fh:
    json.dump({"copy_1g_us": copy_1g, "copy_256m_us": copy_256, "rows": rows}, fh, indent=1)
out = [f"cuMemcpyDtoD 1 GB {rate:.1f} GB/s; 256 MB {copy_256:.1f} us"]
out += [f"{r['kernel']:22} grid {r['grid']:5} regs {r['regs']:3}: {r['us']:7.1f} us "
        f"{r['pct_of_1g_copy']:5.1f} % exact {r['exact']}" for r in rows]
sys.stdout.write("\n".join(out) + "\n")
