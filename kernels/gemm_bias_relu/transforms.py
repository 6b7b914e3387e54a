"""The action space of ``gemm_bias_relu``: the seed's eight transforms and the expert ones.

Each transform is a pure function ``(candidate, *args) -> Candidate | Rejection``. A transform that
would not change the kernel is a ``no_change`` rejection (an evaluation saved); one whose result is
invalid is rejected with the numbers of :func:`~kernels.gemm_bias_relu.params.validate`.
New transforms register here (or in another module) with ``@TRANSFORMS.register``; nothing else
changes.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kernels.base import Action, ArgSpec, Candidate, Rejection, TransformRegistry
from kernels.gemm_bias_relu.params import (
    DOMAINS,
    SEARCHED_WGMMA,
    SMEM_ONLY_DEFAULTS,
    TC_ONLY_DEFAULTS,
    WG_THREADS,
    GemmParams,
)
from kernels.gemm_bias_relu.shape import Shape
from kernels.gemm_bias_relu.validity import check_at_shape, validate

TRANSFORMS = TransformRegistry()

#: The arch transforms validate against (rejections name its limit). Families are arch-generic;
#: the campaign re-validates for its own arch before compiling.
DEFAULT_ARCH = "sm_90"


def _step(candidate: Candidate, action: Action, **changes: Any) -> Candidate | Rejection:
    params: GemmParams = candidate.params
    new = replace(params, **changes).canonical()
    if new == params:
        return Rejection(
            "no_change", f"{action} leaves the kernel unchanged", {"action": str(action)}
        )
    rejection = validate(new, DEFAULT_ARCH)
    if rejection is None and candidate.shape is not None:
        rejection = check_at_shape(new, Shape.of(candidate.shape))
    if rejection is not None:
        return rejection
    return Candidate(new, action=action, parent=candidate, shape=candidate.shape)


def _needs_smem(candidate: Candidate, action: Action) -> Rejection | None:
    if not candidate.params.smem:
        return Rejection(
            "requires_shared_memory",
            f"{action} acts on shared-memory tiles; apply_shared_memory_load(true) first",
            {"action": str(action), "smem": False},
        )
    return None


def _needs_simt(candidate: Candidate, action: Action, why: str) -> Rejection | None:
    if candidate.params.tf32x3:
        return Rejection("tensor_core_kernel", f"{action} shapes the SIMT kernel; {why}",
                         {"action": str(action), "tf32x3": True})
    return None


def _simt_smem_step(candidate: Candidate, action: Action, why: str,
                    **changes: Any) -> Candidate | Rejection:
    """A step of the staged SIMT kernel: rejected on the tensor-core kernels (``why``) and
    without shared-memory tiles."""
    return (_needs_simt(candidate, action, why) or _needs_smem(candidate, action)
            or _step(candidate, action, **changes))


def _needs_wgmma(candidate: Candidate, action: Action) -> Rejection | None:
    if not (candidate.params.tf32x3 and candidate.params.wgmma):
        return Rejection("requires_wgmma",
                         f"{action} shapes the wgmma 3xTF32 kernel; apply_wgmma(128) first",
                         {"action": str(action), "wgmma": candidate.params.wgmma,
                          "tf32x3": candidate.params.tf32x3})
    return None


def _needs_tensor_cores(candidate: Candidate, action: Action) -> Rejection | None:
    if not candidate.params.tf32x3:
        return Rejection("requires_tensor_cores",
                         f"{action} shapes the tensor-core kernel; apply_tf32x3(true) first",
                         {"action": str(action), "tf32x3": False})
    return None


@TRANSFORMS.register(
    "apply_tiling",
    ArgSpec("tile_size", DOMAINS["tile_k"], "K-depth of the staged A/B tiles, 8..64", "tile_k"),
)
def apply_tiling(candidate: Candidate, tile_size: int) -> Candidate | Rejection:
    """Set the shared-memory tile size (K-depth of the staged tiles)."""
    action = Action("apply_tiling", (tile_size,))
    return _needs_smem(candidate, action) or _step(candidate, action, tile_k=tile_size)


@TRANSFORMS.register(
    "apply_vectorize",
    ArgSpec("vec_width", DOMAINS["vec"], "floats per global load/store: 1, 2 or 4 (float4)",
            "vec"),
)
def apply_vectorize(candidate: Candidate, vec_width: int) -> Candidate | Rejection:
    """Set the width of global loads and stores; edges and misaligned rows fall back to scalar."""
    return _step(candidate, Action("apply_vectorize", (vec_width,)), vec=vec_width)


@TRANSFORMS.register(
    "apply_register_block",
    ArgSpec("m", DOMAINS["reg_m"], "outputs per thread along M: 1, 2, 4, 8, 16", "reg_m"),
    ArgSpec("n", DOMAINS["reg_n"], "outputs per thread along N: 1, 2, 4, 8, 16 (the seed's "
            "space stops at 8x8; 8x16 and 16x8 fit in 255 registers)", "reg_n"),
)
def apply_register_block(candidate: Candidate, m: int, n: int) -> Candidate | Rejection:
    """Each thread computes an m x n block of outputs in registers."""
    return _step(candidate, Action("apply_register_block", (m, n)), reg_m=m, reg_n=n)


@TRANSFORMS.register(
    "apply_unroll",
    ArgSpec("factor", DOMAINS["unroll"], "unroll factor of the inner k loop: 1, 2, 4, 8",
            "unroll"),
)
def apply_unroll(candidate: Candidate, factor: int) -> Candidate | Rejection:
    """Set the unroll factor of the inner loop."""
    return _step(candidate, Action("apply_unroll", (factor,)), unroll=factor)


@TRANSFORMS.register(
    "change_block_config",
    ArgSpec("x", DOMAINS["block_x"], "threads along x: 8..256", "block_x"),
    ArgSpec("y", DOMAINS["block_y"], "threads along y: 1..32 (32 <= x*y <= 1024)", "block_y"),
)
def change_block_config(candidate: Candidate, x: int, y: int) -> Candidate | Rejection:
    """Set the thread-block shape, e.g. (16,8), (32,4), (64,2), (128,1), (256,1)."""
    return _step(candidate, Action("change_block_config", (x, y)), block_x=x, block_y=y)


@TRANSFORMS.register(
    "apply_shared_memory_load",
    ArgSpec("on", DOMAINS["smem"], "stage A/B tiles in shared memory (true) or not (false)",
            "smem"),
)
def apply_shared_memory_load(candidate: Candidate, on: bool) -> Candidate | Rejection:
    """Stage A and B tiles in shared memory, or read operands straight from global memory."""
    action = Action("apply_shared_memory_load", (on,))
    if on:
        return _step(candidate, action, smem=True)
    return _step(candidate, action, smem=False, **SMEM_ONLY_DEFAULTS)


@TRANSFORMS.register(
    "avoid_bank_conflict",
    ArgSpec("pad", DOMAINS["pad"], "floats of padding per shared-memory row: 0, 1, 2, 4", "pad"),
)
def avoid_bank_conflict(candidate: Candidate, pad: int) -> Candidate | Rejection:
    """Pad shared-memory rows so that a warp's accesses spread over the 32 banks."""
    action = Action("avoid_bank_conflict", (pad,))
    return _needs_smem(candidate, action) or _step(candidate, action, pad=pad)


