"""Validity of GEMM points: why a point cannot be a correct kernel, with numbers, before compiling.

:func:`validate` holds a point to every shape (on an arch), :func:`check_at_shape` to one shape
(split-K's K tiles and workspace, a compiled-in shape).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kernels.base import Rejection
from kernels.gemm_bias_relu.arch import (
    MAX_REGS_PER_THREAD,
    MAX_THREADS_PER_BLOCK,
    MIN_THREADS_PER_BLOCK,
    REGISTERS_PER_SM,
    WGMMA_ARCHS,
    max_smem_limit,
)
from kernels.gemm_bias_relu.params import DOMAINS, SHAPE_FIELDS, WG_THREADS, GemmParams
from kernels.gemm_bias_relu.shape import Shape

#: Largest split-K workspace (splits x M x N fp32 partial sums) a launch may ask for.
MAX_WORKSPACE_BYTES = 2 << 30


def validate(params: GemmParams, arch: str = "sm_90") -> Rejection | None:
    """Why ``params`` cannot be a correct kernel on ``arch`` for every shape, or ``None``."""
    for name, domain in DOMAINS.items():
        value = getattr(params, name)
        if value not in domain:
            return Rejection(
                "out_of_domain", f"{name}={value!r} is outside {list(domain)}",
                {"field": name, "value": value},
            )
    dims = [getattr(params, name) for name in SHAPE_FIELDS]
    if (any(isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in dims)
            or (any(dims) and not all(dims))):
        return Rejection(
            "shape_fields",
            f"compile-time shape {'x'.join(map(str, dims))}: all three of M, N, K must be >= 1 "
            "(a shape-specialized kernel), or all 0 (any shape)",
            dict(zip(SHAPE_FIELDS, dims, strict=True)),
        )
    threads = params.threads
    if threads > MAX_THREADS_PER_BLOCK or threads < MIN_THREADS_PER_BLOCK:
        return Rejection(
            "threads_per_block",
            f"block {params.block_x}x{params.block_y} has {threads} threads; "
            f"allowed {MIN_THREADS_PER_BLOCK}..{MAX_THREADS_PER_BLOCK}",
            {"threads_per_block": threads, "max_threads_per_block": MAX_THREADS_PER_BLOCK,
             "min_threads_per_block": MIN_THREADS_PER_BLOCK},
        )
    if params.wgmma and not params.tf32x3:
        return Rejection(
            "requires_tensor_cores",
            f"wgmma={params.wgmma} shapes the 3xTF32 tensor-core kernel, and tf32x3 is off",
            {"wgmma": params.wgmma, "tf32x3": False},
        )
    if params.frag_global and not (params.tf32x3 and params.wgmma):
        return Rejection(
            "requires_wgmma",
            "frag_global shapes the wgmma 3xTF32 kernel, and "
            + ("tf32x3 is off" if not params.tf32x3 else "wgmma is 0"),
            {"frag_global": True, "wgmma": params.wgmma, "tf32x3": params.tf32x3},
        )
    if params.mma_window > 1 and not (params.tf32x3 and params.wgmma):
        return Rejection(
            "requires_wgmma",
            f"mma_window={params.mma_window} shapes the wgmma 3xTF32 kernel, and "
            + ("tf32x3 is off" if not params.tf32x3 else "wgmma is 0"),
            {"mma_window": params.mma_window, "wgmma": params.wgmma, "tf32x3": params.tf32x3},
        )
    if params.producers and not (params.tf32x3 and params.wgmma and params.mma_window > 1):
        return Rejection(
            "requires_mma_pipeline",
            f"producers={params.producers} specializes the wgmma 3xTF32 kernel's in-flight MMA "
            "pipeline, and "
            + ("tf32x3 is off" if not params.tf32x3 else "wgmma is 0" if not params.wgmma
               else "mma_window is 1"),
            {"producers": params.producers, "wgmma": params.wgmma,
             "mma_window": params.mma_window, "tf32x3": params.tf32x3},
        )
    if params.bf16_split and not (params.tf32x3 and params.wgmma):
        return Rejection(
            "requires_wgmma",
            f"bf16_split={params.bf16_split} splits the wgmma kernel's operands, and "
            + ("tf32x3 is off" if not params.tf32x3 else "wgmma is 0"),
            {"bf16_split": params.bf16_split, "wgmma": params.wgmma, "tf32x3": params.tf32x3},
        )
    if params.bf16_split and params.frag_global:
        return Rejection(
            "bf16_split_frag_global",
            "the bf16 split kernels read both operands from shared memory (split once per tile); "
            "frag_global loads the TF32 kernel's B fragments from global memory: choose one",
            {"bf16_split": params.bf16_split, "frag_global": True},
        )
    if params.bf16_split and params.async_copy and not params.producers:
        return Rejection(
            "bf16_async_copy_producers",
            "async_copy on a bf16 split kernel stages the producers' fp32 tiles; the lockstep "
            "kernel (producers=0) has no producers: apply_warp_specialization first",
            {"bf16_split": params.bf16_split, "async_copy": True, "producers": 0},
        )
    if params.pass_cluster > 1 and not params.split_pass:
        return Rejection(
            "pass_cluster_needs_split_pass",
            f"pass_cluster={params.pass_cluster} shares the split pass's A blocks in a cluster, "
            "and split_pass is off: apply_split_pass(true) first",
            {"pass_cluster": params.pass_cluster, "split_pass": False})
    if params.split_on_demand and not (params.split_pass and params.pass_cluster == 1):
        return Rejection(
            "split_on_demand_needs_split_pass",
            "split_on_demand does the split pass's work inside the GEMM, block by block into "
            f"the pass's workspace: it needs split_pass on (is {params.split_pass}) and no "
            f"cluster (pass_cluster 1, is {params.pass_cluster})",
            {"split_on_demand": True, "split_pass": params.split_pass,
             "pass_cluster": params.pass_cluster})
    if params.split_pass:
        rejection = _validate_split_pass(params)
        if rejection is not None:
            return rejection
    if params.mma_accumulate or params.wgmma > 128:
        rejection = _validate_mma_accumulate(params)
        if rejection is not None:
            return rejection
    if params.mma_window > 1 and params.frag_global:
        return Rejection(
            "mma_window_frag_global",
            "the in-flight MMA pipeline (mma_window > 1) makes its fragments from the "
            "shared-memory B tile; frag_global loads them from global memory instead: choose one",
            {"mma_window": params.mma_window, "frag_global": True},
        )
    if params.tf32x3 and params.wgmma:
        rejection = _validate_wgmma(params, arch)
        if rejection is not None:
            return rejection
    elif params.tf32x3:
        rejection = _validate_tc(params)
        if rejection is not None:
            return rejection
    regs_needed = params.est_regs_per_thread * threads
    if regs_needed > REGISTERS_PER_SM:
        return Rejection(
            "register_file",
            f"a {params.reg_m}x{params.reg_n} register block needs at least "
            f"{params.est_regs_per_thread} registers per thread; x{threads} threads = "
            f"{regs_needed} > {REGISTERS_PER_SM} per SM",
            {"est_regs_per_thread": params.est_regs_per_thread, "threads_per_block": threads,
             "registers_per_sm": REGISTERS_PER_SM},
        )
    # (checked for the late fields only: older points past it compile with spills and were
    # measured, and the space they belong to stays as it was)
    late = params.reg_m > 8 or params.reg_n > 8 or params.frag_prefetch
    if late and not params.tf32x3 and params.est_regs_per_thread > MAX_REGS_PER_THREAD:
        return Rejection(
            "register_file",
            f"a {params.reg_m}x{params.reg_n} register block needs at least "
            f"{params.est_regs_per_thread} registers per thread (max {MAX_REGS_PER_THREAD})",
            {"est_regs_per_thread": params.est_regs_per_thread,
             "max_regs_per_thread": MAX_REGS_PER_THREAD},
        )
    if params.frag_prefetch:
        rejection = _validate_frag_prefetch(params)
        if rejection is not None:
            return rejection
    if params.lane_quads and (params.threads_m % 2 or params.threads_n % 2 or not params.smem):
        return Rejection(
            "lane_quads_shape",
            "lane quads arrange 2x2 threads over the shared-memory fragments: they need smem on "
            f"and an even number of threads along M and N, here smem={params.smem}, "
            f"{params.threads_m} x {params.threads_n} threads",
            {"lane_quads": True, "smem": params.smem, "threads_m": params.threads_m,
             "threads_n": params.threads_n},
        )
    if params.stream_k:
        rejection = _validate_stream_k(params)
        if rejection is not None:
            return rejection
    if params.async_copy and not params.smem:
        return Rejection(
            "requires_shared_memory",
            "async_copy copies tiles into shared memory, and smem is off",
            {"async_copy": True, "smem": False},
        )
    if params.async_copy and not params.tf32x3 and params.pad % params.vec:
        return Rejection(
            "async_copy_alignment",
            f"cp.async copies {4 * params.vec} bytes (vec {params.vec}) to addresses aligned to "
            f"that size: padding {params.pad} floats must be a multiple of {params.vec}",
            {"pad": params.pad, "vec": params.vec, "copy_bytes": 4 * params.vec},
        )
    if params.interleave and (params.reg_m % 4 or params.reg_n % 4):
        return Rejection(
            "fragment_shape",
            f"interleaved float4 fragments need a register block of 4-multiples, "
            f"not {params.reg_m}x{params.reg_n}",
            {"reg_m": params.reg_m, "reg_n": params.reg_n, "fragment": 4},
        )
    if params.smem and not params.tf32x3 and params.block_n % params.vec:
        return Rejection(
            "vector_exceeds_tile",
            f"vec_width {params.vec} does not divide the tile width {params.block_n}",
            {"vec": params.vec, "block_n": params.block_n},
        )
    if params.smem:
        limit = max_smem_limit(arch)
        if params.smem_bytes > limit:
            return Rejection(
                "smem_over_limit",
                f"tiles need {params.smem_bytes} bytes of shared memory; {arch} allows {limit}",
                {"smem_bytes": params.smem_bytes, "max_smem_limit": limit},
            )
    fixed = params.fixed_shape
    if fixed is not None:  # a specialized kernel has one shape: check it there now
        return check_at_shape(params, fixed)
    return None


def split_pass_workspace_bytes(params: GemmParams, shape: Shape) -> int:
    """Bytes of the bf16 split pass's workspace: each operand's parts, tile by tile, padded to
    whole tiles (``bf16_parts`` x 2 bytes x 64-deep K tiles x (A's rows + B's columns), the
    columns to whole clusters); with ``split_on_demand`` two 4-byte counters a block after
    them."""
    k_pad = params.k_tiles(shape.k) * params.tile_k
    m_pad = -(-shape.m // params.tc_block_m) * params.tc_block_m
    cluster_n = params.tc_block_n * params.pass_cluster  # whole clusters of column tiles
    n_pad = -(-shape.n // cluster_n) * cluster_n
    blocks = params.bf16_parts * 2 * k_pad * (m_pad + n_pad)
    if params.split_on_demand:  # two counters a block: slices claimed, slices done
        return blocks + 2 * 4 * split_blocks(params, shape)
    return blocks


def split_blocks(params: GemmParams, shape: Shape) -> int:
    """The split pass's blocks at ``shape``: one a (row tile, K tile) of A and a (column tile,
    K tile) of B^T."""
    n_tiles = -(-shape.n // (params.tc_block_n * params.pass_cluster)) * params.pass_cluster
    return (-(-shape.m // params.tc_block_m) + n_tiles) * params.k_tiles(shape.k)


def split_pass_limit(params: GemmParams, shape: Shape) -> Rejection | None:
    """Why the split pass's workspace at ``shape`` is too large, or None."""
    return _over_workspace_limit(split_pass_workspace_bytes(params, shape),
                                 f"the bf16 split pass at {shape}", "split operands",
                                 {"m": shape.m, "n": shape.n, "k": shape.k})


