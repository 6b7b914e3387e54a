"""Facts of the GPUs the GEMM's kernels run on: per-block and per-SM limits, registers, wgmma.

Figures of the hardware (the CUDA programming guide's compute-capability tables), not of any
kernel: the params, validity and launch modules read them.
"""

from __future__ import annotations

from kernels.arch import MAX_SMEM_BY_ARCH

MAX_THREADS_PER_BLOCK = 1024
MIN_THREADS_PER_BLOCK = 32
REGISTERS_PER_SM = 65536
MAX_GRID_Y = 65535
#: Shared memory of an SM (sm_80/sm_90: 228 KB, of which each resident CTA reserves 1 KB).
SMEM_PER_SM = 228 * 1024
SMEM_RESERVED_PER_CTA = 1024
MAX_REGS_PER_THREAD = 255
#: Archs whose GPUs have wgmma (the kernel is built for the ``a`` variant of sm_90).
WGMMA_ARCHS = ("sm_90", "sm_90a")


def max_smem_limit(arch: str) -> int:
    """The per-block dynamic shared-memory limit of ``arch`` in bytes."""
    try:
        return MAX_SMEM_BY_ARCH[arch]
    except KeyError:
        known = ", ".join(sorted(MAX_SMEM_BY_ARCH))
        raise ValueError(f"unknown arch {arch!r}; known: {known}") from None
