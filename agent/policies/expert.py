"""The built-in expert policy: the seed's profile-driven rules, then local numeric search.

Rules, in order, each producing a move from the incumbent only when its signal is present
(actions injected into a running campaign come before any policy's proposals: the engine tries
them, :func:`agent.engine.proposing.propose_candidates`):

1. strided warp accesses (threadIdx.x along M) → ``apply_coalesce(true)``;
2. the last compile was over the shared-memory limit → the largest tile that fits, computed from
   ``max_smem_limit`` in the feedback (not a blind halving);
3. operands read straight from global memory (memory-bound) → vectorize, stage tiles in shared
   memory, register-block;
4. shared-memory bank conflicts (Nsight figure, or unpadded tiles when none was measured) →
   ``avoid_bank_conflict``;
5. spills, or occupancy limited by registers → a smaller register block;
6. low reuse per shared-memory load (register block under 4x4) → a larger register block;
7. a grid with fewer CTAs than the GPU holds at once (SMs x resident CTAs per SM, from the
   occupancy figures) and many K tiles → ``apply_split_k`` with the smallest split that fills it
   (each split keeping at least :data:`MIN_K_TILES_PER_SPLIT` tiles), and the split below it;
8. the structure has settled (a stagnation window without an acceptance) →
   ``specialize_shape(true)``: compile-time M, N, K. Local search does not propose it earlier,
   since a specialized kernel is checked at the campaign's shape only;
9. local numeric search over the rest of the one-step neighbourhood, transforms that paid first
   (a running mean of their improvements), untried ones next.

A point measured once is never proposed again (so no ping-pong between two block shapes); a
block shape that lost rules out nothing else: the block's shape sets the tile's, so a shape of
the same thread count next to it may still win. The figures behind the rules are in
``docs/EXPERT.md``.
After ``stagnation_window`` evaluations without an acceptance the action set widens to two-step
moves; after three windows, to the neighbourhoods of the best few points instead of the incumbent
alone. When all of those are spent it widens to the neighbourhoods of every correct point, fastest
first, so the policy runs dry only when no evaluated point has an unexplored neighbour left.

What it derives from a campaign's history (the payoffs, the correct points fastest first,
each point's unexplored moves, the two-step walks from the incumbent) it keeps between
decisions, per campaign (:class:`_Memory`), and brings it up to date from the candidates that
are new or finished since: a decision costs about the same at 1000 candidates as at 100.
Everything kept is a function of the history alone, checked against it at every decision, so
any process may decide for any campaign after any other; a history that does not extend the one
remembered (a decision rolled back after the policy saw it) is read afresh. The proposals are
exactly those of a decision computed from the history alone (``tests/test_expert_memory.py``
holds it to that against a stateless search).
"""

from __future__ import annotations

import bisect
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import chain
from typing import Any

from agent.policies.base import (
    HistoryItem,
    PolicyContext,
    Proposal,
    key_of,
)
from core.arch import theoretical_occupancy
from core.statuses import CANDIDATE_IN_FLIGHT
from kernels.base import DEFAULT_SM_COUNT, Action, Rejection

STAGNATION_WINDOW = 12
#: split-K is proposed only while every split keeps at least this many K tiles (a split of one
#: or two tiles spends its time filling and draining the pipeline)
MIN_K_TILES_PER_SPLIT = 4
#: stream-K is proposed while the last wave of tiles would be at most this full (the fix-up
#: of its split tiles costs about a workspace pass over S tiles)
STREAM_K_MAX_LAST_WAVE_FILL = 0.9


#: campaigns whose memory one policy object keeps (least recently decided forgotten first)
MAX_CAMPAIGNS = 64

@dataclass(frozen=True)
class _Move:
    """A one-transform move from a point to a valid point of the space (fixed by the point, the
    family and the space; whether it is still fresh or allowed is decided at each decision)."""

    action: Action
    params: Any
    key: str
    #: ``specialize_shape(true)``: proposed by search only once the structure has settled
    special: bool


@dataclass(frozen=True)
class _Offer:
    """A proposal with its point's key when already known."""

    proposal: Proposal
    key: str | None = None


