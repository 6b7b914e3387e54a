"""The GEMM's expert rule book: profile-driven moves from the incumbent, best first.

Each rule yields a move only when its signal is present:

1. strided warp accesses (threadIdx.x along M) → ``apply_coalesce(true)``;
2. the last compile was over the shared-memory limit → the largest tile that fits, computed from
   ``max_smem_limit`` in the feedback (not a blind halving);
3. operands read straight from global memory (memory-bound) → vectorize, stage tiles in shared
   memory, register-block;
4. shared-memory bank conflicts (Nsight figure, or unpadded tiles when none was measured) →
   ``avoid_bank_conflict``;
5. spills, or occupancy limited by registers → a smaller register block;
6. low reuse per shared-memory load (register block under 4x4) → a larger register block;
7. a register-blocked staged SIMT kernel → the 3xTF32 tensor-core kernel (the higher ceiling)
   when a precision split fits the campaign's tolerance (:func:`precision.schemes_for`: the
   scheme's error class with a 3x margin); where none fits, the tensor cores are not allowed or
   were tried, the SIMT kernel's end: stream-K for a part-empty last wave, the register pipeline
   with lane quads and its register blocks;
8. on the tensor-core kernels: wgmma where the arch has it, deeper pipelines, larger warp tiles,
   block swizzle, warp specialization; on a wgmma kernel, the most preferred precision split that
   fits the tolerance (bf16x3, else bf16x6, else tf32x3), on a bf16 kernel with the MMA
   pipeline the split pass first (then its clusters of two sharing A), and on a
   warp-specialized bf16 kernel producers staging their tiles by cp.async;
9. a grid with fewer CTAs than the GPU holds at once (SMs x resident CTAs per SM, from the
   occupancy figures) and many K tiles → ``apply_split_k`` with the smallest split that fills it
   (each split keeping at least :data:`MIN_K_TILES_PER_SPLIT` tiles), and the split below it;
10. the structure has settled (``ctx.settled``) → ``specialize_shape(true)``: compile-time
    M, N, K (local search holds it back until then: :func:`held_until_settled`).

Why each rule is what it is, with the measurements behind it:
``docs/GPU.md#why-the-gemm-rule-book-is-what-it-is``. Pure: reads the decision through
:class:`kernels.family.RuleContext`.
"""

from __future__ import annotations

from typing import Any

from kernels.base import DEFAULT_SM_COUNT, Action, Rejection
from kernels.family import EvaluatedPoint, RuleContext
from kernels.gemm_bias_relu.params import PRECISION_SCHEMES
from kernels.gemm_bias_relu.precision import MARGIN, error_class, schemes_for
from kernels.gemm_bias_relu.shape import Shape

#: split-K is proposed only while every split keeps at least this many K tiles (a split of one
#: or two tiles spends its time filling and draining the pipeline)
MIN_K_TILES_PER_SPLIT = 4
#: stream-K is proposed while the last wave of tiles would be at most this full (the fix-up
#: of its split tiles costs about a workspace pass over S tiles)
STREAM_K_MAX_LAST_WAVE_FILL = 0.9

Move = tuple[str, str]


def held_until_settled(action: Action) -> bool:
    """``specialize_shape(true)``: a specialized kernel is checked at the campaign's shape only,
    so search proposes it once the structure has settled."""
    return action.name == "specialize_shape" and bool(action.args[0])


def expert_moves(ctx: RuleContext) -> list[Move]:
    """``(action text, reason)`` moves from the incumbent, best first (see the module doc); an
    action text may chain transforms (``"a(1) ; b(2)"``)."""
    inc = ctx.incumbent
    assert inc is not None
    p = inc.params
    profile = inc.profile or {}
    moves: list[Move] = []
    if not p.coalesced:
        moves.append(("apply_coalesce(true)",
                      "threadIdx.x runs along M: a warp's B loads and C stores are strided"))
    moves += _smem_limit_moves(ctx, p)
    if p.tf32x3:
        moves += _tensor_core_moves(ctx, inc)
    elif not p.smem:
        reason = ("operands come straight from global memory, re-read by every thread: "
                  "memory-bound")
        if p.vec < 4:
            moves.append(("apply_vectorize(4)", reason + "; float4 loads move 4x per access"))
        moves.append(("apply_shared_memory_load(true)", reason + "; stage tiles in smem"))
        moves.append(("apply_register_block(4, 4)", reason + "; reuse operands in registers"))
    else:
        moves += _staged_simt_moves(ctx, inc, profile)
    moves += _split_k_moves(ctx, inc)
    if ctx.settled and ctx.shape is not None and getattr(p, "fixed_shape", None) is None:
        moves.append(("specialize_shape(true)",
                      f"no acceptance in {ctx.stagnation} evaluations: the structure has "
                      f"settled; compile M, N, K = {ctx.shape} in as constants so that "
                      "bounds checks and index arithmetic fold away"))
    return moves


