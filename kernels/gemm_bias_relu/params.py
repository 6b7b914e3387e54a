"""The GEMM's parameter space: the fields of a point, their domains and canonical values.

A point is valid for *every* shape M, N, K >= 1 (the template handles tails and misaligned rows
at run time), or it is rejected before compiling with numbers (:mod:`.validity`); its launch at
a shape is :mod:`.launch`'s, the space's enumeration and sampling :mod:`.space`'s, and the
GPUs' limits :mod:`.arch`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, ClassVar

from kernels.gemm_bias_relu.arch import MAX_REGS_PER_THREAD, REGISTERS_PER_SM
from kernels.gemm_bias_relu.shape import Shape

#: The family's name, and its kernel's in the rendered module.
KERNEL_NAME = "gemm_bias_relu"
#: Registers a thread needs beyond its accumulators and operand fragments (indices, pointers).
REGISTER_OVERHEAD = 24

#: Domains of every field (also the argument domains of the transforms).
DOMAINS: dict[str, tuple[Any, ...]] = {
    "block_x": (8, 16, 32, 64, 128, 256),
    "block_y": (1, 2, 4, 8, 16, 32),
    "coalesced": (False, True),
    "smem": (False, True),
    "tile_k": (8, 16, 32, 64),
    "reg_m": (1, 2, 4, 8, 16),
    "reg_n": (1, 2, 4, 8, 16),
    "vec": (1, 2, 4),
    "unroll": (1, 2, 4, 8),
    "pad": (0, 1, 2, 4),
    # expert fields (transforms beyond the seed)
    "interleave": (False, True),
    "stages": (1, 2),
    "swizzle": (1, 2, 4, 8),
    "tf32x3": (False, True),
    "warp_m": (32, 64),
    "warp_n": (32, 64),
    "split_k": (1, 2, 4, 8, 16, 32),
    # Hopper warpgroup MMA for the 3xTF32 kernel: the instruction's N (rows of C per CTA);
    # 0 = the mma.sync kernel; 256 only for the bf16 kernels that copy their stages from the
    # split workspace and accumulate in the MMAs (SEARCHED_WGMMA: what the space's walk and
    # apply_wgmma take)
    "wgmma": (0, 64, 128, 256),
    # the wgmma kernel's B^T fragments straight from global memory (L2) into registers
    "frag_global": (False, True),
    # the SIMT kernel's tiles copied by cp.async into stages + 1 shared-memory buffers
    "async_copy": (False, True),
    # the SIMT kernel's k-steps unrolled over the tile, each step's fragments read one step ahead
    # into a second register set, interior tiles loaded without bound checks
    "frag_prefetch": (False, True),
    # the SIMT kernel's threads in 2x2 quads of (row, column) fragments: lane pairs share an
    # address in every shared-memory fragment read (an LDS.128 returns in 2 wavefronts, not 4)
    "lane_quads": (False, True),
    # the SIMT pipeline's tiles scheduled stream-K: whole waves of tiles data-parallel, the
    # last tiles' K iterations shared equally by one CTA a resident slot, split tiles fixed up;
    # 1: the tiles past the whole waves, 2: those and one whole wave (0: off)
    "stream_k": (0, 1, 2),
    # the wgmma kernel's MMAs kept in flight across K-tiles, partial sums promoted every this
    # many K-tiles (1: every tile, the pipeline drained each time)
    "mma_window": (1, 2, 4),
    # the wgmma kernel with that pipeline, warp-specialized: this many producer warpgroups copy
    # the tiles and split A, the consumer warpgroups only run the MMAs (0: all in lockstep)
    "producers": (0, 1, 2),
    # the precision split of the wgmma kernel's fp32 operands: 0 = tf32x3 (big + small TF32
    # parts, three products), 3 = bf16x3 (hi + lo bf16, three products), 6 = bf16x6 (hi + mid +
    # lo bf16, the six largest products); see PRECISION_SCHEMES
    "bf16_split": (0, 3, 6),
    # the bf16 split kernel's operands split once, by a pass before the GEMM, into a workspace
    # laid out as the stages are: the producer copies whole stages by cp.async.bulk
    "split_pass": (False, True),
    # the split pass's GEMM in clusters of this many CTAs along N, the A block they share
    # copied once, a part by each CTA multicast into all of them (1: no cluster)
    "pass_cluster": (1, 2),
    # the split pass's work done inside the GEMM, on demand: no prologue kernel; the producer
    # warps split each (tile, K tile) block slice by slice as the CTAs that read it come to it,
    # each slice once, and the copying thread waits for a block's slices before copying it
    "split_on_demand": (False, True),
    # the bf16 kernels' MMAs accumulate into the fp32 sums themselves: no window of partial
    # sums, no promotion, no drain of the tensor pipe at a window's end
    "mma_accumulate": (False, True),
}

#: ``mma_window`` of a point that accumulates in the MMAs (it has no window; the in-flight
#: pipeline the warp-specialized kernel needs is ``mma_window`` > 1)
MMA_ACCUMULATE_WINDOW = 4

#: The wgmma N the space's walk, its sampling and ``apply_wgmma`` take: 256 (the bf16 split
#: workspace's 128 x 256 tiles) is valid but not searched until the H200 has measured it.
SEARCHED_WGMMA = (0, 64, 128)

#: The precision-split schemes by name, and the ``bf16_split`` value of each.
PRECISION_SCHEMES: dict[str, int] = {"tf32x3": 0, "bf16x3": 3, "bf16x6": 6}

#: Fields added after the replay dataset and the first campaigns were recorded: left out of
#: :meth:`GemmParams.to_dict` (and so of every key) while at these values, so that the points
#: that do not use them keep their identity, JSON and keys byte for byte.
KEY_OMITTED_DEFAULTS: dict[str, Any] = {"split_k": 1, "shape_m": 0, "shape_n": 0, "shape_k": 0,
                                         "wgmma": 0, "frag_global": False, "async_copy": False,
                                         "mma_window": 1, "producers": 0, "frag_prefetch": False,
                                         "lane_quads": False, "stream_k": 0,
                                         "bf16_split": 0, "split_pass": False,
                                         "pass_cluster": 1, "split_on_demand": False,
                                         "mma_accumulate": False}
#: The compile-time shape of ``specialize_shape``: any non-negative integer (0 = run-time shape),
#: so they have no finite domain and are not search knobs.
SHAPE_FIELDS = ("shape_m", "shape_n", "shape_k")

#: Fields that mean nothing without shared-memory staging (canonical value when it is off).
SMEM_ONLY_DEFAULTS: dict[str, Any] = {"tile_k": 16, "pad": 0, "interleave": False, "stages": 1,
                                      "split_k": 1, "async_copy": False, "frag_prefetch": False,
                                      "lane_quads": False, "stream_k": 0}
#: Fields of the SIMT path that the 3xTF32 tensor-core path does not use (and its fixed values).
TC_FIXED: dict[str, Any] = {"smem": True, "coalesced": True, "reg_m": 1, "reg_n": 1, "vec": 4,
                            "unroll": 1, "pad": 0, "interleave": False, "async_copy": False,
                            "frag_prefetch": False, "lane_quads": False, "stream_k": 0}
#: Fields only the tensor-core path uses (canonical values on the SIMT path).
TC_ONLY_DEFAULTS: dict[str, Any] = {"warp_m": 32, "warp_n": 32}
#: Registers a tensor-core thread needs beyond its fragments.
TC_REGISTER_OVERHEAD = 40
#: The wgmma kernel: 128 threads per warpgroup, each warpgroup owns 64 columns of C; its K tile
#: is one 128-byte swizzle row of fp32 and it keeps ``stages + 2`` shared-memory buffers
#: (``stages + 3`` and three small-part buffers when warp-specialized).
WG_THREADS = 128
WG_COLUMNS = 64
WG_TILE_K = 32
#: Buffers of the A tile's small part in the warp-specialized kernel (the tile being split, the
#: one the MMAs read, and the one whose MMAs may still be in flight).
WG_SMALL_BUFFERS = 3
#: Fields the wgmma kernel fixes (besides :data:`TC_FIXED`); its block must be (128, 1 or 2),
#: which validation checks rather than canonicalization hides.
WG_FIXED: dict[str, Any] = {"tile_k": WG_TILE_K, **TC_ONLY_DEFAULTS}
#: The bf16 split kernels' K tile: one 128-byte swizzle row of bf16 (four k16 MMA steps).
BF16_TILE_K = 64
#: Fields the bf16 split kernels fix (besides :data:`TC_FIXED`).
BF16_FIXED: dict[str, Any] = {"tile_k": BF16_TILE_K, **TC_ONLY_DEFAULTS}
#: Registers a consumer thread of a warp-specialized bf16 split kernel gets: accumulators and
#: partial sums (``wgmma`` of them), descriptors and barrier addresses; its producers keep the
#: rest (a K-tile's fp32 loads in flight and their split).
BF16_WS_CONSUMER_REGISTERS = 160
#: The same for the 128 x 256 tiles (``wgmma=256``, accumulating in the MMAs): 128 accumulators
#: a thread; the one copying producer thread's warpgroup keeps 40 (ptxas 13.0: the consumers
#: spill at 168, none at 232).
BF16_WIDE_WS_CONSUMER_REGISTERS = 232
#: The same for bf16x6, whose six products a k16 step take more descriptor registers (ptxas 13.0
#: spills its consumers at 160).
BF16X6_WS_CONSUMER_REGISTERS = 184
#: Largest number of 16-byte chunks whose fp32 loads a splitting thread has in flight at once
#: (8 floats each in registers).
BF16_CHUNKS_IN_FLIGHT = 8


#: Registers a consumer thread of the warp-specialized wgmma kernel gets (``setmaxnreg.inc``)
#: when the launch count is lower: accumulators, partial sums, four fragment sets, addresses.
WS_CONSUMER_REGISTERS = 192


def ws_launch_registers(threads: int) -> int:
    """Registers per thread a warp-specialized wgmma kernel of ``threads`` is launched with
    (``__launch_bounds__(threads, 1)``: what the register file allows, in steps of 8)."""
    return min(REGISTERS_PER_SM // threads // 8 * 8, MAX_REGS_PER_THREAD)


def ws_producer_registers(consumers: int, producers: int,
                          consumer_registers: int = WS_CONSUMER_REGISTERS) -> int:
    """Registers a producer thread keeps (``setmaxnreg.dec``) so that the ``consumers``
    warpgroups can take ``consumer_registers`` out of the CTA's launch allocation."""
    threads = WG_THREADS * (consumers + producers)
    launch = ws_launch_registers(threads)
    if launch >= consumer_registers:
        return launch
    spare = threads * launch - WG_THREADS * consumers * consumer_registers
    return spare // (WG_THREADS * producers) // 8 * 8


