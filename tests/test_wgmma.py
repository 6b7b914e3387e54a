"""The wgmma 3xTF32 kernel without a GPU: its parameters, the transform and its rejections,
canonical points and keys, launch shapes, and every variant compiled by the real nvcc for
sm_90a with no spills (a stratified sample; all of them under ``--full``; the GPU side is
tests/test_gpu_wgmma.py)."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest
from sampling import sample_unless_full

from agent.policies.base import key_of
from kernels.base import Candidate, LaunchConfig, Rejection
from kernels.gemm_bias_relu import FAMILY, GemmParams
from kernels.gemm_bias_relu.params import DOMAINS, ws_launch_registers, ws_producer_registers
from kernels.gemm_bias_relu.shape import Shape
from kernels.gemm_bias_relu.space import enumerate_space
from kernels.gemm_bias_relu.validity import validate
from worker.compile import Compiler, compile_candidate

TC = GemmParams(tf32x3=True, block_x=64, block_y=4, tile_k=32, stages=2).canonical()
WG = GemmParams(tf32x3=True, wgmma=128, block_x=128, block_y=2, stages=2).canonical()


def variants() -> list[GemmParams]:
    """Every wgmma tile and buffer count, with swizzle, split-K and a specialized shape."""
    out = [replace(WG, wgmma=n, block_y=w, stages=s)
           for n in (64, 128) for w in (1, 2) for s in (1, 2)]
    out += [replace(WG, swizzle=4), replace(WG, split_k=4),
            replace(WG, shape_m=4096, shape_n=4096, shape_k=4096)]
    # B^T fragments from global memory: both tiles, one and two warpgroups, with split-K
    out += [replace(WG, wgmma=n, block_y=w, frag_global=True) for n in (64, 128) for w in (1, 2)]
    out += [replace(WG, frag_global=True, split_k=4, swizzle=4)]
    # MMAs in flight across K-tiles: windows 2 and 4, three and four buffers, both tiles, split-K
    out += [replace(WG, mma_window=w, swizzle=4) for w in (2, 4)]
    out += [replace(WG, mma_window=4, stages=1), replace(WG, mma_window=4, wgmma=64, block_y=1),
            replace(WG, mma_window=2, split_k=4)]
    return out


def test_the_transform_moves_a_tensor_core_kernel_to_wgmma_and_back() -> None:
    node = Candidate(TC)
    on = FAMILY.apply(node, "apply_wgmma(128)")
    assert isinstance(on, Candidate)
    assert (on.params.wgmma, on.params.block_x, on.params.block_y) == (128, 128, 2)
    assert on.params.tile_k == 32
    narrow = FAMILY.apply(Candidate(replace(TC, block_x=64, block_y=2)), "apply_wgmma(64)")
    assert isinstance(narrow, Candidate)
    assert (narrow.params.block_y, narrow.params.tc_block_m, narrow.params.tc_block_n) == (
        1, 64, 64)
    off = FAMILY.apply(on, "apply_wgmma(0)")
    assert isinstance(off, Candidate)
    assert off.params.wgmma == 0
    assert validate(off.params) is None


def test_rejections_name_the_problem() -> None:
    simt = Candidate(GemmParams(coalesced=True, smem=True, reg_m=8, reg_n=8, vec=4))
    rej = FAMILY.apply(simt, "apply_wgmma(128)")
    assert isinstance(rej, Rejection)
    assert rej.reason == "requires_tensor_cores"
    assert "apply_tf32x3(true)" in rej.message
    rej = FAMILY.apply(Candidate(WG), "change_block_config(64, 4)")
    assert isinstance(rej, Rejection)
    assert rej.reason == "warpgroup_layout"
    assert "(64, 4)" in rej.message
    arch = validate(WG, "sm_80")
    assert arch is not None
    assert arch.reason == "requires_sm90a"
    assert "sm_80" in arch.message
    off = validate(GemmParams(wgmma=64))
    assert off is not None
    assert off.reason == "requires_tensor_cores"
    with pytest.raises(ValueError, match="wgmma must be an integer"):
        GemmParams.from_dict({"tf32x3": True, "wgmma": True})
    assert validate(replace(WG, wgmma=96)) is not None  # outside the domain


def test_keys_of_older_points_are_unchanged_and_wgmma_points_are_distinct() -> None:
    assert "wgmma" not in TC.to_dict()
    assert "wgmma" not in FAMILY.baseline.to_dict()
    assert WG.to_dict()["wgmma"] == 128
    assert len({key_of(p) for p in variants()}) == len(variants())
    # fields the kernel does not read are canonical, so equal kernels have one key
    assert replace(WG, warp_m=64, tile_k=8).canonical() == WG


def test_launch_shapes_follow_the_tile() -> None:
    for p in variants():
        shape = Shape(4096, 4096, 4096)
        launch = FAMILY.launch(p, shape)
        assert not isinstance(launch, Rejection)
        assert launch.block == (128, p.block_y, 1)
        assert launch.grid[:2] == (-(-4096 // (64 * p.block_y)), -(-4096 // p.wgmma))
        assert launch.dynamic_smem_bytes == p.smem_bytes <= 232448
        assert p.smem_bytes % 1024 == 0


def test_the_space_holds_the_wgmma_path_on_hopper_only() -> None:
    tensor_cores = {**DOMAINS, "tf32x3": (True,)}  # the SIMT paths hold millions: left out
    hopper = [p for p in enumerate_space("sm_90", tensor_cores) if p.wgmma]
    # tiles x warpgroups x buffers x swizzle x splits x (B's fragments from shared memory with
    # the per-tile promotion, or two MMA windows in lockstep or with one or two producer
    # warpgroups; or from global memory with the per-tile promotion)
    tiles = 2 * 2 * 2 * 4 * 6
    tf32x3 = tiles * (1 + 2 * 3 + 1)
    # the bf16 splits: three windows in lockstep, two with one or two producers; lockstep
    # keeps stages + 2 stages of split tiles (bf16x3: 128x128 with four does not fit; bf16x6:
    # only 64x64 fits four, 64x128 and 128x64 three, 128x128 none), warp-specialized stages + 1
    # (bf16x6 128x128 with three does not fit)
    bf16x3 = tiles * 7 // 8 * 3 + tiles * 2 * 2
    bf16x6 = tiles * 4 // 8 * 3 + tiles * 7 // 8 * 2 * 2
    # the split pass: one producer, two windows, no split-K (its workspace holds the parts)
    # (and each of them in clusters of two)
    passes = 2 * (tiles // 6 * 2 + tiles // 6 * 7 // 8 * 2)
    assert len(hopper) == tf32x3 + bf16x3 + bf16x6 + passes
    assert len(set(hopper)) == len(hopper)
    assert not [p for p in enumerate_space("sm_80", tensor_cores) if p.wgmma]
    assert FAMILY.compile_arch(WG, "sm_90") == "sm_90a"
    assert FAMILY.compile_arch(TC, "sm_90") == "sm_90"


def test_every_variant_compiles_for_sm90a_without_spills(compiler: Compiler, full: bool) -> None:
    """Every variant under ``--full`` (``make test-full``); else a stratified sample: each value
    of each parameter, with and without ``setmaxnreg`` (the GPU tests run them all)."""
    points = sample_unless_full(
        variants(), full, lambda p: [("setmaxnreg", "setmaxnreg" in FAMILY.render(p))])
    with ThreadPoolExecutor(compiler.workers) as pool:  # nvcc runs outside the GIL
        results = list(pool.map(lambda p: compile_candidate(compiler, FAMILY, p), points))
    for p, r in zip(points, results, strict=True):
        assert r.status == "ok", (p, r.error)
        assert r.arch == "sm_90a"
        assert any("sm_90a" in f for f in r.flags)
        assert r.spill_bytes == 0, (p, r.spill_bytes)
        assert r.regs_per_thread is not None
        assert r.regs_per_thread <= 255
        assert "wgmma.mma_async" in FAMILY.render(p)


def test_the_mma_pipeline_keeps_mmas_in_flight_and_promotes_per_window() -> None:
    on = FAMILY.apply(Candidate(replace(WG, swizzle=4)), "apply_mma_pipeline(4)")
    assert isinstance(on, Candidate)
    p = on.params
    assert p.mma_window == 4
    assert p.to_dict()["mma_window"] == 4
    assert "mma_window" not in WG.to_dict()  # older wgmma points keep their keys
    assert p.smem_bytes == replace(WG, swizzle=4).smem_bytes  # registers, not shared memory
    source = FAMILY.render(p)
    # a commit group per k8 step, each set of fragment registers rewritten once the group four
    # back has retired (three left in flight)
    assert source.count("tf_wg_wait<BK / 8 - 1>();") == 1
    assert source.count("tf_wg_commit();") == 1
    # windows of 4 tiles unrolled (straight-line between promotions), the rest one at a time
    assert "constexpr int WINDOW = 4;" in source
    assert "tile(kt + t, t == 0, t == WINDOW - 1)" in source
    assert "tf_wg_wait<1>" not in FAMILY.render(WG)
    # not on the mma.sync kernel, not with global fragments
    mma = FAMILY.apply(on, "apply_wgmma(0)")
    assert isinstance(mma, Candidate)
    assert mma.params.mma_window == 1
    glob = FAMILY.apply(on, "apply_global_fragments(true)")
    assert isinstance(glob, Rejection)
    assert glob.reason == "mma_window_frag_global"
    assert isinstance(FAMILY.apply(Candidate(TC), "apply_mma_pipeline(2)"), Rejection)


def test_global_fragments_take_b_out_of_shared_memory() -> None:
    on = FAMILY.apply(Candidate(WG), "apply_global_fragments(true)")
    assert isinstance(on, Candidate)
    p = on.params
    assert p.frag_global
    assert p.to_dict()["frag_global"] is True
    assert "frag_global" not in WG.to_dict()  # older wgmma points keep their keys
    # the stage holds the big and small A tiles only: 2 x 128 x 32 x 4 bytes, 4 buffers + 1 KB
    assert p.smem_bytes == 4 * (2 * 128 * 32 * 4) + 1024 < WG.smem_bytes
    source = FAMILY.render(p)
    assert "load_frags(nb" in source
    assert "__ldg" in source
    assert "#define B_BYTES 0" in source
    assert "__ldg" not in FAMILY.render(WG)
    off = FAMILY.apply(on, "apply_global_fragments(false)")
    assert isinstance(off, Candidate)
    assert off.params == WG
    again = FAMILY.apply(on, "apply_global_fragments(true)")
    assert isinstance(again, Rejection)
    assert again.reason == "no_change"
    # leaving wgmma drops the field: the mma.sync kernel has no such choice
    mma = FAMILY.apply(on, "apply_wgmma(0)")
    assert isinstance(mma, Candidate)
    assert not mma.params.frag_global


def test_global_fragments_need_the_wgmma_kernel() -> None:
    rej = FAMILY.apply(Candidate(TC), "apply_global_fragments(true)")
    assert isinstance(rej, Rejection)
    assert rej.reason == "requires_wgmma"
    assert "apply_wgmma(128)" in rej.message
    raw = validate(replace(TC, frag_global=True))
    assert raw is not None
    assert raw.reason == "requires_wgmma"
    assert "wgmma is 0" in raw.message
    assert replace(TC, frag_global=True).canonical() == TC


def test_the_wgmma_ceiling_benchmark_compiles_every_variant(tmp_path: Path) -> None:
    """bench/wgmma_peak.py (the TF32 warpgroup-MMA ceiling docs/GPU.md quotes) builds its six
    kernels with the real nvcc for sm_90a, without spills."""
    done = subprocess.run([sys.executable, "bench/wgmma_peak.py", "--compile-only", "--cache",
                           str(tmp_path)], capture_output=True, text=True, timeout=600,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 6
    for form in ("RS", "SS"):
        for n in (64, 128, 256):
            line = next(ln for ln in lines if ln.startswith(f"{form} m64n{n}k8:"))
            assert line.endswith(", 0 spill bytes"), line


def test_warp_specialization_hands_the_copies_to_producer_warpgroups() -> None:
    window = FAMILY.apply(Candidate(WG), "apply_mma_pipeline(4)")
    assert isinstance(window, Candidate)
    on = FAMILY.apply(window, "apply_warp_specialization(2)")
    assert isinstance(on, Candidate)
    p = on.params
    assert p.producers == 2
    assert p.to_dict()["producers"] == 2
    assert "producers" not in window.params.to_dict()  # older points keep their keys
    # two consumer warpgroups (64 columns of C each) plus two producers: 512 threads
    launch = FAMILY.launch(p, Shape(4096, 4096, 4096))
    assert isinstance(launch, LaunchConfig)
    assert launch.block == (128, 4, 1)
    assert launch.grid == (32, 32, 1)
    assert p.threads == 512
    # stages + 3 stages of A and B as copied and three small-part buffers
    assert p.wg_buffers == p.stages + 3
    assert p.smem_bytes == 5 * (16384 + 32 * 136 * 4) + 3 * 16384 + 1024
    # registers: launched with 128 a thread; producers give 64 each to the consumers' 192
    assert ws_launch_registers(p.threads) == 128
    assert ws_producer_registers(2, 2) == 64
    assert ws_producer_registers(2, 1) == 120
    assert ws_producer_registers(1, 1) == 255  # no move needed
    source = FAMILY.render(p)
    assert "setmaxnreg.dec.sync.aligned.u32 64;" in source
    assert "setmaxnreg.inc.sync.aligned.u32 192;" in source
    assert source.count("mbarrier.try_wait.parity") == 1
    assert "__syncthreads();" in source  # once, after the barriers' init
    assert source.count("__syncthreads()") == 1
    # only on the in-flight pipeline of the wgmma kernel
    per_tile = FAMILY.apply(on, "apply_mma_pipeline(1)")
    assert isinstance(per_tile, Rejection)
    assert per_tile.reason == "requires_mma_pipeline"
    assert isinstance(FAMILY.apply(Candidate(TC), "apply_warp_specialization(1)"), Rejection)
    assert "setmaxnreg" not in FAMILY.render(window.params)


def test_warp_specialized_kernels_launch_with_the_registers_setmaxnreg_assumes(
        compiler: Compiler) -> None:
    """setmaxnreg.inc waits for registers the producers' dec returns: if ptxas launched the
    kernel with fewer registers than the arithmetic assumes, the consumers would wait forever."""
    base = replace(WG, mma_window=4)
    points = [replace(base, producers=n, block_y=w, stages=s, wgmma=t)
              for n in (1, 2) for w in (1, 2) for s in (1, 2) for t in (64, 128)]
    with ThreadPoolExecutor(compiler.workers) as pool:
        results = list(pool.map(lambda p: compile_candidate(compiler, FAMILY, p), points))
    for p, r in zip(points, results, strict=True):
        assert r.status == "ok", (p, r.error)
        assert r.spill_bytes == 0, (p.to_dict(), r.spill_bytes)
        if "setmaxnreg" in FAMILY.render(p):
            assert r.regs_per_thread == ws_launch_registers(p.threads), p.to_dict()
