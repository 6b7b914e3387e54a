"""Launch of GEMM points: grid, block, shared memory, split-K's or stream-K's workspace and
epilogue kernel, the bf16 split pass's workspace and prologue kernel; the arch a point is built
for."""

from __future__ import annotations

from kernels.base import DEFAULT_SM_COUNT, AuxLaunch, LaunchConfig, Rejection
from kernels.gemm_bias_relu.arch import MAX_GRID_Y, SMEM_PER_SM, SMEM_RESERVED_PER_CTA
from kernels.gemm_bias_relu.params import KERNEL_NAME, GemmParams
from kernels.gemm_bias_relu.shape import Shape
from kernels.gemm_bias_relu.validity import (
    shape_mismatch,
    split_blocks,
    split_pass_limit,
    split_pass_workspace_bytes,
    workspace_bytes,
    workspace_limit,
)

#: The split-K epilogue kernel (same module): partial sums + bias + ReLU.
SPLITK_REDUCE_NAME = "gemm_bias_relu_splitk_reduce"
#: Threads per block of the epilogue, and the fp32 elements each thread handles per step.
REDUCE_THREADS = 256
REDUCE_VEC = 4
#: Blocks of the epilogue at most (it walks the output with a grid-stride loop).
REDUCE_MAX_BLOCKS = 8192
#: The stream-K fix-up kernel (same module): sums the parts of split tiles + bias + ReLU.
SK_FIXUP_NAME = "gemm_bias_relu_sk_fixup"
#: Floats before the stream-K part-tile slots in the workspace (its header: 128 bytes).
SK_HEADER_FLOATS = 32
#: The bf16 split pass (same module): A's and B's bf16 parts into the workspace, before the GEMM.
SPLIT_PASS_NAME = "gemm_bias_relu_split_pass"
#: Threads per block of the split pass (one block per (tile, K tile) of A or of B^T).
SPLIT_PASS_THREADS = 256
#: The on-demand split's prologue (same module): zeroes the workspace's counters.
SPLIT_RESET_NAME = "gemm_bias_relu_split_reset"
#: Threads per block of the reset, and its blocks at most (a grid-stride loop past that).
SPLIT_RESET_THREADS = 256
SPLIT_RESET_MAX_BLOCKS = 1024
#: Parts a stream-K tile is split into at most: the fix-up reads them all, one CTA a tile, so a
#: rest of very few tiles takes the last whole wave with it instead (a bound, not a tuned value)
SK_MAX_PARTS = 8
#: Where a split workspace's stream-K region starts: past the blocks (and counters), at a
#: multiple of this many bytes (the kernels compute the same offset)
SPLIT_REGION_ALIGN = 256


def compile_arch(params: GemmParams, arch: str) -> str:
    """The arch ``params`` is built for on ``arch``: a wgmma kernel needs the ``a`` variant
    (sm_90 -> sm_90a, whose cubin runs on the same GPUs); every other point ``arch`` itself."""
    if params.tf32x3 and params.wgmma and arch == "sm_90":
        return "sm_90a"
    return arch


def stream_k_slots(params: GemmParams, sm_count: int) -> int:
    """CTAs of ``params`` the GPU holds at once: ``sm_count`` x the CTAs an SM fits (the
    ``__launch_bounds__`` figure ptxas builds for, fewer if shared memory runs out first); a
    warp-specialized kernel is launched with the register file's worth, one CTA an SM."""
    if params.producers:
        return sm_count
    by_smem = SMEM_PER_SM // (params.smem_bytes + SMEM_RESERVED_PER_CTA)
    return sm_count * max(1, min(params.min_blocks_per_sm, by_smem))


def stream_k_workspace_bytes(params: GemmParams, ctas: int) -> int:
    """Header plus two part-tile slots (a tile's fp32 sums) for each stream-K CTA."""
    block_m, block_n = _tile(params)
    return 4 * (SK_HEADER_FLOATS + 2 * ctas * block_m * block_n)


def _tile(params: GemmParams) -> tuple[int, int]:
    """Rows and columns of C a CTA of ``params`` computes."""
    if params.tf32x3:
        return params.tc_block_m, params.tc_block_n
    return params.block_m, params.block_n


