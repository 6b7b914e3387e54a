"""Facts of the GPUs the GEMM's kernels run on: per-block and per-SM limits, registers, wgmma.

Figures of the hardware (the CUDA programming guide's compute-capability tables), not of any
kernel: the params, validity and launch modules read them.
"""

from __future__ import annotations

#: Per-block shared-memory limit in bytes (dynamic, after the opt-in), by arch.
MAX_SMEM_BY_ARCH: dict[str, int] = {
    "sm_70": 98304,
    "sm_75": 65536,
    "sm_80": 166912,
    "sm_86": 101376,
    "sm_87": 166912,
    "sm_89": 101376,
    "sm_90": 232448,
    "sm_90a": 232448,
    "sm_100": 232448,
    "sm_120": 101376,
}
#: Static shared memory a block may declare without opting in.
STATIC_SMEM_LIMIT = 48 * 1024
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
