"""The softmax kernels run on the host, thread by thread (``tests/simt``: every CUDA thread a
fiber of the host thread, giving way at barriers, shuffles and spins; DSMEM through per-CTA
arenas), so that their logic is checked without a GPU: tails, misaligned rows, x and y aligned
differently, the register-held capacity and its fallback, packed rows, clusters, every
distribution, against a float64 reference with the family's scaled rule. Not a timing and not
the GPU's arithmetic (``expf`` stands in for ``__expf``): the GPU tests judge those."""

from __future__ import annotations

import math
import random
import re
import shutil
import struct
import subprocess
import zlib
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from simt_support import SIMT, precompiled
from softmax_bulk_points import BULK_PICKS

from kernels.base import Dims, LaunchConfig
from kernels.softmax import FAMILY, SoftmaxParams
from kernels.softmax.params import BULK_SMEM_CAP, held_fits
from kernels.softmax.rules import plan

TOL = 1e-4
P = SoftmaxParams
POINTS = {
    "baseline": FAMILY.baseline,
    "warp a row, held": plan(65536, 128),
    "16 threads a row, held": plan(7, 33),
    "8 threads, vec 2, held, hints": P(block_threads=64, row_threads=8, vec=2, passes=1,
                                       chunks=2, load_hint=1, store_hint=True),
    "4 warps a row, 4 rows, held": P(block_threads=512, row_threads=128, vec=4, passes=1,
                                     chunks=2, load_hint=3, store_hint=True),
    "2 warps a row, two passes": P(block_threads=256, row_threads=64, vec=4, passes=2,
                                   unroll=4, load_hint=1, store_hint=True),
    "CTA a row, three passes, vec 2": P(block_threads=256, row_threads=256, vec=2, passes=3,
                                        unroll=2, load_hint=2),
    "cluster 2, held": P(block_threads=64, row_threads=64, cluster=2, vec=4, passes=1,
                         chunks=2, load_hint=1, store_hint=True),
    "cluster 4, two passes": P(block_threads=32, row_threads=32, cluster=4, vec=4, passes=2,
                               unroll=2, load_hint=3),
    "cluster 8, held, scalar": P(block_threads=32, row_threads=32, cluster=8, vec=1, passes=1,
                                 chunks=1),
    "cluster 2, 2 warps, held": P(block_threads=64, row_threads=64, cluster=2, vec=2,
                                  passes=1, chunks=4, load_hint=1, store_hint=True),
}
#: bulk-copy points: a CTA a row, clusters, rows packed (parts of a warp and several warps on a
#: row), pieces from 1 to 8, their two-pass fallback scalar and float4
BULK_POINTS = {
    "bulk, CTA a row, 4 pieces": P(block_threads=64, row_threads=64, vec=4, bulk=4, unroll=2),
    "bulk, cluster 2, 2 pieces, hints": P(block_threads=32, row_threads=32, cluster=2, vec=4,
                                          bulk=2, load_hint=3, store_hint=True),
    "bulk, cluster 8, 8 pieces, scalar": P(block_threads=32, row_threads=32, cluster=8, vec=1,
                                           bulk=8, unroll=4),
    "bulk, 8 threads a row, 4 rows": P(block_threads=32, row_threads=8, vec=4, bulk=1),
    "bulk, 4 threads a row, 16 rows, 2 pieces": P(block_threads=64, row_threads=4, vec=2,
                                                  bulk=2, unroll=2, load_hint=1),
    "bulk, 2 warps a row, 2 rows, 8 pieces": P(block_threads=128, row_threads=64, vec=4,
                                               bulk=8, unroll=4, load_hint=2),
    "bulk, the 65536x128 pick": BULK_PICKS["rt8x256"],
}
#: clusters whose CTAs push their partials (apply_cluster_push): every pass count, the
#: bulk-copy path, two warps a CTA (the block's reduction before the push)
PUSH_POINTS = {
    "push, cluster 2, 2 warps, held": P(block_threads=64, row_threads=64, cluster=2, vec=4,
                                        passes=1, chunks=2, push=True),
    "push, cluster 4, two passes": P(block_threads=32, row_threads=32, cluster=4, vec=4,
                                     passes=2, unroll=2, load_hint=3, push=True),
    "push, cluster 8, three passes, scalar": P(block_threads=32, row_threads=32, cluster=8,
                                               vec=1, passes=3, push=True),
    "push, bulk, cluster 2": P(block_threads=32, row_threads=32, cluster=2, vec=4, bulk=2,
                               push=True),
    "push, cluster 16, held": P(block_threads=32, row_threads=32, cluster=16, vec=4, passes=1,
                                chunks=2, load_hint=1, store_hint=True, push=True),
    "cluster 16, two passes": P(block_threads=32, row_threads=32, cluster=16, vec=2, passes=2,
                                unroll=2),
}

