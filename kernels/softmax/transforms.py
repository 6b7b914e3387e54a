"""The action space of ``softmax``: named transforms from one point to the next.

Each transform is a pure function ``(candidate, *args) -> Candidate | Rejection``: a move that
would not change the kernel is a ``no_change`` rejection, an invalid result is rejected with the
numbers of :func:`~kernels.softmax.params.validate`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kernels.base import Action, ArgSpec, Candidate, Rejection, TransformRegistry
from kernels.softmax.params import DOMAINS, LOAD_HINTS, SoftmaxParams, validate

TRANSFORMS = TransformRegistry()
#: the arch transforms validate against; the campaign re-validates for its own before compiling
DEFAULT_ARCH = "sm_90"


def _step(candidate: Candidate, action: Action, **changes: Any) -> Candidate | Rejection:
    params: SoftmaxParams = candidate.params
    new = replace(params, **changes).canonical()
    if new == params.canonical():
        return Rejection("no_change", f"{action} leaves the kernel unchanged",
                         {"action": str(action)})
    rejection = validate(new, DEFAULT_ARCH)
    if rejection is not None:
        return rejection
    return Candidate(new, action=action, parent=candidate, shape=candidate.shape)


@TRANSFORMS.register(
    "apply_vectorize",
    ArgSpec("vec_width", DOMAINS["vec"], "floats per global load/store: 1, 2 or 4 (float4)",
            "vec"),
)
def apply_vectorize(candidate: Candidate, vec_width: int) -> Candidate | Rejection:
    """Set the width of global loads and stores (a scalar head and tail keep them aligned)."""
    return _step(candidate, Action("apply_vectorize", (vec_width,)), vec=vec_width)


@TRANSFORMS.register(
    "set_threads_per_row",
    ArgSpec("threads", DOMAINS["row_threads"],
            "threads of a CTA on one row: 1 (a thread a row), 2..16 (part of a warp), 32 (a "
            "warp), 64..1024 (several warps, reducing through shared memory)", "row_threads"),
)
def set_threads_per_row(candidate: Candidate, threads: int) -> Candidate | Rejection:
    """Put ``threads`` threads of a CTA on each row; the rows a CTA packs stay the same where
    the CTA allows it (at most 1024 threads), and a cluster needs the whole CTA on its row."""
    p: SoftmaxParams = candidate.params
    action = Action("set_threads_per_row", (threads,))
    block = min(1024, max(32, p.rows_per_cta * threads))
    cluster = p.cluster if block == threads else 1
    return _step(candidate, action, row_threads=threads, block_threads=block, cluster=cluster)


@TRANSFORMS.register(
    "apply_rows_per_cta",
    ArgSpec("rows", (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024),
            "rows packed in one CTA (CTA = rows x threads per row, 32..1024 threads)"),
)
def apply_rows_per_cta(candidate: Candidate, rows: int) -> Candidate | Rejection:
    """Pack ``rows`` rows in one CTA (short rows: fewer, fuller CTAs)."""
    p: SoftmaxParams = candidate.params
    action = Action("apply_rows_per_cta", (rows,))
    block = rows * p.row_threads
    if block < 32 or block > 1024:
        return Rejection(
            "block_threads_out_of_range",
            f"{rows} rows x {p.row_threads} threads = {block} threads a CTA, outside 32..1024",
            {"rows": rows, "row_threads": p.row_threads, "block_threads": block})
    if p.cluster > 1 and rows > 1:
        return Rejection("cluster_needs_block_per_row",
                         f"a cluster of {p.cluster} CTAs works on one row at a time; "
                         "apply_cluster(1) first", {"cluster": p.cluster, "rows": rows})
    return _step(candidate, action, block_threads=block)


@TRANSFORMS.register(
    "apply_cluster",
    ArgSpec("ctas", DOMAINS["cluster"],
            "CTAs of a thread-block cluster on one row (sm_90; 16 is a non-portable size): "
            "max and sum reduced through distributed shared memory; 32 only as a spread "
            "group (apply_spread)", "cluster"),
    origin="expert",
)
def apply_cluster(candidate: Candidate, ctas: int) -> Candidate | Rejection:
    """Spread each row over ``ctas`` CTAs of a cluster (``__cluster_dims__``, DSMEM
    reductions): rows too long for one CTA's registers, or too few rows to fill the GPU."""
    p: SoftmaxParams = candidate.params
    action = Action("apply_cluster", (ctas,))
    if ctas > 1 and p.row_threads != p.block_threads:
        return Rejection(
            "cluster_needs_block_per_row",
            f"a cluster shares one row: put the CTA's {p.block_threads} threads on it first "
            f"(set_threads_per_row({p.block_threads}); row_threads is {p.row_threads})",
            {"cluster": ctas, "row_threads": p.row_threads, "block_threads": p.block_threads})
    return _step(candidate, action, cluster=ctas)


