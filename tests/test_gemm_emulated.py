"""The GEMM's bf16 kernels that copy their stages from a split workspace, run on the host thread
by thread (``tests/simt/gemm.h``): the split pass's and the split made on demand (slices claimed
by atomics, counters read sixteen tiles at once, stages copied once both blocks are whole; the
whole grid at once, and one CTA after another), one tile a CTA and stream-K (runs over part and
whole tiles, the fix-up after), tails in M, N and K, rows of A not 16-byte aligned, against
float64 with the family's scaled rule. The mbarriers, bulk copies and wgmma's
shared-memory layout are the host's stand-ins: the pass's kernels, correct on the H200
(tests/test_gpu_wgmma.py), are checked here first, so a stand-in that read the layout wrong
fails on them too. Not a timing, and not the memory model (the async proxy's ordering, acquire
and release across SMs): the GPU tests judge those."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from bf16_points import (
    BF3_ACCUMULATE,
    BF3_ON_DEMAND,
    BF3_ON_DEMAND_SK,
    BF3_PASS,
    BF3_STREAM_K,
    BF3_WIDE,
)
from simt_support import SIMT, precompiled

from kernels.base import DEFAULT_SM_COUNT, LaunchConfig
from kernels.gemm_bias_relu import FAMILY, GemmParams
from kernels.gemm_bias_relu.launch import SK_FIXUP_NAME, SPLIT_PASS_NAME, SPLIT_RESET_NAME
from kernels.gemm_bias_relu.shape import Shape

#: the worst element error over Σ|a·b| + |bias| each scheme is held to (as on the GPU)
BOUND = {3: 3e-5, 6: 3e-6}
#: the PTX wrappers the host replaces (tests/simt/gemm.h defines them)
WRAPPERS = ("bf_pack", "bf_st_shared4", "bf_wg_fence", "bf_wg_commit", "bf_wg_wait",
            "bf_proxy_fence", "bf_mbar_init", "bf_mbar_arrive", "bf_mbar_wait",
            "bf_mbar_expect_tx", "bf_bulk_copy", "bf_wgmma", "od_ld_relaxed", "od_add_release",
            "od_fence_acquire", "od_proxy_fence")
#: the pass's kernels (GPU-checked: the stand-ins' check) and the on-demand split's, every
#: tile and scheme; no shape-specialized kernel (its shape is 4096³)
POINTS = {
    "pass, 128 x 128": BF3_PASS,
    "pass, 64 x 64, bf16x6": replace(BF3_PASS, block_y=1, wgmma=64, bf16_split=6,
                                     stages=1).canonical(),
    "on demand, 128 x 128": BF3_ON_DEMAND,
    "on demand, 64 x 128": replace(BF3_ON_DEMAND, block_y=1).canonical(),
    "on demand, 128 x 64, swizzle 8": replace(BF3_ON_DEMAND, wgmma=64, swizzle=8).canonical(),
    "on demand, 64 x 64, one stage": replace(BF3_ON_DEMAND, block_y=1, wgmma=64,
                                             stages=1).canonical(),
    "on demand, bf16x6": replace(BF3_ON_DEMAND, bf16_split=6, stages=1).canonical(),
    "on demand, two producer warpgroups": replace(BF3_ON_DEMAND, producers=2).canonical(),
    "pass, stream-K": BF3_STREAM_K,
    "pass, 64 x 64, stream-K with a whole wave": replace(BF3_STREAM_K, stream_k=2, block_y=1,
                                                         wgmma=64).canonical(),
    "on demand, stream-K, swizzle 8": replace(BF3_ON_DEMAND_SK, swizzle=8).canonical(),
    "on demand, 64 x 64, stream-K": replace(BF3_ON_DEMAND_SK, block_y=1, wgmma=64).canonical(),
    "on demand, two producer warpgroups, stream-K with a whole wave":
        replace(BF3_ON_DEMAND_SK, producers=2, stream_k=2).canonical(),
    "pass, accumulating in the MMAs": BF3_ACCUMULATE,
    "pass, 128 x 256": BF3_WIDE,
    "pass, 64 x 256, bf16x3": replace(BF3_WIDE, block_y=1).canonical(),
    "pass, 128 x 256, stream-K": replace(BF3_WIDE, stream_k=1).canonical(),
    "on demand, accumulating in the MMAs": replace(BF3_ON_DEMAND, mma_accumulate=True)
        .canonical(),
    "pass, accumulating in the MMAs, stream-K with a whole wave":
        replace(BF3_ACCUMULATE, stream_k=2, swizzle=8).canonical(),
}
#: M, N, K: tails in all three with rows of A 16-byte aligned (K % 4 == 0), and not; and how
#: many CTAs run at once: the whole grid (the CTAs that share a block claim its slices and wait
#: on each other's, as a wave does on the GPU), then one after another (a CTA alone splits
#: every slice it needs)
SHAPES = ((Shape(200, 300, 332), 0), (Shape(130, 70, 201), 1))
#: the SMs stream-K's grid is sized for at each shape, so that the points' runs are parts of
#: one tile, cross from a part into the next tile, hold part, whole and part tiles (64 x 64,
#: a whole wave in the stream-K row), or are all empty (64 x 64 at the second shape: the whole
#: waves take every tile)
SK_SMS = {Shape(200, 300, 332): 7, Shape(130, 70, 201): 3}


def emulated_source(p: GemmParams) -> str:
    """The rendered kernel with its PTX wrappers and inline PTX taken out and its shared
    arrays in the host's arena."""
    source = FAMILY.render(p)
    for name in WRAPPERS:
        # the host's wgmma takes the instruction's N from the kernel's BN
        host = ("inline void bf_wgmma(float* d, uint64_t a, uint64_t b, int accumulate) "
                "{ simt_wgmma<BN>(d, a, b, accumulate); }\n" if name == "bf_wgmma" else "")
        source, count = re.subn(
            rf"(?:template <int N_>\n)?__device__ __forceinline__ [^\n(]*\b{name}\("
            rf"(?:[^\n]*\}}\n|.*?\n\}}\n)", host.replace("\\", "\\\\"), source, count=1,
            flags=re.S)
        assert count == (1 if p.split_on_demand or not name.startswith("od_") else 0), name
    for statement in ('asm volatile("fence.mbarrier_init.release.cluster;\\n" ::: "memory");',
                      'asm volatile("" : "+f"(part[i]) :: "memory");'):
        # (a kernel accumulating in its MMAs has no partial sums to promote)
        assert statement in source or (p.mma_accumulate and "part" in statement), statement
        source = source.replace(statement, "")
    source = re.sub(r'asm volatile\("setmaxnreg\.\w+\.sync\.aligned\.u32 \d+;\\n"\);', "",
                    source)
    source = source.replace("extern __shared__ __align__(16) unsigned char bf_smem_raw[];",
                            "unsigned char* bf_smem_raw = gemm::dynamic_shared();")
    source = source.replace("__shared__ __align__(8) uint64_t bf_bars[2 * NBUF];",
                            'uint64_t* bf_bars = gemm::static_shared<uint64_t>("bf_bars", '
                            "2 * NBUF);")
    # the pass's B tile (its columns a part at a time where the tile is wide)
    source = re.sub(r"__shared__ float b_tile\[BK\]\[(\w+) \+ 1\];",
                    lambda m: f"auto b_tile = reinterpret_cast<float (*)[{m[1]} + 1]>("
                              f'gemm::static_shared<float>("b_tile", BK * ({m[1]} + 1)));',
                    source)
    assert "asm" not in source
    assert "__shared__" not in source
    return source