@TRANSFORMS.register("revert_last")
def revert_last(candidate: Candidate) -> Candidate | Rejection:
    """Return to the parent candidate (its own lineage intact, so the chain replays)."""
    if candidate.parent is None:
        return Rejection("no_parent", "revert_last() on the root candidate", {})
    return candidate.parent


# ---- expert transforms beyond the seed ------------------------------------------------------


@TRANSFORMS.register(
    "apply_coalesce",
    ArgSpec("on", DOMAINS["coalesced"], "threadIdx.x along N (true) or along M (false)",
            "coalesced"),
    origin="expert",
)
def apply_coalesce(candidate: Candidate, on: bool) -> Candidate | Rejection:
    """Run threadIdx.x along the columns of C, so a warp's B loads and C stores are contiguous."""
    return _step(candidate, Action("apply_coalesce", (on,)), coalesced=on)


@TRANSFORMS.register(
    "apply_fragment_interleave",
    ArgSpec("on", DOMAINS["interleave"], "float4 fragments interleaved across threads",
            "interleave"),
    origin="expert",
)
def apply_fragment_interleave(candidate: Candidate, on: bool) -> Candidate | Rejection:
    """Interleave each thread's float4 output fragments across the block: conflict-free smem reads
    and coalesced float4 stores (register blocks of 4-multiples, staged tiles)."""
    action = Action("apply_fragment_interleave", (on,))
    return _needs_smem(candidate, action) or _step(candidate, action, interleave=on)