@TRANSFORMS.register(
    "set_passes",
    ArgSpec("passes", DOMAINS["passes"],
            "passes over global memory: 3 (max, sum, write), 2 (online max+sum, then read "
            "again and write), 1 (the row held in registers: read once)", "passes"),
)
def set_passes(candidate: Candidate, passes: int) -> Candidate | Rejection:
    """Read the row three times, twice (online max and sum), or once (held in registers)."""
    return _step(candidate, Action("set_passes", (passes,)), passes=passes)


@TRANSFORMS.register(
    "apply_register_row",
    ArgSpec("chunks", DOMAINS["chunks"],
            "vectors of the row each thread holds in registers (one pass); a longer row takes "
            "the two-pass loop", "chunks"),
)
def apply_register_row(candidate: Candidate, chunks: int) -> Candidate | Rejection:
    """Hold the row in registers, ``chunks`` vectors a thread, and read it once (one pass)."""
    return _step(candidate, Action("apply_register_row", (chunks,)), passes=1, chunks=chunks)


@TRANSFORMS.register(
    "apply_unroll",
    ArgSpec("factor", DOMAINS["unroll"], "vectors a thread loads before using them (two- and "
            "three-pass loops)", "unroll"),
)
def apply_unroll(candidate: Candidate, factor: int) -> Candidate | Rejection:
    """Unroll the streaming loops: more loads in flight a thread."""
    return _step(candidate, Action("apply_unroll", (factor,)), unroll=factor)


@TRANSFORMS.register(
    "apply_cache_hints",
    ArgSpec("load", DOMAINS["load_hint"],
            "; ".join(f"{k}: {v}" for k, v in LOAD_HINTS.items()), "load_hint"),
    ArgSpec("stream_stores", DOMAINS["store_hint"], "__stcs streaming stores (evict first)",
            "store_hint"),
    origin="expert",
)
def apply_cache_hints(candidate: Candidate, load: int, stream_stores: bool
                      ) -> Candidate | Rejection:
    """Set the load and store cache hints."""
    return _step(candidate, Action("apply_cache_hints", (load, stream_stores)),
                 load_hint=load, store_hint=stream_stores)


@TRANSFORMS.register(
    "apply_bulk_copy",
    ArgSpec("pieces", DOMAINS["bulk"],
            "stage the CTA's part of the rows in shared memory by this many bulk async copies "
            "(cp.async.bulk on mbarriers, sm_90), each reduced as it lands; 0: off", "bulk"),
    origin="expert",
)
def apply_bulk_copy(candidate: Candidate, pieces: int) -> Candidate | Rejection:
    """Stage each CTA's part of its rows (a cluster's slice of a row, or the rows it packs) in
    shared memory with ``pieces`` bulk async copies: one read and one write of global memory,
    no row held in registers; a part past the shared memory of a CTA takes the two-pass
    loop. ``0`` returns to the register and streaming kernels (two passes)."""
    return _step(candidate, Action("apply_bulk_copy", (pieces,)), bulk=pieces)


