"""How fast can the SMs copy 256 MB (the bytes 256x262144's softmax reads and writes)? The copy
rate the softmax targets is cuMemcpyDtoD's over 1 GB; call 1 found that a copy kernel moving
64 KB tiles (load all, then store all, two 512-thread CTAs an SM) runs at 91.4 % of
cuMemcpyDtoD at 256 MB, about what the softmax's best reaches. This times plain copy kernels over
the choices that could matter: one tile a CTA (no loop) or a grid-stride loop on a few CTAs an
SM, threads, float4 vectors a thread, load and store cache hints. Each is timed as the protocol
does (an L2 flush before every launch, CUDA events, median of 15), beside cuMemcpyDtoD of the
same 256 MB and of 1 GB. Prints the 1 GB and 256 MB copies and the fastest 16 kernels; all rows
go to $OUT/copy_probe.json."""
# ruff: noqa: E501 - the CUDA source's lines

import json
import os
import statistics
import sys

import numpy as np
import pycuda.autoinit  # noqa: F401
import pycuda.driver as cuda
from pycuda.compiler import SourceModule

HEAD = r"""
template <int L> __device__ __forceinline__ float4 ld(const float4* p)
{
    float4 v;
    if constexpr (L == 0) v = *p;
    else if constexpr (L == 1) v = __ldg(p);
    else if constexpr (L == 2)
        asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.f32 {%0,%1,%2,%3}, [%4];"
                     : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
    else if constexpr (L == 3)
        asm volatile("ld.global.L2::256B.v4.f32 {%0,%1,%2,%3}, [%4];"
                     : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
    else v = __ldcs(p);
    return v;
}
template <int S> __device__ __forceinline__ void st(float4* p, float4 v)
{
    if constexpr (S == 0) *p = v;
    else if constexpr (S == 1) __stcs(p, v);
    else __stwt(p, v);
}
// one tile of blockDim * U float4 a CTA: all loads, then all stores
template <int L, int S, int U>
__device__ __forceinline__ void tile(const float4* __restrict__ x, float4* __restrict__ y, size_t n4)
{
    const size_t base = (size_t)blockIdx.x * blockDim.x * U + threadIdx.x;
    float4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) if (base + u * blockDim.x < n4) v[u] = ld<L>(x + base + u * blockDim.x);
#pragma unroll
    for (int u = 0; u < U; ++u) if (base + u * blockDim.x < n4) st<S>(y + base + u * blockDim.x, v[u]);
}
// a grid-stride loop of U float4 a thread an iteration
template <int L, int S, int U>
__device__ __forceinline__ void stream(const float4* __restrict__ x, float4* __restrict__ y, size_t n4)
{
    const size_t step = (size_t)gridDim.x * blockDim.x * U;
    for (size_t base = (size_t)blockIdx.x * blockDim.x * U + threadIdx.x; base < n4; base += step) {
        float4 v[U];
#pragma unroll
        for (int u = 0; u < U; ++u) if (base + u * blockDim.x < n4) v[u] = ld<L>(x + base + u * blockDim.x);
#pragma unroll
        for (int u = 0; u < U; ++u) if (base + u * blockDim.x < n4) st<S>(y + base + u * blockDim.x, v[u]);
    }
}
"""

VARIANTS = []
for kind in ("tile", "stream"):
    for block in (256, 512, 1024):
        for u in ((2, 4, 8, 16) if kind == "tile" else (1, 4)):
            if block * u > 8192:
                continue
            for load in (0, 1, 2, 3, 4):
                for store in (0, 1, 2):
                    VARIANTS.append((kind, block, u, load, store))
src = HEAD + "".join(
    f'extern "C" __global__ void __launch_bounds__({b}) k_{k}_{b}_{u}_{ld}_{st}'
    f"(const float4* x, float4* y, size_t n4) {{ {k}<{ld}, {st}, {u}>(x, y, n4); }}\n"
    for k, b, u, ld, st in VARIANTS)
