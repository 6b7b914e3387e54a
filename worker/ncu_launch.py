"""A minimal program for Nsight Compute to profile: load a cubin, launch the kernel twice.

    ncu … python -m worker.ncu_launch KERNEL.cubin NAME M N K GRIDX GRIDY BX BY SMEM [GRIDZ WS]

numpy + pycuda only. Inputs are seeded normal values (never zeros); the first launch warms up, the
second is the one profiled (``--launch-skip 1 --launch-count 1``). A split-K kernel (``WS`` > 0
bytes of workspace, ``GRIDZ`` splits) gets the workspace as its eighth argument; its epilogue
kernel is not launched (only the named kernel is profiled).
"""

from __future__ import annotations

import sys

import numpy as np


def main(argv: list[str]) -> int:
    """Launch twice and exit."""
    import pycuda.autoinit  # noqa: F401  (creates the context)
    import pycuda.driver as cuda

    cubin, name = argv[0], argv[1]
    m, n, k, gx, gy, bx, by, smem = (int(x) for x in argv[2:10])
    gz, ws_bytes = (int(x) for x in (argv[10:12] if len(argv) >= 12 else (1, 0)))
    rng = np.random.default_rng(0)
    a = cuda.to_device(rng.standard_normal((m, k), dtype=np.float32))
    b = cuda.to_device(rng.standard_normal((k, n), dtype=np.float32))
    bias = cuda.to_device(rng.standard_normal(n, dtype=np.float32))
    c = cuda.mem_alloc(4 * m * n)
    extra = (cuda.mem_alloc(ws_bytes),) if ws_bytes else ()
    fn = cuda.module_from_file(cubin).get_function(name)
    if smem > 48 * 1024:
        fn.set_attribute(cuda.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, smem)
    for _ in range(2):
        fn(a, b, bias, c, np.int32(m), np.int32(n), np.int32(k), *extra, block=(bx, by, 1),
           grid=(gx, gy, gz), shared=smem)
    cuda.Context.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