@TRANSFORMS.register(
    "apply_cluster_push",
    ArgSpec("push", DOMAINS["push"],
            "a cluster's CTAs push their partial (max, sum) into each other's shared memory "
            "by st.async on mbarriers and each waits on its own, instead of a cluster-wide "
            "barrier and remote reads", "push"),
    origin="expert",
)
def apply_cluster_push(candidate: Candidate, push: bool) -> Candidate | Rejection:
    """Combine a cluster's partial sums by pushing them (``st.async`` completing bytes on each
    CTA's mbarrier) rather than through a cluster barrier and DSMEM reads; the kernel's last
    barrier goes too (no CTA reads another's memory)."""
    p: SoftmaxParams = candidate.params
    action = Action("apply_cluster_push", (push,))
    if push and p.cluster == 1:
        return Rejection("push_needs_cluster", "apply_cluster_push(true) needs a cluster: "
                         "apply_cluster(n) first", {"push": True, "cluster": 1})
    return _step(candidate, action, push=push)


@TRANSFORMS.register(
    "apply_staged_row",
    ArgSpec("vectors", DOMAINS["staged"],
            "vectors of the row each thread keeps in shared memory (copied by cp.async) besides "
            "those it holds in registers (one pass); 0: registers only", "staged"),
    origin="expert",
)
def apply_staged_row(candidate: Candidate, vectors: int) -> Candidate | Rejection:
    """Hold ``vectors`` more vectors of the row a thread in shared memory, copied there by
    ``cp.async`` (sm_80), beside those in registers: a CTA holds more of the row at the same
    registers, so that a row takes fewer CTAs. Sets one pass (the row is read once)."""
    return _step(candidate, Action("apply_staged_row", (vectors,)),
                 **({"passes": 1, "staged": vectors} if vectors else {"staged": 0}))


@TRANSFORMS.register(
    "set_min_ctas",
    ArgSpec("ctas", DOMAINS["min_ctas"],
            "CTAs an SM the compiler must fit (__launch_bounds__'s second argument: registers "
            "capped at 64K / (threads x ctas)); 0: the compiler's choice", "min_ctas"),
    origin="expert",
)
def set_min_ctas(candidate: Candidate, ctas: int) -> Candidate | Rejection:
    """Ask the compiler to fit ``ctas`` CTAs an SM (registers capped to match), so that more
    CTAs share an SM and their phases overlap; a point whose registers do not fit is rejected
    with the numbers."""
    return _step(candidate, Action("set_min_ctas", (ctas,)), min_ctas=ctas)


@TRANSFORMS.register(
    "apply_spread",
    ArgSpec("spread", DOMAINS["spread"],
            "a row's CTAs (apply_cluster's count) are consecutive CTAs of a persistent grid "
            "meeting through global memory, not a thread-block cluster: no cluster to place, "
            "so every SM takes CTAs; false: the cluster", "spread"),
    origin="expert",
)
def apply_spread(candidate: Candidate, spread: bool) -> Candidate | Rejection:
    """Put each row on ``cluster`` CTAs of a persistent grid that combine their partial (max,
    sum) through global memory (an arrival counter a group, release and acquire) instead of a
    cluster's distributed shared memory: the scheduler has no cluster to fit into a GPC, so
    every SM takes CTAs. The launch's grid is cut to CTAs all resident at once."""
    p: SoftmaxParams = candidate.params
    action = Action("apply_spread", (spread,))
    if spread and p.cluster == 1:
        return Rejection("spread_needs_group", "apply_spread(true) needs several CTAs a row: "
                         "apply_cluster(n) first", {"spread": True, "cluster": 1})
    if spread and p.bulk:
        return Rejection("spread_needs_register_path",
                         "a bulk-copy point's CTAs meet in a cluster: apply_bulk_copy(0) first",
                         {"spread": True, "bulk": p.bulk})
    return _step(candidate, action, spread=spread)


