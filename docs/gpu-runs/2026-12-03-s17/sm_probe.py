"""Does the copy rate scale with the SMs that take part? 256x262144's best softmax runs on 112 of
132 SMs (14 clusters of 16 at two CTAs an SM) at 85 % of the copy rate, and 112/132 = 85 %.
A copy of the same 256 MB is run on the first ``nsm`` SMs only (CTAs on other SMs, by %smid,
leave at once; the rest take 64 KB tiles from an atomic counter), two ways: streaming (float4
loads and stores interleaved) and as the one-pass softmax moves data (a 512-thread CTA loads
its 64 KB tile into registers, meets its CTA at a barrier, then stores it), two CTAs an SM.
Prints the median of 30 launches (counter reset by a memset each launch, timed with it) and the
rate against cuMemcpyDtoD's."""

import statistics
import sys

import numpy as np
import pycuda.autoinit  # noqa: F401
import pycuda.driver as cuda
from pycuda.compiler import SourceModule

SRC = r"""
__device__ __forceinline__ unsigned smid()
{ unsigned s; asm("mov.u32 %0, %%smid;" : "=r"(s)); return s; }
extern "C" __global__ void __launch_bounds__(512, 2)
tiles(const float4* __restrict__ x, float4* __restrict__ y, unsigned ntiles, unsigned nsm,
      unsigned* counter, unsigned* maxsm, int held)
{
    __shared__ unsigned tile;
    if (threadIdx.x == 0) atomicMax(maxsm, smid());
    if (smid() >= nsm) return;
    for (;;) {
        if (threadIdx.x == 0) tile = atomicAdd(counter, 1u);
        __syncthreads();
        const unsigned t = tile;
        __syncthreads();
        if (t >= ntiles) return;
        const float4* src = x + (size_t)t * 4096;   // 64 KB: 512 threads x 8 float4
        float4* dst = y + (size_t)t * 4096;
        if (held) {
            float4 v[8];
#pragma unroll
            for (int i = 0; i < 8; ++i) v[i] = __ldg(src + i * 512 + threadIdx.x);
            __syncthreads();
#pragma unroll
            for (int i = 0; i < 8; ++i) __stcs(dst + i * 512 + threadIdx.x, v[i]);
        } else {
#pragma unroll
            for (int i = 0; i < 8; ++i)
                __stcs(dst + i * 512 + threadIdx.x, __ldg(src + i * 512 + threadIdx.x));
        }
    }
}
"""

n = 256 * 262144
x = cuda.mem_alloc(n * 4)
y = cuda.mem_alloc(n * 4)
cuda.memcpy_htod(x, np.random.default_rng(1).standard_normal(n, dtype=np.float32))
counter = cuda.mem_alloc(4)
maxsm = cuda.mem_alloc(4)
cuda.memset_d32(maxsm, 0, 1)
fn = SourceModule(SRC, no_extern_c=True, arch="sm_90a").get_function("tiles")
sms = cuda.Context.get_device().get_attribute(cuda.device_attribute.MULTIPROCESSOR_COUNT)


def median_us(launch, reps: int = 30) -> float:
    for _ in range(3):
        launch()
    times = []
    for _ in range(reps):
        a, b = cuda.Event(), cuda.Event()
        a.record()
        launch()
        b.record()
        b.synchronize()
        times.append(b.time_since(a) * 1000.0)
    return statistics.median(times)


copy_us = median_us(lambda: cuda.memcpy_dtod(y, x, n * 4))
rate = lambda us: 2 * n * 4 / us / 1e3  # noqa: E731  GB/s
out = [f"memcpy_dtod {copy_us:8.1f} us {rate(copy_us):7.1f} GB/s (100.0 %)"]
for held in (0, 1):
    for nsm in (sms, 128, 120, 112, 96):
        def launch(nsm: int = nsm, held: int = held) -> None:
            cuda.memset_d32(counter, 0, 1)
            fn(x, y, np.uint32(n // 16384), np.uint32(nsm), counter, maxsm, np.int32(held),
               grid=(2 * sms, 1, 1), block=(512, 1, 1))
        us = median_us(launch)
        out.append(f"{'held' if held else 'stream'} nsm {nsm:3d}: {us:8.1f} us "
                   f"{rate(us):7.1f} GB/s ({100 * copy_us / us:5.1f} %)")
got = np.empty(n, np.float32)
cuda.memcpy_dtoh(got, y)
ref = np.empty(n, np.float32)
cuda.memcpy_dtoh(ref, x)
top = np.zeros(1, np.uint32)
cuda.memcpy_dtoh(top, maxsm)
out.append(f"copy exact: {bool((got == ref).all())}; highest %smid seen {int(top[0])}")
sys.stdout.write("\n".join(out) + "\n")