module = SourceModule(src, no_extern_c=True, arch="sm_90a", options=["-O3"])
sms = cuda.Context.get_device().get_attribute(cuda.device_attribute.MULTIPROCESSOR_COUNT)

n = 256 * 262144
big = 1 << 28  # 1 GB of floats
x = cuda.mem_alloc(big * 4)
y = cuda.mem_alloc(big * 4)
cuda.memcpy_htod(x, np.random.default_rng(1).standard_normal(n, dtype=np.float32))
flush = cuda.mem_alloc(128 << 20)


def median_us(launch, reps: int = 15) -> float:
    launch()
    times = []
    for _ in range(reps):
        cuda.memset_d32(flush, 0, (128 << 20) // 4)  # L2 flush (writes 128 MB)
        a, b = cuda.Event(), cuda.Event()
        a.record()
        launch()
        b.record()
        b.synchronize()
        times.append(b.time_since(a) * 1000.0)
    return statistics.median(times)


copy_1g = median_us(lambda: cuda.memcpy_dtod(y, x, big * 4))
copy_256 = median_us(lambda: cuda.memcpy_dtod(y, x, n * 4))
rate1g = 2 * big * 4 / copy_1g / 1e3
rows = []
for kind, block, u, load, store in VARIANTS:
    fn = module.get_function(f"k_{kind}_{block}_{u}_{load}_{store}")
    per_sm = cuda.Context.get_device().get_attribute(
        cuda.device_attribute.MAX_THREADS_PER_MULTIPROCESSOR) // block
    grids = ([n // 4 // (block * u)] if kind == "tile"
             else sorted({sms * k for k in (1, 2, 4) if k <= per_sm}))
    for grid in grids:
        us = median_us(lambda fn=fn, grid=grid, block=block: fn(
            x, y, np.uint64(n // 4), grid=(grid, 1, 1), block=(block, 1, 1)))
        gbs = 2 * n * 4 / us / 1e3
        rows.append({"kind": kind, "block": block, "float4": u, "load": load, "store": store,
                     "grid": grid, "us": round(us, 2), "gbs": round(gbs, 1),
                     "of_1g_copy": round(100 * gbs / rate1g, 1),
                     "of_256m_copy": round(100 * copy_256 / us, 1)})
check = np.empty(n, np.float32)
cuda.memcpy_dtoh(check, y)
ref = np.random.default_rng(1).standard_normal(n, dtype=np.float32)
rows.sort(key=lambda r: r["us"])
out = os.environ.get("OUT", ".")
with open(os.path.join(out, "copy_probe.json"), "w") as fh:
    json.dump({"copy_1g_us": copy_1g, "copy_1g_gbs": rate1g, "copy_256m_us": copy_256,
               "rows": rows}, fh, indent=1)
lines = [f"cuMemcpyDtoD 1 GB {copy_1g:8.1f} us {rate1g:7.1f} GB/s; 256 MB {copy_256:7.1f} us "
         f"{2 * n * 4 / copy_256 / 1e3:7.1f} GB/s ({100 * 2 * n * 4 / copy_256 / 1e3 / rate1g:.1f} %)",
         f"last kernel's copy exact: {bool((check == ref).all())}; {len(rows)} kernels; "
         "load 0 plain 1 ldg 2 nc.no_allocate.L2::256B 3 L2::256B 4 ldcs; store 0 plain 1 stcs 2 stwt"]
lines += [f"{r['kind']:6} b{r['block']:5} u{r['float4']:3} ld{r['load']} st{r['store']} "
          f"grid {r['grid']:6}: {r['us']:7.1f} us {r['gbs']:7.1f} GB/s {r['of_1g_copy']:5.1f} % "
          f"(of 256 MB copy {r['of_256m_copy']:5.1f} %)" for r in rows[:16]]
lines += [f"slowest: {rows[-1]['us']} us"]
sys.stdout.write("\n".join(lines) + "\n")