@TRANSFORMS.register(
    "apply_double_buffer",
    ArgSpec("stages", DOMAINS["stages"], "1 = single buffer, 2 = register-staged double buffer",
            "stages"),
    origin="expert",
)
def apply_double_buffer(candidate: Candidate, stages: int) -> Candidate | Rejection:
    """Load the next tile into registers while computing the current one from shared memory."""
    action = Action("apply_double_buffer", (stages,))
    return _needs_smem(candidate, action) or _step(candidate, action, stages=stages)


@TRANSFORMS.register(
    "apply_async_copy",
    ArgSpec("on", DOMAINS["async_copy"], "SIMT tiles copied into shared memory by cp.async "
            "into stages + 1 buffers (true), or staged through registers (false)", "async_copy"),
    origin="expert",
)
def apply_async_copy(candidate: Candidate, on: bool) -> Candidate | Rejection:
    """Copy the SIMT kernel's tiles with ``cp.async`` (global to shared memory without passing
    through registers) into ``stages + 1`` buffers, one barrier per tile: with
    ``apply_double_buffer(2)`` a three-stage pipeline. A's elements land transposed, as the
    register-staged kernel stores them, so the compute loop is unchanged. On a warp-specialized
    bf16 split kernel: the producers copy each fp32 tile one ahead by ``cp.async`` into a
    staging buffer and split it from there (a whole tile in flight, not a register batch)."""
    params: GemmParams = candidate.params
    if params.tf32x3 and params.wgmma and params.bf16_split:
        return _step(candidate, Action("apply_async_copy", (on,)), async_copy=on)
    return _simt_smem_step(candidate, Action("apply_async_copy", (on,)),
                           "the tensor-core kernels always copy by cp.async "
                           "(apply_double_buffer sets their buffers)", async_copy=on)


@TRANSFORMS.register(
    "apply_fragment_prefetch",
    ArgSpec("on", DOMAINS["frag_prefetch"], "SIMT k-steps unrolled over the tile, each step's "
            "fragments read one step ahead into a second register set (true)", "frag_prefetch"),
    origin="expert",
)
def apply_fragment_prefetch(candidate: Candidate, on: bool) -> Candidate | Rejection:
    """Software-pipeline the double-buffered SIMT kernel in registers: the tile's ``tile_k``
    steps unrolled whole, step k+1's A and B fragments read from shared memory into a second
    register set while step k's FFMAs run (the next tile's first ones right after its one
    barrier), interior CTAs loading their tiles without bound checks. Needs
    ``apply_double_buffer(2)``; the unroll factor then has no meaning."""
    return _simt_smem_step(candidate, Action("apply_fragment_prefetch", (on,)),
                           "the tensor-core kernels pipeline their fragments themselves",
                           frag_prefetch=on)


@TRANSFORMS.register(
    "apply_lane_quads",
    ArgSpec("on", DOMAINS["lane_quads"], "SIMT threads in 2x2 quads: lane pairs share each "
            "shared-memory fragment read (an LDS.128 in 2 wavefronts, not 4)", "lane_quads"),
    origin="expert",
)
def apply_lane_quads(candidate: Candidate, on: bool) -> Candidate | Rejection:
    """Arrange the SIMT kernel's threads in 2x2 quads of (row, column) fragments: of four
    consecutive threads, index bit 0 runs along N and bit 1 along M, so lanes t and t^1 read the
    same A fragment and t and t^2 the same B fragment. Shared memory returns 128 B a cycle: an
    LDS.128 whose 32 lanes want different addresses takes four wavefronts, one whose lane pairs
    share them two. The warp's footprint (rows and columns of C) is unchanged; the pipelined
    kernel also runs its FFMAs in a serpentine order. Needs staged tiles and an even number of
    threads along M and N."""
    return _simt_smem_step(candidate, Action("apply_lane_quads", (on,)),
                           "the tensor-core kernels' fragments follow the mma layouts",
                           lane_quads=on)


