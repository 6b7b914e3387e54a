"""For the next GPU session: what a cluster of 16 costs by itself. An empty kernel, and one that
only meets its cluster once (barrier.cluster arrive + wait), launched as 4096 CTAs of 512 threads
with no cluster, clusters of 8 and clusters of 16 (non-portable: the attribute set first), each
timed over 200 back-to-back launches after a warm-up. Prints microseconds a launch; a cluster of
16 that costs several microseconds more a wave than one of 8 would explain why 256x262144 runs at
85 % of the copy rate while the same CTAs over clusters of 8 run at 94 % (docs/GPU.md, session
16, call 6)."""

import sys

import pycuda.autoinit  # noqa: F401
import pycuda.driver as cuda
from pycuda.compiler import SourceModule

SRC = r"""
extern "C" __global__ void __launch_bounds__(512) {cluster_decl} empty(int* out) {{ }}
extern "C" __global__ void __launch_bounds__(512) {cluster_decl} meet(int* out)
{{
{meet}
}}
"""
MEET = ('    asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");\n'
        '    asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");')


def timed(fn: object, grid: int, out: object, reps: int = 200) -> float:
    for _ in range(10):
        fn(out, grid=(grid, 1, 1), block=(512, 1, 1))  # type: ignore[operator]
    start, stop = cuda.Event(), cuda.Event()
    start.record()
    for _ in range(reps):
        fn(out, grid=(grid, 1, 1), block=(512, 1, 1))  # type: ignore[operator]
    stop.record()
    stop.synchronize()
    return stop.time_since(start) * 1000.0 / reps


out = cuda.mem_alloc(4)
for cluster in (1, 8, 16):
    decl = f"__cluster_dims__({cluster}, 1, 1)" if cluster > 1 else ""
    module = SourceModule(SRC.format(cluster_decl=decl, meet=MEET if cluster > 1 else ""),
                          no_extern_c=True, arch="sm_90a")
    row = []
    for name in ("empty", "meet"):
        fn = module.get_function(name)
        if cluster > 8:
            fn.set_attribute(cuda.function_attribute(14), 1)  # non-portable cluster size
        row.append(timed(fn, 4096, out))
    sys.stdout.write(f"cluster {cluster:>2}: empty {row[0]:7.2f} us, one cluster barrier "
                     f"{row[1]:7.2f} us a launch of 4096 CTAs x 512 threads\n")