@TRANSFORMS.register(
    "apply_row_pipeline",
    ArgSpec("on", DOMAINS["pipeline"],
            "a spread group's CTA loads its part of the next row before it meets the group "
            "over this one (twice the registers for the row); false: one row at a time",
            "pipeline"),
    origin="expert",
)
def apply_row_pipeline(candidate: Candidate, on: bool) -> Candidate | Rejection:
    """Load a CTA's part of its next row before it meets its group over this one, so that the
    next row's loads are in flight through this row's wait and stores. A thread holds two rows'
    ``chunks`` vectors: the move halves ``chunks`` and doubles the group (``cluster``) where the
    registers would not hold both, so that the group still holds the row. Needs a one-pass
    ``spread`` point."""
    p: SoftmaxParams = candidate.params
    action = Action("apply_row_pipeline", (on,))
    if not on:
        return _step(candidate, action, pipeline=False)
    if not p.pipeline_fits:
        return Rejection("pipeline_needs_spread_row",
                         "apply_row_pipeline(true) needs a one-pass spread point without a "
                         "staged part: apply_cluster(n), set_passes(1), apply_staged_row(0) and "
                         "apply_spread(true) first",
                         {"spread": p.spread, "cluster": p.cluster, "passes": p.passes,
                          "staged": p.staged, "bulk": p.bulk})
    doubled = replace(p, pipeline=True)
    if (validate(doubled, DEFAULT_ARCH) is not None and p.chunks > 1
            and 2 * p.cluster in DOMAINS["cluster"]):
        return _step(candidate, action, pipeline=True, chunks=p.chunks // 2,
                     cluster=2 * p.cluster)
    return _step(candidate, action, pipeline=True)


@TRANSFORMS.register(
    "apply_prefetch",
    ArgSpec("vectors", (0, *DOMAINS["chunks"]),
            "float4 vectors of its tile each thread holds in registers while the next tile's "
            "bulk copies land in the stage, on a persistent grid (a bulk-copy point); 0: off"),
    origin="expert",
)
def apply_prefetch(candidate: Candidate, vectors: int) -> Candidate | Rejection:
    """Run a bulk-copy point on a persistent grid (as many CTAs as are resident at once, each
    looping over its tiles) and, once a tile has landed, hold it in registers (``vectors``
    float4 a thread) so that the stage takes the next tile's copies while this one is reduced
    and written. A tile past ``vectors`` a thread takes the plain bulk-copy path. ``0``: off."""
    p: SoftmaxParams = candidate.params
    action = Action("apply_prefetch", (vectors,))
    if vectors and not p.bulk:
        return Rejection("prefetch_needs_bulk", "apply_prefetch needs a bulk-copy point: "
                         "apply_bulk_copy(n) first", {"prefetch": True, "bulk": 0})
    if not vectors:
        return _step(candidate, action, prefetch=False)
    return _step(candidate, action, prefetch=True, chunks=vectors)


@TRANSFORMS.register(
    "apply_max_first",
    ArgSpec("on", DOMAINS["max_first"],
            "a held row's max reduced first, then the exponentials against it and their sum "
            "(two one-float reductions, the cross-warp step over the row's warps only); false: "
            "one reduction of (max, sum) pairs, an exponential a step", "max_first"),
    origin="expert",
)
def apply_max_first(candidate: Candidate, on: bool) -> Candidate | Rejection:
    """Reduce a held row's max, then its sum, as two reductions of one float (a shuffle and a
    max or an add a step) instead of one reduction of (max, sum) pairs (two shuffles and two
    exponentials a step, then each thread's sum rescaled), and scale the outputs by the sum's
    reciprocal. Needs a one-pass point of one CTA a row (no cluster) without bulk copies."""
    p: SoftmaxParams = candidate.params
    action = Action("apply_max_first", (on,))
    if on and not p.max_first_fits:
        return Rejection("max_first_needs_held_row",
                         "apply_max_first(true) needs a one-pass point of one CTA a row: "
                         "set_passes(1), apply_cluster(1) and apply_bulk_copy(0) first",
                         {"passes": p.passes, "cluster": p.cluster, "bulk": p.bulk})
    return _step(candidate, action, max_first=on)


