"""The ceiling of Hopper's TF32 warpgroup MMA for the shapes the 3xTF32 kernel can use.

    python bench/wgmma_peak.py [--iters 4000]

A kernel per variant that does nothing but issue ``wgmma.mma_async … f32.tf32.tf32`` from two
warpgroups per CTA (one CTA per SM, 132 CTAs), 12 MMAs per commit group, one group kept in flight
behind the one being issued (``wait_group 1``), on random data in shared memory and registers
(tensor-core power, and so the clock, depends on the data: never zeros). Variants: the register
(RS: A from registers, as the kernel's B^T fragments) or shared-memory (SS: both operands through
descriptors) form, N = 64, 128, 256. Prints TFLOP/s and the share of the dense TF32 peak
(989.4 / 2 TFLOP/s for the H100/H200 SXM at its boost clock), the ceiling against which the
kernel's tensor-pipe figures are read: 3xTF32 runs three MMAs per product, so a kernel at a
fraction f of this ceiling reaches f × ceiling / 3 in fp32 terms.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from worker.compile import Compiler  # noqa: E402

#: dense TF32 tensor-core peak of the H100/H200 SXM (NVIDIA's datasheet: 989 TFLOP/s sparse)
TF32_DENSE_PEAK_TFLOPS = 494.7
SMEM_BYTES = 64 * 1024
THREADS = 256
MMAS_PER_GROUP = 12


def source(n: int, rs: bool) -> str:
    """CUDA source of one variant (entry ``peak``)."""
    na = n // 2  # fp32 accumulators per thread
    regs = ", ".join(f"%{i}" for i in range(na))
    outs = ", ".join(f'"+f"(d[{i}])' for i in range(na))
    if rs:
        a_ops = f"{{%{na}, %{na + 1}, %{na + 2}, %{na + 3}}}, %{na + 4}"
        ins = '"r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(bdesc)'
    else:
        a_ops = f"%{na}, %{na + 1}"
        ins = '"l"(adesc), "l"(bdesc)'
    return f"""
#include <stdint.h>
__device__ __forceinline__ uint64_t desc(uint32_t addr) {{
    return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)1 << 16)
         | ((uint64_t)(1024 >> 4) << 32) | (1ull << 62);
}}
extern "C" __global__ void __launch_bounds__({THREADS}, 1)
peak(const float* __restrict__ src, float* __restrict__ out, int iters)
{{
    extern __shared__ __align__(1024) unsigned char smem[];
    const uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
    const uint32_t base = (raw + 1023u) & ~1023u;
    float* s = reinterpret_cast<float*>(smem + (base - raw));
    for (int i = threadIdx.x; i < ({SMEM_BYTES} - 1024) / 4; i += blockDim.x) s[i] = src[i];
    asm volatile("fence.proxy.async.shared::cta;\\n" ::: "memory");
    __syncthreads();
    uint32_t a[4];
    for (int i = 0; i < 4; ++i) a[i] = __float_as_uint(src[threadIdx.x * 4 + i]);
    const int wg = threadIdx.x / 128;
    const uint64_t adesc = desc(base + wg * 8192);
    const uint64_t bdesc = desc(base + 16384);
    float d[{na}];
    for (int i = 0; i < {na}; ++i) d[i] = 0.0f;
    for (int it = 0; it < iters; ++it) {{
        asm volatile("wgmma.fence.sync.aligned;\\n" ::: "memory");
#pragma unroll
        for (int j = 0; j < {MMAS_PER_GROUP}; ++j) {{
            asm volatile("wgmma.mma_async.sync.aligned.m64n{n}k8.f32.tf32.tf32 "
                         "{{{regs}}}, {a_ops}, 1, 1, 1;\\n"
                         : {outs} : {ins});
        }}
        asm volatile("wgmma.commit_group.sync.aligned;\\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 1;\\n" ::: "memory");
    }}
    asm volatile("wgmma.wait_group.sync.aligned 0;\\n" ::: "memory");
    float sum = 0.0f;
    for (int i = 0; i < {na}; ++i) sum += d[i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}}
"""


def main() -> int:
    """Compile every variant, time each on the GPU, print a table last."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=4000)
    ap.add_argument("--cache", type=Path, default=Path("/tmp/tf-cache"))
    ap.add_argument("--compile-only", action="store_true", help="check the variants compile")
    args = ap.parse_args()
    compiler = Compiler(args.cache, arch="sm_90a", workers=os.cpu_count() or 4)
    variants = [(n, rs) for rs in (True, False) for n in (64, 128, 256)]
    futures = {v: compiler.submit(source(*v), entry="peak", dynamic_smem_bytes=SMEM_BYTES,
                                  arch="sm_90a") for v in variants}
    compiled = {v: f.result() for v, f in futures.items()}
    for v, r in compiled.items():
        if r.status != "ok":
            print(f"{v}: {r.status} {r.error}", file=sys.stderr)
            return 1
    if args.compile_only:
        for (n, rs), r in compiled.items():
            print(f"{'RS' if rs else 'SS'} m64n{n}k8: {r.regs_per_thread} regs, "
                  f"{r.spill_bytes} spill bytes")
        return 0
    import numpy as np
    import pycuda.autoinit  # noqa: F401
    import pycuda.driver as cuda

    sms = cuda.Context.get_device().get_attribute(cuda.device_attribute.MULTIPROCESSOR_COUNT)
    rng = np.random.default_rng(1)
    src = cuda.to_device(rng.standard_normal(SMEM_BYTES // 4, dtype=np.float32))
    out = cuda.mem_alloc(4 * sms * THREADS)
    rows = []
    for (n, rs), r in compiled.items():
        assert r.cubin_path is not None
        fn = cuda.module_from_file(r.cubin_path).get_function("peak")
        fn.set_attribute(cuda.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, SMEM_BYTES)
        times = []
        for rep in range(4):
            start, end = cuda.Event(), cuda.Event()
            start.record()
            fn(src, out, np.int32(args.iters), block=(THREADS, 1, 1), grid=(sms, 1, 1),
               shared=SMEM_BYTES)
            end.record()
            end.synchronize()
            if rep:  # the first launch warms up
                times.append(end.time_since(start) / 1e3)
        flops = 2 * 64 * n * 8 * MMAS_PER_GROUP * args.iters * (THREADS // 128) * sms
        tflops = flops / min(times) / 1e12
        rows.append({"form": "RS" if rs else "SS", "n": n, "regs": r.regs_per_thread,
                     "tflops": round(tflops, 1),
                     "pct_of_peak": round(100 * tflops / TF32_DENSE_PEAK_TFLOPS, 1),
                     "fp32_ceiling_3xtf32": round(tflops / 3, 1)})
    print(f"{'form':4s} {'shape':10s} {'regs':>5s} {'TFLOP/s':>8s} {'% peak':>7s} "
          f"{'3xTF32 ceiling':>15s}")
    for row in rows:
        print(f"{row['form']:4s} m64n{row['n']}k8 {row['regs'] or 0:5d} {row['tflops']:8.1f} "
              f"{row['pct_of_peak']:7.1f} {row['fp32_ceiling_3xtf32']:15.1f}")
    print(json.dumps({"device": cuda.Context.get_device().name(), "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
