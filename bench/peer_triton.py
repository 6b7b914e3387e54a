"""The Triton kernels a PyTorch user would write instead of a tuning service, kept here as the
benchmark's peers (``bench/peers.py`` times them): the softmax of the fused-softmax tutorial, an
fp32 GEMM whose ``tl.dot`` runs bf16x3 on the tensor cores, and the tiled transpose.

- :func:`softmax_row_kernel`: one program a row, the whole row held in registers (a power-of-two
  block of columns, masked past the row's end), max, exp, sum and the division in one pass;
- :func:`softmax_loop_kernel`: one program a row for rows too long to hold, looping over the row
  in blocks twice: an online pass (a running max and rescaled sum per lane), then the writes;
- :func:`gemm_bf16x3_kernel`: ``y = relu(a @ b + bias)`` in tiles of a few autotuned
  configurations, grouped along M for L2 reuse, ``tl.dot(..., input_precision="bf16x3")``
  (each fp32 operand split into bf16 high and low parts, three products accumulated in fp32);
- :func:`transpose_kernel`: ``y = x^T`` (``x`` m x n, ``y`` n x m, row-major fp32), one program
  a ``BLOCK_M x BLOCK_N`` tile: it loads the tile (masked past the edges) and stores
  ``tl.trans`` of it, the textbook 2D-tiled transpose (Triton stages the change of layout
  through shared memory, so both the loads and the stores are coalesced).

Imports triton at the top: only the peers' process on a GPU host imports this module
(:mod:`bench.peers` picks the launch of each). No ``from __future__ import annotations``: the
JIT reads the ``tl.constexpr`` annotations of the kernels' parameters.
"""

import triton
import triton.language as tl