class _Memory:
    """What the policy has derived from one campaign's history, brought up to date at each
    decision from the candidates that are new or finished since the last one.

    Kept: the payoff of each transform (mean clipped improvement, summed in iteration order as a
    full pass adds them), the correct points fastest first, the unexplored moves of every point
    searched so far (pruned as their points are explored: that only grows while the history only
    grows, so a point with none left is never searched again), and the two-step walks from the
    incumbent. A decision's history must extend the one remembered: every candidate seen before
    is still there, and only those that were in flight have changed; otherwise :meth:`absorb`
    says so and the policy starts a new memory.
    """

    def __init__(self, ctx: PolicyContext) -> None:
        self.family = ctx.family
        self.space = ctx.space
        self.arch = ctx.arch
        self.shape = ctx.shape
        self.allowed = ctx.allowed_actions
        self.transforms = ctx.family.transforms.names()
        #: what the memory took in of each candidate (:func:`_facts`)
        self.seen: dict[str, tuple[Any, ...]] = {}
        self._gains: dict[str, list[tuple[int, float]]] = {}
        self.payoffs: dict[str, tuple[float, int]] = {}
        #: (avg_us, iteration, item) of every correct point
        self.ranked: list[tuple[float, int, HistoryItem]] = []
        self._moves: dict[str, list[_Move]] = {}
        self._walks_from: str | None = None
        self._walks: dict[tuple[int, ...], Any] = {}
        self._firsts: list[tuple[str, bool, list[Action]]] | None = None

    def fits(self, ctx: PolicyContext) -> bool:
        """Whether this memory was built for the same family, space and action set."""
        return (ctx.family is self.family and ctx.space is self.space
                and ctx.arch == self.arch and ctx.shape == self.shape
                and ctx.allowed_actions == self.allowed
                and ctx.family.transforms.names() == self.transforms)

    def absorb(self, history: Iterable[HistoryItem]) -> bool:
        """Take in the candidates new or finished since the last decision; False (and nothing
        changed) when ``history`` does not extend the history remembered."""
        known = self.seen
        found = 0
        changed: list[HistoryItem] = []
        for h in history:
            before = known.get(h.id)
            if before is None:
                changed.append(h)
                continue
            found += 1
            now = _facts(h)
            if now != before:
                if before[2] not in CANDIDATE_IN_FLIGHT:
                    # a finished candidate in flight again, or finished otherwise: what the
                    # memory took in came from a transaction that did not commit
                    return False
                changed.append(h)
        if found != len(known):
            return False  # a candidate seen before is gone: its proposal was rolled back
        for h in changed:
            known[h.id] = _facts(h)
            if h.status not in CANDIDATE_IN_FLIGHT:
                self._finished(h)
        return True

    def _finished(self, h: HistoryItem) -> None:
        if h.action is not None and h.improvement_pct is not None:
            name = h.action.split("(")[0]
            gains = self._gains.setdefault(name, [])
            bisect.insort(gains, (h.iteration, max(min(h.improvement_pct, 50.0), -50.0)))
            total = 0.0
            for _iteration, gain in gains:  # in iteration order, as a full pass adds them
                total += gain
            self.payoffs[name] = (total / len(gains), len(gains))
        if h.status == "ok" and h.avg_us is not None:
            bisect.insort(self.ranked, (h.avg_us or 0.0, h.iteration, h))

    def top(self, k: int) -> list[HistoryItem]:
        """The ``k`` fastest correct points (ties: the earlier first)."""
        return [h for _us, _it, h in self.ranked[:k]]

    def moves(self, ctx: PolicyContext, start: HistoryItem) -> list[_Move]:
        """The moves from ``start`` to points not explored yet (in the order of
        :meth:`PolicyContext.neighbours`)."""
        found = self._moves.get(start.key)
        if found is None:
            found = self._moves[start.key] = _all_moves(ctx, start.params)
        explored = ctx.explored
        live = [m for m in found if m.key not in explored]
        if len(live) != len(found):
            self._moves[start.key] = live
        return live

    def firsts(self, ctx: PolicyContext) -> list[tuple[str, bool, list[Action]]]:
        """Every transform with whether a two-step walk may use it, and its actions the space
        can hold."""
        if self._firsts is None:
            self._firsts = [
                (spec.name, spec.name != "revert_last" and ctx.action_allowed(spec.name),
                 [a for a in spec.actions() if ctx.in_domains(spec, a)])
                for spec in ctx.family.transforms]
        return self._firsts

    def walks(self, incumbent: HistoryItem) -> dict[tuple[int, ...], Any]:
        """Where the two-step walks from ``incumbent`` led (transform and action indices ->
        the point reached, or None for a rejection), forgotten when the incumbent changes."""
        if self._walks_from != incumbent.key:
            self._walks_from, self._walks = incumbent.key, {}
        return self._walks


