"""The built-in expert policy: the seed's profile-driven rules, then local numeric search.

Rules, in order, each producing a move from the incumbent only when its signal is present:

1. actions injected into the running campaign (the seed's human adding register blocking);
2. strided warp accesses (threadIdx.x along M) → ``apply_coalesce(true)``;
3. the last compile was over the shared-memory limit → the largest tile that fits, computed from
   ``max_smem_limit`` in the feedback (not a blind halving);
4. operands read straight from global memory (memory-bound) → vectorize, stage tiles in shared
   memory, register-block;
5. shared-memory bank conflicts (Nsight figure, or unpadded tiles when none was measured) →
   ``avoid_bank_conflict``;
6. spills, or occupancy limited by registers → a smaller register block;
7. low reuse per shared-memory load (register block under 4x4) → a larger register block;
8. a grid with fewer CTAs than the GPU holds at once (SMs x resident CTAs per SM, from the
   occupancy figures) and many K tiles → ``apply_split_k`` with the smallest split that fills it
   (each split keeping at least :data:`MIN_K_TILES_PER_SPLIT` tiles), and the split below it;
9. the structure has settled (a stagnation window without an acceptance) →
   ``specialize_shape(true)``: compile-time M, N, K. Local search does not propose it earlier,
   since a specialized kernel is checked at the campaign's shape only;
10. local numeric search over the rest of the one-step neighbourhood, transforms that paid first
   (a running mean of their improvements), untried ones next.

Neighbourhoods that did not pay are marked explored: a block shape that lost from an incumbent
also rules out the shapes of the same thread count next to it for that incumbent (no ping-pong
between (32,4) and (64,2)); the rule holds for every proposal, whichever step produced it.
After ``stagnation_window`` evaluations without an acceptance the action set widens to two-step
moves; after three windows, to the neighbourhoods of the best few points instead of the incumbent
alone. When all of those are spent it widens to the neighbourhoods of every correct point, fastest
first, so the policy runs dry only when no evaluated point has an unexplored neighbour left.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import replace
from itertools import chain
from typing import Any

from agent.policies.base import (
    HistoryItem,
    PolicyContext,
    Proposal,
    key_of,
    take_unique,
)
from kernels.base import Action, Rejection
from worker.evaluate import theoretical_occupancy

STAGNATION_WINDOW = 12
#: split-K is proposed only while every split keeps at least this many K tiles (a split of one
#: or two tiles spends its time filling and draining the pipeline)
MIN_K_TILES_PER_SPLIT = 4
#: SMs assumed when the device is not known (an H200)
DEFAULT_SM_COUNT = 132


def _payoffs(ctx: PolicyContext) -> dict[str, tuple[float, int]]:
    """Mean improvement (%) and count of each transform name over finished candidates."""
    sums: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    for h in ctx.history:
        if h.action is None or h.improvement_pct is None:
            continue
        name = h.action.split("(")[0]
        sums[name] += max(min(h.improvement_pct, 50.0), -50.0)
        counts[name] += 1
    return {k: (sums[k] / counts[k], counts[k]) for k in counts}


def _failed_block_contexts(ctx: PolicyContext) -> set[tuple[str, int, int]]:
    """(context key without block shape, x, y) of block shapes that did not pay, plus their
    same-thread-count neighbours."""
    by_id = {h.id: h for h in ctx.history}
    tabu: set[tuple[str, int, int]] = set()
    for h in ctx.history:
        if not (h.action or "").startswith("change_block_config") or h.accepted:
            continue
        if h.status in ("pending", "compiling", "compiled", "measuring"):
            continue
        parent = by_id.get(h.parent_id or "")
        if parent is None:
            continue
        ctx_key = _context_key(parent.params)
        x, y = h.params.block_x, h.params.block_y
        for nx, ny in ((x, y), (x * 2, y // 2), (x // 2, y * 2)):
            if nx >= 1 and ny >= 1:
                tabu.add((ctx_key, nx, ny))
    return tabu


def _context_key(params: Any) -> str:
    return key_of(replace(params, block_x=16, block_y=16))


class ExpertPolicy:
    """Profile-driven rules from the seed, then local search (see the module docstring)."""

    name = "expert"

    def __init__(self, stagnation_window: int = STAGNATION_WINDOW) -> None:
        self.stagnation_window = stagnation_window

    def propose(self, ctx: PolicyContext, n: int) -> list[Proposal]:
        """Up to ``n`` fresh proposals from the incumbent (or wider after stagnation)."""
        if ctx.incumbent is None:
            return []
        # read the history once per decision (each is linear in it)
        tabu, payoffs = _failed_block_contexts(ctx), _payoffs(ctx)
        out = list(self._ruled(ctx, tabu))
        out += self._local_search(ctx, ctx.incumbent, payoffs, tabu)
        if ctx.stagnation >= self.stagnation_window:
            out += self._two_step(ctx)
        if ctx.stagnation >= 3 * self.stagnation_window or not out:
            for item in self._top(ctx, 3):
                out += self._local_search(ctx, item, payoffs, tabu)
        allowed = (p for p in chain(out, self._everywhere(ctx, payoffs, tabu))
                   if (_context_key(p.params), p.params.block_x, p.params.block_y) not in tabu)
        return take_unique(allowed, n)

    # -- rules ---------------------------------------------------------------------------------
    def _move(self, ctx: PolicyContext, text: str, reason: str,
              tabu: set[tuple[str, int, int]]) -> Proposal | None:
        inc = ctx.incumbent
        assert inc is not None
        try:
            action = Action.parse(text)
            ctx.family.transforms.check(action)
        except ValueError:
            return None
        if not ctx.action_allowed(action.name):
            return None
        result = ctx.family.apply(ctx.point(inc.params), action)
        if isinstance(result, Rejection) or not ctx.fresh(result.params):
            return None
        if action.name == "change_block_config" and (
                _context_key(inc.params), action.args[0], action.args[1]) in tabu:
            return None
        return Proposal(result.params, str(action), reason, self.name, inc.id)

    def _ruled(self, ctx: PolicyContext, tabu: set[tuple[str, int, int]]) -> list[Proposal]:
        inc = ctx.incumbent
        assert inc is not None
        p = inc.params
        profile = inc.profile or {}
        moves: list[tuple[str, str]] = []
        for text in ctx.injected:
            moves.append((text, "injected into the running campaign"))
        if not p.coalesced:
            moves.append(("apply_coalesce(true)",
                          "threadIdx.x runs along M: a warp's B loads and C stores are strided"))
        last = max(ctx.history, key=lambda h: h.iteration, default=None)
        rejection = ((last.compile or {}).get("rejection") or {}) if last else {}
        if rejection.get("reason") == "smem_over_limit" and p.smem:
            limit = int(rejection["max_smem_limit"])
            for tile in (64, 32, 16, 8):
                need = 4 * tile * (p.block_m + p.block_n + 2 * p.pad)
                if need <= limit and tile != p.tile_k:
                    moves.append((f"apply_tiling({tile})",
                                  f"last tile needed {rejection.get('smem_bytes')} B of smem, "
                                  f"limit {limit} B: tile {tile} needs {need} B"))
                    break
        if p.tf32x3:
            moves += self._tensor_core_moves(inc)
        elif not p.smem:
            reason = ("operands come straight from global memory, re-read by every thread: "
                      "memory-bound")
            if p.vec < 4:
                moves.append(("apply_vectorize(4)", reason + "; float4 loads move 4x per access"))
            moves.append(("apply_shared_memory_load(true)", reason + "; stage tiles in smem"))
            moves.append(("apply_register_block(4, 4)", reason + "; reuse operands in registers"))
        else:
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
            if p.reg_m * p.reg_n >= 16:
                moves.append(("apply_tf32x3(true)",
                              f"register-blocked {p.reg_m}x{p.reg_n} tiles: the kernel is bound "
                              "by FP32 FMA issue; 3xTF32 on tensor cores keeps fp32 accuracy "
                              "with a higher ceiling"))
        moves += self._split_k_moves(ctx, inc)
        if self._settled(ctx) and ctx.shape is not None and getattr(
                p, "fixed_shape", None) is None:
            moves.append(("specialize_shape(true)",
                          f"no acceptance in {ctx.stagnation} evaluations: the structure has "
                          f"settled; compile M, N, K = {ctx.shape} in as constants so that "
                          "bounds checks and index arithmetic fold away"))
        out = []
        for text, reason in moves:
            prop = self._move(ctx, text, reason, tabu)
            if prop is not None:
                out.append(prop)
        return out

    def _settled(self, ctx: PolicyContext) -> bool:
        return ctx.stagnation >= self.stagnation_window

    @staticmethod
    def _split_k_moves(ctx: PolicyContext, inc: HistoryItem) -> list[tuple[str, str]]:
        """Split K when the output tiles leave SMs idle and K is long enough to share."""
        p = inc.params
        if ctx.shape is None or "apply_split_k" not in ctx.family.transforms or not (
                p.smem or p.tf32x3):
            return []
        launch = ctx.family.launch(p, ctx.shape)
        if isinstance(launch, Rejection):
            return []
        gx, gy, _ = launch.grid
        tiles = gx * gy
        device = ctx.device or {}
        sms = int(device.get("sm_count") or DEFAULT_SM_COUNT)
        resident = _resident_ctas(inc, device)
        slots = sms * resident
        if tiles * p.split_k >= slots:
            return []
        k_tiles = -(-ctx.shape.k // p.tile_k)
        choices = [s for s in ctx.family.transforms.get("apply_split_k").args[0].choices
                   if s > p.split_k and k_tiles >= MIN_K_TILES_PER_SPLIT * s]
        if not choices:
            return []
        filling = [s for s in choices if tiles * s >= slots]
        split = filling[0] if filling else choices[-1]
        why = (f"{tiles} CTAs ({gx}x{gy} output tiles) x split {p.split_k} for {sms} SMs x "
               f"{resident} resident CTAs = {slots} slots, and K = {ctx.shape.k} is {k_tiles} "
               f"tiles of {p.tile_k}")
        moves = [(f"apply_split_k({split})",
                  f"{why}: split K {split} ways -> {tiles * split} CTAs")]
        lower = [s for s in choices if s < split]
        if lower:
            moves.append((f"apply_split_k({lower[-1]})",
                          f"{why}: split K {lower[-1]} ways (less workspace traffic)"))
        return moves

    @staticmethod
    def _tensor_core_moves(inc: HistoryItem) -> list[tuple[str, str]]:
        p = inc.params
        spills = (inc.compile or {}).get("spill_bytes") or 0
        moves: list[tuple[str, str]] = []
        if spills > 0 and p.warp_m * p.warp_n > 32 * 32:
            moves.append(("apply_warp_tiling(32, 32)",
                          f"{spills} bytes of spills: a smaller warp tile needs fewer "
                          "accumulator registers"))
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

    # -- search --------------------------------------------------------------------------------
    def _local_search(self, ctx: PolicyContext, start: HistoryItem,
                      payoffs: dict[str, tuple[float, int]],
                      tabu: set[tuple[str, int, int]]) -> list[Proposal]:
        ctx_key = _context_key(start.params)
        scored = []
        rng = ctx.rng(salt=len(ctx.history))
        settled = self._settled(ctx)
        for action, params in ctx.neighbours(start):
            if action.name == "change_block_config" and (
                    ctx_key, action.args[0], action.args[1]) in tabu:
                continue
            if action.name == "specialize_shape" and action.args[0] and not settled:
                continue  # by rule only, once the structure has settled
            mean, count = payoffs.get(action.name, (0.0, 0))
            bonus = 1.0 / (1 + count)  # untried transforms first among equals
            scored.append((mean + bonus + rng.random() * 0.01, action, params))
        scored.sort(key=lambda t: -t[0])
        return [Proposal(params, str(action),
                         f"local search from #{start.iteration}: {action.name} has paid "
                         f"{payoffs.get(action.name, (0.0, 0))[0]:+.1f}% on average",
                         self.name, start.id)
                for _, action, params in scored]

    def _two_step(self, ctx: PolicyContext) -> list[Proposal]:
        inc = ctx.incumbent
        assert inc is not None
        rng = ctx.rng(salt=97)
        firsts = list(ctx.family.transforms)
        out: list[Proposal] = []
        explored = ctx.explored
        for _ in range(200):
            node = ctx.point(inc.params)
            steps = []
            for _step in range(2):
                spec = rng.choice(firsts)
                if spec.name == "revert_last" or not ctx.action_allowed(spec.name):
                    break
                # only actions the space can hold (a replay measured some values only)
                actions = [a for a in spec.actions() if ctx.in_domains(spec, a)]
                if not actions:
                    break
                action = rng.choice(actions)
                result = ctx.family.apply(node, action)
                if isinstance(result, Rejection):
                    break
                node = result
                steps.append(str(action))
            if len(steps) == 2 and key_of(node.params) not in explored and ctx.fresh(node.params):
                out.append(Proposal(node.params, " ; ".join(steps),
                                    f"stagnation ({ctx.stagnation} evaluations without an "
                                    "acceptance): two-step move", self.name, inc.id))
            if len(out) >= 8:
                break
        return out

    def _everywhere(self, ctx: PolicyContext, payoffs: dict[str, tuple[float, int]],
                    tabu: set[tuple[str, int, int]]) -> Iterator[Proposal]:
        """The neighbourhoods of every correct point, fastest first (lazily: only reached when
        the narrower neighbourhoods are spent)."""
        for item in self._top(ctx, len(ctx.history)):
            yield from self._local_search(ctx, item, payoffs, tabu)

    @staticmethod
    def _top(ctx: PolicyContext, k: int) -> list[HistoryItem]:
        ok = [h for h in ctx.history if h.status == "ok" and h.avg_us is not None]
        return sorted(ok, key=lambda h: h.avg_us or 0.0)[:k]


def _resident_ctas(inc: HistoryItem, device: dict[str, Any]) -> int:
    """CTAs of the incumbent one SM holds at once: from its profile's theoretical occupancy,
    else computed from its registers (measured, or the estimate) and shared memory."""
    p = inc.params
    warps = -(-p.threads // 32)
    max_warps = int(device.get("max_threads_per_sm") or 2048) // 32
    occupancy = (inc.profile or {}).get("theoretical_occupancy_pct")
    if occupancy is None:
        regs = (inc.compile or {}).get("regs_per_thread") or p.est_regs_per_thread
        occupancy, _ = theoretical_occupancy(p.threads, int(regs), p.smem_bytes, device)
    return max(1, round(float(occupancy) / 100.0 * max_warps / warps))