#: bulk-copy points that hold their tile in registers and prefetch the next one
#: (apply_prefetch): clusters with and without push, packed rows, 1 to 4 pieces
PREFETCH_POINTS = {
    "prefetch, cluster 2, push": P(block_threads=32, row_threads=32, cluster=2, vec=4, bulk=2,
                                   push=True, prefetch=True, chunks=2),
    "prefetch, cluster 4, 2 warps, hints": P(block_threads=64, row_threads=64, cluster=4,
                                             vec=4, bulk=1, prefetch=True, chunks=1,
                                             load_hint=3, store_hint=True),
    "prefetch, 8 threads a row, 8 rows": P(block_threads=64, row_threads=8, vec=4, bulk=1,
                                           prefetch=True, chunks=4),
    "prefetch, a CTA a row, 4 pieces": P(block_threads=32, row_threads=32, vec=4, bulk=4,
                                         prefetch=True, chunks=4),
}

#: one-pass points keeping part of the row in shared memory (apply_staged_row): clusters with
#: push, a CTA a row, rows packed, scalar and float2 vectors
STAGED_POINTS = {
    "staged, cluster 2, push": P(block_threads=32, row_threads=32, cluster=2, vec=4, passes=1,
                                 chunks=2, staged=2, push=True, load_hint=1, store_hint=True),
    "staged, cluster 4, 2 warps": P(block_threads=64, row_threads=64, cluster=4, vec=4,
                                    passes=1, chunks=1, staged=4),
    "staged, a CTA a row, float2": P(block_threads=64, row_threads=64, vec=2, passes=1,
                                     chunks=2, staged=1),
    "staged, 8 threads a row, scalar": P(block_threads=64, row_threads=8, vec=1, passes=1,
                                         chunks=2, staged=2, load_hint=3),
}


#: a row over CTAs of a persistent grid meeting through global memory (apply_spread): every
#: pass count, two warps a CTA, float2 and scalar vectors, groups of 2 to 32, and the next
#: row's part loaded ahead (apply_row_pipeline)
SPREAD_POINTS = {
    "spread 2, 2 warps, held": P(block_threads=64, row_threads=64, cluster=2, vec=4, passes=1,
                                 chunks=2, spread=True, load_hint=1, store_hint=True),
    "spread 4, two passes, float2": P(block_threads=32, row_threads=32, cluster=4, vec=2,
                                      passes=2, unroll=2, spread=True),
    "spread 8, three passes, scalar": P(block_threads=32, row_threads=32, cluster=8, vec=1,
                                        passes=3, spread=True, load_hint=3),
    "spread 16, held": P(block_threads=32, row_threads=32, cluster=16, vec=4, passes=1,
                         chunks=2, spread=True),
    "spread 32, two passes": P(block_threads=32, row_threads=32, cluster=32, vec=4, passes=2,
                               spread=True, store_hint=True),
    "spread 4, pipelined, 2 warps": P(block_threads=64, row_threads=64, cluster=4, vec=4,
                                      passes=1, chunks=2, spread=True, pipeline=True,
                                      load_hint=2),
    "spread 32, pipelined, float2": P(block_threads=32, row_threads=32, cluster=32, vec=2,
                                      passes=1, chunks=1, spread=True, pipeline=True,
                                      store_hint=True),
    "spread 8, pipelined, scalar": P(block_threads=32, row_threads=32, cluster=8, vec=1,
                                     passes=1, chunks=4, spread=True, pipeline=True),
}


#: one-pass points reducing the row's max first, then the sum (apply_max_first), and points
#: whose vector stores are PTX (apply_ptx_stores): part of a warp, a warp, several warps on a
#: row (rows packed), a staged part, float2 and scalar vectors, two and three passes
MAX_FIRST_POINTS = {
    "max first, 8 threads a row, 8 rows": P(block_threads=64, row_threads=8, vec=4, passes=1,
                                            chunks=4, max_first=True),
    "max first, a warp a row, float2, ptx stores": P(block_threads=64, row_threads=32, vec=2,
                                                     passes=1, chunks=2, max_first=True,
                                                     ptx_stores=True, load_hint=1),
    "max first, 4 warps a row, ptx stores": P(block_threads=128, row_threads=128, vec=4,
                                              passes=1, chunks=2, max_first=True,
                                              ptx_stores=True),
    "max first, 2 warps a row, 2 rows, staged": P(block_threads=128, row_threads=64, vec=4,
                                                  passes=1, chunks=1, staged=2, max_first=True,
                                                  ptx_stores=True),
    "max first, 16 warps a row, scalar": P(block_threads=512, row_threads=512, vec=1,
                                           passes=1, chunks=2, max_first=True, load_hint=3),
    "ptx stores, two passes, float2": P(block_threads=256, row_threads=64, vec=2, passes=2,
                                        unroll=4, ptx_stores=True),
    "ptx stores, three passes": P(block_threads=32, row_threads=32, vec=4, passes=3, unroll=2,
                                  ptx_stores=True),
    "ptx stores, bulk, 8 threads a row": P(block_threads=32, row_threads=8, vec=4, bulk=1,
                                           passes=2, ptx_stores=True),
}

