"""The stream-K points of the CPU and GPU tests (imports nothing but the family, so that the
GPU test collects on the device machine's lean environment)."""

from __future__ import annotations

from dataclasses import replace

from frag_prefetch_points import PREFETCH, QUADS, WIDE

from kernels.gemm_bias_relu import GemmParams
from kernels.gemm_bias_relu.shape import Shape

#: the 64x128 lane-quad kernel scheduled stream-K (the tiles past the whole waves shared), and
#: with one whole wave more in the stream-K row
STREAM_K = replace(QUADS, stream_k=1).canonical()
STREAM_K2 = replace(QUADS, stream_k=2).canonical()

#: Shapes whose stream-K geometry differs: one tile, fewer tiles than slots (every tile split,
#: some CTAs with more than one part), K of one tile (a run is whole tiles), K not a multiple of
#: the tile, tiles just over one wave and just under two, exactly three waves of the 396 slots
#: of an H200 (the last row's tiles all whole), edges along M and N, and the shapes the
#: stream-K kernel was measured at.
SK_SHAPES = (Shape(1, 1, 1), Shape(17, 33, 65), Shape(131, 257, 61), Shape(100, 60, 1000),
             Shape(1000, 1002, 999), Shape(4096, 4095, 31), Shape(8192, 1024, 4096),
             Shape(1600, 4096, 16), Shape(1700, 4096, 300), Shape(3136, 2048, 1000),
             Shape(2304, 4224, 513), Shape(4096, 4096, 4096))


def variants() -> list[GemmParams]:
    """Stream-K on the 64x128 kernel (both rows) and the 128x64 quad kernel, on 8x16 (two CTAs
    an SM), on the pipelined kernel without quads, with swizzle off and 8, tile 8, a
    specialized shape."""
    return [STREAM_K, STREAM_K2, replace(STREAM_K, block_x=8, block_y=16),
            replace(WIDE, lane_quads=True, stream_k=1), replace(PREFETCH, stream_k=1),
            replace(STREAM_K, swizzle=1), replace(STREAM_K, swizzle=8),
            replace(STREAM_K, tile_k=8),
            replace(STREAM_K, shape_m=4096, shape_n=4096, shape_k=4096)]


def check_fix_up(tiles: int, dp: int, ctas: int, k_tiles: int, done: dict[int, int],
                 slots: dict[tuple[int, int], tuple[int, int, int]],
                 max_parts: int | None = None) -> None:
    """The fix-up as the rendered formulas compute it, after a walk of the stream-K row: for
    each of its tiles, the CTAs whose runs hold it and their slots. ``done`` counts the tiles
    stored whole (the data-parallel rows' among them), ``slots`` maps (CTA, slot) to the part
    written there, (tile, first K tile, end); each part is summed once, in K order, and every
    tile is stored whole once or summed (in at most ``max_parts`` parts, where given: a tile
    of a rest shared SK_MAX_PARTS ways on average can straddle one CTA more)."""
    work = (tiles - dp) * k_tiles
    summed = set()
    for rel in range(tiles - dp):
        lo, hi = rel * k_tiles, rel * k_tiles + k_tiles
        c_lo, c_hi = ((lo + 1) * ctas - 1) // work, (hi * ctas - 1) // work
        if c_lo == c_hi:
            assert done.get(dp + rel) == 1, rel
            continue
        assert dp + rel not in done
        parts = []
        for c in range(c_lo, c_hi + 1):
            begin = c * work // ctas
            if begin != (c + 1) * work // ctas:  # not an empty run (more CTAs than work)
                parts.append(slots.pop((c, 0 if begin // k_tiles == rel else 1)))
        assert [p[0] for p in parts] == [dp + rel] * len(parts)
        # the parts in K order, back to back from the first K tile to the last
        assert [p[1] for p in parts] == [0] + [p[2] for p in parts[:-1]]
        assert parts[-1][2] == k_tiles
        assert max_parts is None or len(parts) <= max_parts
        summed.add(dp + rel)
    assert not slots  # every part written was summed
    assert all(v == 1 for v in done.values())  # a whole tile stored by one CTA
    assert not summed & set(done)
    assert summed | set(done) == set(range(tiles))