def workspace_bytes(splits: int, shape: Shape) -> int:
    """Bytes of the split-K workspace: ``splits`` fp32 partial products of C."""
    return 4 * splits * shape.m * shape.n


def check_at_shape(params: GemmParams, shape: Shape) -> Rejection | None:
    """Why ``params`` (valid for every shape) is not worth launching at ``shape``, or None.

    Split-K must leave every split at least one K tile (more splits than tiles is a kernel that
    only pretends to split) and its workspace must fit; a shape-specialized kernel runs at its
    own shape only. :func:`~.launch.launch_config` refuses the last two at launch as well; for
    shapes with fewer K tiles than splits (the edge shapes of every check) it launches fewer
    splits, so the point stays correct for any shape.
    """
    p = params.canonical()
    fixed = p.fixed_shape
    if fixed is not None and fixed != shape:
        return shape_mismatch(fixed, shape)
    if p.split_k > 1:
        tiles = p.k_tiles(shape.k)
        if p.split_k > tiles:
            return Rejection(
                "split_k_exceeds_k_tiles",
                f"split_k {p.split_k} at K={shape.k}: {tiles} K tile(s) of depth {p.tile_k} "
                f"cannot give each of {p.split_k} splits one",
                {"split_k": p.split_k, "k": shape.k, "tile_k": p.tile_k, "k_tiles": tiles},
            )
        rejection = workspace_limit(p.split_k, shape)
        if rejection is not None:
            return rejection
    if p.split_pass:
        return split_pass_limit(p, shape)
    return None