@triton.jit
def softmax_row_kernel(y_ptr, x_ptr, n_cols, row_stride, BLOCK: tl.constexpr):
    """``y[row] = softmax(x[row])`` for the program's row, the row held in registers."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * row_stride + cols, mask=mask, other=-float("inf"))
    num = tl.exp(x - tl.max(x, axis=0))
    den = tl.sum(num, axis=0)
    tl.store(y_ptr + row * row_stride + cols, num / den, mask=mask)


@triton.jit
def softmax_loop_kernel(y_ptr, x_ptr, n_cols, row_stride, BLOCK: tl.constexpr):
    """``y[row] = softmax(x[row])`` for the program's row in blocks of ``BLOCK`` columns: the
    row is read twice (the online max and sum, then the outputs) and written once."""
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * row_stride
    y_row = y_ptr + row * row_stride
    cols = tl.arange(0, BLOCK)
    run_max = tl.full((BLOCK,), -float("inf"), tl.float32)
    run_sum = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=-float("inf"))
        new_max = tl.maximum(run_max, x)
        # a lane that has seen only -inf keeps a sum of 0 (exp(-inf - -inf) would be NaN)
        empty = new_max == -float("inf")
        rescale = tl.where(empty, 0.0, tl.exp(run_max - new_max))
        term = tl.where(empty, 0.0, tl.exp(x - new_max))
        run_sum = run_sum * rescale + term
        run_max = new_max
    row_max = tl.max(run_max, axis=0)
    lane_scale = tl.where(run_max == -float("inf"), 0.0, tl.exp(run_max - row_max))
    inv_sum = 1.0 / tl.sum(run_sum * lane_scale, axis=0)
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=-float("inf"))
        tl.store(y_row + start + cols, tl.exp(x - row_max) * inv_sum, mask=mask)


#: the GEMM's tiles (BLOCK_M x BLOCK_N, BLOCK_K deep), stages and warps the autotuner tries at
#: every new (M, N, K): those that ptxas builds for sm_90 without spilling (the bf16 split of
#: both operands' tiles runs in registers beside the accumulator)
GEMM_CONFIGS = [
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 8},
                  num_stages=4, num_warps=8),
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 8},
                  num_stages=3, num_warps=8),
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 16, "GROUP_M": 8},
                  num_stages=4, num_warps=8),
    triton.Config({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 8},
                  num_stages=4, num_warps=4),
]


@triton.autotune(configs=GEMM_CONFIGS, key=["M", "N", "K"])
@triton.jit
def gemm_bf16x3_kernel(a_ptr, b_ptr, bias_ptr, y_ptr, M, N, K,
                       stride_am, stride_ak, stride_bk, stride_bn, stride_ym, stride_yn,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                       GROUP_M: tl.constexpr):
    """One ``BLOCK_M x BLOCK_N`` tile of ``y = relu(a @ b + bias)``, fp32 in and out."""
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * tiles_n
    first_m = (pid // per_group) * GROUP_M
    group_rows = min(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % group_rows
    pid_n = (pid % per_group) // group_rows
    # rows and columns past the edge read wrapped-around ones (never stored): no masks on M, N
    rows = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    cols = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    ks = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rows[:, None] * stride_am + ks[None, :] * stride_ak
    b_ptrs = b_ptr + ks[:, None] * stride_bk + cols[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=ks[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=ks[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc=acc, input_precision="bf16x3")
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    out_rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    out_cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    bias = tl.load(bias_ptr + out_cols, mask=out_cols < N, other=0.0)
    y = tl.maximum(acc + bias[None, :], 0.0)
    y_ptrs = y_ptr + out_rows[:, None] * stride_ym + out_cols[None, :] * stride_yn
    tl.store(y_ptrs, y, mask=(out_rows[:, None] < M) & (out_cols[None, :] < N))


@triton.jit
def transpose_kernel(y_ptr, x_ptr, m, n, stride_x, stride_y, BLOCK_M: tl.constexpr,
                     BLOCK_N: tl.constexpr):
    """Tile (``program_id(0)``, ``program_id(1)``) of ``x`` (m x n, rows ``stride_x`` apart)
    stored transposed into ``y`` (n x m, rows ``stride_y`` apart)."""
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    tile = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :],
                   mask=(rows[:, None] < m) & (cols[None, :] < n))
    tl.store(y_ptr + cols[:, None] * stride_y + rows[None, :], tl.trans(tile),
             mask=(cols[:, None] < n) & (rows[None, :] < m))


def softmax(x, y, kind, block, num_warps):
    """Launch one program a row of ``x`` (rows x cols, contiguous fp32) into ``y``: ``kind``
    ``row`` or ``loop``, ``block`` columns (a power of two), ``num_warps`` warps."""
    rows, cols = x.shape
    kernel = softmax_row_kernel if kind == "row" else softmax_loop_kernel
    kernel[(rows,)](y, x, cols, x.stride(0), BLOCK=block, num_warps=num_warps)
    return y


def gemm_bf16x3(a, b, bias, y):
    """``y = relu(a @ b + bias)`` by :func:`gemm_bf16x3_kernel` (autotuned at each new shape
    on its first call)."""
    m, k = a.shape
    n = b.shape[1]

    def grid(meta):
        return (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)

    gemm_bf16x3_kernel[grid](a, b, bias, y, m, n, k, a.stride(0), a.stride(1), b.stride(0),
                             b.stride(1), y.stride(0), y.stride(1))
    return y


def transpose(x, y, block_m, block_n, num_warps):
    """``y = x^T`` by :func:`transpose_kernel`: ``x`` m x n and ``y`` n x m, fp32 with unit
    column strides, in tiles of ``block_m x block_n`` (powers of two), ``num_warps`` warps a
    tile; the grid's second axis (at most 65535) spans n in blocks of ``block_n``."""
    m, n = x.shape
    grid = (triton.cdiv(m, block_m), triton.cdiv(n, block_n))
    transpose_kernel[grid](y, x, m, n, x.stride(0), y.stride(0), BLOCK_M=block_m,
                           BLOCK_N=block_n, num_warps=num_warps)
    return y


def gemm_config():
    """The configuration the autotuner chose at the last shape it tuned (text), or None."""
    best = getattr(gemm_bf16x3_kernel, "best_config", None)
    return None if best is None else str(best)