@TRANSFORMS.register(
    "apply_stream_k",
    ArgSpec("waves", DOMAINS["stream_k"], "SIMT pipeline's tiles scheduled stream-K: 1 = the "
            "tiles past the whole waves shared by every resident CTA slot, 2 = those and one "
            "whole wave, 0 = one tile a CTA", "stream_k"),
    origin="expert",
)
def apply_stream_k(candidate: Candidate, waves: int) -> Candidate | Rejection:
    """Schedule the pipelined SIMT kernel's tiles stream-K: S = SMs x the CTAs an SM holds;
    the whole waves of tiles run a tile per CTA, and the rest's K iterations (with ``waves=2``
    one whole wave more) are shared equally by S CTAs, each a contiguous run over whole and
    part tiles, so that the last wave is not part-empty (64x128 tiles at 4096^2: 2048 tiles on
    396 slots are 5.17 waves, six without it). Parts of split tiles go to a workspace; a fix-up
    kernel sums them in K order, adds the bias and applies ReLU. Needs
    ``apply_fragment_prefetch(true)``."""
    return _simt_smem_step(candidate, Action("apply_stream_k", (waves,)),
                           "stream-K schedules the SIMT pipeline's tiles", stream_k=waves)


@TRANSFORMS.register(
    "apply_block_swizzle",
    ArgSpec("group", DOMAINS["swizzle"], "row-tiles of blocks walked together: 1, 2, 4, 8",
            "swizzle"),
    origin="expert",
)
def apply_block_swizzle(candidate: Candidate, group: int) -> Candidate | Rejection:
    """Rasterize blocks in groups of row-tiles so that the tiles they share stay in L2."""
    return _step(candidate, Action("apply_block_swizzle", (group,)), swizzle=group)


@TRANSFORMS.register(
    "apply_tf32x3",
    ArgSpec("on", DOMAINS["tf32x3"], "3xTF32 on tensor cores (mma.sync), fp32 accuracy",
            "tf32x3"),
    origin="expert",
)
def apply_tf32x3(candidate: Candidate, on: bool) -> Candidate | Rejection:
    """Switch to the 3xTF32 tensor-core kernel: each operand split into a big and a small TF32
    part, three mma products per step, partial sums promoted into fp32 registers per K-tile."""
    action = Action("apply_tf32x3", (on,))
    if on:
        return _step(candidate, action, tf32x3=True)
    return _step(candidate, action, tf32x3=False, **TC_ONLY_DEFAULTS)


@TRANSFORMS.register(
    "apply_warp_tiling",
    ArgSpec("wm", DOMAINS["warp_m"], "rows of C per warp: 32 or 64", "warp_m"),
    ArgSpec("wn", DOMAINS["warp_n"], "columns of C per warp: 32 or 64", "warp_n"),
    origin="expert",
)
def apply_warp_tiling(candidate: Candidate, wm: int, wn: int) -> Candidate | Rejection:
    """Set the warp tile of the tensor-core kernel (block tile = warps x warp tile)."""
    action = Action("apply_warp_tiling", (wm, wn))
    return (_needs_tensor_cores(candidate, action)
            or _step(candidate, action, warp_m=wm, warp_n=wn))