#: What :meth:`GemmParams.canonical` sets on each kernel path: the bf16 split kernels (their
#: ``async_copy`` kept), the wgmma kernel, the mma.sync kernel, and the SIMT kernel without
#: shared memory, with the prefetching pipeline, and staged otherwise.
#: (``stream_k`` is kept on the bf16 kernels: the split workspace's kernels schedule their
#: tiles stream-K, validity rejects it on the others)
_CANONICAL_BF16: dict[str, Any] = {k: v for k, v in {**TC_FIXED, **BF16_FIXED}.items()
                                   if k != "stream_k"}
_CANONICAL_WGMMA: dict[str, Any] = {**TC_FIXED, **WG_FIXED, "mma_accumulate": False}
_CANONICAL_TC: dict[str, Any] = {**TC_FIXED, "frag_global": False, "mma_window": 1,
                                 "producers": 0, "bf16_split": 0, "split_pass": False,
                                 "pass_cluster": 1, "split_on_demand": False,
                                 "mma_accumulate": False}
_CANONICAL_SIMT: dict[str, Any] = {**TC_ONLY_DEFAULTS, "wgmma": 0, "frag_global": False,
                                   "mma_window": 1, "producers": 0, "bf16_split": 0,
                                   "split_pass": False, "pass_cluster": 1,
                                   "split_on_demand": False, "mma_accumulate": False}
