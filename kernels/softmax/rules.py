"""The softmax rule book: moves from the incumbent, best first, each with its numbers.

Softmax is memory-bound: the least a kernel moves is one read and one write of every element
(8 bytes), and what separates points is how close they come to that and to the copy bandwidth.
In order:

1. the planned point for the shape in one move (:func:`plan`): float4 accesses and the row held
   in registers, read once: part of a warp for rows of up to 128 columns, a warp (8 rows a CTA)
   up to 1024, a CTA of 128..512 threads at 16 floats a thread up to 8192, then clusters of up
   to 16 CTAs (16: a non-portable size) of 512 threads at 32 floats a thread (two CTAs an SM)
   reducing through DSMEM, 64 floats a thread up to 524288; clusters widened while
   ``rows x cluster`` is under the SM count; two passes on 16-CTA clusters past every capacity;
2. the single steps of that plan (vectorize, threads per row, rows per CTA, one pass, cluster),
   so that a plan rejected by measurement still leaves its parts to try;
3. spills or a register-limited CTA → fewer floats a thread, more threads a row; a CTA alone
   on its SM (over half its registers) → a cluster twice as large at half the floats (at the
   largest cluster, a CTA twice as large at half the floats), or two passes in small CTAs where
   the rows in flight fit the L2 (the re-read stays on chip);
4. too few CTAs for the GPU (rows x cluster under the SM count) → a larger cluster;
5. a cluster's partial sums pushed to each CTA (``apply_cluster_push``) rather than met at a
   cluster-wide barrier; few rows on clusters of 8 or more (``rows x cluster`` CTAs resident
   at once as plain CTAs, not as clusters, which must each fit one GPC) → the row's CTAs as a
   spread group meeting through global memory (``apply_spread``), one wave;
6. the code of a held row on one CTA: its max reduced first, then its sum (``apply_max_first``:
   a shuffle and a max or an add a step, not two shuffles and two exponentials), and the vector
   stores as PTX (``apply_ptx_stores``: the compiler splits the first float4 of a held row into
   four scalar stores); the SASS beside Triton's row kernel:
   docs/GPU.md#the-softmax-gap-to-triton-in-the-sass; from a point with both, where ``cols %
   4 == 0``, the row's head and tail and the grid-stride loop taken out (``apply_aligned_rows``
   and ``apply_one_pass_grid``, together);
7. the unroll of the streaming loops (two-pass points), then cache hints last.

Right after the plan, Triton's arrangement (:func:`row_a_cta`):
one row a CTA of :func:`triton_warps` warps (the fused-softmax tutorial's count by row length),
the row in registers as float4, its max reduced first and its vectors stored whole (Triton's
code: 37.9 against 40.6 µs without at 16384x1024, docs/GPU.md), then the same with half and
with twice the warps, for rows that
fill every thread with a float4 and need at most :data:`MAX_FLOATS_PER_THREAD` floats a thread;
from a point that is already one row a CTA, its half and double warp counts in turn. Rows of at
most :data:`ALIGNED_MAX_COLS` columns with ``cols % 4 == 0`` get the arrangement with no head
or tail and no grid-stride loop as well (``aligned_rows``, ``one_pass_grid``: the held path of
Triton's length, docs/GPU.md); the longer rows' Triton arrangements stay as they were, so that
the recorded replay campaigns (8192x8192) decide as before. Rows of at most 512 columns
(a multiple of 16) are offered the packed arrangement too (:func:`packed_rows`: 64-thread CTAs
of several rows, 16 floats a thread, with the four code moves).

Then, for rows of :data:`BULK_MIN_COLS` columns and more and rows of at most
:data:`BULK_MAX_SHORT_COLS`, the bulk-copy point of the shape (:func:`bulk_plan`): the CTA's
part of the rows staged in shared memory by bulk async copies, reduced piece by piece as they
land. Long rows: CTAs of 512 threads a row, a cluster that cuts the row into slices of at most
:data:`BULK_SLICE_FLOATS` floats (several CTAs an SM), widened while ``rows x cluster`` is under
twice the SM count. Short rows: 8 threads a row (a quarter-warp reads 128 contiguous bytes of
shared memory), 32 rows a CTA of 256 threads, so that a CTA's copy is 32 rows long.

Four moves of the action space are not offered, for none beat the register-held points at the long
rows on the H200 (the measurements: docs/GPU.md#why-the-softmax-rule-book-is-what-it-is):
``apply_prefetch`` (a persistent grid whose bulk-copy CTAs hold each tile in registers while the
next lands), ``apply_staged_row`` (part of the row in shared memory, so that a row takes half the
cluster), ``set_min_ctas`` (more CTAs of a cluster an SM) and ``apply_row_pipeline`` (a spread
group's CTAs loading their next row's part before this row's wait). The agent's own moves still
reach them.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from kernels.base import DEFAULT_SM_COUNT, Action, Candidate, Rejection
from kernels.family import RuleContext
from kernels.softmax.params import (
    BULK_SMEM_CAP,
    MAX_HW_CLUSTER,
    SoftmaxParams,
    bulk_smem_bytes,
    validate,
)
from kernels.softmax.transforms import TRANSFORMS

#: floats of the row a thread holds in the planned one-pass points up to 8192 columns: 16 (four
#: float4) in CTAs of up to 512 threads, ~40 registers, four CTAs an SM
FLOATS_PER_THREAD = 16
#: past 8192 columns: CTAs of 512 threads holding 32 floats a thread (~62 registers: two CTAs
#: an SM, so that one CTA's loads overlap another's reduction and stores), clusters of them
WIDE_THREADS = 512
WIDE_FLOATS = 32
#: most floats a thread holds (64: ~92 registers, one 512-thread CTA an SM) before the row
#: takes two passes
MAX_FLOATS_PER_THREAD = 64
#: the largest cluster the plans use: a thread-block cluster's most (non-portable past 8: the
#: launch config asks the launcher to allow it): at 256x262144 a cluster of 16 holds the row at
#: two CTAs an SM (docs/GPU.md#why-the-softmax-rule-book-is-what-it-is)
MAX_CLUSTER = MAX_HW_CLUSTER
#: registers of an SM: a CTA whose threads x registers exceed half of them runs alone on its
#: SM, its load, reduction and store phases one after another
SM_REGISTERS = 65536
#: the smallest cluster offered ``spread`` where its rows would be one wave of plain CTAs: it
#: wins with few rows and loses with many (docs/GPU.md#why-the-softmax-rule-book-is-what-it-is)
SPREAD_MIN_CLUSTER = 8
#: L2 of an H100/H200 (50 MB): a two-pass row re-read within it costs no second DRAM read
L2_BYTES = 50 * 1024 * 1024


#: the fields Triton's arrangement (:func:`row_a_cta`) sets besides the threads and the floats
#: a thread: one CTA a row, one pass, float4, none of the late moves (the hints stay; its code,
#: max_first, ptx_stores, aligned_rows and one_pass_grid, is set by the move)
ROW_A_CTA_RESET: dict[str, Any] = {"cluster": 1, "vec": 4, "passes": 1, "bulk": 0, "staged": 0,
                                   "min_ctas": 0, "spread": False, "pipeline": False,
                                   "prefetch": False, "push": False}

#: rows of at most this many columns (and ``cols % 4 == 0``) are offered Triton's arrangement
#: with ``aligned_rows`` and ``one_pass_grid`` (the short rows where the head, the tail and the
#: grid-stride loop are a part of the row's work that shows)
ALIGNED_MAX_COLS = 4096

#: the packed short rows' arrangement (:func:`packed_rows`): CTAs of this many threads (the
#: SM's 2048 threads in 32 CTAs, its CTA limit) and this many floats a thread, as float4s
PACKED_BLOCK_THREADS = 64
PACKED_FLOATS = 16

#: rows of at least this many columns are offered the bulk-copy point, right after the plan
#: (docs/GPU.md#why-the-softmax-rule-book-is-what-it-is)
BULK_MIN_COLS = 32768
#: rows of at most this many columns are offered the packed bulk-copy point
BULK_MAX_SHORT_COLS = 256
#: floats of a row one CTA of the long-row bulk point stages at most (64 KB: three CTAs an SM)
BULK_SLICE_FLOATS = 16384


def triton_warps(cols: int) -> int:
    """The warps Triton's fused-softmax tutorial gives a row of ``cols`` columns: 4, 8 from a
    block (the power of two at least ``cols``) of 2048, 16 from 4096."""
    block = pow2_at_least(cols)
    return 16 if block >= 4096 else 8 if block >= 2048 else 4


def row_a_cta(cols: int, warps: int) -> SoftmaxParams | None:
    """One row a CTA of ``warps`` warps, the row held in registers as float4 (Triton's row
    kernel's arrangement), or None where a thread would hold less than a float4 of the row,
    more than :data:`MAX_FLOATS_PER_THREAD` floats, or the point is invalid."""
    threads = 32 * warps
    if warps < 1 or threads > 1024 or cols < 4 * threads:
        return None
    chunks = pow2_at_least(-(-cols // 4) / threads)
    point = SoftmaxParams(block_threads=threads, row_threads=threads, vec=4, passes=1,
                          chunks=chunks)
    if chunks * 4 > MAX_FLOATS_PER_THREAD or validate(point) is not None:
        return None
    return point


def packed_rows(cols: int) -> SoftmaxParams | None:
    """Short rows packed into small CTAs: ``cols / 16`` threads a row holding 16 floats each
    (four float4s), :data:`PACKED_BLOCK_THREADS`-thread CTAs of several rows; None unless
    ``cols`` is a multiple of 16 that leaves at least two rows a CTA. At the short rows on the
    H200 it was the fastest of 56 held-row arrangements (threads a row x floats a thread x
    CTA size, each with the four code moves; docs/GPU.md)."""
    if cols % PACKED_FLOATS or not 0 < cols // PACKED_FLOATS <= PACKED_BLOCK_THREADS // 2:
        return None
    point = SoftmaxParams(block_threads=PACKED_BLOCK_THREADS, row_threads=cols // PACKED_FLOATS,
                          vec=4, passes=1, chunks=PACKED_FLOATS // 4)
    return point if validate(point) is None else None


def pow2_at_least(n: float) -> int:
    """The least power of two at least ``n``."""
    out = 1
    while out < n:
        out *= 2
    return out


def plan(rows: int, cols: int, sm_count: int = DEFAULT_SM_COUNT) -> SoftmaxParams:
    """The point the rule book heads for at ``rows x cols`` (see the module docstring)."""
    vec = 4
    vectors = -(-cols // vec)
    if vectors <= 32 * 8:  # up to 1024 columns: a warp or part of one, rows packed
        threads = min(32, pow2_at_least(vectors))
        chunks = pow2_at_least(vectors / threads)
        return SoftmaxParams(block_threads=max(32, min(256, 8 * threads)) if threads < 32
                             else 256, row_threads=threads, vec=vec, passes=1, chunks=chunks)
    cluster = 1
    if cols <= WIDE_THREADS * FLOATS_PER_THREAD:  # up to 8192: one CTA, 16 floats a thread
        threads = max(128, pow2_at_least(vectors / (FLOATS_PER_THREAD // vec)))
        per_thread = pow2_at_least(vectors / threads)
    else:  # 512-thread CTAs of 32 floats a thread, a cluster of them; 64 floats past 16 CTAs
        threads = WIDE_THREADS
        cluster = min(MAX_CLUSTER, pow2_at_least(cols / (threads * WIDE_FLOATS)))
        per_thread = pow2_at_least(vectors / (threads * cluster))
    # too few rows to fill the GPU: spread each over more CTAs
    while rows * cluster < sm_count and cluster < MAX_CLUSTER and per_thread > 1:
        cluster *= 2
        per_thread //= 2
    point = SoftmaxParams(block_threads=threads, row_threads=threads, cluster=cluster, vec=vec,
                          passes=1, chunks=per_thread)
    if per_thread * vec > MAX_FLOATS_PER_THREAD or validate(point) is not None:
        # the row outgrows every register-held point: online max and sum, then a re-read
        point = SoftmaxParams(block_threads=1024, row_threads=1024, cluster=MAX_CLUSTER,
                              vec=vec, passes=2, unroll=4)
    return point


def bulk_plan(rows: int, cols: int, sm_count: int = DEFAULT_SM_COUNT) -> SoftmaxParams | None:
    """The bulk-copy point the rule book offers at ``rows x cols`` (module docstring), or None
    between the two classes of rows or where a cluster of :data:`MAX_CLUSTER` CTAs cannot stage
    the row."""
    if cols <= BULK_MAX_SHORT_COLS:
        return SoftmaxParams(block_threads=256, row_threads=8, vec=4, bulk=1, passes=2)
    if cols < BULK_MIN_COLS:
        return None
    cluster = min(MAX_CLUSTER, pow2_at_least(cols / BULK_SLICE_FLOATS))
    while rows * cluster < 2 * sm_count and cluster < MAX_CLUSTER:
        cluster *= 2
    point = SoftmaxParams(block_threads=WIDE_THREADS, row_threads=WIDE_THREADS, cluster=cluster,
                          vec=4, bulk=4, passes=2, unroll=2)
    if bulk_smem_bytes(point, cols) > BULK_SMEM_CAP or validate(point) is not None:
        return None
    return point


def alone_on_sm(p: SoftmaxParams, regs: int | None = None) -> bool:
    """Whether a CTA of ``p`` takes more than half an SM's registers (measured ``regs`` a
    thread, else the estimate)."""
    return p.block_threads * (regs or p.estimated_registers) > SM_REGISTERS // 2


def _chain(params: SoftmaxParams, target: dict[str, Any]) -> list[Action] | None:
    """Transforms from ``params`` to its fields updated by ``target``, each changing the
    kernel (a no-op is left out), or None when the way is rejected. The floats a thread holds
    change after the threads a row, or first where the other order passes through a point over
    the register limit (twice the threads at the old floats a thread)."""
    want = SoftmaxParams(**{**params.to_dict(), **target}).canonical()
    first = _steps(params, want, registers_first=False)
    return first if first is not None else _steps(params, want, registers_first=True)


def _steps(params: SoftmaxParams, want: SoftmaxParams, registers_first: bool
           ) -> list[Action] | None:
    node = Candidate(params)
    steps: list[Action] = []
    held = (None if want.bulk else Action("apply_register_row", (want.chunks,))
            if want.passes == 1 else Action("set_passes", (want.passes,)))
    order = [held if registers_first else None,
             Action("apply_bulk_copy", (0,)) if params.bulk and not want.bulk else None,
             Action("apply_cluster", (1,)) if params.cluster != want.cluster else None,
             Action("set_threads_per_row", (want.row_threads,)),
             Action("apply_rows_per_cta", (want.rows_per_cta,)),
             Action("apply_cluster", (min(want.cluster, MAX_CLUSTER),)),
             (Action("apply_cluster_push", (want.push,)) if want.push != params.push
              and want.cluster > 1 else None),
             (Action("apply_spread", (want.spread,)) if want.spread != params.spread
              and want.cluster > 1 else None),
             Action("apply_cluster", (want.cluster,)),   # past a cluster's most: spread
             Action("apply_vectorize", (want.vec,)),
             None if registers_first else held,
             (Action("apply_staged_row", (want.staged,))
              if want.staged != params.staged and not want.bulk else None),
             (Action("set_min_ctas", (want.min_ctas,))
              if want.min_ctas != params.min_ctas else None),
             (Action("apply_row_pipeline", (want.pipeline,))
              if want.pipeline != params.pipeline else None),
             Action("apply_unroll", (want.unroll,)),
             Action("apply_cache_hints", (want.load_hint, want.store_hint)),
             (Action("apply_max_first", (want.max_first,))
              if want.max_first != params.max_first else None),
             (Action("apply_ptx_stores", (want.ptx_stores,))
              if want.ptx_stores != params.ptx_stores else None),
             (Action("apply_aligned_rows", (want.aligned_rows,))
              if want.aligned_rows != params.aligned_rows else None),
             (Action("apply_one_pass_grid", (want.one_pass_grid,))
              if want.one_pass_grid != params.one_pass_grid else None),
             Action("apply_bulk_copy", (want.bulk,)) if want.bulk else None,
             (Action("apply_prefetch", (want.chunks if want.prefetch else 0,))
              if want.bulk and (want.prefetch or params.prefetch) else None)]
    for action in order:
        if action is None:
            continue
        try:
            result = TRANSFORMS.apply(node, action)
        except ValueError:  # an argument outside the transform's domain
            return None
        if isinstance(result, Rejection):
            if result.reason == "no_change":
                continue
            return None
        node, steps = result, [*steps, action]
    return steps if node.params == want and steps else None


def _text(actions: list[Action]) -> str:
    return " ; ".join(str(a) for a in actions)


def _coded(held: SoftmaxParams, aligned: bool) -> dict[str, Any]:
    """The move's target for a held-row arrangement (:func:`row_a_cta`, :func:`packed_rows`):
    its threads and floats, :data:`ROW_A_CTA_RESET`, Triton's code (max first, whole vector
    stores) and, where ``aligned``, no head or tail and no grid-stride loop."""
    return {**ROW_A_CTA_RESET, "block_threads": held.block_threads,
            "row_threads": held.row_threads, "chunks": held.chunks, "max_first": True,
            "ptx_stores": True, "aligned_rows": aligned, "one_pass_grid": aligned}


def _feedback(inc: Any) -> dict[str, Any]:
    fb = getattr(inc, "feedback", None)
    if isinstance(fb, dict):
        return fb
    return {"compile": getattr(inc, "compile", None) or {},
            "profile": getattr(inc, "profile", None) or {}}


def expert_moves(ctx: RuleContext) -> list[tuple[str, str]]:  # noqa: C901 - one rule book
    """``(action text, reason)`` moves from ``ctx.incumbent``, best first."""
    inc = ctx.incumbent
    if inc is None:
        return []
    p: SoftmaxParams = inc.params.canonical()
    device = ctx.device or {}
    sms = int(device.get("sm_count") or DEFAULT_SM_COUNT)
    rows, cols = (ctx.shape["rows"], ctx.shape["cols"]) if ctx.shape is not None else (4096,
                                                                                      4096)
    moves: list[tuple[str, str]] = []

    def add(target: dict[str, Any], reason: str) -> None:
        steps = _chain(p, target)
        if steps:
            moves.append((_text(steps), reason))

    goal = plan(rows, cols, sms)
    g_threads = goal.group_threads
    if goal.passes == 1:
        held = (f"the row of {cols} floats fits in registers: {g_threads} threads"
                f"{f' ({goal.cluster} CTAs of a cluster)' if goal.cluster > 1 else ''} x "
                f"{goal.chunks} float{goal.vec} = {goal.capacity} floats, "
                f"{goal.chunks * goal.vec} a thread; one read and one write (8 B an element "
                f"against {4 * (p.passes + 1)} B for {p.passes} passes)")
    else:
        held = (f"the row of {cols} floats is longer than a cluster of {MAX_CLUSTER} CTAs holds "
                f"in registers: online max and sum in one read, then a re-read (mostly from L2)")
    add({**asdict(goal), "push": p.push, "max_first": p.max_first, "ptx_stores": p.ptx_stores,
         "aligned_rows": p.aligned_rows, "one_pass_grid": p.one_pass_grid},
        f"plan for {rows}x{cols}: {held}")
    # Triton's arrangement (one row a CTA, warps by row length), the warp counts beside it, and
    # from a point already one row a CTA, its own neighbours
    textbook = triton_warps(cols)
    tried = [(textbook, "Triton's warp count for the row"),
             (textbook // 2, "half Triton's warp count"), (textbook * 2, "twice Triton's")]
    if (p.row_threads == p.block_threads and p.cluster == 1 and p.passes == 1 and not p.staged
            and not p.bulk and p.capacity >= cols):
        tried += [(p.block_threads // 64, "half the warps of this row a CTA"),
                  (p.block_threads // 16, "twice the warps of this row a CTA")]
    counts: dict[int, str] = {}
    for warps, why in tried:
        counts.setdefault(warps, why)
    aligned = cols % 4 == 0 and cols <= ALIGNED_MAX_COLS
    for warps, why in counts.items():
        row = row_a_cta(cols, warps)
        if row is not None:
            add(_coded(row, aligned),
                f"one row a CTA of {warps} warp(s) ({why}), {row.chunks * 4} floats a thread "
                f"in registers for {rows}x{cols}: Triton's row kernel's arrangement and order "
                "(its max first, then the sum; whole vector stores"
                + ("; no head or tail, a CTA a row, no grid-stride loop)" if aligned else ")"))

    packed = packed_rows(cols)
    if packed is not None:
        add(_coded(packed, True),
            f"{packed.rows_per_cta} rows of {cols} a CTA of {packed.block_threads} threads, "
            f"{packed.row_threads} a row with {PACKED_FLOATS} floats each in registers for "
            f"{rows}x{cols}: the SM's 2048 threads in 32 small CTAs, the most loads in flight "
            "a thread, Triton's code, no head or tail, no grid-stride loop")

    staged = bulk_plan(rows, cols, sms)
    if staged is not None and p.bulk == 0:
        slice_floats = -(-cols // staged.cluster) if staged.cluster > 1 else (
            staged.rows_per_cta * cols)
        add({**asdict(staged), "push": p.push, "ptx_stores": p.ptx_stores},
            f"stage the rows in shared memory by bulk async copies for {rows}x{cols}: "
            f"{slice_floats} floats a CTA ({bulk_smem_bytes(staged, cols) // 1024} KB"
            + (f", a cluster of {staged.cluster} on a row" if staged.cluster > 1 else
               f", {staged.rows_per_cta} rows") + f") in {staged.bulk} piece(s), each reduced "
            "as it lands: one read and one write of every element, no row in registers")

    # the plan's parts, one at a time
    if p.vec < 4:
        add({"vec": 4}, f"loads are {4 * p.vec} B a thread: float4 moves 16 B an access "
                        "(a scalar head and tail keep them aligned)")
    if p.row_threads == 1 and cols > 1:
        add({"row_threads": min(32, g_threads), "block_threads": 256, "cluster": 1},
            f"a thread a row reads {cols} columns alone, strided across the warp: a warp on a "
            "row reads it coalesced")
    if (p.row_threads, p.block_threads, p.cluster) != (goal.row_threads, goal.block_threads,
                                                       goal.cluster):
        add({"row_threads": goal.row_threads, "block_threads": goal.block_threads,
             "cluster": goal.cluster},
            f"{goal.row_threads} threads a row, {goal.rows_per_cta} rows a CTA, "
            f"{goal.cluster} CTA(s) a row for {rows}x{cols} (now {p.row_threads}, "
            f"{p.rows_per_cta}, {p.cluster})")
    # one pass where the current mapping holds the row
    fits = pow2_at_least(cols / (p.group_threads * p.vec))
    if p.passes != 1 and fits * p.vec <= MAX_FLOATS_PER_THREAD:
        add({"passes": 1, "chunks": fits},
            f"{p.group_threads} threads x {fits} float{p.vec} hold the row of {cols}: read x "
            f"once (8 B an element, not {4 * (p.passes + 1)})")
    elif p.passes == 3:
        add({"passes": 2}, "three reads of x: online max and sum in one read saves one "
                           f"({cols} floats a row do not fit {p.group_threads} threads)")

    # registers: spills, or a CTA limited by them
    fb = _feedback(inc)
    comp = fb.get("compile") or {}
    prof = fb.get("profile") or {}
    spills = int(comp.get("spill_bytes") or prof.get("spill_bytes") or 0)
    regs = comp.get("regs_per_thread") or prof.get("regs_per_thread")
    if p.passes == 1 and p.chunks > 1 and (spills > 0 or (regs and regs >= p.register_limit)):
        why = (f"{spills} bytes of spills" if spills else
               f"{regs} registers, the limit of a {p.block_threads}-thread CTA")
        if p.row_threads < 1024 and p.row_threads * 2 <= 1024:
            add({"row_threads": p.row_threads * 2,
                 "block_threads": min(1024, p.block_threads * 2), "chunks": p.chunks // 2},
                f"{why}: half the floats a thread ({p.chunks * p.vec // 2}), twice the threads")
        if p.cluster < MAX_CLUSTER and p.row_threads == p.block_threads:
            add({"cluster": p.cluster * 2, "chunks": p.chunks // 2},
                f"{why}: half the floats a thread over a cluster of {p.cluster * 2}")

    # a CTA alone on its SM: its phases do not overlap
    if p.passes == 1 and p.capacity >= cols and alone_on_sm(p, regs):
        used = regs or p.estimated_registers
        why = (f"{p.block_threads} threads x {used} registers = {p.block_threads * used} of "
               f"the SM's {SM_REGISTERS}: one CTA an SM loads, reduces and stores in turn")
        if p.cluster < MAX_CLUSTER and p.chunks > 1 and p.row_threads == p.block_threads:
            add({"cluster": p.cluster * 2, "chunks": p.chunks // 2},
                f"{why}; a cluster of {p.cluster * 2} holds the row at "
                f"{p.chunks * p.vec // 2} floats a thread")
        elif p.chunks > 1 and p.row_threads == p.block_threads and p.block_threads < 1024:
            add({"row_threads": p.block_threads * 2, "block_threads": p.block_threads * 2,
                 "chunks": p.chunks // 2},
                f"{why}, and the cluster is at its {MAX_CLUSTER} CTAs: twice the threads at "
                f"{p.chunks * p.vec // 2} floats each hold the same row with twice the warps "
                "to cover the loads' latency")
        in_flight = min(rows, 2 * sms // max(1, p.cluster)) * cols * 4
        if in_flight <= L2_BYTES:
            add({"passes": 2, "unroll": 4},
                f"{why}; two passes in small CTAs instead: the rows in flight take "
                f"{in_flight / 2**20:.1f} MB of the 50 MB L2, so the re-read stays on chip")

    # too few CTAs for the GPU
    ctas = -(-rows // p.rows_per_cta) * p.cluster
    if ctas < sms and p.row_threads == p.block_threads and p.cluster < MAX_CLUSTER:
        new_cluster = min(MAX_CLUSTER, pow2_at_least(sms / max(1, rows)))
        if new_cluster > p.cluster:
            target: dict[str, Any] = {"cluster": new_cluster}
            if p.passes == 1:
                target["chunks"] = max(1, p.chunks * p.cluster // new_cluster)
            add(target, f"{ctas} CTAs for {sms} SMs: {rows} rows over clusters of "
                        f"{new_cluster} CTAs give {rows * new_cluster}")

    # a cluster's reductions without the cluster-wide barrier
    if p.cluster > 1 and not p.push:
        add({"push": True},
            f"{p.cluster} CTAs meet at a cluster-wide barrier for every reduction (each thread "
            "after a release fence): each CTA pushes its partial into the others' shared "
            "memory on their mbarriers instead")
    # few rows on large clusters: as plain CTAs they would all be resident at once, but each
    # cluster must find room in one GPC and fewer fit (14 of 16 CTAs at two an SM on the H200),
    # so that the last rows wait for a second wave; CTAs of a persistent grid meeting through
    # global memory take them in one
    if p.cluster >= SPREAD_MIN_CLUSTER and not p.spread and not p.bulk:
        per_sm = max(1, min(2048 // p.block_threads,
                            SM_REGISTERS // (p.block_threads * (regs or p.estimated_registers))))
        need = rows * p.cluster
        if need <= per_sm * sms:
            add({"spread": True, "push": False},
                f"{rows} rows x {p.cluster} CTAs = {need} CTAs, resident at once as plain CTAs "
                f"({per_sm} an SM x {sms} SMs) but not as clusters of {p.cluster}, which must "
                "each fit one GPC: the row's CTAs as CTAs of a persistent grid, meeting through "
                "global memory, take every row in one wave")
    # the held row's code on one CTA: the max reduced first, then the sum; vector stores that
    # stay vector stores
    if p.max_first_fits and not p.max_first and p.capacity >= cols:
        add({"max_first": True},
            f"the row's (max, sum) pairs are reduced with two shuffles and two exponentials a "
            f"step over {p.row_threads} threads: its max first, then the sum of the "
            "exponentials against it, take a shuffle and one max or add a step (Triton's row "
            "kernel's order)")
    if not p.ptx_stores and not p.store_hint and (p.vec > 1 or p.bulk):
        add({"ptx_stores": True},
            "the compiler splits a float4 store into four scalar stores where it loses the "
            "pointer's alignment (the first vector of a held row): st.global.v4 PTX keeps "
            "each one 16-byte store")
    # with Triton's code in place, what is left beside its held path: the row's head and tail
    # and the grid-stride loop (never reached in the replay datasets, which hold no max_first
    # point)
    if (p.max_first and p.ptx_stores and cols % p.vec == 0 and p.aligned_rows_fits
            and p.one_pass_grid_fits and not (p.aligned_rows and p.one_pass_grid)):
        add({"aligned_rows": True, "one_pass_grid": True},
            f"{cols} columns are whole float{p.vec} vectors from every row's start: no scalar "
            "head and tail (a predicated load and store a thread, their 64-bit addresses), and "
            f"a CTA for every {p.rows_per_cta}-row unit with no grid-stride loop and 32-bit "
            "row offsets: the held path at Triton's length")
    # the two-pass loops' loads in flight, then cache hints
    if p.passes != 1 and p.unroll < 4:
        add({"unroll": 4}, f"{p.unroll} vector(s) in flight a thread in the streaming loops: "
                           "4 hide more of the memory latency")
    if not p.store_hint or p.load_hint != 3:
        add({"load_hint": 3, "store_hint": True},
            "every element is read and written once: evict-first loads on the last read and "
            "streaming stores keep L2 for the rows still to come")
    if p.load_hint != 1:
        add({"load_hint": 1}, "read-only loads (__ldg): the non-coherent path")
    if p.load_hint != 2:
        add({"load_hint": 2}, "ld.global.nc.L1::no_allocate: no L1 line for data read once")
    return [m for m in dict.fromkeys(moves) if ctx.action_allowed(m[0].split("(")[0])
            and all(ctx.action_allowed(a.strip().split("(")[0]) for a in m[0].split(";"))]
