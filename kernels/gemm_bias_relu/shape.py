"""The GEMM's problem dimensions: ``C[M, N] = relu(A[M, K] @ B[K, N] + bias[N])``."""

from __future__ import annotations

from typing import Any

from kernels.base import Dims
from kernels.family import Dim, parse_dims

#: M, N, K; each at most 65536 (the kernels' 32-bit index arithmetic and the grid's limits).
DIMS: tuple[Dim, ...] = (
    Dim("m", "rows of A and C", 1, 1 << 16),
    Dim("n", "columns of B and C", 1, 1 << 16),
    Dim("k", "columns of A, rows of B (the reduction)", 1, 1 << 16),
)


class Shape(Dims):
    """A GEMM shape ``Shape(m, n, k)``: :class:`~kernels.base.Dims` named ``m, n, k``."""

    __slots__ = ()

    def __init__(self, m: int, n: int, k: int) -> None:
        super().__init__({"m": m, "n": n, "k": k})

    def __reduce__(self) -> tuple[Any, ...]:
        return (Shape, (self.m, self.n, self.k))

    @classmethod
    def parse(cls, text: str) -> Shape:
        """Parse ``"4096x4096x4096"`` (also ``4096*…``, ``4096,…`` or ``m=…,n=…,k=…``)."""
        dims = parse_dims(DIMS, text)
        return cls(dims.m, dims.n, dims.k)

    @classmethod
    def of(cls, dims: Dims) -> Shape:
        """``dims`` as a :class:`Shape`."""
        return dims if isinstance(dims, Shape) else cls(dims.m, dims.n, dims.k)

    @property
    def flops(self) -> int:
        """Floating-point operations of the GEMM (2·M·N·K)."""
        return 2 * self.m * self.n * self.k