@TRANSFORMS.register(
    "apply_wgmma",
    ArgSpec("n", SEARCHED_WGMMA, "Hopper warpgroup MMA (wgmma, sm_90a) for the 3xTF32 kernel: "
            "rows of C per CTA, 64 or 128; 0 = mma.sync", "wgmma"),
    origin="expert",
)
def apply_wgmma(candidate: Candidate, n: int) -> Candidate | Rejection:
    """Run the 3xTF32 kernel on Hopper's warpgroup tensor cores (wgmma, built for sm_90a): one
    or two warpgroups of 128 threads, 64 columns of C each, ``n`` rows; the A tile split once per
    K-tile in shared memory, B's fragments in registers; partial sums promoted per K-tile."""
    action = Action("apply_wgmma", (n,))
    params: GemmParams = candidate.params
    rejection = _needs_tensor_cores(candidate, action)
    if rejection is not None:
        return rejection
    if n == 0:  # back to mma.sync: 4 x 2 warps of 32 x 32 (the kernel's usual shape)
        return _step(candidate, action, wgmma=0, block_x=64, block_y=4)
    warpgroups = 2 if params.threads >= 2 * WG_THREADS else 1
    return _step(candidate, action, wgmma=n, block_x=WG_THREADS, block_y=warpgroups)


@TRANSFORMS.register(
    "apply_global_fragments",
    ArgSpec("on", DOMAINS["frag_global"], "the wgmma kernel's B^T fragments straight from global "
            "memory (L2) into registers, a K-tile ahead (true), or through a shared-memory B "
            "tile (false)", "frag_global"),
    origin="expert",
)
def apply_global_fragments(candidate: Candidate, on: bool) -> Candidate | Rejection:
    """Load the wgmma kernel's register operand (B^T fragments) from global memory, one K-tile
    ahead of the MMAs, instead of through a shared-memory B tile: shared memory then carries only
    the A tiles. Slower on the H200 than the shared-memory B tile (the kernel is not short of
    shared-memory bandwidth), so the expert does not offer it (``docs/GPU.md``)."""
    action = Action("apply_global_fragments", (on,))
    return _needs_wgmma(candidate, action) or _step(candidate, action, frag_global=on)


@TRANSFORMS.register(
    "apply_mma_pipeline",
    ArgSpec("window", DOMAINS["mma_window"], "K-tiles whose tensor-core partial sums are promoted "
            "into fp32 at once, with the MMAs kept in flight across the tiles between (1: "
            "promote every tile, all MMAs retired each time)", "mma_window"),
    origin="expert",
)
def apply_mma_pipeline(candidate: Candidate, window: int) -> Candidate | Rejection:
    """Keep the wgmma kernel's MMAs in flight across K-tiles: each k8 step's three MMAs are a
    commit group with fragment registers of its own, made while the three groups before it run;
    the partial sums are promoted into fp32 every ``window`` K-tiles (32·window products a sum),
    the only point where the tensor pipe drains."""
    action = Action("apply_mma_pipeline", (window,))
    return _needs_wgmma(candidate, action) or _step(candidate, action, mma_window=window)


@TRANSFORMS.register(
    "apply_warp_specialization",
    ArgSpec("producers", DOMAINS["producers"], "producer warpgroups that copy the tiles and split "
            "A while the consumer warpgroups only run the MMAs (0: all in lockstep)",
            "producers"),
    origin="expert",
)
def apply_warp_specialization(candidate: Candidate, producers: int) -> Candidate | Rejection:
    """Warp-specialize the wgmma kernel's in-flight MMA pipeline: ``producers`` warpgroups copy
    each K-tile (cp.async) and split its A tile, handing stages to the consumer warpgroups through
    mbarriers (full: copied and split; empty: the MMAs that read it retired); the consumers make
    B's fragments and issue the MMAs and never stop at a CTA-wide barrier. Registers move from
    producers to consumers with ``setmaxnreg``."""
    action = Action("apply_warp_specialization", (producers,))
    return _needs_wgmma(candidate, action) or _step(candidate, action, producers=producers)


@TRANSFORMS.register(
    "apply_precision_split",
    ArgSpec("scheme", DOMAINS["bf16_split"], "how the wgmma kernel splits its fp32 operands: "
            "0 = tf32x3 (big + small TF32), 3 = bf16x3 (hi + lo bf16, three products), 6 = "
            "bf16x6 (hi + mid + lo bf16, six products: tighter)", "bf16_split"),
    origin="expert",
)
def apply_precision_split(candidate: Candidate, scheme: int) -> Candidate | Rejection:
    """Choose the precision split of the wgmma kernel (``PRECISION_SCHEMES``): tf32x3 (0),
    bf16x3 (3: each operand hi + lo in bf16, hi·hi + hi·lo + lo·hi by bf16 wgmma m64nNk16 into
    fp32) or bf16x6 (6: hi + mid + lo, the six largest products). The bf16 schemes split both
    operands once per tile into shared memory (the splitting threads transpose B on the way) and
    run at twice TF32's tensor-core rate; their error class is ``precision.py``'s."""
    action = Action("apply_precision_split", (scheme,))
    return _needs_wgmma(candidate, action) or _step(candidate, action, bf16_split=scheme)