@pytest.fixture(scope="module")
def launcher(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path, list[str]]:
    """g++, the host launcher compiled once (gemm_main.cpp with gemm.h) and the flags of every
    build, which include a copy of ``gemm.h`` precompiled once a module with them
    (:func:`simt_support.precompiled`)."""
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("g++ is not on PATH")
    folder = tmp_path_factory.mktemp("gemm-main")
    base = ["-std=c++20", "-O2", f"-I{SIMT / 'inc'}", f"-I{SIMT}"]  # gemm.h's "simt.h"
    header = precompiled(gxx, "gemm.h", base, folder)
    flags = [*base, "-include", str(header), "-Winvalid-pch"]
    obj = folder / "main.o"
    done = subprocess.run([gxx, *flags, "-c", str(SIMT / "gemm_main.cpp"), "-o", str(obj)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return gxx, obj, flags


def run(gxx: str, main: Path, p: GemmParams, shape: Shape, together: int, work: Path,
        rng: np.random.Generator) -> tuple[np.ndarray, list[np.ndarray]]:
    """C from the emulated launch of ``p`` at ``shape`` (its prologue first; ``together`` of
    the GEMM's CTAs at once, 0: all; the stream-K fix-up after it), and the inputs. Stream-K
    sizes its grid for a GPU of :data:`SK_SMS` SMs."""
    launch = FAMILY.launch(p, shape, sm_count=SK_SMS[shape] if p.stream_k else DEFAULT_SM_COUNT)
    assert isinstance(launch, LaunchConfig)
    assert launch.prologue is not None
    kind = {SPLIT_PASS_NAME: "pass", SPLIT_RESET_NAME: "reset"}[launch.prologue.kernel_name]
    assert launch.epilogue is None or launch.epilogue.kernel_name == SK_FIXUP_NAME
    a = rng.standard_normal((shape.m, shape.k)).astype(np.float32)
    b = rng.standard_normal((shape.k, shape.n)).astype(np.float32)
    bias = rng.standard_normal(shape.n).astype(np.float32)
    (work / "in.bin").write_bytes(a.tobytes() + b.tobytes() + bias.tobytes())
    done = subprocess.run(
        [str(work / "run"), *(str(v) for v in (shape.m, shape.n, shape.k, *launch.grid[:2],
                                                 *launch.block[:2], launch.dynamic_smem_bytes,
                                                 kind, launch.prologue.grid[0],
                                                 launch.workspace_bytes)),
         str(work / "in.bin"), str(work / "out.bin"),
         str(together or launch.grid[0] * launch.grid[1]),
         str(launch.epilogue.grid[0] if launch.epilogue is not None else 0)],
        capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    c = np.frombuffer((work / "out.bin").read_bytes(), dtype=np.float32)
    return c.reshape(shape.m, shape.n), [a, b, bias]


@pytest.mark.parametrize("name", list(POINTS))
def test_split_workspace_kernels_compute_the_gemm_on_the_host(
        name: str, launcher: tuple[str, Path, list[str]], tmp_path: Path) -> None:
    gxx, main, flags = launcher
    p = POINTS[name]
    (tmp_path / "kernel.cpp").write_text(emulated_source(p))
    done = subprocess.run([gxx, *flags, str(tmp_path / "kernel.cpp"), str(main), "-o",
                           str(tmp_path / "run")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    rng = np.random.default_rng(17)
    for shape, together in SHAPES:
        c, (a, b, bias) = run(gxx, main, p, shape, together, tmp_path, rng)
        a64, b64, bias64 = a.astype(np.float64), b.astype(np.float64), bias.astype(np.float64)
        ref = np.maximum(a64 @ b64 + bias64, 0.0)
        scale = np.abs(a64) @ np.abs(b64) + np.abs(bias64)
        assert np.isfinite(c).all(), (name, str(shape))  # every element written
        worst = float((np.abs(c - ref) / scale).max())
        assert worst <= BOUND[p.bf16_split], (name, str(shape), worst)