def _smem_limit_moves(ctx: RuleContext, p: Any) -> list[Move]:
    """The largest tile that fits when the last compile was over the shared-memory limit."""
    last = max(ctx.history, key=lambda h: h.iteration, default=None)
    rejection = ((last.compile or {}).get("rejection") or {}) if last else {}
    if rejection.get("reason") != "smem_over_limit" or not p.smem:
        return []
    limit = int(rejection["max_smem_limit"])
    for tile in (64, 32, 16, 8):
        need = 4 * tile * (p.block_m + p.block_n + 2 * p.pad)
        if need <= limit and tile != p.tile_k:
            return [(f"apply_tiling({tile})",
                     f"last tile needed {rejection.get('smem_bytes')} B of smem, "
                     f"limit {limit} B: tile {tile} needs {need} B")]
    return []


def _staged_simt_moves(ctx: RuleContext, inc: EvaluatedPoint,
                       profile: Any) -> list[Move]:
    """Moves of the SIMT kernel with shared-memory tiles."""
    p = inc.params
    moves: list[Move] = []
    conflicts = profile.get("shared_mem_bank_conflicts")
    if p.pad == 0 and (conflicts is None or conflicts > 0):
        why = (f"{conflicts} shared-memory bank conflicts" if conflicts is not None
               else "unpadded shared-memory tiles (transposed A stores conflict)")
        moves.append(("avoid_bank_conflict(1)", why + ": pad rows by one word"))
        moves.append(("avoid_bank_conflict(4)", why + ": pad rows by one float4"))
    spills = (inc.compile or {}).get("spill_bytes") or 0
    occupancy = profile.get("theoretical_occupancy_pct")
    limiter = profile.get("limiter")
    if spills > 0 or (limiter == "registers" and occupancy is not None and occupancy < 20):
        why = (f"{spills} bytes of spills" if spills else
               f"occupancy {occupancy}% limited by registers")
        moves.append((f"apply_register_block({max(1, p.reg_m // 2)}, {p.reg_n})", why))
        moves.append((f"apply_register_block({p.reg_m}, {max(1, p.reg_n // 2)})", why))
    if p.reg_m * p.reg_n < 16:
        why = (f"a {p.reg_m}x{p.reg_n} register block does few FMAs per shared-memory "
               "load: raise reuse")
        moves += [("apply_register_block(4, 4)", why), ("apply_register_block(8, 4)", why),
                  ("apply_register_block(4, 8)", why), ("apply_register_block(8, 8)", why)]
    if p.vec < 4:
        moves.append(("apply_vectorize(4)", "tile loads and C stores one float at a time"))
    # apply_async_copy is not offered: the campaign's best SIMT kernel runs slower with it;
    # search policies still reach it
    splits = schemes_for(ctx.tolerance)
    if p.reg_m * p.reg_n >= 16 and splits:
        moves.append(("apply_tf32x3(true)",
                      f"register-blocked {p.reg_m}x{p.reg_n} tiles: the kernel is bound "
                      "by FP32 FMA issue; 3xTF32 on tensor cores keeps fp32 accuracy "
                      f"with a higher ceiling (splits within tolerance {ctx.tolerance:g}: "
                      f"{', '.join(splits)})"))
    # the SIMT kernel's own end, where the tensor cores are not to be had (not allowed, or no
    # split fits the tolerance) or were tried (their ceiling is far higher: offered before them,
    # these moves delay a campaign on its way there)
    if not ctx.action_allowed("apply_tf32x3") or not splits or any(
            getattr(h.params, "tf32x3", False) for h in ctx.history):
        moves += _stream_k_moves(ctx, inc) + _simt_pipeline_moves(p)
    return moves