def _facts(h: HistoryItem) -> tuple[Any, ...]:
    """What the memory derives anything from, of one candidate (its compile and profile
    figures are read afresh from the context: only the incumbent's and the last one's)."""
    return (h.iteration, h.key, h.status, h.action, h.avg_us, h.improvement_pct)


def _all_moves(ctx: PolicyContext, params: Any) -> list[_Move]:
    """The one-transform moves from ``params`` to valid points of the space, explored or not:
    what :meth:`PolicyContext.neighbours` yields with nothing explored."""
    node = ctx.point(params)
    out: list[_Move] = []
    seen: set[str] = set()
    for spec in ctx.family.transforms:
        if spec.name == "revert_last" or not ctx.action_allowed(spec.name):
            continue
        for action in spec.actions():
            if not ctx.in_domains(spec, action):
                continue
            result = ctx.family.apply(node, action)
            if isinstance(result, Rejection):
                continue
            point = result.params
            if ctx.family.validate(point, ctx.arch) is not None or not ctx.space.contains(point):
                continue  # never fresh (and, as there, not counted as seen)
            key = key_of(point)
            if key in seen:
                continue
            seen.add(key)
            out.append(_Move(action, point, key,
                             action.name == "specialize_shape" and bool(action.args[0])))
    return out


class ExpertPolicy:
    """Profile-driven rules from the seed, then local search (see the module docstring).

    One object may decide for many campaigns, from several threads: it keeps a memory per
    campaign (``ctx.campaign_id``; a context without one is decided from its history alone)."""

    name = "expert"

    def __init__(self, stagnation_window: int = STAGNATION_WINDOW,
                 max_campaigns: int = MAX_CAMPAIGNS) -> None:
        self.stagnation_window = stagnation_window
        self.max_campaigns = max_campaigns
        self._memories: OrderedDict[str, _Memory] = OrderedDict()
        self._mutex = threading.Lock()
        self.memories_built = 0  # a figure for tests and benches: fresh memories so far

    def propose(self, ctx: PolicyContext, n: int) -> list[Proposal]:
        """Up to ``n`` fresh proposals from the incumbent (or wider after stagnation)."""
        if ctx.incumbent is None:
            return []
        with self._mutex:
            memory = self._memory(ctx)
            return self._propose(ctx, n, memory)

    def _memory(self, ctx: PolicyContext) -> _Memory:
        """This campaign's memory, brought up to date with ``ctx.history`` (a new one when the
        history does not extend the one remembered, or the campaign is not named)."""
        campaign = ctx.campaign_id
        found = self._memories.get(campaign) if campaign is not None else None
        if campaign is not None and found is not None and found.fits(ctx) and \
                found.absorb(ctx.history):
            self._memories.move_to_end(campaign)
            return found
        memory = _Memory(ctx)
        memory.absorb(ctx.history)
        self.memories_built += 1
        if campaign is not None:
            self._memories[campaign] = memory
            self._memories.move_to_end(campaign)
            while len(self._memories) > self.max_campaigns:
                self._memories.popitem(last=False)
        return memory

    def _propose(self, ctx: PolicyContext, n: int, memory: _Memory) -> list[Proposal]:
        inc = ctx.incumbent
        assert inc is not None
        out = [_Offer(p) for p in self._ruled(ctx)]
        out += self._local_search(ctx, memory, inc)
        if ctx.stagnation >= self.stagnation_window:
            out += [_Offer(p, key) for p, key in self._two_step(ctx, memory)]
        if ctx.stagnation >= 3 * self.stagnation_window or not out:
            for item in memory.top(3):
                out += self._local_search(ctx, memory, item)
        chosen: list[Proposal] = []
        taken: set[str] = set()
        for offer in chain(out, self._everywhere(ctx, memory)):
            p = offer.proposal
            key = offer.key or key_of(p.params)
            if key in taken:
                continue
            taken.add(key)
            chosen.append(p)
            if len(chosen) >= n:
                break
        return chosen

    # -- rules ---------------------------------------------------------------------------------
    def _move(self, ctx: PolicyContext, text: str, reason: str) -> Proposal | None:
        """The incumbent moved by ``text``: one action, or a chain ``"a(1) ; b(2)"`` applied in
        order (a rule whose destination is two transforms away); None when an action is
        unknown, not allowed or rejected, or the point was tried."""
        inc = ctx.incumbent
        assert inc is not None
        try:
            actions = Action.parse_many(text)
            for action in actions:
                ctx.family.transforms.check(action)
        except ValueError:
            return None
        if not actions or not all(ctx.action_allowed(a.name) for a in actions):
            return None
        node = ctx.point(inc.params)
        for action in actions:
            result = ctx.family.apply(node, action)
            if isinstance(result, Rejection):
                return None
            node = result
        if not ctx.fresh(node.params):
            return None
        return Proposal(node.params, " ; ".join(str(a) for a in actions), reason, self.name,
                        inc.id)

    def _ruled(self, ctx: PolicyContext) -> list[Proposal]:
        inc = ctx.incumbent
        assert inc is not None
        p = inc.params
        profile = inc.profile or {}
        moves: list[tuple[str, str]] = []
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
            moves += self._tensor_core_moves(ctx, inc)
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
            # apply_async_copy is not offered: the best SIMT kernel ran slower with it
            # (docs/EXPERT.md); search policies still reach it
            if p.reg_m * p.reg_n >= 16:
                moves.append(("apply_tf32x3(true)",
                              f"register-blocked {p.reg_m}x{p.reg_n} tiles: the kernel is bound "
                              "by FP32 FMA issue; 3xTF32 on tensor cores keeps fp32 accuracy "
                              "with a higher ceiling"))
            # the SIMT kernel's own end, where the tensor cores are not to be had or were tried
            # (they reach 2.6x cuBLAS against 0.94x: offered earlier, these moves cost a full
            # campaign 20 evaluations on its way there)
            if not ctx.action_allowed("apply_tf32x3") or any(
                    getattr(h.params, "tf32x3", False) for h in ctx.history):
                moves += self._stream_k_moves(ctx, inc) + self._simt_pipeline_moves(p)
        moves += self._split_k_moves(ctx, inc)
        if self._settled(ctx) and ctx.shape is not None and getattr(
                p, "fixed_shape", None) is None:
            moves.append(("specialize_shape(true)",
                          f"no acceptance in {ctx.stagnation} evaluations: the structure has "
                          f"settled; compile M, N, K = {ctx.shape} in as constants so that "
                          "bounds checks and index arithmetic fold away"))
        out = []
        for text, reason in moves:
            prop = self._move(ctx, text, reason)
            if prop is not None:
                out.append(prop)
        return out

    @staticmethod
    def _simt_pipeline_moves(p: Any) -> list[tuple[str, str]]:
        """Where the SIMT kernel ends (offered where the tensor cores, with the higher
        ceiling, are not allowed or were tried): the register pipeline on the double-buffered,
        interleaved kernel with its threads in lane quads, then register blocks in 128 threads:
        8x8 in a 64x128 tile and in a 128x64 one (~160 registers, three CTAs an SM) and 8x16 in
        a 128x128 one (255 registers, two CTAs an SM), each a chain from wherever a
        register-blocked staged incumbent stands, with its blocks swizzled in groups of four
        row-tiles (B's tiles shared in L2). What each step gave is in ``docs/EXPERT.md``."""
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
            # swizzled blocks measured faster for 64x128 with quads (docs/EXPERT.md)
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

    @staticmethod
    def _stream_k_moves(ctx: PolicyContext, inc: HistoryItem) -> list[tuple[str, str]]:
        """Stream-K when the pipelined SIMT kernel's last wave of tiles would run part-empty: a
        part-empty wave costs about a third of a full one whatever its fill (``docs/EXPERT.md``)."""
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
        moves = [("apply_stream_k(1)", f"{why}: share the tiles past the whole waves over every "
                                       "slot (stream-K) so that no wave runs part-empty"),
                 ("apply_stream_k(2)", f"{why}: share those and one whole wave over every slot "
                                       "(data-parallel + one stream-K wave)")]
        # the rest alone first: it did better than the rest and a wave at every shape measured
        # (docs/EXPERT.md); the other is the second try
        return moves

    def _settled(self, ctx: PolicyContext) -> bool:
        return ctx.stagnation >= self.stagnation_window

    @staticmethod
    def _split_k_moves(ctx: PolicyContext, inc: HistoryItem) -> list[tuple[str, str]]:
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
    def _tensor_core_moves(ctx: PolicyContext, inc: HistoryItem) -> list[tuple[str, str]]:
        p = inc.params
        spills = (inc.compile or {}).get("spill_bytes") or 0
        moves: list[tuple[str, str]] = []
        wgmma = getattr(p, "wgmma", 0)
        if wgmma:
            if p.block_y < 2:
                moves.append(("change_block_config(128, 2)", "two warpgroups share each A tile "
                              "and its split: half the shared-memory traffic per product"))
            if p.stages < 2:
                moves.append(("apply_double_buffer(2)", "four shared-memory buffers: three "
                              "tiles in flight behind the warpgroup MMAs"))
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
            if producers and p.stages > 1:
                moves.append(("apply_double_buffer(1)", "with producers, three stages ahead "
                              "measured faster than four (docs/GPU.md, 2026-11-30)"))
            # not offered, measured slower (docs/EXPERT.md): B's fragments from global memory
            # (apply_global_fragments) and two one-warpgroup CTAs per SM with them
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

    # -- search --------------------------------------------------------------------------------
    def _local_search(self, ctx: PolicyContext, memory: _Memory,
                      start: HistoryItem) -> list[_Offer]:
        """The unexplored moves from ``start``, transforms that paid first, untried next (a
        seeded random tie-break)."""
        payoffs = memory.payoffs
        scored = []
        rng = ctx.rng(salt=len(ctx.history))
        settled = self._settled(ctx)
        for move in memory.moves(ctx, start):
            if move.special and not settled:
                continue  # by rule only, once the structure has settled
            mean, count = payoffs.get(move.action.name, (0.0, 0))
            bonus = 1.0 / (1 + count)  # untried transforms first among equals
            scored.append((mean + bonus + rng.random() * 0.01, move))
        scored.sort(key=lambda t: -t[0])
        return [_Offer(Proposal(move.params, str(move.action),
                                f"local search from #{start.iteration}: {move.action.name} has "
                                f"paid {payoffs.get(move.action.name, (0.0, 0))[0]:+.1f}% on "
                                "average", self.name, start.id), move.key)
                for _, move in scored]

    def _two_step(self, ctx: PolicyContext, memory: _Memory) -> list[tuple[Proposal, str]]:
        """Up to 8 fresh points two random transforms away from the incumbent (200 seeded
        walks; where a walk leads is remembered while the incumbent stays)."""
        inc = ctx.incumbent
        assert inc is not None
        rng = ctx.rng(salt=97)
        firsts = memory.firsts(ctx)
        picks = range(len(firsts))
        walks = memory.walks(inc)
        out: list[tuple[Proposal, str]] = []
        explored = ctx.explored
        for _ in range(200):
            path: tuple[int, ...] = ()
            reached: Any = None
            steps = []
            for _step in range(2):
                # the draws are those of ``rng.choice`` over the transforms, then their actions
                i = rng.choice(picks)
                _name, usable, actions = firsts[i]
                if not usable or not actions:
                    break
                j = rng.choice(range(len(actions)))
                before, path = reached, (*path, i, j)
                if path not in walks:
                    result = ctx.family.apply(before[0] if before else ctx.point(inc.params),
                                              actions[j])
                    walks[path] = None if isinstance(result, Rejection) else (
                        result, key_of(result.params),
                        ctx.family.validate(result.params, ctx.arch) is None
                        and ctx.space.contains(result.params))
                reached = walks[path]
                if reached is None:
                    break
                steps.append(str(actions[j]))
            if len(steps) == 2 and reached[2] and reached[1] not in explored:
                out.append((Proposal(reached[0].params, " ; ".join(steps),
                                     f"stagnation ({ctx.stagnation} evaluations without an "
                                     "acceptance): two-step move", self.name, inc.id),
                            reached[1]))
            if len(out) >= 8:
                break
        return out

    def _everywhere(self, ctx: PolicyContext, memory: _Memory) -> Iterator[_Offer]:
        """The neighbourhoods of every correct point, fastest first (lazily: only reached when
        the narrower neighbourhoods are spent). A point with no move left offers nothing and is
        passed over."""
        settled = self._settled(ctx)
        for _us, _iteration, item in memory.ranked:
            if any(settled or not move.special for move in memory.moves(ctx, item)):
                yield from self._local_search(ctx, memory, item)


def _tile_slots(ctx: PolicyContext, inc: HistoryItem
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
    resident = _resident_ctas(inc, device)
    return gx, gy, gx * gy, sms, resident, sms * resident


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