#: points whose rows are whole vectors from their start (apply_aligned_rows: no head or tail,
#: the scalar path for any other shape or alignment) and points with a CTA a row unit and no
#: grid-stride loop (apply_one_pass_grid): Triton's arrangement with its code, rows packed in
#: a CTA, a staged part, float2, two and three passes, a cluster of two, scalar accesses
ALIGNED_POINTS = {
    "aligned, one grid, 4 warps a row, Triton's code": P(
        block_threads=128, row_threads=128, vec=4, passes=1, chunks=2, max_first=True,
        ptx_stores=True, aligned_rows=True, one_pass_grid=True),
    "aligned, one grid, 8 threads a row, 8 rows": P(
        block_threads=64, row_threads=8, vec=4, passes=1, chunks=4, max_first=True,
        aligned_rows=True, one_pass_grid=True),
    "aligned, 2 warps a row, 2 rows, staged": P(
        block_threads=128, row_threads=64, vec=4, passes=1, chunks=1, staged=2, max_first=True,
        ptx_stores=True, aligned_rows=True),
    "aligned, a warp a row, pairs reduced, hints": P(
        block_threads=256, row_threads=32, vec=4, passes=1, chunks=4, load_hint=1,
        store_hint=True, aligned_rows=True),
    "aligned, two passes, float2": P(block_threads=256, row_threads=64, vec=2, passes=2,
                                     unroll=4, ptx_stores=True, aligned_rows=True),
    "aligned, one grid, three passes, cluster 2": P(
        block_threads=32, row_threads=32, cluster=2, vec=4, passes=3, unroll=2,
        aligned_rows=True, one_pass_grid=True),
    "one grid, a warp a row, 2 rows, scalar": P(block_threads=64, row_threads=32, vec=1,
                                                passes=1, chunks=2, one_pass_grid=True),
}


def gxx_flags(reference: bool) -> list[str]:
    """g++'s flags for both translation units (the kernel and the host launcher), less the
    ``-include`` of ``simt.h`` (:data:`HEADERS`)."""
    return ["-std=c++20", "-O1", f"-I{SIMT / 'inc'}",
            *(["-DREFERENCE"] if reference else [])]


#: the host launcher (main.cpp) compiled once a module by ``gxx``: reference? -> object file
MAIN_OBJECTS: dict[bool, Path] = {}
#: the ``simt.h`` each build includes: reference? -> path. The kernels' is a copy with its
#: precompiled header beside it (``simt.h.gch``, built once a module with the kernels' flags),
#: which g++ reads instead of compiling the header again in every build (0.8 -> 0.3 CPU-s a
#: build); the reference's is the file itself
HEADERS: dict[bool, Path] = {True: SIMT / "simt.h"}