def _simt_pipeline_moves(p: Any) -> list[Move]:
    """Where the SIMT kernel ends (offered where the tensor cores, with the higher ceiling, are
    not allowed or were tried): the register pipeline on the double-buffered, interleaved kernel
    with its threads in lane quads and its blocks swizzled in groups of four row-tiles (B's
    tiles shared in L2), then register blocks in 128 threads: 8x8 in a 64x128 tile and in a
    128x64 one (~160 registers, three CTAs an SM) and 8x16 in a 128x128 one (255 registers, two
    CTAs an SM), each a chain from wherever a register-blocked staged incumbent stands, the
    fastest on the H200 first."""
    if p.reg_m * p.reg_n < 16 or p.async_copy:
        return []
    base = [step for step, needed in (
        ("apply_coalesce(true)", not p.coalesced),
        ("apply_vectorize(4)", p.vec != 4),
        ("avoid_bank_conflict(4)", p.pad % 4 != 0),
        ("apply_fragment_interleave(true)", not p.interleave),
        ("apply_double_buffer(2)", p.stages != 2),
        ("apply_fragment_prefetch(true)", not p.frag_prefetch),
        ("apply_lane_quads(true)", not p.lane_quads),
        # with lane quads the swizzled 64x128 kernel runs faster than the unswizzled one
        ("apply_block_swizzle(4)", p.swizzle == 1)) if needed]
    moves = []
    if not (p.frag_prefetch and p.lane_quads):
        moves.append((" ; ".join(base), (
            f"a {p.reg_m}x{p.reg_n} block waits on each k-step's shared-memory fragments "
            "(short-scoreboard stalls): read the next step's into a second register set "
            "while this step's FFMAs run, with lane pairs sharing each LDS.128 (two "
            "wavefronts instead of four)")))
    per_lds = p.reg_m * p.reg_n * 4 // (p.reg_m + p.reg_n)
    for (rm, rn), (bx, by), why in (
            ((8, 8), (16, 8), "8x8 in 128 threads as a 64x128 tile (~160 registers, three "
                              "CTAs an SM: three warps a scheduler to hide the fragment "
                              "and barrier waits; B's rows 512 B wide)"),
            ((8, 8), (8, 16), "8x8 in 128 threads as a 128x64 tile (three CTAs an SM)"),
            ((8, 16), (8, 16), "8x16 in 128 threads (a 128x128 tile, 255 registers, two "
                               "CTAs an SM: 21 FFMAs per LDS.128)")):
        chain = base + [step for step, needed in (
            ("apply_tiling(16)", p.tile_k != 16),
            (f"apply_register_block({rm}, {rn})", (p.reg_m, p.reg_n) != (rm, rn)),
            (f"change_block_config({bx}, {by})", (p.block_x, p.block_y) != (bx, by)))
            if needed]
        if len(chain) > len(base):
            moves.append((" ; ".join(chain), (
                f"{p.reg_m}x{p.reg_n} outputs in {p.threads} threads ({per_lds} FFMAs per "
                f"LDS.128): {why}, with the fragment pipeline and lane quads")))
    return moves


def _stream_k_moves(ctx: RuleContext, inc: EvaluatedPoint) -> list[Move]:
    """Stream-K when the pipelined SIMT kernel's last wave of tiles would run part-empty: a
    part-empty last wave costs about as much as a full one, whatever its fill."""
    p = inc.params
    if (ctx.shape is None or "apply_stream_k" not in ctx.family.transforms
            or not getattr(p, "frag_prefetch", False) or getattr(p, "stream_k", False)
            or p.split_k > 1):
        return []
    grid = _tile_slots(ctx, inc)
    if grid is None:
        return []
    gx, gy, tiles, sms, resident, slots = grid
    waves = tiles / slots
    fill = waves - int(waves)
    if fill == 0 or fill > STREAM_K_MAX_LAST_WAVE_FILL:
        return []
    why = (f"{tiles} tiles ({gx}x{gy}) on {sms} SMs x {resident} resident CTAs = {slots} "
           f"slots: {waves:.2f} waves, the last {fill:.0%} full")
    # the rest alone first: it beats the rest and a whole wave at every fill measured
    return [("apply_stream_k(1)", f"{why}: share the tiles past the whole waves over every "
                                  "slot (stream-K) so that no wave runs part-empty"),
            ("apply_stream_k(2)", f"{why}: share those and one whole wave over every slot "
                                  "(data-parallel + one stream-K wave)")]