def _stream_k_grid(params: GemmParams, shape: Shape, tiles: int, sm_count: int
                   ) -> tuple[int, int, int]:
    """The stream-K grid's CTAs a row and rows, and the tiles of its last (stream-K) row."""
    slots = stream_k_slots(params, sm_count)
    waves, rest = divmod(tiles, slots)
    if waves == 0:  # fewer tiles than slots: all in the stream-K row, split at most so far
        return min(slots, tiles * SK_MAX_PARTS, tiles * params.k_tiles(shape.k)), 1, tiles
    # the whole waves data-parallel, the rest shared by every slot; a rest too small to share
    # in SK_MAX_PARTS parts a tile (or stream_k 2) takes the last whole wave with it
    alone = params.stream_k == 1 and (rest == 0 or slots <= SK_MAX_PARTS * rest)
    rows = waves + 1 if alone else waves
    return slots, rows, tiles - (rows - 1) * slots


def _stream_k_launch(params: GemmParams, shape: Shape, tiles: int, sm_count: int
                     ) -> LaunchConfig:
    ctas, rows, row_tiles = _stream_k_grid(params, shape, tiles, sm_count)
    return LaunchConfig(
        kernel_name=KERNEL_NAME,
        grid=(ctas, rows, 1),
        block=(params.block_x, params.block_y, 1),
        dynamic_smem_bytes=params.smem_bytes,
        workspace_bytes=stream_k_workspace_bytes(params, ctas),
        epilogue=_fixup(row_tiles, epilogue_args(ctas)),
        tile=_tile(params),
    )


def _fixup(row_tiles: int, args: tuple[str | int, ...]) -> AuxLaunch:
    """The stream-K fix-up: one CTA a tile of the stream-K row (one when it has none)."""
    return AuxLaunch(SK_FIXUP_NAME, (max(1, row_tiles), 1, 1), (REDUCE_THREADS, 1, 1), args)


