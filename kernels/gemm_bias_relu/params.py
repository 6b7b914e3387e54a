"""Parameter space of ``gemm_bias_relu``: the fields, their domains, validity and launch shape.

A point is valid for *every* shape M, N, K >= 1 (the template handles tails and misaligned rows
at run time), or it is rejected here, before compiling, with numbers.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, ClassVar

from kernels.base import DEFAULT_SM_COUNT, EpilogueLaunch, LaunchConfig, Rejection
from kernels.gemm_bias_relu.shape import Shape

KERNEL_NAME = "gemm_bias_relu"

#: Per-block shared-memory limit in bytes (dynamic, after the opt-in), by arch.
MAX_SMEM_BY_ARCH: dict[str, int] = {
    "sm_70": 98304,
    "sm_75": 65536,
    "sm_80": 166912,
    "sm_86": 101376,
    "sm_87": 166912,
    "sm_89": 101376,
    "sm_90": 232448,
    "sm_90a": 232448,
    "sm_100": 232448,
    "sm_120": 101376,
}
#: Static shared memory a block may declare without opting in.
STATIC_SMEM_LIMIT = 48 * 1024
MAX_THREADS_PER_BLOCK = 1024
MIN_THREADS_PER_BLOCK = 32
REGISTERS_PER_SM = 65536
#: Registers a thread needs beyond its accumulators and operand fragments (indices, pointers).
REGISTER_OVERHEAD = 24
MAX_GRID_Y = 65535
#: Largest split-K workspace (splits x M x N fp32 partial sums) a launch may ask for.
MAX_WORKSPACE_BYTES = 2 << 30
#: The split-K epilogue kernel (same module): partial sums + bias + ReLU.
SPLITK_REDUCE_NAME = "gemm_bias_relu_splitk_reduce"
#: Threads per block of the epilogue, and the fp32 elements each thread handles per step.
REDUCE_THREADS = 256
REDUCE_VEC = 4
#: Blocks of the epilogue at most (it walks the output with a grid-stride loop).
REDUCE_MAX_BLOCKS = 8192
#: The stream-K fix-up kernel (same module): sums the parts of split tiles + bias + ReLU.
SK_FIXUP_NAME = "gemm_bias_relu_sk_fixup"
#: Floats before the stream-K part-tile slots in the workspace (its header: 128 bytes).
SK_HEADER_FLOATS = 32
#: Parts a stream-K tile is split into at most: the fix-up reads them all, one CTA a tile, so a
#: rest of very few tiles takes the last whole wave with it instead (a bound, not a tuned value)
SK_MAX_PARTS = 8
#: Shared memory of an SM (sm_80/sm_90: 228 KB, of which each resident CTA reserves 1 KB).
SMEM_PER_SM = 228 * 1024
SMEM_RESERVED_PER_CTA = 1024

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
    # 0 = the mma.sync kernel
    "wgmma": (0, 64, 128),
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
}

#: Fields added after the replay dataset and the first campaigns were recorded: left out of
#: :meth:`GemmParams.to_dict` (and so of every key) while at these values, so that the points
#: that do not use them keep their identity, JSON and keys byte for byte.
KEY_OMITTED_DEFAULTS: dict[str, Any] = {"split_k": 1, "shape_m": 0, "shape_n": 0, "shape_k": 0,
                                         "wgmma": 0, "frag_global": False, "async_copy": False,
                                         "mma_window": 1, "producers": 0, "frag_prefetch": False,
                                         "lane_quads": False, "stream_k": 0}
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
MAX_REGS_PER_THREAD = 255
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
#: Archs whose GPUs have wgmma (the kernel is built for the ``a`` variant of sm_90).
WGMMA_ARCHS = ("sm_90", "sm_90a")


#: Registers a consumer thread of the warp-specialized wgmma kernel gets (``setmaxnreg.inc``)
#: when the launch count is lower: accumulators, partial sums, four fragment sets, addresses.
WS_CONSUMER_REGISTERS = 192


def ws_launch_registers(threads: int) -> int:
    """Registers per thread a warp-specialized wgmma kernel of ``threads`` is launched with
    (``__launch_bounds__(threads, 1)``: what the register file allows, in steps of 8)."""
    return min(REGISTERS_PER_SM // threads // 8 * 8, MAX_REGS_PER_THREAD)


def ws_producer_registers(consumers: int, producers: int) -> int:
    """Registers a producer thread keeps (``setmaxnreg.dec``) so that the ``consumers``
    warpgroups can take :data:`WS_CONSUMER_REGISTERS` out of the CTA's launch allocation."""
    threads = WG_THREADS * (consumers + producers)
    launch = ws_launch_registers(threads)
    if launch >= WS_CONSUMER_REGISTERS:
        return launch
    spare = threads * launch - WG_THREADS * consumers * WS_CONSUMER_REGISTERS
    return spare // (WG_THREADS * producers) // 8 * 8