def _split_k_moves(ctx: RuleContext, inc: EvaluatedPoint) -> list[Move]:
    """Split K when the output tiles leave SMs idle and K is long enough to share."""
    p = inc.params
    if ctx.shape is None or "apply_split_k" not in ctx.family.transforms or not (
            p.smem or p.tf32x3) or getattr(p, "stream_k", False):
        return []
    grid = _tile_slots(ctx, inc)
    if grid is None:
        return []
    gx, gy, tiles, sms, resident, slots = grid
    if tiles * p.split_k >= slots:
        return []
    shape = Shape.of(ctx.shape)
    k_tiles = -(-shape.k // p.tile_k)
    choices = [s for s in ctx.family.transforms.get("apply_split_k").args[0].choices
               if s > p.split_k and k_tiles >= MIN_K_TILES_PER_SPLIT * s]
    if not choices:
        return []
    filling = [s for s in choices if tiles * s >= slots]
    split = filling[0] if filling else choices[-1]
    why = (f"{tiles} CTAs ({gx}x{gy} output tiles) x split {p.split_k} for {sms} SMs x "
           f"{resident} resident CTAs = {slots} slots, and K = {shape.k} is {k_tiles} "
           f"tiles of {p.tile_k}")
    moves = [(f"apply_split_k({split})",
              f"{why}: split K {split} ways -> {tiles * split} CTAs")]
    lower = [s for s in choices if s < split]
    if lower:
        moves.append((f"apply_split_k({lower[-1]})",
                      f"{why}: split K {lower[-1]} ways (less workspace traffic)"))
    return moves


def _tensor_core_moves(ctx: RuleContext, inc: EvaluatedPoint) -> list[Move]:
    """Moves of the 3xTF32 tensor-core kernels (wgmma, or mma.sync)."""
    p = inc.params
    spills = (inc.compile or {}).get("spill_bytes") or 0
    moves: list[Move] = []
    wgmma = getattr(p, "wgmma", 0)
    if wgmma:
        if p.block_y < 2:
            moves.append(("change_block_config(128, 2)", "two warpgroups share each A tile "
                          "and its split: half the shared-memory traffic per product"))
        if p.stages < 2:
            moves.append(("apply_double_buffer(2)", "one more stage of split bf16 tiles "
                          "ahead of the warpgroup MMAs" if p.bf16_split else
                          "four shared-memory buffers: three tiles in flight behind the "
                          "warpgroup MMAs"))
        if p.swizzle == 1:
            moves.append(("apply_block_swizzle(4)", "blocks in groups of row-tiles share "
                          "B tiles in L2"))
        if getattr(p, "mma_window", 1) == 1 and not getattr(p, "frag_global", False) \
                and "apply_mma_pipeline" in ctx.family.transforms:
            moves.append(("apply_mma_pipeline(4)", "the tensor pipe drains at every K-tile "
                          "(all MMAs retired before the promotion): keep them in flight "
                          "across tiles, promote every 4 tiles"))
        producers = getattr(p, "producers", 0)
        if getattr(p, "mma_window", 1) > 1 and not producers \
                and "apply_warp_specialization" in ctx.family.transforms:
            moves += [("apply_warp_specialization(2)", "the warps that issue the MMAs also "
                       "copy and split every tile and meet at a CTA barrier each K-tile: "
                       "give that to two producer warpgroups, the consumers only feed the "
                       "tensor cores"),
                      ("apply_warp_specialization(1)", "the warps that issue the MMAs also "
                       "copy and split every tile: give that to a producer warpgroup")]
        if producers and p.stages > 1 and not p.bf16_split:
            moves.append(("apply_double_buffer(1)", "with producers, three stages ahead "
                          "measured faster than four (docs/GPU.md, 2026-11-30)"))
        split_pass = getattr(p, "split_pass", False)
        if p.bf16_split and not split_pass and getattr(p, "mma_window", 1) > 1 \
                and "apply_split_pass" in ctx.family.transforms:
            moves.insert(0, ("apply_split_pass(true)", "every CTA of a column of tiles splits "
                             "the same A tile again, and the splitting threads' loads, "
                             "conversions and stores hold the tensor pipe to a third of its "
                             "time: split each operand once by a pass before the GEMM and copy "
                             "whole split stages by cp.async.bulk"))
        if split_pass and getattr(p, "pass_cluster", 1) == 1 \
                and "apply_pass_cluster" in ctx.family.transforms:
            moves.insert(0, ("apply_pass_cluster(2)", "the stages' copies from L2 (64 KB a "
                             "128x128x64 step for ~1536 cycles of bf16 MMA) bound the split-pass "
                             "kernel: the two CTAs of a cluster along N read the same A block, "
                             "so copy it once, half by each, multicast"))
        if producers and p.bf16_split and not p.async_copy and not split_pass:
            moves.append(("apply_async_copy(true)", "the register-loading producers keep two "
                          "32-byte chunks a thread in flight (ptxas spills past that at their "
                          "register count): copy the next fp32 tile by cp.async into a "
                          "staging buffer so that a whole tile is in flight"))
        moves += _precision_moves(ctx, p)
        # not offered, slower on the H200: B's fragments from global memory
        # (apply_global_fragments), and two one-warpgroup CTAs per SM with them
        return moves
    if spills > 0 and p.warp_m * p.warp_n > 32 * 32:
        moves.append(("apply_warp_tiling(32, 32)",
                      f"{spills} bytes of spills: a smaller warp tile needs fewer "
                      "accumulator registers"))
    if ctx.arch in ("sm_90", "sm_90a") and "apply_wgmma" in ctx.family.transforms:
        moves += [("apply_wgmma(128)", f"{ctx.arch} has warpgroup MMA (wgmma): about twice "
                   "mma.sync's TF32 rate per SM, operands straight from shared memory"),
                  ("apply_wgmma(64)", f"{ctx.arch} has warpgroup MMA (wgmma): 64-row tiles, "
                   "fewer registers")]
    if p.stages < 2:
        moves.append(("apply_double_buffer(2)",
                      "three cp.async buffers keep two tiles in flight behind the mma"))
    if p.tile_k < 32:
        moves.append(("apply_tiling(32)", "deeper K-tiles: fewer barriers per mma step"))
    if p.warp_m * p.warp_n < 32 * 64:
        moves += [("apply_warp_tiling(32, 64)", "a larger warp tile reuses each fragment "
                   "over more mma"), ("apply_warp_tiling(64, 32)", "a larger warp tile "
                   "reuses each fragment over more mma")]
    if p.swizzle == 1:
        moves.append(("apply_block_swizzle(4)", "blocks in groups of row-tiles share B "
                      "tiles in L2"))
    return moves


def _precision_moves(ctx: RuleContext, p: Any) -> list[Move]:
    """The wgmma kernel moved to the most preferred precision split that fits the campaign's
    tolerance (none when it has that split already, or no split fits)."""
    if "apply_precision_split" not in ctx.family.transforms:
        return []
    splits = schemes_for(ctx.tolerance)
    if not splits or PRECISION_SCHEMES[splits[0]] == p.bf16_split:
        return []
    scheme = splits[0]
    found, measured = error_class(scheme)
    figures = (f"norm {found.rel_err:.1e}, element/Σ|a·b| {found.max_scaled_err:.1e} "
               f"({'measured' if measured else 'first estimate'})")
    speed = {"bf16x3": "three bf16 products at twice TF32's tensor-core rate",
             "bf16x6": "six bf16 products, tighter than bf16x3, at tf32x3's MMA time",
             "tf32x3": "three TF32 products"}[scheme]
    return [(f"apply_precision_split({PRECISION_SCHEMES[scheme]})",
             f"{scheme}: {speed}; its error class ({figures}) x {MARGIN:g} is within the "
             f"campaign's tolerance {ctx.tolerance:g}")]


def _tile_slots(ctx: RuleContext, inc: EvaluatedPoint
                ) -> tuple[int, int, int, int, int, int] | None:
    """The incumbent's output tiles at the campaign's shape and the CTA slots of the GPU:
    ``(grid x, grid y, tiles, SMs, CTAs an SM, slots)``; None when its launch is refused."""
    assert ctx.shape is not None
    launch = ctx.family.launch(inc.params, ctx.shape)
    if isinstance(launch, Rejection):
        return None
    gx, gy, _ = launch.grid
    device = ctx.device or {}
    sms = int(device.get("sm_count") or DEFAULT_SM_COUNT)
    resident = _resident_ctas(ctx, inc)
    return gx, gy, gx * gy, sms, resident, sms * resident


def _resident_ctas(ctx: RuleContext, inc: EvaluatedPoint) -> int:
    """CTAs of ``inc`` one SM holds at once: from its profile's theoretical occupancy, else
    computed from its registers (measured, or the estimate) and shared memory."""
    p = inc.params
    device = ctx.device or {}
    warps = -(-p.threads // 32)
    max_warps = int(device.get("max_threads_per_sm") or 2048) // 32
    occupancy = (inc.profile or {}).get("theoretical_occupancy_pct")
    if occupancy is None:
        regs = (inc.compile or {}).get("regs_per_thread") or p.est_regs_per_thread
        occupancy = ctx.theoretical_occupancy(p.threads, int(regs), p.smem_bytes)
    return max(1, round(float(occupancy) / 100.0 * max_warps / warps))
