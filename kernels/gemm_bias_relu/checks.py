"""The GEMM's small check shapes: what the sanitizer runs a point at."""

from __future__ import annotations

from typing import Any

from kernels.base import Dims, Rejection
from kernels.gemm_bias_relu.shape import Shape

#: Shapes every point runs at under the sanitizer: 1x1x1 and one of primes.
GATE_SHAPES: tuple[Shape, ...] = (Shape(1, 1, 1), Shape(131, 257, 61))
#: K-tile assumed for a point that has none (the naive kernel).
DEFAULT_TILE_K = 64


def block_tile(family: Any, params: Any) -> tuple[int, int] | None:
    """Rows and columns of C that one block computes, read from the launch contract (its
    ``tile``, else grid x covers N and grid y covers M); None when the kernel refuses small
    shapes."""
    def grid(m: int, n: int) -> tuple[int, int] | None:
        found = family.launch(params, Shape(m, n, 1))
        return None if isinstance(found, Rejection) else (found.grid[1], found.grid[0])

    first = family.launch(params, Shape(1, 1, 1))
    if isinstance(first, Rejection):
        return None
    if first.tile is not None:  # the launch says it (its grid counts CTAs, not tiles)
        return first.tile

    def largest(axis: int) -> int:  # the largest extent one block covers along ``axis``
        lo, hi = 1, 2
        while hi <= 1 << 16:
            g = grid(hi, 1) if axis == 0 else grid(1, hi)
            if g is None or g[axis] > 1:
                break
            lo, hi = hi, hi * 2
        while hi - lo > 1:
            mid = (lo + hi) // 2
            g = grid(mid, 1) if axis == 0 else grid(1, mid)
            lo, hi = (mid, hi) if g is not None and g[axis] == 1 else (lo, mid)
        return lo

    return largest(0), largest(1)


def tiled_shape(family: Any, params: Any) -> Shape | None:
    """A shape with two block tiles and a tail along M and N, three K-tiles and a tail along
    K, and N and K multiples of 4 (the float4 / float2 paths and their edge branches run,
    double buffers swap, split-K splits get their tiles): ``(2 BM + 3) x (2 BN + 4) x
    (3 BK + 4)``."""
    tile = block_tile(family, params)
    if tile is None:
        return None
    bm, bn = tile
    bk = int(getattr(params, "tile_k", 0) or DEFAULT_TILE_K)
    return Shape(2 * bm + 3, 2 * bn + 4 + (-(2 * bn + 4)) % 4, 3 * bk + 4 + (-(3 * bk + 4)) % 4)



def sanitizer_shapes(family: Any, params: Any) -> list[Dims]:
    """:data:`GATE_SHAPES` and the point's tiled shape (when it launches at small shapes)."""
    tiled = tiled_shape(family, params)
    return list(dict.fromkeys([*GATE_SHAPES, *([tiled] if tiled is not None else [])]))