_CANONICAL_PREFETCH: dict[str, Any] = {**_CANONICAL_SIMT, "unroll": 1}
_CANONICAL_DIRECT: dict[str, Any] = {**_CANONICAL_SIMT, **SMEM_ONLY_DEFAULTS}


@dataclass(frozen=True)
class GemmParams:
    """One point of the space. Defaults are the seed's baseline.

    The baseline: one output per thread, each thread reads a row of A and a column of B straight
    from global memory, threadIdx.x runs along the rows of C (so a warp's accesses are strided,
    not coalesced), no shared memory, no vectorization, no unrolling.
    """

    block_x: int = 16
    block_y: int = 16
    #: threadIdx.x runs along N (columns of C, contiguous) when True, along M when False.
    coalesced: bool = False
    #: stage A and B tiles through shared memory.
    smem: bool = False
    #: K-depth of the staged tiles (the seed's "tile size").
    tile_k: int = 16
    #: outputs per thread along M and N (register blocking).
    reg_m: int = 1
    reg_n: int = 1
    #: width of global loads and stores in floats (1, 2 or 4).
    vec: int = 1
    #: unroll factor of the inner k loop.
    unroll: int = 1
    #: floats of padding per shared-memory row (bank-conflict avoidance).
    pad: int = 0
    #: split each thread's register block into float4 fragments interleaved across the block's
    #: threads: a warp's shared-memory reads and C stores become contiguous (needs 4-multiples).
    interleave: bool = False
    #: 2 = double buffer: the next tile is loaded into registers while the current one is
    #: computed from the other shared-memory buffer (one barrier per tile instead of two).
    stages: int = 1
    #: block rasterization: this many row-tiles of blocks are walked together for L2 reuse.
    swizzle: int = 1
    #: 3xTF32 on tensor cores (mma.sync m16n8k8): fp32 accuracy at tensor-core speed.
    tf32x3: bool = False
    #: warp tile of the tensor-core path (rows x columns of C per warp).
    warp_m: int = 32
    warp_n: int = 32
    #: Hopper warpgroup MMA (``wgmma``, sm_90a) for the 3xTF32 kernel: the instruction's N, which
    #: is the rows of C a CTA computes (64 or 128); 0 = the mma.sync kernel. Block (128, W):
    #: W warpgroups of 128 threads, 64 columns of C each.
    wgmma: int = 0
    #: the wgmma kernel loads its B^T fragments from global memory (L2) into registers, one
    #: K-tile ahead, instead of staging a B tile in shared memory (which then carries only the
    #: A tiles: their copies, their split and the MMAs' reads).
    frag_global: bool = False
    #: the SIMT kernel's A and B tiles go from global to shared memory by ``cp.async`` (no
    #: register staging) into ``stages + 1`` buffers, one barrier per tile (A element by
    #: element, landing transposed as before; B a vector at a time).
    async_copy: bool = False
    #: the SIMT kernel's software pipeline in registers (with the register-staged double buffer,
    #: ``stages=2``): the tile's ``tile_k`` steps unrolled, step k+1's A and B fragments read from
    #: shared memory into a second register set while step k's FFMAs run (the next tile's first
    #: fragments right after the one barrier that publishes it), and CTAs inside the matrices
    #: loading their tiles without per-element bound checks. ``unroll`` has no meaning then.
    frag_prefetch: bool = False
    #: the SIMT kernel's threads in 2x2 quads: of each four consecutive threads, bit 0 of the
    #: index runs along N and bit 1 along M (the rest row-major over quads), so lanes t and t^1
    #: read the same A fragment and t and t^2 the same B fragment. Shared memory returns 128 B a
    #: cycle; an LDS.128 of 32 different addresses takes 4 wavefronts, one whose lane pairs share
    #: their addresses 2. A warp covers the same rows and columns as without (shared-memory path,
    #: threads even along M and N).
    lane_quads: bool = False
    #: stream-K scheduling of the SIMT pipeline's tiles (frag_prefetch): with S = SMs x the CTAs
    #: an SM holds, the grid is S CTAs by R rows; rows 0..R-2 take a whole tile each and the
    #: last row's S CTAs share the K iterations of the remaining tiles equally, so the last wave
    #: is not part-empty. 1: the row takes the tiles past the whole waves (where they are too
    #: few to share in :data:`~.launch.SK_MAX_PARTS` parts a tile, one whole wave with them);
    #: 2: those and one whole wave, always (CUTLASS's data-parallel + one stream-K wave). A CTA that
    #: covers a whole tile stores it; the parts of split tiles go to a workspace and a fix-up
    #: kernel sums them in K order, adds the bias and applies ReLU. The SM count is the GPU's
    #: (the launch's argument). 0: one tile a CTA. The bf16 kernels that copy their stages from
    #: the split workspace (``split_pass``, with or without ``split_on_demand``) schedule their
    #: tiles the same way, one CTA an SM: every role of the CTA walks the run's whole and part
    #: tiles in order, the stages numbered across them, so the producers copy (and split) the
    #: next tile's first stages while the consumers store the last one's sums.
    stream_k: int = 0
    #: the wgmma kernel keeps its MMAs in flight across K-tiles (each tile's MMAs in two commit
    #: groups with fragment registers of their own, made while the other group runs) and
    #: promotes its partial sums into fp32 every this many K-tiles; 1 = every tile, waiting for
    #: all MMAs each time.
    mma_window: int = 1
    #: warp specialization of the wgmma kernel with the in-flight MMA pipeline: this many
    #: producer warpgroups (besides the ``block_y`` consumer warpgroups) copy the tiles and split
    #: A, handing stages over through mbarriers; the consumers make B's fragments and run the
    #: MMAs, and no CTA-wide barrier stops them. 0: every warpgroup does everything in lockstep.
    producers: int = 0
    #: the precision split of the wgmma kernel (:data:`PRECISION_SCHEMES`): 0 = tf32x3; 3 =
    #: bf16x3, each fp32 operand split once per tile into hi + lo bf16 parts and
    #: hi·hi + hi·lo + lo·hi summed by bf16 wgmma (m64nNk16, fp32 accumulation); 6 = bf16x6,
    #: hi + mid + lo parts and the six largest cross products. The bf16 kernels read both
    #: operands from shared memory (the split threads transpose B on the way in): block
    #: (128, W) is W consumer warpgroups of 64 rows of C each, ``wgmma`` the columns.
    bf16_split: int = 0
    #: the bf16 split kernel's split made once, by a pass before the GEMM (warp-specialized,
    #: one producer warpgroup): a prologue kernel reads A and B once, splits every value into
    #: its bf16 parts and writes them to the workspace tile by tile, each (row tile, K tile) of
    #: A and (column tile, K tile) of B^T in the byte layout of a stage (128-byte swizzle, zeros
    #: past the edges); the GEMM's producer thread then copies a whole stage by two
    #: ``cp.async.bulk`` on the stage's mbarrier. A value is split once, not once per CTA
    #: that reads its tile, and no register of the GEMM's producers holds it.
    split_pass: bool = False
    #: the split pass's GEMM in thread-block clusters of this many CTAs (1 or 2) side by side
    #: along N: they read the same A block each K tile, so each CTA's producer copies its share
    #: of it by a multicast ``cp.async.bulk`` into every CTA of the cluster (and its own B^T
    #: block alone), and each consumer warp releases a stage to every producer of the cluster.
    #: Half the A traffic from L2; the grid's columns are padded to whole clusters.
    pass_cluster: int = 1
    #: the split pass's work done by the GEMM itself, overlapped with its MMAs (no prologue
    #: kernel but a reset of the workspace's counters): the producer warps but the first (of
    #: one or two producer warpgroups) walk this CTA's K tiles and split the A and B^T blocks
    #: it will copy, a slice of 128 or 256 chunks at a time, each slice claimed by one warp of
    #: whichever CTA needing the block comes first (an atomic counter a block) and counted done
    #: once its stores are visible (a second counter); the copying warp reads the counters of
    #: 16 tiles at once and copies a tile's stage once both its blocks are done. Every value is
    #: split once, as by the pass, and the split's memory traffic runs beside the tensor cores
    #: instead of before them. A warp never waits for another, so every claimed slice
    #: completes and every wait ends.
    split_on_demand: bool = False
    #: the bf16 split workspace's kernels accumulate in the MMAs: each wgmma adds its products
    #: to the fp32 sums in its accumulator registers (bf16 wgmma accumulates in fp32), where
    #: otherwise a window of ``mma_window`` K tiles sums into partial registers that are then
    #: added to the sums after every MMA in flight has retired. Half the accumulator registers
    #: (which is what lets ``wgmma=256``, 128 x 256 tiles, fit) and no drain of the tensor pipe
    #: at a window's end; the consumers wait for the MMAs of one tile back only, to release its
    #: stage.
    mma_accumulate: bool = False
    #: split-K: the K tiles are shared among this many CTAs along grid z, each writing fp32
    #: partial sums to a workspace; a second kernel sums them, adds the bias and applies ReLU.
    split_k: int = 1
    #: shape specialization: M, N, K compiled in as constants (all 0: the shape is a run-time
    #: argument). A specialized kernel refuses any other shape (host check, and a trap).
    shape_m: int = 0
    shape_n: int = 0
    shape_k: int = 0

    #: see :data:`KEY_OMITTED_DEFAULTS`
    OMITTED_AT_DEFAULT: ClassVar[dict[str, Any]] = KEY_OMITTED_DEFAULTS

    # -- derived figures ---------------------------------------------------------------------
    @property
    def threads(self) -> int:
        """Threads per block (a warp-specialized wgmma kernel's producers included)."""
        return self.block_x * (self.block_y + self.producers)

    @property
    def threads_n(self) -> int:
        """Threads of a block along N."""
        return self.block_x if self.coalesced else self.block_y

    @property
    def threads_m(self) -> int:
        """Threads of a block along M."""
        return self.block_y if self.coalesced else self.block_x

    @property
    def block_m(self) -> int:
        """Rows of C one block computes."""
        return self.threads_m * self.reg_m

    @property
    def block_n(self) -> int:
        """Columns of C one block computes."""
        return self.threads_n * self.reg_n

    @property
    def tc_warps_n(self) -> int:
        """Warps of a block along N on the tensor-core path."""
        return max(1, self.block_x // 32)

    @property
    def tc_warps_m(self) -> int:
        """Warps of a block along M on the tensor-core path."""
        return max(1, (self.threads // 32) // self.tc_warps_n)

    @property
    def bf16_parts(self) -> int:
        """bf16 parts of each operand of a bf16 split kernel (0 for any other point)."""
        return {0: 0, 3: 2, 6: 3}[self.bf16_split]

    @property
    def tc_block_m(self) -> int:
        """Rows of C a block computes on the tensor-core path."""
        if self.wgmma and self.bf16_split:
            return WG_COLUMNS * self.block_y
        if self.wgmma:
            return self.wgmma
        return self.tc_warps_m * self.warp_m

    @property
    def tc_block_n(self) -> int:
        """Columns of C a block computes on the tensor-core path."""
        if self.wgmma and self.bf16_split:
            return self.wgmma
        if self.wgmma:
            return WG_COLUMNS * self.block_y
        return self.tc_warps_n * self.warp_n

    @property
    def wg_buffers(self) -> int:
        """Shared-memory stages of the wgmma kernel: ``stages + 2`` of big A, small A and B;
        warp-specialized ``stages + 3`` of A and B as copied (the small parts then live in
        :data:`WG_SMALL_BUFFERS` buffers of their own). A bf16 split kernel's stages of split
        tiles: ``stages + 2`` in lockstep (one tile split ahead while one is read and the one
        before it may still be), ``stages + 1`` warp-specialized."""
        if self.bf16_split:
            return self.stages + (1 if self.producers else 2)
        return self.stages + (3 if self.producers else 2)

    @property
    def ws_registers(self) -> tuple[int, int, int]:
        """Launch, producer and consumer registers per thread of a warp-specialized wgmma
        kernel (zeros for any other point)."""
        if not self.producers:
            return (0, 0, 0)
        consumer = {0: WS_CONSUMER_REGISTERS, 3: BF16_WS_CONSUMER_REGISTERS,
                    6: BF16X6_WS_CONSUMER_REGISTERS}[self.bf16_split]
        if self.bf16_split and self.wgmma > 128:
            consumer = BF16_WIDE_WS_CONSUMER_REGISTERS
        return (ws_launch_registers(self.threads),
                ws_producer_registers(self.block_y, self.producers, consumer), consumer)

    @property
    def fixed_shape(self) -> Shape | None:
        """The compile-time shape of a shape-specialized kernel (None: any shape)."""
        if not (self.shape_m or self.shape_n or self.shape_k):
            return None
        return Shape(self.shape_m, self.shape_n, self.shape_k)

    def k_tiles(self, k: int) -> int:
        """K tiles of depth ``tile_k`` that cover ``k``."""
        return -(-k // self.tile_k)

    @property
    def smem_bytes(self) -> int:
        """Dynamic shared memory per block in bytes (0 without staging)."""
        if self.tf32x3 and self.wgmma and self.bf16_split:  # the parts of A and B^T, 1 KB
            # aligned stages; + 1 KB for the alignment
            stage = self.bf16_parts * 2 * BF16_TILE_K * (self.tc_block_m + self.tc_block_n)
            # the staged producers' fp32 tile (async_copy)
            staging = 4 * BF16_TILE_K * (self.tc_block_m + self.tc_block_n) if self.async_copy \
                else 0
            return self.wg_buffers * (-(-stage // 1024) * 1024) + staging + 1024
        if self.tf32x3 and self.wgmma:  # big + small A tiles, raw B tile, 1 KB aligned; + 1 KB
            a_tile = 4 * self.wgmma * WG_TILE_K
            b_tile = 0 if self.frag_global else 4 * WG_TILE_K * (self.tc_block_n + 8)
            if self.producers:  # stages of A and B, the small parts apart
                stage = -(-(a_tile + b_tile) // 1024) * 1024
                return self.wg_buffers * stage + WG_SMALL_BUFFERS * a_tile + 1024
            stage = -(-(2 * a_tile + b_tile) // 1024) * 1024
            return self.wg_buffers * stage + 1024
        if self.tf32x3:  # stages + 1 cp.async buffers of padded A and B tiles
            tiles = self.tc_block_m * (self.tile_k + 4) + self.tile_k * (self.tc_block_n + 8)
            return 4 * (self.stages + 1) * tiles
        if not self.smem:
            return 0
        per_stage = (self.block_m + self.pad) + (self.block_n + self.pad)
        buffers = self.stages + 1 if self.async_copy else self.stages
        return 4 * buffers * self.tile_k * per_stage

    @property
    def est_regs_per_thread(self) -> int:
        """A lower estimate of registers per thread: accumulators, fragments, overhead."""
        if self.tf32x3 and self.wgmma and self.bf16_split:
            if self.producers:
                return ws_launch_registers(self.threads)
            # accumulators + partial sums + the fp32 loads in flight
            return self.wgmma + 8 * self.bf16_chunks_in_flight + TC_REGISTER_OVERHEAD
        if self.tf32x3 and self.wgmma:  # accumulators + promoted partial sums + B^T fragments
            # (+ the next tile's raw fragments in flight when they come from global memory)
            if self.producers:  # the roles share the launch count out with setmaxnreg
                return ws_launch_registers(self.threads)
            frags = (12 if self.frag_global else 8) * (WG_TILE_K // 8)
            return self.wgmma + frags + TC_REGISTER_OVERHEAD
        if self.tf32x3:  # accumulators + promoted partial sums + split fragments
            mt, nt = self.warp_m // 16, self.warp_n // 8
            return 2 * 4 * mt * nt + 8 * mt + 4 * nt + TC_REGISTER_OVERHEAD
        staged = 0
        if self.smem and self.stages > 1 and not self.async_copy:  # the prefetched tile lives
            # in registers (cp.async copies without them)
            staged = -(-self.tile_k * (self.block_m + self.block_n) // self.threads)
        frags = (2 if self.frag_prefetch else 1) * (self.reg_m + self.reg_n)
        return self.reg_m * self.reg_n + frags + staged + REGISTER_OVERHEAD

    @property
    def bf16_batches(self) -> list[dict[str, int]]:
        """How a splitting thread of a bf16 split kernel loads a K-tile: batches of at most
        :data:`BF16_CHUNKS_IN_FLIGHT` chunks, each loaded whole before it is split and stored
        (``a``/``b`` chunks of the A and B^T tiles from chunk ``a0``/``b0`` on)."""
        splitters = WG_THREADS * (self.producers or self.block_y)
        limit = BF16_CHUNKS_IN_FLIGHT
        if self.async_copy:  # staged producers: one chunk at a time from shared memory
            limit = 1
        elif self.producers and self.ws_registers[1] < 128:
            # producers cut down by setmaxnreg: ptxas 13.0 spills with more than two chunks'
            # loads in flight at 96 registers, none with two (bf16x6, three parts: one)
            limit = 2 if self.bf16_split == 3 else 1
        elif self.producers and self.bf16_split == 6:
            limit = 4  # the same at 168 registers past four
        a_chunks = self.tc_block_m * 8 // splitters
        b_chunks = self.tc_block_n * 8 // splitters
        if a_chunks + b_chunks <= limit:
            return [{"a": a_chunks, "a0": 0, "b": b_chunks, "b0": 0}]
        out = [{"a": min(limit, a_chunks - i), "a0": i, "b": 0, "b0": 0}
               for i in range(0, a_chunks, limit)]
        return out + [{"a": 0, "a0": 0, "b": min(limit, b_chunks - i), "b0": i}
                      for i in range(0, b_chunks, limit)]

    @property
    def bf16_chunks_in_flight(self) -> int:
        """The most chunks a splitting thread of a bf16 split kernel loads at once."""
        return max(b["a"] + b["b"] for b in self.bf16_batches)

    @property
    def min_blocks_per_sm(self) -> int:
        """CTAs per SM a SIMT kernel asks ptxas to fit (``__launch_bounds__``' second figure):
        as many as the register file holds at :attr:`est_regs_per_thread` rounded up to 8."""
        regs = -(-self.est_regs_per_thread // 8) * 8
        return max(1, REGISTERS_PER_SM // (self.threads * regs))

    # -- conversions ---------------------------------------------------------------------------
    def canonical(self) -> GemmParams:
        """The same kernel with fields that do not matter set to their canonical values (the
        point itself when it is canonical already)."""
        if self.tf32x3 and self.wgmma and self.bf16_split:
            # async_copy stays: the warp-specialized kernel's staged producers (validity)
            fixed = {**_CANONICAL_BF16, "async_copy": self.async_copy}
            if self.mma_accumulate:  # no window: the in-flight pipeline's value stands for it
                fixed["mma_window"] = MMA_ACCUMULATE_WINDOW
        elif self.tf32x3 and self.wgmma:
            fixed = _CANONICAL_WGMMA
        elif self.tf32x3:
            fixed = _CANONICAL_TC
        elif not self.smem:
            fixed = _CANONICAL_DIRECT
        elif self.frag_prefetch:
            # the prefetching kernel unrolls its tile's steps whole: the unroll factor is moot
            fixed = _CANONICAL_PREFETCH
        else:
            fixed = _CANONICAL_SIMT
        changes = {name: value for name, value in fixed.items()
                   if (now := getattr(self, name)) != value or type(now) is not type(value)}
        return replace(self, **changes) if changes else self

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of the fields; the late fields of :data:`KEY_OMITTED_DEFAULTS` only when
        they are set (so a point without them keeps the key it always had)."""
        out = dict(self.__dict__)  # the fields in order, every one a number or a flag
        for name, default in KEY_OMITTED_DEFAULTS.items():
            if out[name] == default:
                del out[name]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GemmParams:
        """Build from a dict; unknown keys or wrongly typed values raise ``ValueError``."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown parameter(s) {unknown}; known: {sorted(known)}")
        values: dict[str, Any] = {}
        for name, value in data.items():
            if name in SHAPE_FIELDS:
                if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                    raise ValueError(f"parameter {name} must be an integer >= 0, got {value!r}")
                values[name] = value
                continue
            domain = DOMAINS[name]
            want_bool = isinstance(domain[0], bool)
            if want_bool != isinstance(value, bool) or not isinstance(value, int):
                kind = "true/false" if want_bool else "an integer"
                raise ValueError(f"parameter {name} must be {kind}, got {value!r}")
            values[name] = value
        return cls(**values)


BASELINE = GemmParams()