@pytest.fixture(scope="module")
def gxx(tmp_path_factory: pytest.TempPathFactory) -> str:
    """g++, with the launcher compiled for the kernels and the reference and the kernels'
    precompiled ``simt.h`` (each build then compiles its kernel only, and links)."""
    found = shutil.which("g++")
    if found is None:
        pytest.skip("g++ is not on PATH")
    folder = tmp_path_factory.mktemp("simt-main")
    HEADERS[False] = precompiled(found, "simt.h", gxx_flags(False), folder)
    for reference in (False, True):
        obj = folder / f"main-{int(reference)}.o"
        done = subprocess.run([found, *gxx_flags(reference), "-include", str(HEADERS[reference]),
                               "-Winvalid-pch", "-c", str(SIMT / "main.cpp"), "-o", str(obj)],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        MAIN_OBJECTS[reference] = obj
    return found


def build(gxx: str, p: SoftmaxParams | None, work: Path) -> Path:
    """The rendered kernel of ``p`` (None: the float64 reference) and the host launcher."""
    source = FAMILY.render(p) if p is not None else FAMILY.reference_source()
    source = re.sub(r"__shared__ (\w+) (\w+)\[(.+?)\];",
                    r'\1* \2 = simt::shared<\1>("\2", \3);', source)
    # the bulk-copy path: dynamic shared memory of the launch's size, the host's copies and
    # mbarriers (tests/simt/simt.h) for the PTX wrappers
    source = source.replace("extern __shared__ float4 stage[];",
                            'float4* stage = simt::shared<float4>("stage", simt::dyn_smem / 16);')
    # the PTX wrappers of each path the point takes go: simt.h defines them for the host
    q = p.canonical() if p is not None else None
    wrapped = {
        "bulk-copy PTX (sm_90)": q is not None and q.bulk > 0,
        "staged-row PTX (sm_80)": q is not None and q.staged > 0,
        "cluster-barrier PTX (sm_90)": q is not None and q.cluster > 1 and not q.spread,
        "spread-group PTX": q is not None and q.spread,
        "tagged-slot PTX": q is not None and q.pipeline,
        "cluster-push PTX (sm_90)": q is not None and q.push,
        "vector-store PTX": q is not None and q.ptx_stores,
    }
    for section, present in wrapped.items():
        name = section.split(" PTX")[0]
        source, count = re.subn(rf"// ---- {re.escape(section)} ----\n.*?// ---- end of "
                                rf"{re.escape(name)} PTX ----\n", "", source, flags=re.S)
        assert count == int(present), (section, count)
    # group 0's counter starts two reductions short of wrapping round 2^32, and a pipelined
    # group's tags three rounds short of it
    source = source.replace("unsigned spread_count[SPREAD_GROUPS];",
                            "unsigned spread_count[SPREAD_GROUPS] = {0u - 2u * CL};")
    source = source.replace("unsigned spread_epoch[SPREAD_GROUPS];",
                            "unsigned spread_epoch[SPREAD_GROUPS] = {0u - 3u};")
    # the PTX of the no-allocate loads has no host meaning: an aligned load stands in for it
    source, count = re.subn(r"__device__ __forceinline__ float\d? ld_na\(.*?return v; \}\n",
                            "", source, flags=re.S)
    assert count in (0, 3)
    if count:
        source = source.replace("// an earlier pass's read", "template <typename T> T ld_na("
                                "const T* p) { return __ldg(p); }\n// an earlier pass's read")
    (work / "kernel.cpp").write_text(source)
    binary = work / "run"
    done = subprocess.run(
        [gxx, *gxx_flags(p is None), "-include", str(HEADERS[p is None]), "-Winvalid-pch",
         str(work / "kernel.cpp"), str(MAIN_OBJECTS[p is None]), "-o", str(binary)],
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return binary


def inputs(dist: str, rows: int, cols: int, rng: random.Random) -> np.ndarray:
    """The case's x, drawn from ``rng``, as float32: what the kernel reads."""
    if dist == "constant":
        return np.full(rows * cols, 3.0, dtype=np.float32)
    if dist == "large":
        x = [rng.uniform(-1e4, 1e4) for _ in range(rows * cols)]
    else:
        x = [rng.gauss(0.0, 1.0) for _ in range(rows * cols)]
    if dist == "neg_inf":
        for r in range(rows):
            for c in range(cols):
                if c != r % cols and rng.random() < 0.125:
                    x[r * cols + c] = -math.inf
    return np.asarray(x, dtype=np.float32)


def run(binary: Path, p: SoftmaxParams, rows: int, cols: int, x: np.ndarray, xoff: int,
        yoff: int, work: Path, units: int | None = None) -> np.ndarray:
    """``units``: launch that many row units instead of the launch's (a grid-stride loop)."""
    launch = FAMILY.launch(p, Dims({"rows": rows, "cols": cols}))
    assert isinstance(launch, LaunchConfig)
    if units is not None:
        launch = replace(launch, grid=(units * p.cluster, 1, 1))
    (work / "x.bin").write_bytes(x.tobytes())
    done = subprocess.run(
        [str(binary), str(rows), str(cols), str(xoff), str(yoff), str(launch.grid[0]),
         str(launch.block[0]), str(p.cluster), str(work / "x.bin"), str(work / "y.bin"),
         str(launch.dynamic_smem_bytes)],
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    return np.frombuffer((work / "y.bin").read_bytes(), dtype=np.float32)


def judge(x: np.ndarray, y: np.ndarray, rows: int, cols: int) -> tuple[float, float]:
    """Worst |y - ref| / (ref + 1/n) and the norm-relative error, ref the float64 softmax of
    each row and n its entries above -inf; NaN/Inf fail, and so does a -inf entry's y that is
    not exactly 0."""
    xs = x.astype(np.float64).reshape(rows, cols)
    got = y.astype(np.float64).reshape(rows, cols)
    for r, c in np.argwhere(~np.isfinite(got))[:1]:
        raise AssertionError((int(r), int(c), float(got[r, c])))
    for r, c in np.argwhere((xs == -np.inf) & (got != 0.0))[:1]:
        raise AssertionError((int(r), int(c), float(got[r, c])))
    e = np.exp(xs - xs.max(axis=1, keepdims=True))
    ref = e / e.sum(axis=1, keepdims=True)
    n = (xs > -np.inf).sum(axis=1, keepdims=True)
    worst = float((np.abs(got - ref) / (ref + 1.0 / n)).max())
    return worst, math.sqrt(float(((got - ref) ** 2).sum() / (ref * ref).sum()))


def shapes(p: SoftmaxParams) -> list[tuple[int, int]]:
    out = [(1, 1), (7, 33), (3, 4098), (2 * p.rows_per_cta + 1, 67)]
    if p.passes == 1:
        out += [(3, p.capacity - 3), (2, p.capacity + 1), (2, p.capacity + p.vec + 1)]
    else:
        out.append((2, 3 * p.group_threads * p.vec * p.unroll + 5))
    return [(r, c) for r, c in dict.fromkeys(out) if c >= 1]


#: (rows, cols, distribution, x offset, y offset, row units or None)
Case = tuple[int, int, str, int, int, int | None]


def check_cases(binary: Path, p: SoftmaxParams, cases: list[Case], rng: random.Random,
                tmp_path: Path) -> None:
    """Run ``binary`` on each ``(rows, cols, dist, xoff, yoff, units)`` case (``units``: the
    grid's row units, None for the launch's own) and hold its output to the float64 rule."""
    for rows, cols, dist, xoff, yoff, units in cases:
        x = inputs(dist, rows, cols, rng)
        y = run(binary, p, rows, cols, x, xoff, yoff, tmp_path, units)
        worst, norm = judge(x, y, rows, cols)
        assert worst <= TOL, (rows, cols, dist, xoff, yoff, units, worst)
        assert norm <= TOL, (rows, cols, dist, xoff, yoff, units, norm)


@pytest.mark.parametrize("name", list(POINTS))
def test_kernel_on_the_host(name: str, gxx: str, tmp_path: Path) -> None:
    p = POINTS[name]
    assert FAMILY.validate(p) is None
    binary = build(gxx, p, tmp_path)
    rng = random.Random(zlib.crc32(name.encode()))
    cases: list[Case] = [(r, c, "normal", 0, 0, None) for r, c in shapes(p)]
    cases += [(5, 4098, d, 0, 0, None) for d in ("large", "neg_inf", "constant")]
    # a misaligned base (same for x and y), and x and y aligned differently
    cases += [(3, 1027, "normal", 1, 1, None), (3, 1027, "neg_inf", 3, 1, None),
              (2, 70, "normal", 2, 0, None)]
    check_cases(binary, p, cases, rng, tmp_path)


@pytest.mark.parametrize("name", list(MAX_FIRST_POINTS))
def test_max_first_kernel_on_the_host(name: str, gxx: str, tmp_path: Path) -> None:
    """The max reduced first, then the sum (the cross-warp folds double-buffered, two a row),
    and the vector stores as PTX: every shape class of the plain test, the held capacity's
    edges and its fallback, -inf entries, misaligned rows, x and y aligned differently, and
    grids smaller than the rows (each CTA on many rows: the folds' buffers reused)."""
    p = MAX_FIRST_POINTS[name]
    assert FAMILY.validate(p) is None
    assert p.canonical() == p
    binary = build(gxx, p, tmp_path)
    rng = random.Random(zlib.crc32(name.encode()))
    cases: list[Case] = [(r, c, "normal", 0, 0, None) for r, c in shapes(p)]
    cases += [(5, 4098, d, 0, 0, None) for d in ("large", "neg_inf", "constant")]
    cases += [(3, 1027, "normal", 1, 1, None), (3, 1027, "neg_inf", 3, 1, None),
              (2, 70, "normal", 2, 0, None), (4 * p.rows_per_cta + 3, 131, "neg_inf", 1, 1, 1),
              (3 * p.rows_per_cta + 1, 67, "large", 0, 0, 2)]
    if p.passes == 1:
        cases += [(5, p.capacity, "neg_inf", 0, 0, 1), (3, p.capacity - 1, "large", 1, 0, 2)]
    check_cases(binary, p, cases, rng, tmp_path)


@pytest.mark.parametrize("name", list(ALIGNED_POINTS))
def test_aligned_and_one_pass_grid_kernels_on_the_host(name: str, gxx: str,
                                                       tmp_path: Path) -> None:
    """Rows of whole vectors from their start (the vector path without a head or tail) at
    cols % vec == 0 with x and y aligned, and the scalar path the kernel takes instead for cols
    % vec != 0, a misaligned base (the same for x and y) and x, y aligned differently; the
    held capacity's edges and its two-pass fallback; rows not a multiple of the rows a CTA
    packs; a grid of a CTA a row unit (one_pass_grid: the launch's own grid only), else grids
    smaller than the rows too; every distribution."""
    p = ALIGNED_POINTS[name]
    assert FAMILY.validate(p) is None
    assert p.canonical() == p
    source = FAMILY.render(p)
    assert ("for (long long base" in source) != p.one_pass_grid
    assert ("#define EXTRA 0" in source) == p.aligned_rows
    binary = build(gxx, p, tmp_path)
    rng = random.Random(zlib.crc32(name.encode()))
    rpc, v = p.rows_per_cta, p.vec
    cap = p.capacity or 3 * p.group_threads * p.vec * p.unroll
    whole = cap // (4 * v) * 4 * v   # a multiple of 4 and of the width, within the capacity
    cases: list[Case] = [(r, c, "normal", 0, 0, None) for r, c in shapes(p)]
    cases += [
        (2 * rpc + 1, whole, "normal", 0, 0, None), (3 * rpc + 2, 64, "neg_inf", 0, 0, None),
        (rpc + 1, cap, "large", 0, 0, None), (5, 4096, "constant", 0, 0, None),
        (2, cap + 4 * v, "normal", 0, 0, None), (3, 1024, "neg_inf", 1, 1, None),
        (2, 1024, "normal", 0, 2, None), (3, 1027, "large", 0, 0, None),
        (2 * rpc + 1, 4 * v + 2, "normal", 3, 3, None), (1, 4, "normal", 0, 0, None)]
    if not p.one_pass_grid:
        cases += [(4 * rpc + 3, 128, "neg_inf", 0, 0, 1), (3 * rpc + 1, whole, "large", 0, 0, 2)]
    check_cases(binary, p, cases, rng, tmp_path)


def bulk_cases(p: SoftmaxParams) -> list[tuple[int, int, str, int, int]]:
    """Rows of every length class for a bulk-copy point: under a vector, under one vector a
    CTA of the cluster (empty slices), a tail, cols % 4 != 0 (misaligned rows, rows sharing a
    vector), more rows than a CTA packs, misaligned x (and y aligned unlike it), and one row
    past the shared memory a CTA may have (the two-pass fallback)."""
    q = p.canonical()
    rpc = q.rows_per_cta
    past = BULK_SMEM_CAP // 4 * q.cluster // rpc + 64
    return [(1, 1, "normal", 0, 0), (3, 3, "neg_inf", 1, 1), (2, 5 * q.cluster, "normal", 0, 0),
            (2 * rpc + 1, 67, "large", 0, 0), (rpc + 3, 1027, "neg_inf", 3, 3),
            (rpc, 4098, "constant", 2, 2), (3, 1030, "normal", 1, 0), (3, 777, "neg_inf", 0, 2),
            (max(1, rpc // 2), 4096 * q.cluster + 4, "normal", 0, 0),
            (1, past, "normal", 1, 1)]


@pytest.mark.parametrize("name", list(BULK_POINTS))
def test_bulk_kernel_on_the_host(name: str, gxx: str, tmp_path: Path) -> None:
    """The bulk-copy kernel's tiles (slices of a row over a cluster, packed rows), its pieces
    and their mbarrier phases, the partial vectors at a tile's ends, masked rows, x and y
    aligned differently, the fallback past the shared memory, and a grid smaller than the rows
    (every CTA on several tiles: the phases' parity flips)."""
    p = BULK_POINTS[name]
    assert FAMILY.validate(p) is None
    binary = build(gxx, p, tmp_path)
    rng = random.Random(zlib.crc32(name.encode()))
    rpc = p.canonical().rows_per_cta
    cases: list[Case] = [(*c, None) for c in bulk_cases(p)]
    cases += [(5 * rpc + 1, 131, "neg_inf", 1, 1, 2), (4 * rpc + 3, 36, "normal", 0, 0, 1)]
    for rows, cols, *_ in cases:
        launch = FAMILY.launch(p, Dims({"rows": rows, "cols": cols}))
        assert isinstance(launch, LaunchConfig)
        assert (launch.dynamic_smem_bytes > 0) == (cols * rpc < BULK_SMEM_CAP // 4 * p.cluster)
    check_cases(binary, p, cases, rng, tmp_path)


@pytest.mark.parametrize("name", list(PUSH_POINTS))
def test_push_kernel_on_the_host(name: str, gxx: str, tmp_path: Path) -> None:
    """A cluster's partials pushed into each CTA's shared memory on mbarriers: one reduction a
    row, two (three passes), and grids smaller than the rows, so that each CTA runs several
    reductions and both mbarriers go through several phases."""
    p = PUSH_POINTS[name]
    assert FAMILY.validate(p) is None
    binary = build(gxx, p, tmp_path)
    rng = random.Random(zlib.crc32(name.encode()))
    cases: list[Case] = [
        (1, 1, "normal", 0, 0, None), (3, 5 * p.cluster, "neg_inf", 1, 1, None),
        (5, 4098, "large", 0, 0, None), (9, 131, "neg_inf", 1, 1, 2),
        (7, 1030, "normal", 0, 2, 1), (6, 777, "constant", 0, 0, 4)]
    check_cases(binary, p, cases, rng, tmp_path)


@pytest.mark.parametrize("name", list(SPREAD_POINTS))
def test_spread_kernel_on_the_host(name: str, gxx: str, tmp_path: Path) -> None:
    """A row's CTAs meeting through global memory: one reduction a row, two (three passes),
    the two-pass fallback past a one-pass point's capacity, and grids smaller than the rows, so
    that a group runs many reductions on its counter (group 0's wrapping round 2^32) and both
    halves of its partials' buffer."""
    p = SPREAD_POINTS[name]
    assert FAMILY.validate(p) is None
    launch = FAMILY.launch(p, Dims({"rows": 9, "cols": 131}))
    assert isinstance(launch, LaunchConfig)
    assert (launch.persistent, launch.group, launch.cluster_size) == (True, p.cluster, 1)
    binary = build(gxx, p, tmp_path)
    rng = random.Random(zlib.crc32(name.encode()))
    cap = p.capacity or 2 * p.group_threads * p.vec
    cases: list[Case] = [
        (1, 1, "normal", 0, 0, None), (3, 5 * p.cluster, "neg_inf", 1, 1, None),
        (5, 4098, "large", 0, 0, None), (9, 131, "neg_inf", 1, 1, 2),
        (7, 1030, "normal", 0, 2, 1), (6, 777, "constant", 0, 0, 4),
        (4, cap, "normal", 0, 0, 1), (3, cap + 1, "large", 1, 1, 1)]
    check_cases(binary, p, cases, rng, tmp_path)


@pytest.mark.parametrize("name", list(PREFETCH_POINTS))
def test_prefetch_kernel_on_the_host(name: str, gxx: str, tmp_path: Path) -> None:
    """Tiles held in registers while the next one is copied into the stage: grids of one and
    two row units (each CTA on many tiles, the copies of the next tile issued while this one
    is reduced), the launch's own grid, rows that fill the held capacity exactly and rows one
    vector past it (the plain bulk-copy path), misaligned x, and y aligned unlike x. The
    host's copies land at once, so a copy issued before every thread has read its tile would
    show here as a wrong row."""
    p = PREFETCH_POINTS[name]
    assert FAMILY.validate(p) is None
    assert p.canonical() == replace(p, passes=2)
    binary = build(gxx, p, tmp_path)
    rng = random.Random(zlib.crc32(name.encode()))
    q = p.canonical()
    cap = q.chunks * q.row_threads * q.cluster * 4   # floats a row unit holds, aligned
    rpc = q.rows_per_cta
    assert held_fits(q, cap)
    assert not held_fits(q, cap + 4)
    launch = FAMILY.launch(q, Dims({"rows": 3 * rpc, "cols": cap}))
    assert isinstance(launch, LaunchConfig)
    assert launch.persistent
    launch = FAMILY.launch(q, Dims({"rows": 3 * rpc, "cols": cap + 4}))
    assert isinstance(launch, LaunchConfig)
    assert not launch.persistent
    cases: list[Case] = [
        (5 * rpc + 1, cap, "normal", 0, 0, 1), (4 * rpc + 3, cap, "neg_inf", 0, 0, 2),
        (3 * rpc, cap - 5, "large", 1, 1, 2), (2 * rpc + 1, cap - 2, "normal", 3, 1, 1),
        (3 * rpc + 2, 67, "constant", 2, 2, 2), (1, 1, "normal", 0, 0, None),
        (2 * rpc, cap, "neg_inf", 0, 0, None), (3 * rpc, cap + 4, "normal", 0, 0, 2),
        (rpc + 1, cap + 1, "large", 1, 1, 1), (2, 5 * q.cluster, "normal", 0, 2, 1)]
    check_cases(binary, p, cases, rng, tmp_path)


@pytest.mark.parametrize("name", list(STAGED_POINTS))
def test_staged_kernel_on_the_host(name: str, gxx: str, tmp_path: Path) -> None:
    """Part of the row in shared memory: rows that fill the registers and the staged vectors
    exactly, rows shorter than the registers' part, one vector past the capacity (the two-pass
    fallback), misaligned rows and x, y aligned unlike x (the scalar path's staged slots),
    -inf entries, and grids smaller than the rows (the slots reused row after row)."""
    p = STAGED_POINTS[name]
    assert FAMILY.validate(p) is None
    binary = build(gxx, p, tmp_path)
    rng = random.Random(zlib.crc32(name.encode()))
    cap = p.capacity
    launch = FAMILY.launch(p, Dims({"rows": 3, "cols": cap}))
    assert isinstance(launch, LaunchConfig)
    assert launch.dynamic_smem_bytes == p.staged * p.block_threads * p.vec * 4
    cases: list[Case] = [
        (3, cap, "normal", 0, 0, None), (2, cap - 3, "neg_inf", 1, 1, None),
        (3, cap // 3, "large", 0, 0, None), (2, cap + 1, "normal", 0, 0, None),
        (5, cap - p.vec, "constant", 2, 2, 1), (4, cap, "neg_inf", 0, 0, 1),
        (3, cap - 1, "normal", 1, 0, 2), (1, 1, "normal", 0, 0, None),
        (2 * p.rows_per_cta + 1, 67, "large", 3, 3, None)]
    check_cases(binary, p, cases, rng, tmp_path)


def test_points_cover_every_path() -> None:
    points = list(POINTS.values())
    assert {p.passes for p in points} == {1, 2, 3}
    assert {p.cluster for p in points} == {1, 2, 4, 8}
    assert {p.vec for p in points} == {1, 2, 4}
    assert {p.load_hint for p in points} == {0, 1, 2, 3}
    assert any(p.row_threads > 32 and p.rows_per_cta > 1 for p in points)
    assert any(p.row_threads < 32 for p in points)
    assert replace(FAMILY.baseline) in points


@pytest.mark.parametrize(("rows", "cols"), [(8192, 8192), (4096, 32768), (256, 262144),
                                            (3, 1000003)])
def test_planned_points_on_the_host(rows: int, cols: int, gxx: str, tmp_path: Path) -> None:
    """The rule book's plans for long rows (CTAs of 512 and 1024 threads, clusters of 2 and 16,
    the two-pass point past every capacity) at their capacity's edges, misaligned. The two-pass
    plan (16 CTAs of 1024 threads: 16384 fibers) runs its row past three strides only."""
    p = plan(rows, cols)
    binary = build(gxx, p, tmp_path)
    rng = random.Random(cols)
    cap = p.capacity or 3 * p.group_threads * p.vec * p.unroll
    cases: list[Case] = [(1, cap + 1, "normal", 0, 0, None)]
    if p.passes == 1:
        cases += [(1, cap - 3, "neg_inf", 1, 1, None), (2, 4099, "large", 2, 0, None)]
    check_cases(binary, p, cases, rng, tmp_path)


def test_reference_on_the_host(gxx: str, tmp_path: Path) -> None:
    """The float64 reference kernel: ref within 1e-12 of a Python float64 softmax, scale =
    ref + 1/n with n the row's entries above -inf, -inf entries exactly 0, over rows past one
    CTA's stride and all distributions."""
    binary = build(gxx, None, tmp_path)
    rng = random.Random(5)
    for rows, cols, dist in ((1, 1, "normal"), (3, 1000, "neg_inf"), (2, 4099, "large"),
                             (4, 300, "constant"), (5, 7, "neg_inf")):
        x32 = inputs(dist, rows, cols, rng)
        x = x32.tolist()
        launch = FAMILY.reference_launch(Dims({"rows": rows, "cols": cols}))
        (tmp_path / "x.bin").write_bytes(x32.tobytes())
        done = subprocess.run(
            [str(binary), str(rows), str(cols), "0", "0", str(launch.grid[0]),
             str(launch.block[0]), "1", str(tmp_path / "x.bin"), str(tmp_path / "r.bin")],
            capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        data = (tmp_path / "r.bin").read_bytes()
        out = struct.unpack(f"{2 * rows * cols}d", data)
        ref, scale = out[:rows * cols], out[rows * cols:]
        for r in range(rows):
            row = x[r * cols:(r + 1) * cols]
            m = max(row)
            e = [math.exp(v - m) for v in row]
            total = sum(e)
            n = sum(v > -math.inf for v in row)
            for c in range(cols):
                want = e[c] / total
                got = ref[r * cols + c]
                assert abs(got - want) <= 1e-12 * max(want, 1e-300), (rows, cols, dist, r, c)
                if row[c] == -math.inf:
                    assert got == 0.0
                assert scale[r * cols + c] == pytest.approx(got + 1.0 / n, rel=1e-12)