def max_smem_limit(arch: str) -> int:
    """The per-block dynamic shared-memory limit of ``arch`` in bytes."""
    try:
        return MAX_SMEM_BY_ARCH[arch]
    except KeyError:
        known = ", ".join(sorted(MAX_SMEM_BY_ARCH))
        raise ValueError(f"unknown arch {arch!r}; known: {known}") from None


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
    #: few to share in :data:`SK_MAX_PARTS` parts a tile, one whole wave with them); 2: those
    #: and one whole wave, always (CUTLASS's data-parallel + one stream-K wave). A CTA that
    #: covers a whole tile stores it; the parts of split tiles go to a workspace and a fix-up
    #: kernel sums them in K order, adds the bias and applies ReLU. The SM count is the GPU's
    #: (the launch's argument). 0: one tile a CTA.
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
    def tc_block_m(self) -> int:
        """Rows of C a block computes on the tensor-core path."""
        if self.wgmma:
            return self.wgmma
        return self.tc_warps_m * self.warp_m

    @property
    def tc_block_n(self) -> int:
        """Columns of C a block computes on the tensor-core path."""
        if self.wgmma:
            return WG_COLUMNS * self.block_y
        return self.tc_warps_n * self.warp_n

    @property
    def wg_buffers(self) -> int:
        """Shared-memory stages of the wgmma kernel: ``stages + 2`` of big A, small A and B;
        warp-specialized ``stages + 3`` of A and B as copied (the small parts then live in
        :data:`WG_SMALL_BUFFERS` buffers of their own)."""
        return self.stages + (3 if self.producers else 2)

    @property
    def ws_registers(self) -> tuple[int, int, int]:
        """Launch, producer and consumer registers per thread of a warp-specialized wgmma
        kernel (zeros for any other point)."""
        if not self.producers:
            return (0, 0, 0)
        return (ws_launch_registers(self.threads),
                ws_producer_registers(self.block_y, self.producers), WS_CONSUMER_REGISTERS)

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
    def min_blocks_per_sm(self) -> int:
        """CTAs per SM a SIMT kernel asks ptxas to fit (``__launch_bounds__``' second figure):
        as many as the register file holds at :attr:`est_regs_per_thread` rounded up to 8."""
        regs = -(-self.est_regs_per_thread // 8) * 8
        return max(1, REGISTERS_PER_SM // (self.threads * regs))

    # -- conversions ---------------------------------------------------------------------------
    def canonical(self) -> GemmParams:
        """The same kernel with fields that do not matter set to their canonical values."""
        if self.tf32x3 and self.wgmma:
            return replace(self, **TC_FIXED, **WG_FIXED)
        if self.tf32x3:
            return replace(self, **TC_FIXED, frag_global=False, mma_window=1, producers=0)
        point = replace(self, **TC_ONLY_DEFAULTS, wgmma=0, frag_global=False, mma_window=1,
                        producers=0)
        if point.smem:
            # the prefetching kernel unrolls its tile's steps whole: the unroll factor is moot
            return replace(point, unroll=1) if point.frag_prefetch else point
        return replace(point, **SMEM_ONLY_DEFAULTS)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of the fields; the late fields of :data:`KEY_OMITTED_DEFAULTS` only when
        they are set (so a point without them keeps the key it always had)."""
        out = asdict(self)
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


def workspace_bytes(splits: int, shape: Shape) -> int:
    """Bytes of the split-K workspace: ``splits`` fp32 partial products of C."""
    return 4 * splits * shape.m * shape.n


def check_at_shape(params: GemmParams, shape: Shape) -> Rejection | None:
    """Why ``params`` (valid for every shape) is not worth launching at ``shape``, or None.

    Split-K must leave every split at least one K tile (more splits than tiles is a kernel that
    only pretends to split) and its workspace must fit; a shape-specialized kernel runs at its
    own shape only. :func:`launch_config` refuses the last two at launch as well; for shapes with
    fewer K tiles than splits (the edge shapes of every check) it launches fewer splits, so the
    point stays correct for any shape.
    """
    p = params.canonical()
    fixed = p.fixed_shape
    if fixed is not None and fixed != shape:
        return _shape_mismatch(fixed, shape)
    if p.split_k > 1:
        tiles = p.k_tiles(shape.k)
        if p.split_k > tiles:
            return Rejection(
                "split_k_exceeds_k_tiles",
                f"split_k {p.split_k} at K={shape.k}: {tiles} K tile(s) of depth {p.tile_k} "
                f"cannot give each of {p.split_k} splits one",
                {"split_k": p.split_k, "k": shape.k, "tile_k": p.tile_k, "k_tiles": tiles},
            )
        rejection = _workspace_check(p.split_k, shape)
        if rejection is not None:
            return rejection
    return None


def _shape_mismatch(fixed: Shape, shape: Shape) -> Rejection:
    return Rejection(
        "shape_mismatch",
        f"kernel specialized for M, N, K = {fixed} cannot run at {shape}",
        {"compiled_shape": str(fixed), "shape": str(shape)},
    )


def _workspace_check(splits: int, shape: Shape) -> Rejection | None:
    need = workspace_bytes(splits, shape)
    if need > MAX_WORKSPACE_BYTES:
        return Rejection(
            "workspace_limit",
            f"split_k {splits} at {shape} needs a {need} B workspace of partial sums; "
            f"the limit is {MAX_WORKSPACE_BYTES} B",
            {"workspace_bytes": need, "max_workspace_bytes": MAX_WORKSPACE_BYTES,
             "split_k": splits, "m": shape.m, "n": shape.n},
        )
    return None


def _wrong_fields(params: GemmParams, needs: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of ``params`` that differ from what ``needs`` asks, with their values."""
    return {k: getattr(params, k) for k, v in needs.items() if getattr(params, k) != v}


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


def compile_arch(params: GemmParams, arch: str) -> str:
    """The arch ``params`` is built for on ``arch``: a wgmma kernel needs the ``a`` variant
    (sm_90 -> sm_90a, whose cubin runs on the same GPUs); every other point ``arch`` itself."""
    if params.tf32x3 and params.wgmma and arch == "sm_90":
        return "sm_90a"
    return arch


def stream_k_slots(params: GemmParams, sm_count: int) -> int:
    """CTAs of ``params`` the GPU holds at once: ``sm_count`` x the CTAs an SM fits (the
    ``__launch_bounds__`` figure ptxas builds for, fewer if shared memory runs out first)."""
    by_smem = SMEM_PER_SM // (params.smem_bytes + SMEM_RESERVED_PER_CTA)
    return sm_count * max(1, min(params.min_blocks_per_sm, by_smem))


def stream_k_workspace_bytes(params: GemmParams, ctas: int) -> int:
    """Header plus two part-tile slots (``block_m x block_n`` fp32) for each stream-K CTA."""
    return 4 * (SK_HEADER_FLOATS + 2 * ctas * params.block_m * params.block_n)


def _stream_k_launch(params: GemmParams, shape: Shape, tiles: int, sm_count: int
                     ) -> LaunchConfig:
    slots = stream_k_slots(params, sm_count)
    waves, rest = divmod(tiles, slots)
    if waves == 0:  # fewer tiles than slots: all in the stream-K row, split at most so far
        rows, row_tiles = 1, tiles
        ctas = min(slots, tiles * SK_MAX_PARTS, tiles * params.k_tiles(shape.k))
    else:
        # the whole waves data-parallel, the rest shared by every slot; a rest too small to
        # share in SK_MAX_PARTS parts a tile (or stream_k 2) takes the last whole wave with it
        alone = params.stream_k == 1 and (rest == 0 or slots <= SK_MAX_PARTS * rest)
        rows = waves + 1 if alone else waves
        row_tiles = tiles - (rows - 1) * slots
        ctas = slots
    return LaunchConfig(
        kernel_name=KERNEL_NAME,
        grid=(ctas, rows, 1),
        block=(params.block_x, params.block_y, 1),
        dynamic_smem_bytes=params.smem_bytes,
        workspace_bytes=stream_k_workspace_bytes(params, ctas),
        epilogue=EpilogueLaunch(SK_FIXUP_NAME, (max(1, row_tiles), 1, 1),
                                (REDUCE_THREADS, 1, 1), epilogue_args(ctas)),
        tile=(params.block_m, params.block_n),
    )


def epilogue_args(parts: int) -> tuple[str | int, ...]:
    """Arguments of the split-K reduction and the stream-K fix-up: ``(workspace, bias, C, M, N,
    parts)``, ``parts`` the partial sums a tile has (splits) or the CTAs of a row (stream-K)."""
    return ("workspace", "bias", "C", "M", "N", parts)


def launch_config(params: GemmParams, shape: Shape, sm_count: int = DEFAULT_SM_COUNT
                  ) -> LaunchConfig | Rejection:
    """Grid, block and dynamic shared memory of ``params`` for ``shape``.

    Split-K (``split_k > 1``): grid z is the number of splits, ``min(split_k, K tiles)`` (every
    split gets at least one K tile, whatever the shape), each split writes its partial sums to a
    ``splits x M x N`` fp32 workspace, and the epilogue kernel sums them in split order, adds the
    bias and applies ReLU. Stream-K (``stream_k``): grid (S, R) with S the CTAs ``sm_count``
    SMs hold at once (:func:`stream_k_slots`), R - 1 rows of whole tiles and one row that shares
    the rest's K iterations, then the fix-up kernel (see :class:`GemmParams`). A
    shape-specialized kernel is refused at any other shape.
    """
    fixed = params.fixed_shape
    if fixed is not None and fixed != shape:
        return _shape_mismatch(fixed, shape)
    block_m = params.tc_block_m if params.tf32x3 else params.block_m
    block_n = params.tc_block_n if params.tf32x3 else params.block_n
    grid_x = -(-shape.n // block_n)
    grid_y = -(-shape.m // block_m)
    if grid_y > MAX_GRID_Y:
        return Rejection(
            "grid_limit",
            f"{grid_y} row tiles exceed the grid's y limit {MAX_GRID_Y}",
            {"grid_y": grid_y, "max_grid_y": MAX_GRID_Y},
        )
    if params.stream_k:
        return _stream_k_launch(params, shape, grid_x * grid_y, sm_count)
    if params.split_k == 1:
        return LaunchConfig(
            kernel_name=KERNEL_NAME,
            grid=(grid_x, grid_y, 1),
            block=(params.block_x, params.block_y + params.producers, 1),
            dynamic_smem_bytes=params.smem_bytes,
        )
    # the split-K kernel always writes partial sums (even when a short K leaves one split)
    splits = min(params.split_k, params.k_tiles(shape.k))
    rejection = _workspace_check(splits, shape)
    if rejection is not None:
        return rejection
    per_block = REDUCE_THREADS * REDUCE_VEC
    reduce_blocks = max(1, min(-(-(shape.m * shape.n) // per_block), REDUCE_MAX_BLOCKS))
    return LaunchConfig(
        kernel_name=KERNEL_NAME,
        grid=(grid_x, grid_y, splits),
        block=(params.block_x, params.block_y + params.producers, 1),
        dynamic_smem_bytes=params.smem_bytes,
        workspace_bytes=workspace_bytes(splits, shape),
        epilogue=EpilogueLaunch(SPLITK_REDUCE_NAME, (reduce_blocks, 1, 1),
                                (REDUCE_THREADS, 1, 1), epilogue_args(splits)),
    )


#: The sub-space measured for the replay dataset: closed enough under the transforms that a
#: campaign walking from the baseline meets measured points, small enough to measure in minutes.
REPLAY_DOMAINS: dict[str, tuple[Any, ...]] = {
    **DOMAINS,
    "block_x": (16, 32, 64),
    "block_y": (4, 8, 16),
    "tile_k": (8, 16, 32),
    "reg_m": (1, 4, 8),
    "reg_n": (1, 4, 8),
    "vec": (1, 4),
    "unroll": (1, 4),
    "pad": (0, 1),
    "interleave": (False,),
    "stages": (1,),
    "swizzle": (1,),
    "tf32x3": (False,),
    "warp_m": (32,),
    "warp_n": (32,),
    "split_k": (1,),
    "wgmma": (0,),
    "frag_global": (False,),
    "async_copy": (False,),
    "mma_window": (1,),
    "producers": (0,),
    "frag_prefetch": (False,),
    "lane_quads": (False,),
    "stream_k": (0,),
}


def in_replay_space(params: GemmParams) -> bool:
    """Whether a point belongs to the replay sub-space (staged tiles only with coalescing)."""
    return all(getattr(params, k) in v for k, v in REPLAY_DOMAINS.items()) and (
        params.coalesced or not params.smem
    ) and params.fixed_shape is None


#: The fields each kernel path reads; the others are fixed at their canonical values there.
PATH_FIELDS: dict[str, tuple[str, ...]] = {
    "direct": ("block_x", "block_y", "coalesced", "reg_m", "reg_n", "vec", "unroll", "swizzle"),
    "smem": ("block_x", "block_y", "coalesced", "reg_m", "reg_n", "vec", "unroll", "swizzle",
             "tile_k", "pad", "interleave", "stages", "split_k", "async_copy", "frag_prefetch",
             "lane_quads", "stream_k"),
    "tc": ("block_x", "block_y", "tile_k", "stages", "swizzle", "warp_m", "warp_n", "split_k"),
    "wgmma": ("block_y", "stages", "swizzle", "wgmma", "split_k", "frag_global", "mma_window",
              "producers"),
}
_PATH_BASE: dict[str, dict[str, Any]] = {
    "direct": {"smem": False, "tf32x3": False},
    "smem": {"smem": True, "tf32x3": False},
    "tc": {"tf32x3": True},
    "wgmma": {"tf32x3": True, "block_x": WG_THREADS, **WG_FIXED},
}

#: The seed's space plus coalescing (no expert fields): small enough to enumerate whole.
SEED_DOMAINS: dict[str, tuple[Any, ...]] = {
    **DOMAINS, "interleave": (False,), "stages": (1,), "swizzle": (1,), "tf32x3": (False,),
    "split_k": (1,), "wgmma": (0,), "frag_global": (False,), "async_copy": (False,),
    "mma_window": (1,),
    "producers": (0,),
    # the seed's register blocking goes up to 8 x 8
    "reg_m": (1, 2, 4, 8), "reg_n": (1, 2, 4, 8), "frag_prefetch": (False,),
    "lane_quads": (False,),
    "stream_k": (0,),
}


def _path_size(path: str, domains: Mapping[str, tuple[Any, ...]]) -> int:
    size = 1
    for name in PATH_FIELDS[path]:
        size *= len(domains[name])
    values = {**_PATH_BASE[path]}
    if any(v not in domains[k] for k, v in values.items()):
        return 0
    return size


def enumerate_space(arch: str = "sm_90", domains: Mapping[str, tuple[Any, ...]] | None = None
                    ) -> Iterator[GemmParams]:
    """Every valid canonical point of ``domains`` (default the whole space), deterministic.

    Walks each kernel path over the fields it reads only, so every tuple is a distinct canonical
    point. The whole space holds about 45 million valid points (staged SIMT tiles dominate;
    estimated by sampling): use :func:`sample_space` to draw from it. With
    ``domains=REPLAY_DOMAINS`` only points of :func:`in_replay_space`.
    """
    replay = domains == REPLAY_DOMAINS
    domains = domains or DOMAINS
    base = GemmParams().canonical()
    for path, names in PATH_FIELDS.items():
        if not _path_size(path, domains):
            continue
        for values in itertools.product(*(domains[n] for n in names)):
            point = replace(base, **_PATH_BASE[path], **dict(zip(names, values, strict=True)))
            point = point.canonical()
            if path == "wgmma" and not point.wgmma:
                continue  # that is a point of the mma.sync path, walked there
            if validate(point, arch) is not None:
                continue
            if replay and not in_replay_space(point):
                continue
            yield point


def sample_space(rng: Any, n: int, arch: str = "sm_90",
                 domains: Mapping[str, tuple[Any, ...]] | None = None,
                 max_tries: int = 100_000) -> list[GemmParams]:
    """``n`` distinct valid points drawn uniformly from the space without enumerating it
    (a path chosen in proportion to its size, its fields uniformly, invalid draws rejected)."""
    domains = domains or DOMAINS
    paths = [p for p in PATH_FIELDS if _path_size(p, domains)]
    weights = [_path_size(p, domains) for p in paths]
    base = GemmParams().canonical()
    out: dict[GemmParams, None] = {}
    for _ in range(max_tries):
        if len(out) >= n:
            break
        path = rng.choices(paths, weights=weights)[0]
        values = {name: rng.choice(domains[name]) for name in PATH_FIELDS[path]}
        point = replace(base, **_PATH_BASE[path], **values).canonical()
        if path == "wgmma" and not point.wgmma:
            continue
        if validate(point, arch) is None:
            out[point] = None
    return list(out)