@TRANSFORMS.register(
    "apply_split_pass",
    ArgSpec("on", DOMAINS["split_pass"], "split the bf16 kernel's operands once, by a pass "
            "before the GEMM into a workspace in the stages' layout, copied by cp.async.bulk "
            "(true), or once per tile by the producers (false)", "split_pass"),
    origin="expert",
)
def apply_split_pass(candidate: Candidate, on: bool) -> Candidate | Rejection:
    """Split a warp-specialized bf16 kernel's operands once, by a prologue kernel that writes
    every value's bf16 parts to a workspace, block by block in the byte layout of a stage; the
    GEMM's one producer warpgroup then copies whole stages by ``cp.async.bulk`` on their
    mbarriers. A value is split once instead of once per CTA that reads it, and the
    producers hold nothing in registers; the pass reads A and B once and writes their parts.
    On, it sets the one producer warpgroup (``producers=1``, no ``async_copy``) it needs."""
    action = Action("apply_split_pass", (on,))
    rejection = _needs_wgmma(candidate, action)
    if rejection is not None:
        return rejection
    if not on:
        return _step(candidate, action, split_pass=False)
    return _step(candidate, action, split_pass=True, producers=1, async_copy=False)


@TRANSFORMS.register(
    "apply_pass_cluster",
    ArgSpec("ctas", DOMAINS["pass_cluster"], "CTAs of a cluster along N that share each A "
            "block of the split pass, each copying its part multicast to all (1: none)",
            "pass_cluster"),
    origin="expert",
)
def apply_pass_cluster(candidate: Candidate, ctas: int) -> Candidate | Rejection:
    """Run the split pass's GEMM in clusters of ``ctas`` CTAs side by side along N: the A block
    they all read each K tile is copied once, a part by each CTA's producer multicast into
    every CTA of the cluster, and each consumer warp releases the stage to every producer.
    Shared-memory fills from L2 fall by a quarter at two CTAs (128x128 tiles)."""
    action = Action("apply_pass_cluster", (ctas,))
    return _needs_wgmma(candidate, action) or _step(candidate, action, pass_cluster=ctas)


@TRANSFORMS.register(
    "apply_split_k",
    ArgSpec("splits", DOMAINS["split_k"], "CTAs sharing the K tiles of one output tile (grid z); "
            "1 = no split", "split_k"),
    origin="expert",
)
def apply_split_k(candidate: Candidate, splits: int) -> Candidate | Rejection:
    """Split K among CTAs along grid z (for shapes whose M x N tiles do not fill the GPU): each
    writes fp32 partial sums to a workspace, a second kernel sums them, adds bias, applies ReLU."""
    action = Action("apply_split_k", (splits,))
    return _needs_smem(candidate, action) or _step(candidate, action, split_k=splits)


@TRANSFORMS.register(
    "specialize_shape",
    ArgSpec("on", (False, True), "compile M, N, K in as constants (true) or take them at run "
            "time (false)"),
    origin="expert",
)
def specialize_shape(candidate: Candidate, on: bool) -> Candidate | Rejection:
    """Compile the campaign's M, N, K into the kernel as constants (bounds checks and index math
    fold away); the kernel then refuses every other shape."""
    action = Action("specialize_shape", (on,))
    if not on:
        return _step(candidate, action, shape_m=0, shape_n=0, shape_k=0)
    shape = candidate.shape
    if shape is None:
        return Rejection("shape_unknown",
                         f"{action} needs the problem shape, and this candidate carries none "
                         "(a campaign's candidates carry its shape)", {"action": str(action)})
    return _step(candidate, action, shape_m=shape.m, shape_n=shape.n, shape_k=shape.k)