def split_region_bytes(params: GemmParams, shape: Shape) -> int:
    """Bytes of a split workspace kernel's blocks (and counters), padded to the
    :data:`SPLIT_REGION_ALIGN` that the stream-K region after them starts at."""
    need = split_pass_workspace_bytes(params, shape)
    return -(-need // SPLIT_REGION_ALIGN) * SPLIT_REGION_ALIGN


def epilogue_args(parts: int) -> tuple[str | int, ...]:
    """Arguments of the split-K reduction and the stream-K fix-up: ``(workspace, bias, C, M, N,
    parts)``, ``parts`` the partial sums a tile has (splits) or the CTAs of a row (stream-K)."""
    return ("workspace", "bias", "C", "M", "N", parts)


def launch_config(params: GemmParams, shape: Shape, sm_count: int = DEFAULT_SM_COUNT
                  ) -> LaunchConfig | Rejection:
    """Grid, block and dynamic shared memory of ``params`` for ``shape``.

    Split-K (``split_k > 1``): grid z is the number of splits, ``min(split_k, K tiles)`` (every
    split gets at least one K tile, whatever the shape), each split writes its partial sums to a
    ``splits x M x N`` fp32 workspace, and the epilogue kernel sums them in split order, adds the
    bias and applies ReLU. The bf16 split pass (``split_pass``): the prologue kernel splits A
    and B into a workspace of ``(row tiles + column tiles) x K tiles`` blocks, one CTA a block,
    and the GEMM copies its stages from there; with ``split_on_demand`` the GEMM splits the
    blocks itself and the prologue only zeroes the workspace's counters. Stream-K
    (``stream_k``): grid (S, R) with S the CTAs ``sm_count`` SMs hold at once
    (:func:`stream_k_slots`), R - 1 rows of whole tiles and one row that shares the rest's K
    iterations, then the fix-up kernel (see :class:`GemmParams`). A shape-specialized kernel
    is refused at any other shape.
    """
    fixed = params.fixed_shape
    if fixed is not None and fixed != shape:
        return shape_mismatch(fixed, shape)
    block_m, block_n = _tile(params)
    grid_x = -(-shape.n // block_n)
    grid_y = -(-shape.m // block_m)
    if grid_y > MAX_GRID_Y:
        return Rejection(
            "grid_limit",
            f"{grid_y} row tiles exceed the grid's y limit {MAX_GRID_Y}",
            {"grid_y": grid_y, "max_grid_y": MAX_GRID_Y},
        )
    if params.split_pass:
        return _split_workspace_launch(params, shape, grid_x, grid_y, sm_count)
    if params.stream_k:
        return _stream_k_launch(params, shape, grid_x * grid_y, sm_count)
    if params.split_k == 1:
        return LaunchConfig(
            kernel_name=KERNEL_NAME,
            grid=(grid_x, grid_y, 1),
            block=(params.block_x, params.block_y + params.producers, 1),
            dynamic_smem_bytes=params.smem_bytes,
        )
    # the split-K kernel always writes partial sums (even when a short K leaves one split)
    splits = min(params.split_k, params.k_tiles(shape.k))
    rejection = workspace_limit(splits, shape)
    if rejection is not None:
        return rejection
    per_block = REDUCE_THREADS * REDUCE_VEC
    reduce_blocks = max(1, min(-(-(shape.m * shape.n) // per_block), REDUCE_MAX_BLOCKS))
    return LaunchConfig(
        kernel_name=KERNEL_NAME,
        grid=(grid_x, grid_y, splits),
        block=(params.block_x, params.block_y + params.producers, 1),
        dynamic_smem_bytes=params.smem_bytes,
        workspace_bytes=workspace_bytes(splits, shape),
        epilogue=AuxLaunch(SPLITK_REDUCE_NAME, (reduce_blocks, 1, 1),
                           (REDUCE_THREADS, 1, 1), epilogue_args(splits)),
    )


def _split_workspace_launch(params: GemmParams, shape: Shape, grid_x: int, grid_y: int,
                            sm_count: int) -> LaunchConfig | Rejection:
    """A bf16 kernel of the split workspace: the pass (or the on-demand split's reset) first;
    stream-K's grid, part-tile region (after the blocks) and fix-up where it is scheduled so."""
    rejection = split_pass_limit(params, shape)
    if rejection is not None:
        return rejection
    k_tiles = params.k_tiles(shape.k)
    grid_x = -(-grid_x // params.pass_cluster) * params.pass_cluster  # whole clusters
    if params.split_on_demand:  # the GEMM splits; its counters zeroed before it
        counters = 2 * split_blocks(params, shape)
        prologue = AuxLaunch(SPLIT_RESET_NAME,
                             (max(1, min(-(-counters // SPLIT_RESET_THREADS),
                                         SPLIT_RESET_MAX_BLOCKS)), 1, 1),
                             (SPLIT_RESET_THREADS, 1, 1), ("workspace", "M", "N", "K"))
    else:
        prologue = AuxLaunch(SPLIT_PASS_NAME, ((grid_x + grid_y) * k_tiles, 1, 1),
                             (SPLIT_PASS_THREADS, 1, 1),
                             ("A", "B", "workspace", "M", "N", "K"))
    block = (params.block_x, params.block_y + params.producers, 1)
    if not params.stream_k:
        return LaunchConfig(
            kernel_name=KERNEL_NAME,
            grid=(grid_x, grid_y, 1),
            block=block,
            dynamic_smem_bytes=params.smem_bytes,
            workspace_bytes=split_pass_workspace_bytes(params, shape),
            prologue=prologue,
        )
    ctas, rows, row_tiles = _stream_k_grid(params, shape, grid_x * grid_y, sm_count)
    return LaunchConfig(
        kernel_name=KERNEL_NAME,
        grid=(ctas, rows, 1),
        block=block,
        dynamic_smem_bytes=params.smem_bytes,
        workspace_bytes=split_region_bytes(params, shape)
        + stream_k_workspace_bytes(params, ctas),
        prologue=prologue,
        epilogue=_fixup(row_tiles, ("workspace", "bias", "C", "M", "N", "K", ctas)),
        tile=_tile(params),
    )