def shape_mismatch(fixed: Shape, shape: Shape) -> Rejection:
    return Rejection(
        "shape_mismatch",
        f"kernel specialized for M, N, K = {fixed} cannot run at {shape}",
        {"compiled_shape": str(fixed), "shape": str(shape)},
    )


def workspace_limit(splits: int, shape: Shape) -> Rejection | None:
    return _over_workspace_limit(workspace_bytes(splits, shape), f"split_k {splits} at {shape}",
                                 "partial sums", {"split_k": splits, "m": shape.m, "n": shape.n})


def _over_workspace_limit(need: int, what: str, holding: str, details: dict[str, Any]
                          ) -> Rejection | None:
    """``workspace_limit`` when ``need`` bytes (of ``holding``, for ``what``) are too many."""
    if need <= MAX_WORKSPACE_BYTES:
        return None
    return Rejection(
        "workspace_limit",
        f"{what} needs a {need} B workspace of {holding}; the limit is {MAX_WORKSPACE_BYTES} B",
        {"workspace_bytes": need, "max_workspace_bytes": MAX_WORKSPACE_BYTES, **details})


def _wrong_fields(params: GemmParams, needs: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of ``params`` that differ from what ``needs`` asks, with their values."""
    return {k: getattr(params, k) for k, v in needs.items() if getattr(params, k) != v}


def _validate_split_pass(params: GemmParams) -> Rejection | None:
    if not params.bf16_split:
        return Rejection(
            "split_pass_needs_bf16",
            "split_pass splits a bf16 split kernel's operands before the GEMM, and bf16_split is "
            "0 (tf32x3): apply_precision_split(3) or (6) first",
            {"split_pass": True, "bf16_split": 0})
    # one producer warpgroup copies whole stages; split on demand, a second one splits too
    allowed = (1, 2) if params.split_on_demand else (1,)
    if params.producers not in allowed or params.async_copy:
        return Rejection(
            "split_pass_producer",
            "with the split pass one producer warpgroup copies whole stages by cp.async.bulk "
            "(split on demand, one or two split as well): producers must be "
            f"{' or '.join(map(str, allowed))} (is {params.producers}) and async_copy off "
            f"(is {params.async_copy})",
            {"split_pass": True, "producers": params.producers,
             "async_copy": params.async_copy})
    if params.split_k > 1:
        return Rejection(
            "split_pass_split_k",
            f"the split pass's workspace holds the split operands; split_k={params.split_k} "
            "would need one for its partial sums as well: choose one",
            {"split_pass": True, "split_k": params.split_k})
    return None


def _validate_mma_accumulate(params: GemmParams) -> Rejection | None:
    """Accumulating in the MMAs is built for the bf16 kernels of the split workspace; the
    128 x 256 tiles need it (their partial sums would not fit the registers) and bf16x3's two
    parts (three would not fit shared memory twice) with one producer thread copying."""
    if params.mma_accumulate:
        wrong = _wrong_fields(params, {"tf32x3": True, "split_pass": True})
        if wrong or not params.bf16_split:
            return Rejection(
                "mma_accumulate_split_workspace",
                "mma_accumulate lets a bf16 split kernel's MMAs accumulate into its fp32 sums; "
                "it is built for the kernels that copy their stages from the split workspace "
                f"(bf16_split 3 or 6, split_pass on): here bf16_split={params.bf16_split}"
                + "".join(f", {k}={v}" for k, v in wrong.items()),
                {"mma_accumulate": True, "bf16_split": params.bf16_split, **wrong})
    if params.wgmma > 128:
        needs = {"bf16_split": 3, "split_pass": True, "mma_accumulate": True,
                 "split_on_demand": False}
        wrong = _wrong_fields(params, needs)
        if wrong:
            return Rejection(
                "wgmma_256_needs",
                f"wgmma={params.wgmma} (128 x {params.wgmma} tiles) is built for the bf16x3 "
                "kernel of the split pass accumulating in its MMAs (bf16_split 3, split_pass "
                "on, mma_accumulate on, split_on_demand off: its producers keep 40 registers); "
                f"here {', '.join(f'{k}={v}' for k, v in wrong.items())}",
                {"wgmma": params.wgmma, **wrong})
    return None


def _validate_frag_prefetch(params: GemmParams) -> Rejection | None:
    wrong = _wrong_fields(params, {"smem": True, "stages": 2, "async_copy": False})
    if wrong:
        return Rejection(
            "frag_prefetch_pipeline",
            "frag_prefetch pipelines the register-staged double buffer (smem on, stages 2, "
            "async_copy off); "
            f"here {', '.join(f'{k}={v}' for k, v in wrong.items())}",
            {"frag_prefetch": True, **wrong},
        )
    return None


def _validate_stream_k(params: GemmParams) -> Rejection | None:
    if params.tf32x3 and params.wgmma and params.bf16_split:
        wrong = _wrong_fields(params, {"split_pass": True, "pass_cluster": 1})
        if wrong:
            return Rejection(
                "stream_k_split_workspace",
                "stream_k schedules a bf16 split kernel's tiles when it copies its stages from "
                "the split workspace (split_pass on, no cluster: pass_cluster 1); "
                f"here {', '.join(f'{k}={v}' for k, v in wrong.items())}",
                {"stream_k": params.stream_k, **wrong},
            )
        return None
    wrong = _wrong_fields(params, {"smem": True, "frag_prefetch": True, "tf32x3": False,
                                   "split_k": 1})
    if wrong:
        return Rejection(
            "stream_k_pipeline",
            "stream_k schedules the SIMT pipeline's tiles (smem on, frag_prefetch on, tf32x3 "
            "off) and splits their K itself (split_k 1); "
            f"here {', '.join(f'{k}={v}' for k, v in wrong.items())}",
            {"stream_k": params.stream_k, **wrong},
        )
    if params.reg_n % 4:
        return Rejection(
            "stream_k_fragment",
            f"stream_k stores part tiles by float4: reg_n must be a multiple of 4, not "
            f"{params.reg_n}",
            {"stream_k": params.stream_k, "reg_n": params.reg_n, "fragment": 4},
        )
    return None


def _validate_tc(params: GemmParams) -> Rejection | None:
    warps = params.threads // 32
    if params.threads % 32 or warps % params.tc_warps_n:
        return Rejection(
            "warp_layout",
            f"block {params.block_x}x{params.block_y} does not split into whole warps "
            f"({params.tc_warps_n} along N)",
            {"threads_per_block": params.threads, "warps_n": params.tc_warps_n},
        )
    if params.tc_block_m > 256 or params.tc_block_n > 256:
        return Rejection(
            "tile_too_large",
            f"block tile {params.tc_block_m}x{params.tc_block_n} exceeds 256x256",
            {"block_m": params.tc_block_m, "block_n": params.tc_block_n, "max": 256},
        )
    return _register_limit(params, f"a {params.warp_m}x{params.warp_n} warp tile")


def _register_limit(params: GemmParams, what: str) -> Rejection | None:
    if params.est_regs_per_thread > MAX_REGS_PER_THREAD:
        return Rejection(
            "register_file",
            f"{what} needs about {params.est_regs_per_thread} registers per thread "
            f"(max {MAX_REGS_PER_THREAD})",
            {"est_regs_per_thread": params.est_regs_per_thread,
             "max_regs_per_thread": MAX_REGS_PER_THREAD},
        )
    return None


def _validate_wgmma(params: GemmParams, arch: str) -> Rejection | None:
    if arch not in WGMMA_ARCHS:
        return Rejection(
            "requires_sm90a",
            f"wgmma is a Hopper instruction (sm_90a); {arch} has none: use the mma.sync kernel "
            "(wgmma=0)",
            {"wgmma": params.wgmma, "arch": arch, "archs": list(WGMMA_ARCHS)},
        )
    if params.block_x != WG_THREADS or params.block_y not in (1, 2):
        return Rejection(
            "warpgroup_layout",
            f"the wgmma kernel runs 1 or 2 warpgroups of {WG_THREADS} threads: block "
            f"({WG_THREADS}, 1) or ({WG_THREADS}, 2), not ({params.block_x}, {params.block_y})",
            {"block_x": params.block_x, "block_y": params.block_y,
             "warpgroup_threads": WG_THREADS, "max_warpgroups": 2},
        )
    return _register_limit(params, f"wgmma N={params.wgmma}")
