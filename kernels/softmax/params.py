"""The softmax family's parameter space: the point, its domains, validity and launch.

A point says how threads map onto rows (``row_threads`` threads of a CTA on one row,
``block_threads / row_threads`` rows packed in a CTA, or ``cluster`` CTAs of a thread-block
cluster on one row, reducing through distributed shared memory; 16, over the portable 8, is
allowed by the launcher), how wide the global accesses are, and how many passes over global
memory the kernel makes: 3 (max, sum, write), 2 (online
max and sum, then read again and write) or 1 (the row held in registers, ``chunks`` vectors a
thread; a row longer than that capacity takes the two-pass loop of the same kernel, so every
point runs at every shape).

``push`` changes how a cluster's CTAs combine their parts of a row's (max, sum): each CTA's
partial is pushed into every CTA's shared memory by ``st.async`` completing bytes on that CTA's
mbarrier, and each CTA waits on its own mbarrier, instead of a cluster-wide barrier and reads of
the other CTAs' shared memory (and the last barrier before the CTAs leave goes: nobody reads
another CTA's memory).

``bulk`` > 0 stages the row in shared memory instead: a CTA's part of it (its slice of a row
spread over a cluster, or the ``rows_per_cta`` consecutive rows it packs) comes in with Hopper
bulk async copies (``cp.async.bulk``), ``bulk`` pieces each completing on its own mbarrier and
reduced (online max and sum) as it lands, then normalized from shared memory and written: one
read and one write of global memory. A shape whose part does not fit the shared memory a CTA
may have runs the same kernel's two-pass loop (the launch then asks for no shared memory).

``staged`` (a one-pass point) holds ``staged`` more vectors of the row a thread in shared
memory, copied there by ``cp.async`` (no register holds them in flight), beside the ``chunks``
in registers: a CTA holds more of the row than its registers allow at the same occupancy, so
that a row takes fewer CTAs (a smaller cluster: more of the SMs fit a whole number of them).

``min_ctas`` asks the compiler to fit that many CTAs an SM (``__launch_bounds__``'s second
argument): registers capped at 64K / (threads x min_ctas), so that more CTAs of a row's cluster
share an SM and their load, reduction and store phases overlap.

``prefetch`` (a bulk-copy point) runs on a persistent grid: the launcher cuts the grid to the
CTAs that are resident at once, and each CTA works through several tiles. Once a tile has
landed, each thread takes its ``chunks`` float4 vectors of it into registers and the stage
takes the next tile's bulk copies, which land while this tile is reduced and written. A shape
whose tile does not fit ``chunks`` vectors a thread runs the plain bulk-copy path.

``spread`` (a point with ``cluster`` > 1, not a bulk-copy one) puts a row on ``cluster`` CTAs
(up to 32, twice a cluster's most) that are not a thread-block cluster: ``cluster`` consecutive
CTAs of a persistent grid, combining their partial (max, sum) through global memory (each CTA's
partial written, then an arrival on the group's counter with release semantics, and a spin until
the group's count is whole). A cluster must find room in one GPC (clusters of 16 at two CTAs an
SM fit 14 times on the H200), plain CTAs need not: few rows on large clusters run in one wave.
It needs every CTA of the grid resident at once, which the persistent launch gives (the
launcher cuts the grid to the CTAs resident at once, a whole number of groups), and one launch
of the module at a time (the counters are the module's).

``pipeline`` (a one-pass ``spread`` point) loads a CTA's part of its next row before it meets
its group over this one: a thread holds two rows' ``chunks`` vectors, the next row's loads in
flight while this row's partial goes round the group and its output is written, so that the
SM's loads do not stop at every row's wait. Its group meets without a fence, through tagged
slots (each CTA's partial stored relaxed with the round's tag, polled by warp 0; a release
would wait for the next row's loads) rather than the counter. Rows longer than the ``chunks``
vectors take the plain loop.

``aligned_rows`` (a vector point without bulk copies or ``pipeline``) takes every row to start
on a vector boundary where it can: where ``cols`` is a multiple of ``vec`` and x and y are
``vec``-float aligned (torch's allocations are 256-byte aligned), checked once a launch, the
vector path has no scalar head or tail (the row is whole vectors from its first element), so
that its loads and stores are whole vectors and nothing else; any other shape or alignment
runs the scalar path of the same kernel (correct at every shape, slower where ``cols % vec``
is not 0: the rule book offers the move only where it is).

``one_pass_grid`` (a point without bulk copies or ``spread``) gives every row unit (its
``rows_per_cta`` rows) its own CTA, or ``cluster`` CTAs: the launch's grid covers all the rows
(no :data:`MAX_UNITS` cap; rows are at most 2^28) and the kernel has no grid-stride loop, the
row's offset a 32-bit product (``rows * cols`` is at most :data:`MAX_ELEMENTS`, checked at the
launch).
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, ClassVar

from kernels.arch import STATIC_SMEM_LIMIT, max_smem
from kernels.base import DEFAULT_SM_COUNT, PORTABLE_CLUSTER_SIZE, Dims, LaunchConfig, Rejection

KERNEL_NAME = "softmax"
#: 64K 32-bit registers an SM (and a CTA) has on sm_70..sm_90
REGISTERS_PER_SM = 65536
MAX_REGISTERS_PER_THREAD = 255
#: registers a thread needs besides the row it holds or the vectors it has in flight (indices,
#: pointers, the running max and sum), from ptxas's reports of the rendered kernels
REGISTER_OVERHEAD = 28
#: row units (groups of CTAs on the same rows) a launch has at most; a grid-stride loop takes
#: the rest, so grid x stays far below 2^31 - 1 for any cluster size
MAX_UNITS = 1 << 24
#: elements a shape may have: buffers and the check's float64 copies must fit one GPU; the
#: family's bound on a shape, and the reach of ``one_pass_grid``'s 32-bit unsigned row offsets
MAX_ELEMENTS = 1 << 31
#: grid x a launch may have (CUDA's limit)
MAX_GRID_X = (1 << 31) - 1
#: most CTAs of a thread-block cluster (sm_90, 16 a non-portable size); a spread group may
#: have twice as many
MAX_HW_CLUSTER = 16
#: dynamic shared memory a bulk-copy point asks for at most: sm_90's 227 KB opt-in less 2 KB
#: for the static words (reductions, mbarriers); a part that needs more takes the two-pass loop
BULK_SMEM_CAP = 227 * 1024 - 2048

DOMAINS: dict[str, tuple[Any, ...]] = {
    "block_threads": (32, 64, 128, 256, 512, 1024),
    "row_threads": (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024),
    "cluster": (1, 2, 4, 8, 16, 32),
    "vec": (1, 2, 4),
    "passes": (1, 2, 3),
    "chunks": (1, 2, 4, 8, 16, 32),
    "unroll": (1, 2, 4, 8),
    "load_hint": (0, 1, 2, 3),
    "store_hint": (False, True),
    "bulk": (0, 1, 2, 4, 8),
    "push": (False, True),
    "prefetch": (False, True),
    "staged": (0, 1, 2, 4, 8, 16, 32),
    "min_ctas": (0, 2, 3, 4),
    "spread": (False, True),
    "pipeline": (False, True),
    "max_first": (False, True),
    "ptx_stores": (False, True),
    "aligned_rows": (False, True),
    "one_pass_grid": (False, True),
}
#: Fields added after the replay dataset and the first campaigns were recorded: left out of
#: :meth:`SoftmaxParams.to_dict` (and so of every key) while at these values, so that the points
#: that do not use them keep their JSON and keys byte for byte.
KEY_OMITTED_DEFAULTS: dict[str, Any] = {"bulk": 0, "push": False, "prefetch": False,
                                         "staged": 0, "min_ctas": 0, "spread": False,
                                         "pipeline": False, "max_first": False,
                                         "ptx_stores": False, "aligned_rows": False,
                                         "one_pass_grid": False}
#: Fields the policies' point keys (``agent.policies.base.key_of``, every field of the canonical
#: point) leave out at these values: those added after the campaigns' keys were recorded, so
#: that every earlier point keeps its key (the fields before them were in the keys from the start)
KEY_OF_OMITTED: dict[str, Any] = {"max_first": False, "ptx_stores": False,
                                   "aligned_rows": False, "one_pass_grid": False}
#: the domains a random sample draws from: clusters the sizes the sampler drew before 16
#: (non-portable) joined, and no ``prefetch``, ``staged``, ``min_ctas``, ``spread``,
#: ``pipeline``, ``max_first``, ``ptx_stores``, ``aligned_rows`` or ``one_pass_grid`` (added
#: later), so that every seed keeps the points it drew; transforms and the rule book reach them
SAMPLED_DOMAINS: dict[str, tuple[Any, ...]] = {
    **{k: v for k, v in DOMAINS.items()
       if k not in ("prefetch", "staged", "min_ctas", "spread", "pipeline", "max_first",
                    "ptx_stores", "aligned_rows", "one_pass_grid")},
    "cluster": (1, 2, 4, 8)}
#: the part :meth:`~kernels.softmax.Softmax.space` lists (no clusters, no cache hints)
SEED_DOMAINS: dict[str, tuple[Any, ...]] = {
    **DOMAINS, "block_threads": (128, 256, 512, 1024), "cluster": (1,), "unroll": (1, 4),
    "load_hint": (0,), "store_hint": (False,), "bulk": (0,), "push": (False,),
    "prefetch": (False,), "staged": (0,), "min_ctas": (0,), "spread": (False,),
    "pipeline": (False,), "max_first": (False,), "ptx_stores": (False,),
    "aligned_rows": (False,), "one_pass_grid": (False,),
}
LOAD_HINTS = {0: "plain loads", 1: "__ldg (read-only path)",
              2: "ld.global.nc.L1::no_allocate", 3: "__ldcs on the last read (evict first)"}


@dataclass(frozen=True)
class SoftmaxParams:
    """One point of the softmax space (see the module docstring)."""

    OMITTED_AT_DEFAULT: ClassVar[dict[str, Any]] = KEY_OF_OMITTED

    block_threads: int = 128
    row_threads: int = 1
    cluster: int = 1
    vec: int = 1
    passes: int = 3
    chunks: int = 1
    unroll: int = 1
    load_hint: int = 0
    store_hint: bool = False
    bulk: int = 0
    push: bool = False
    prefetch: bool = False
    staged: int = 0
    min_ctas: int = 0
    spread: bool = False
    pipeline: bool = False
    max_first: bool = False
    ptx_stores: bool = False
    aligned_rows: bool = False
    one_pass_grid: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form; the late fields of :data:`KEY_OMITTED_DEFAULTS` only when set."""
        out = dict(self.__dict__)  # the fields in order, every one a number or a flag
        for name, default in KEY_OMITTED_DEFAULTS.items():
            if out[name] == default:
                del out[name]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SoftmaxParams:
        """Parameters from JSON; missing fields take the baseline's values, unknown ones raise."""
        known = {f.name for f in fields(cls)}
        extra = sorted(set(data) - known)
        if extra:
            raise ValueError(f"unknown softmax parameter(s) {', '.join(extra)}; "
                             f"known: {', '.join(sorted(known))}")
        return cls(**{k: data[k] for k in data if k in known})

    def canonical(self) -> SoftmaxParams:
        """The same kernel with the fields it does not read at their defaults (``chunks`` only
        matters to the one-pass kernel and to a prefetching bulk-copy point; a bulk-copy point's
        fallback is the two-pass loop, so its ``passes`` is 2; ``push`` only to a cluster's
        reductions; ``prefetch`` only to a bulk-copy point; ``staged`` only to the one-pass
        kernel; ``spread`` only to a group of CTAs on a row, where it replaces the cluster's
        ``push``; ``pipeline`` only to a one-pass spread point without a staged part;
        ``max_first`` only to a one-pass point of one CTA a row without bulk copies;
        ``ptx_stores`` only to vector stores without ``store_hint``; ``aligned_rows`` only to
        a vector point without bulk copies or ``pipeline``; ``one_pass_grid`` only to a point
        without bulk copies or ``spread``)."""
        if self.aligned_rows and not self.aligned_rows_fits:
            return replace(self, aligned_rows=False).canonical()
        if self.one_pass_grid and not self.one_pass_grid_fits:
            return replace(self, one_pass_grid=False).canonical()
        if self.max_first and not self.max_first_fits:
            return replace(self, max_first=False).canonical()
        if self.ptx_stores and (self.store_hint or (self.vec == 1 and not self.bulk)):
            return replace(self, ptx_stores=False).canonical()
        if self.pipeline and not self.pipeline_fits:
            return replace(self, pipeline=False).canonical()
        if self.spread and (self.cluster == 1 or self.bulk):
            return replace(self, spread=False).canonical()
        if self.push and self.spread:
            return replace(self, push=False).canonical()
        if self.push and self.cluster == 1:
            return replace(self, push=False).canonical()
        if self.staged and (self.passes != 1 or self.bulk):
            return replace(self, staged=0).canonical()
        if self.prefetch and not self.bulk:
            return replace(self, prefetch=False).canonical()
        if self.bulk:
            want = (2, self.chunks if self.prefetch else 1)
            if (self.passes, self.chunks) != want:
                return replace(self, passes=want[0], chunks=want[1])
            return self
        if self.passes != 1 and self.chunks != 1:
            return replace(self, chunks=1)
        return self

    # -- derived figures --------------------------------------------------------------------
    @property
    def pipeline_fits(self) -> bool:
        """Whether ``pipeline`` can apply: a one-pass spread point without a staged part."""
        return (self.spread and self.cluster > 1 and self.passes == 1 and not self.staged
                and not self.bulk)

    @property
    def max_first_fits(self) -> bool:
        """Whether ``max_first`` can apply: a one-pass point of one CTA a row (no cluster, no
        spread group), without bulk copies."""
        return self.passes == 1 and self.cluster == 1 and not self.bulk

    @property
    def aligned_rows_fits(self) -> bool:
        """Whether ``aligned_rows`` can apply: vector accesses (``vec`` > 1) on the register
        and streaming paths (no bulk copies, no ``pipeline``)."""
        return self.vec > 1 and not self.bulk and not self.pipeline

    @property
    def one_pass_grid_fits(self) -> bool:
        """Whether ``one_pass_grid`` can apply: a launch of a CTA (or a cluster) a row unit,
        not a persistent one (no bulk copies, no ``spread`` group)."""
        return not self.bulk and not self.spread

    @property
    def rows_per_cta(self) -> int:
        """Rows one CTA works on at once."""
        return max(1, self.block_threads // self.row_threads)

    @property
    def group_threads(self) -> int:
        """Threads on one row (across the cluster)."""
        return self.row_threads * self.cluster

    @property
    def capacity(self) -> int:
        """Longest row the one-pass kernel holds in registers and its staged shared memory (0
        for the streaming kernels)."""
        if self.passes != 1:
            return 0
        return (self.chunks + self.staged) * self.group_threads * self.vec

    @property
    def extra_slots(self) -> int:
        """Scalar registers a thread keeps for the row's unaligned head and tail (< 2 vec);
        none for ``aligned_rows``, whose held rows have neither."""
        if self.aligned_rows:
            return 0
        return max(1, -(-(2 * self.vec - 2) // self.group_threads))

    @property
    def held_floats(self) -> int:
        """Floats of the row a thread keeps in registers (one pass, a prefetching tile) or has
        in flight (the streaming loops; a bulk-copy point's loops over shared memory take
        float4)."""
        if self.bulk:
            return max(self.unroll * max(self.vec, 4), 4 * self.chunks if self.prefetch else 0)
        if self.passes == 1:
            return (self.chunks * self.vec + self.extra_slots) * (2 if self.pipeline else 1)
        return self.unroll * self.vec

    @property
    def estimated_registers(self) -> int:
        """Registers a thread needs, estimated (ptxas decides)."""
        return self.held_floats + REGISTER_OVERHEAD

    @property
    def register_limit(self) -> int:
        """Registers a thread may have at ``block_threads`` and ``min_ctas`` CTAs an SM (one
        when unset)."""
        return min(MAX_REGISTERS_PER_THREAD,
                   REGISTERS_PER_SM // (self.block_threads * max(1, self.min_ctas)))

    @property
    def smem_bytes(self) -> int:
        """Dynamic shared memory the point may ask for: :data:`BULK_SMEM_CAP` for a bulk-copy
        point (a launch asks for what its shape needs, :func:`bulk_smem_bytes`), a staged
        one-pass point's vectors (:attr:`staged_bytes`), else none (the reductions use a few
        static words)."""
        return BULK_SMEM_CAP if self.bulk else self.staged_bytes

    @property
    def staged_bytes(self) -> int:
        """Shared memory a one-pass point's staged vectors take (``staged`` vectors a thread)."""
        return self.staged * self.block_threads * self.vec * 4 if self.passes == 1 else 0


BASELINE = SoftmaxParams()


def bulk_smem_bytes(params: SoftmaxParams, cols: int) -> int:
    """Shared memory a bulk-copy CTA stages at ``cols`` columns: the 16-byte vectors its part
    can span whatever the alignment of x (``n`` floats span at most ``(n + 6) // 4``): a
    cluster's slice of a row, ``ceil(vectors / cluster)``, or ``rows_per_cta`` whole rows. The
    kernel computes the same figure and takes the two-pass loop when its launch gave less."""
    if params.cluster > 1:
        return 16 * -(-((cols + 6) // 4) // params.cluster)
    return 16 * ((params.rows_per_cta * cols + 6) // 4)


def held_fits(params: SoftmaxParams, cols: int) -> bool:
    """Whether a prefetching point's threads hold their share of a tile at ``cols`` columns:
    the vectors a row spans, a cluster's slice of them, within ``chunks`` vectors a thread of
    the row's ``row_threads``. A row spans ``cols / 4`` vectors where x is 16-byte aligned and
    ``cols % 4 == 0`` (assumed here), at most ``(cols + 6) // 4`` otherwise; the kernel's
    ``held_fits`` knows x and takes the plain bulk-copy path where the share does not fit."""
    span = cols // 4 if cols % 4 == 0 else (cols + 6) // 4
    share = -(-span // params.cluster) if params.cluster > 1 else span
    return share <= params.chunks * params.row_threads


def arch_number(arch: str) -> int:
    """``sm_90a`` -> 90."""
    digits = "".join(ch for ch in arch.removeprefix("sm_") if ch.isdigit())
    return int(digits or 0)


def max_smem_limit(arch: str) -> int:
    """Per-block dynamic shared-memory limit of ``arch`` (opt-in) in bytes."""
    if arch_number(arch) < 80:
        return STATIC_SMEM_LIMIT
    return max_smem(arch) or 227 * 1024


def validate(params: SoftmaxParams, arch: str = "sm_90") -> Rejection | None:
    """Static validity before compiling; the rejection carries the numbers."""
    p = params
    for name, domain in DOMAINS.items():
        value = getattr(p, name)
        if value not in domain or isinstance(value, bool) != isinstance(domain[0], bool):
            return Rejection("out_of_domain", f"{name}={value!r} is outside {list(domain)}",
                             {"field": name, "value": value, "domain": list(domain)})
    if p.row_threads > p.block_threads:
        return Rejection(
            "row_threads_over_block",
            f"{p.row_threads} threads per row do not fit a CTA of {p.block_threads} threads",
            {"row_threads": p.row_threads, "block_threads": p.block_threads})
    if p.cluster > 1:
        if p.row_threads != p.block_threads:
            return Rejection(
                "cluster_needs_block_per_row",
                f"a cluster of {p.cluster} CTAs shares one row: each CTA must put all its "
                f"{p.block_threads} threads on it (row_threads is {p.row_threads})",
                {"cluster": p.cluster, "row_threads": p.row_threads,
                 "block_threads": p.block_threads})
        if p.cluster > MAX_HW_CLUSTER and not p.spread:
            return Rejection(
                "cluster_over_16",
                f"a thread-block cluster has at most {MAX_HW_CLUSTER} CTAs, not {p.cluster}: "
                "a row on more CTAs needs them to meet through global memory (spread)",
                {"cluster": p.cluster, "max_cluster": MAX_HW_CLUSTER})
        if arch_number(arch) < 90 and not p.spread:
            return Rejection("cluster_needs_sm90",
                             f"thread-block clusters need sm_90 or later, not {arch}",
                             {"cluster": p.cluster, "arch": arch})
    if p.pipeline and not p.pipeline_fits:
        return Rejection(
            "pipeline_needs_spread_row",
            "loading the next row during this one's reduction needs a one-pass spread point "
            f"without a staged part (spread={p.spread}, cluster={p.cluster}, passes={p.passes}, "
            f"staged={p.staged}, bulk={p.bulk})",
            {"spread": p.spread, "cluster": p.cluster, "passes": p.passes, "staged": p.staged,
             "bulk": p.bulk})
    if p.max_first and not p.max_first_fits:
        return Rejection(
            "max_first_needs_held_row",
            "reducing the max first, then the sum, needs a one-pass point of one CTA a row "
            f"without bulk copies (passes={p.passes}, cluster={p.cluster}, bulk={p.bulk})",
            {"passes": p.passes, "cluster": p.cluster, "bulk": p.bulk})
    if p.aligned_rows and not p.aligned_rows_fits:
        return Rejection(
            "aligned_rows_needs_vectors",
            "rows starting on a vector boundary need vector accesses on the register or "
            f"streaming path (vec={p.vec}, bulk={p.bulk}, pipeline={p.pipeline})",
            {"vec": p.vec, "bulk": p.bulk, "pipeline": p.pipeline})
    if p.one_pass_grid and not p.one_pass_grid_fits:
        return Rejection(
            "one_pass_grid_needs_plain_launch",
            "a CTA a row unit with no grid-stride loop needs a launch that covers every row, "
            f"not a persistent grid (bulk={p.bulk}, spread={p.spread})",
            {"bulk": p.bulk, "spread": p.spread})
    if p.prefetch and not p.bulk:
        return Rejection("prefetch_needs_bulk",
                         "prefetching the next tile needs the bulk-copy path (bulk is 0)",
                         {"prefetch": True, "bulk": 0})
    if p.push and p.cluster == 1:
        return Rejection("push_needs_cluster",
                         "pushing the partial sums to the other CTAs needs a cluster "
                         "(cluster is 1)", {"push": True, "cluster": 1})
    if p.bulk:
        if arch_number(arch) < 90:
            return Rejection("bulk_copy_needs_sm90",
                             f"bulk async copies (cp.async.bulk, mbarrier) need sm_90 or later, "
                             f"not {arch}", {"bulk": p.bulk, "arch": arch})
        if BULK_SMEM_CAP + 2048 > max_smem_limit(arch):
            return Rejection(
                "bulk_smem_over_limit",
                f"a bulk-copy CTA may stage {BULK_SMEM_CAP} bytes, over the "
                f"{max_smem_limit(arch)} bytes of shared memory a CTA of {arch} may have",
                {"smem_bytes": BULK_SMEM_CAP, "max_smem_limit": max_smem_limit(arch)})
    if p.min_ctas and p.min_ctas * p.block_threads > 2048:
        return Rejection(
            "min_ctas_over_threads",
            f"{p.min_ctas} CTAs of {p.block_threads} threads = {p.min_ctas * p.block_threads} "
            "threads an SM, over its 2048",
            {"min_ctas": p.min_ctas, "block_threads": p.block_threads, "max_threads": 2048})
    if p.staged:
        if arch_number(arch) < 80:
            return Rejection("staged_row_needs_sm80",
                             f"copies into shared memory by cp.async need sm_80 or later, not "
                             f"{arch}", {"staged": p.staged, "arch": arch})
        if p.staged_bytes + 2048 > max_smem_limit(arch):
            return Rejection(
                "staged_row_over_smem",
                f"{p.staged} vectors of {p.vec} floats a thread x {p.block_threads} threads = "
                f"{p.staged_bytes} bytes of shared memory, over the {max_smem_limit(arch)} a "
                f"CTA of {arch} may have (2 KB kept for the reductions)",
                {"smem_bytes": p.staged_bytes, "max_smem_limit": max_smem_limit(arch)})
    if p.passes == 1 and p.chunks * p.vec > 128:
        return Rejection(
            "row_in_registers_too_long",
            f"{p.chunks} vectors of {p.vec} floats = {p.chunks * p.vec} floats a thread: at most "
            "128 are held in registers",
            {"chunks": p.chunks, "vec": p.vec, "held_floats": p.chunks * p.vec, "max": 128})
    if p.estimated_registers > p.register_limit:
        return Rejection(
            "registers_over_limit",
            f"{p.held_floats} floats held a thread + {REGISTER_OVERHEAD} = about "
            f"{p.estimated_registers} registers, over the {p.register_limit} a thread of a "
            f"{p.block_threads}-thread CTA may have (65536 an SM): fewer chunks, a narrower "
            "vector or fewer threads per CTA",
            {"estimated_registers": p.estimated_registers, "register_limit": p.register_limit,
             "held_floats": p.held_floats, "block_threads": p.block_threads})
    return None


def launch_config(params: SoftmaxParams, dims: Dims,
                  sm_count: int = DEFAULT_SM_COUNT) -> LaunchConfig | Rejection:
    """Grid x = row units x cluster (a multiple of the cluster size, as ``__cluster_dims__``
    wants), one CTA of ``block_threads``; rows past ``MAX_UNITS`` units go round the
    grid-stride loop. A bulk-copy point asks for the shared memory its shape stages
    (:func:`bulk_smem_bytes`) when that is within :data:`BULK_SMEM_CAP`, else for none (its
    two-pass loop). A prefetching point whose threads hold their tile asks for a persistent
    launch: the launcher cuts grid x to the CTAs resident at once. ``sm_count`` does not change
    the grid. A ``spread`` point's launch is persistent too, its CTAs grouped by ``cluster``
    (``LaunchConfig.group``: the grid is cut to a whole number of groups) and no hardware
    cluster. A ``one_pass_grid`` point's grid covers every row unit (no cap, no loop): refused
    past :data:`MAX_GRID_X` CTAs or :data:`MAX_ELEMENTS` elements (its 32-bit offsets)."""
    rejection = validate(params)
    if rejection is not None:
        return rejection
    p = params.canonical()
    units = -(-dims["rows"] // p.rows_per_cta)
    if p.one_pass_grid:
        elements = dims["rows"] * dims["cols"]
        if units * p.cluster > MAX_GRID_X or elements > MAX_ELEMENTS:
            return Rejection(
                "one_pass_grid_over_limit",
                f"{dims['rows']} rows in units of {p.rows_per_cta} x {p.cluster} CTA(s) = "
                f"{units * p.cluster} CTAs (at most {MAX_GRID_X}), {elements} elements (at "
                f"most {MAX_ELEMENTS} for 32-bit offsets): a CTA a row unit cannot cover them",
                {"ctas": units * p.cluster, "max_grid_x": MAX_GRID_X, "elements": elements,
                 "max_elements": MAX_ELEMENTS})
    else:
        units = min(units, MAX_UNITS)
    smem = 0
    if p.bulk:
        need = bulk_smem_bytes(p, dims["cols"])
        smem = need if need <= BULK_SMEM_CAP else 0
    persistent = bool(smem) and p.prefetch and held_fits(p, dims["cols"])
    if p.staged:
        smem = p.staged_bytes
    if p.spread:
        return LaunchConfig(KERNEL_NAME, (units * p.cluster, 1, 1), (p.block_threads, 1, 1),
                            smem, persistent=True, group=p.cluster)
    return LaunchConfig(KERNEL_NAME, (units * p.cluster, 1, 1), (p.block_threads, 1, 1), smem,
                        cluster_size=p.cluster if p.cluster > PORTABLE_CLUSTER_SIZE else 1,
                        persistent=persistent)


#: the fields each kernel path reads
PATH_FIELDS: dict[int, tuple[str, ...]] = {
    1: ("block_threads", "row_threads", "cluster", "vec", "chunks", "unroll", "load_hint",
        "store_hint", "push", "staged", "min_ctas", "spread", "pipeline", "max_first",
        "ptx_stores", "aligned_rows", "one_pass_grid"),
    2: ("block_threads", "row_threads", "cluster", "vec", "unroll", "load_hint", "store_hint",
        "push", "min_ctas", "spread", "ptx_stores", "aligned_rows", "one_pass_grid"),
    3: ("block_threads", "row_threads", "cluster", "vec", "unroll", "load_hint", "store_hint",
        "push", "min_ctas", "spread", "ptx_stores", "aligned_rows", "one_pass_grid"),
}
#: the fields the bulk-copy kernel reads (``vec`` and ``unroll`` also shape its two-pass loop;
#: ``chunks`` only with ``prefetch``)
BULK_FIELDS = ("block_threads", "row_threads", "cluster", "vec", "unroll", "load_hint",
               "store_hint", "bulk", "push", "prefetch", "chunks", "min_ctas", "ptx_stores")


def enumerate_space(arch: str = "sm_90", domains: Mapping[str, tuple[Any, ...]] | None = None
                    ) -> Iterator[SoftmaxParams]:
    """Every valid canonical point of ``domains`` (default the whole space), deterministic."""
    domains = domains or DOMAINS
    for passes in domains["passes"]:
        names = PATH_FIELDS[passes]
        for values in itertools.product(*(domains[n] for n in names)):
            point = SoftmaxParams(passes=passes, **dict(zip(names, values, strict=True)))
            if validate(point, arch) is None:
                yield point
    if any(domains.get("bulk", (0,))):
        bulk_domains = {**domains, "bulk": tuple(b for b in domains["bulk"] if b)}
        seen: set[SoftmaxParams] = set()
        for values in itertools.product(*(bulk_domains.get(n, (getattr(BASELINE, n),))
                                          for n in BULK_FIELDS)):
            point = SoftmaxParams(**dict(zip(BULK_FIELDS, values, strict=True))).canonical()
            if point not in seen and validate(point, arch) is None:
                seen.add(point)
                yield point


#: fields :func:`sample_space` draws from a hash of the rest of the point rather than from the
#: caller's generator, so that adding them kept the points every seed draws (``push``)
HASH_DRAWN = ("push",)


def sample_space(rng: Any, n: int, arch: str = "sm_90", max_tries: int = 100_000
                 ) -> list[SoftmaxParams]:
    """``n`` distinct valid points drawn uniformly over the fields (invalid draws skipped)."""
    out: dict[SoftmaxParams, None] = {}
    for _ in range(max_tries):
        if len(out) >= n:
            break
        drawn = {name: rng.choice(dom) for name, dom in SAMPLED_DOMAINS.items()
                 if name not in HASH_DRAWN}
        tie = random.Random(json.dumps(drawn, sort_keys=True))
        point = SoftmaxParams(**drawn, **{name: tie.choice(DOMAINS[name])
                                          for name in HASH_DRAWN}).canonical()
        if validate(point, arch) is None:
            out[point] = None
    return list(out)
