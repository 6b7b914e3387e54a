"""Facts of the GPUs every family's kernels run on (the CUDA programming guide's
compute-capability tables), in one place: the families' validity rules, launches and specs
read them."""

from __future__ import annotations

#: Per-block dynamic shared memory (after the opt-in) in bytes, by arch.
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


def max_smem(arch: str) -> int | None:
    """The per-block dynamic shared-memory limit of ``arch`` (``sm_90a`` as ``sm_90``), or
    None when the table does not know it."""
    return MAX_SMEM_BY_ARCH.get(arch, MAX_SMEM_BY_ARCH.get(arch.removesuffix("a")))