@TRANSFORMS.register(
    "apply_ptx_stores",
    ArgSpec("on", DOMAINS["ptx_stores"],
            "float2/float4 stores written as st.global.v2/v4 PTX, so that none is split into "
            "scalar stores; false: C++ vector assignments (store_hint's __stcs is PTX "
            "already)", "ptx_stores"),
    origin="expert",
)
def apply_ptx_stores(candidate: Candidate, on: bool) -> Candidate | Rejection:
    """Write the vector stores as ``st.global.v2/v4`` PTX instead of C++ assignments of a
    float2/float4, which the compiler splits into scalar stores where it loses the pointer's
    alignment (the first vector of a held row: four 4-byte stores a thread instead of one
    16-byte one). No change with ``store_hint`` (``__stcs`` is PTX) or scalar accesses."""
    return _step(candidate, Action("apply_ptx_stores", (on,)), ptx_stores=on)


@TRANSFORMS.register(
    "apply_aligned_rows",
    ArgSpec("on", DOMAINS["aligned_rows"],
            "every row starts on a vector boundary where cols is a multiple of vec and x, y are "
            "vector-aligned (checked once a launch): the vector path has no scalar head or "
            "tail; other shapes take the scalar path; false: a head and a tail a row",
            "aligned_rows"),
    origin="expert",
)
def apply_aligned_rows(candidate: Candidate, on: bool) -> Candidate | Rejection:
    """Take the row to be whole vectors from its first element: where ``cols % vec == 0`` and
    x and y are ``vec``-float aligned (the kernel checks both once a launch; torch's
    allocations are 256-byte aligned), the vector path drops the scalar head and tail (a
    predicated load and store a thread and their addresses) and its accesses are aligned
    vectors the compiler keeps whole; any other shape or alignment runs the kernel's scalar
    path (correct, slower). Needs vector accesses (``vec`` > 1) without bulk copies or
    ``pipeline``."""
    p: SoftmaxParams = candidate.params
    action = Action("apply_aligned_rows", (on,))
    if on and not p.aligned_rows_fits:
        return Rejection("aligned_rows_needs_vectors",
                         "apply_aligned_rows(true) needs vector accesses without bulk copies "
                         "or a pipelined group: apply_vectorize(4), apply_bulk_copy(0) and "
                         "apply_row_pipeline(false) first",
                         {"vec": p.vec, "bulk": p.bulk, "pipeline": p.pipeline})
    return _step(candidate, action, aligned_rows=on)


@TRANSFORMS.register(
    "apply_one_pass_grid",
    ArgSpec("on", DOMAINS["one_pass_grid"],
            "a CTA (or a cluster) for every row unit, the grid covering all the rows: no "
            "grid-stride loop, 32-bit row offsets; false: a grid of at most 2^24 units and a "
            "loop over the rest", "one_pass_grid"),
    origin="expert",
)
def apply_one_pass_grid(candidate: Candidate, on: bool) -> Candidate | Rejection:
    """Give every row unit (the ``rows_per_cta`` rows of a CTA, or a cluster's row) its own CTA
    or cluster, so that the kernel has no grid-stride loop and its row offset is a 32-bit
    product (the launch refuses past 2^31 elements or 2^31 - 1 CTAs). Needs a launch that is
    not persistent: no bulk copies, no ``spread`` group."""
    p: SoftmaxParams = candidate.params
    action = Action("apply_one_pass_grid", (on,))
    if on and not p.one_pass_grid_fits:
        return Rejection("one_pass_grid_needs_plain_launch",
                         "apply_one_pass_grid(true) needs a launch of a CTA a row unit: "
                         "apply_bulk_copy(0) and apply_spread(false) first",
                         {"bulk": p.bulk, "spread": p.spread})
    return _step(candidate, action, one_pass_grid=on)


@TRANSFORMS.register("revert_last")
def revert_last(candidate: Candidate) -> Candidate | Rejection:
    """Return to the parent candidate (its own lineage intact, so the chain replays)."""
    if candidate.parent is None:
        return Rejection("no_parent", "revert_last() on the root candidate", {})
    return candidate.parent
