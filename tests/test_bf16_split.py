"""The bf16x3 / bf16x6 precision split of the wgmma kernel without a GPU: the transform and its
rejections, keys of older points, shared memory and launch shapes, the rendered pipeline, and
the variants compiled by the real nvcc for sm_90a with bf16 HGMMA in its SASS and no spills (a
stratified sample; all of them under ``--full``; the GPU side is tests/test_gpu_wgmma.py)."""

from __future__ import annotations

import random
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from bf16_points import (
    BF3,
    BF3_ACCUMULATE,
    BF3_LOCKSTEP,
    BF3_ON_DEMAND,
    BF3_PASS,
    BF3_STAGED,
    BF3_WIDE,
    BF6,
    bf16_variants,
)
from sampling import sample_unless_full
from sass_support import cuobjdump

from agent.policies.base import key_of
from kernels.base import Candidate, LaunchConfig, Rejection
from kernels.gemm_bias_relu import FAMILY, GemmParams
from kernels.gemm_bias_relu.params import PRECISION_SCHEMES, ws_launch_registers
from kernels.gemm_bias_relu.shape import Shape
from kernels.gemm_bias_relu.validity import validate
from worker.compile import Compiler, compile_candidate

TF = replace(BF3, bf16_split=0).canonical()  # the tf32x3 kernel of the same pipeline


def test_the_transform_switches_the_scheme_and_back() -> None:
    assert PRECISION_SCHEMES == {"tf32x3": 0, "bf16x3": 3, "bf16x6": 6}
    on = FAMILY.apply(Candidate(TF), "apply_precision_split(3)")
    assert isinstance(on, Candidate)
    assert on.params == BF3
    assert on.params.tile_k == 64  # one 128-byte swizzle row of bf16
    # bf16x6 with two stages of three parts each (three of 96 KB do not fit)
    shallow = Candidate(replace(BF3, stages=1).canonical())
    six = FAMILY.apply(shallow, "apply_precision_split(6)")
    assert isinstance(six, Candidate)
    assert six.params.bf16_split == 6
    assert six.params.smem_bytes == 2 * 98304 + 1024
    back = FAMILY.apply(on, "apply_precision_split(0)")
    assert isinstance(back, Candidate)
    assert back.params == TF
    same = FAMILY.apply(on, "apply_precision_split(3)")
    assert isinstance(same, Rejection)
    assert same.reason == "no_change"
    # the SIMT and mma.sync kernels have no such choice
    mma = replace(TF, wgmma=0, block_x=64, block_y=4, mma_window=1, producers=0).canonical()
    rej = FAMILY.apply(Candidate(mma), "apply_precision_split(3)")
    assert isinstance(rej, Rejection)
    assert rej.reason == "requires_wgmma"
    # leaving wgmma leaves the scheme
    left = FAMILY.apply(Candidate(BF3_LOCKSTEP), "apply_wgmma(0)")
    assert isinstance(left, Candidate)
    assert left.params.bf16_split == 0


def test_bad_combinations_are_rejected_with_reasons() -> None:
    raw = validate(replace(BF3, frag_global=True))
    assert raw is not None
    assert raw.reason == "bf16_split_frag_global"
    assert raw.figures == {"bf16_split": 3, "frag_global": True}
    raw = validate(replace(BF3, wgmma=0))
    assert raw is not None
    assert raw.reason == "requires_wgmma"
    # bf16x6 in lockstep with 128 x 128 tiles: three stages of 96 KB do not fit
    fat = replace(BF6, producers=0).canonical()
    raw = validate(fat)
    assert raw is not None
    assert raw.reason == "smem_over_limit"
    assert raw.figures["smem_bytes"] == 3 * 96 * 1024 + 1024
    rej = FAMILY.apply(Candidate(replace(BF3, producers=0, stages=2).canonical()),
                       "apply_precision_split(6)")
    assert isinstance(rej, Rejection)
    assert rej.reason == "smem_over_limit"


def test_accumulating_in_the_mmas_and_the_wide_tile_name_what_they_need() -> None:
    raw = validate(replace(BF3, mma_accumulate=True).canonical())  # per-tile split
    assert raw is not None
    assert raw.reason == "mma_accumulate_split_workspace"
    assert raw.figures == {"mma_accumulate": True, "bf16_split": 3, "split_pass": False}
    for wide, wrong in ((replace(BF3_PASS, wgmma=256, stages=1), {"mma_accumulate": False}),
                        (replace(BF3_WIDE, bf16_split=6), {"bf16_split": 6}),
                        (replace(BF3_WIDE, split_on_demand=True), {"split_on_demand": True}),
                        (replace(TF, wgmma=256), None)):
        raw = validate(wide.canonical())
        assert raw is not None, wide
        assert raw.reason in ("wgmma_256_needs", "mma_accumulate_split_workspace"), raw
        if wrong is not None:
            assert raw.reason == "wgmma_256_needs"
            assert raw.figures == {"wgmma": 256, **wrong}
    # three stages of 96 KB do not fit
    raw = validate(replace(BF3_WIDE, stages=2).canonical())
    assert raw is not None
    assert raw.reason == "smem_over_limit"
    # valid, and not searched yet: apply_wgmma, the space's walk and the domains a search
    # draws from (Optuna's) take no 256
    assert validate(BF3_WIDE) is None
    assert FAMILY.transforms.get("apply_wgmma").args[0].choices == (0, 64, 128)
    assert FAMILY.domains()["wgmma"] == (0, 64, 128)
    assert not any(p.wgmma == 256 for p in FAMILY.sample(random.Random(3), 500, "sm_90"))
    # the window means nothing when the MMAs accumulate: one canonical point for all of them
    assert replace(BF3_ACCUMULATE, mma_window=2).canonical() == BF3_ACCUMULATE


def test_older_points_keep_their_keys_and_bf16_points_are_distinct() -> None:
    assert "bf16_split" not in TF.to_dict()
    assert BF3.to_dict()["bf16_split"] == 3
    keys = {key_of(p) for p in [TF, BF3, BF6, replace(BF3, bf16_split=6).canonical()]}
    assert len(keys) == 4
    assert FAMILY.source_hash(TF) != FAMILY.source_hash(BF3)


def test_launch_and_shared_memory_follow_the_tile() -> None:
    # block (128, W): W consumer warpgroups of 64 rows, the instruction's N columns
    launch = FAMILY.launch(BF3, Shape(4096, 4096, 4096))
    assert isinstance(launch, LaunchConfig)
    assert launch.block == (128, 4, 1)  # two consumers, two producers
    assert launch.grid == (32, 32, 1)
    assert (BF3.tc_block_m, BF3.tc_block_n) == (128, 128)
    wide = replace(BF3, block_y=1).canonical()
    assert (wide.tc_block_m, wide.tc_block_n) == (64, 128)
    launch = FAMILY.launch(wide, Shape(1000, 1002, 999))
    assert isinstance(launch, LaunchConfig)
    assert launch.grid == (8, 16, 1)
    # stages of split tiles: hi and lo of A (128 x 64 bf16) and B^T (128 x 64): 64 KB each;
    # warp-specialized stages + 1 of them, lockstep stages + 2; + 1 KB to align
    assert BF3.wg_buffers == 3
    assert BF3.smem_bytes == 3 * 65536 + 1024
    assert BF3_LOCKSTEP.wg_buffers == 3
    assert BF6.smem_bytes == 2 * 98304 + 1024
    assert FAMILY.compile_arch(BF3, "sm_90") == "sm_90a"


def test_the_rendered_kernel_splits_once_per_tile_and_issues_bf16_wgmma() -> None:
    source = FAMILY.render(BF3)
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16" in source
    assert "cvt.rn.bf16x2.f32" in source
    assert "#define PARTS 2" in source
    # three products a k16 step, lo·hi and hi·lo before hi·hi; promotion per window of 4
    assert source.count("bf_wgmma(part,") == 3
    assert "constexpr int WINDOW = 4;" in source
    # producers: two warpgroups at 96 registers, consumers 160 (launched at 128)
    assert "setmaxnreg.dec.sync.aligned.u32 96;" in source
    assert "setmaxnreg.inc.sync.aligned.u32 160;" in source
    assert source.count("__syncthreads()") == 1
    six = FAMILY.render(BF6)
    assert six.count("bf_wgmma(part,") == 6
    assert "#define PARTS 3" in six
    lock = FAMILY.render(BF3_LOCKSTEP)
    assert "setmaxnreg" not in lock
    assert "mbarrier" not in lock
    assert "constexpr int LOOK = NBUF - 2;" in lock
    # the tf32x3 template is untouched by the scheme
    assert "bf16" not in FAMILY.render(TF)


def test_the_on_demand_split_is_the_pass_made_by_the_gemm_itself() -> None:
    # a variant of the split pass without clusters, refused elsewhere with the fields named
    cases: list[tuple[GemmParams, dict[str, object]]] = [
        (replace(BF3, split_on_demand=True), {"split_pass": False}),
        (replace(BF3_ON_DEMAND, pass_cluster=2), {"pass_cluster": 2})]
    for bad, figures in cases:
        raw = validate(bad.canonical())
        assert raw is not None
        assert raw.reason == "split_on_demand_needs_split_pass"
        assert figures.items() <= raw.figures.items()
    # a late field: the pass's points keep their keys and bytes, the new one is distinct
    assert "split_on_demand" not in BF3_PASS.to_dict()
    assert BF3_ON_DEMAND.to_dict()["split_on_demand"] is True
    assert key_of(BF3_ON_DEMAND) != key_of(BF3_PASS)
    source, before = FAMILY.render(BF3_ON_DEMAND), FAMILY.render(BF3_PASS)
    assert "split_on_demand" not in before
    assert "od_wait" not in before
    # no pass kernel: the reset of the counters, the slices claimed by an atomic, their stores
    # published by a release, and the copying warp reading the counters of 16 tiles at once
    # (relaxed, then a fence: an acquire) before cp.async.bulk
    assert "gemm_bias_relu_split_pass(" not in source
    assert "gemm_bias_relu_split_reset(" in source
    assert "atomicAdd(claimed + block_of(v), 1u)" in source
    assert "red.release.gpu.global.add.u32" in source
    assert "fence.acq_rel.gpu" in source
    assert "__ballot_sync(0xffffffffu, ok)" in source
    assert "fence.proxy.async.global" in source
    assert "#define A_SLICES (BM * 8 / (32 * A_U))" in source
    # 4 KB of A's fp32 a slice, 8 KB of B's at 128 columns (4 KB at 64)
    assert "#define A_U 4" in source
    assert "#define B_U 8" in source
    narrow = FAMILY.render(replace(BF3_ON_DEMAND, block_y=1, wgmma=64).canonical())
    assert "#define B_U 4" in narrow


def test_staged_producers_copy_by_cp_async_into_a_staging_buffer() -> None:
    on = FAMILY.apply(Candidate(replace(BF3, stages=1).canonical()), "apply_async_copy(true)")
    assert isinstance(on, Candidate)
    assert on.params == BF3_STAGED
    # two stages of split tiles, and the fp32 tile one ahead (128 x 64 + 64 x 128 floats)
    assert BF3_STAGED.smem_bytes == 2 * 65536 + 4 * 64 * 256 + 1024
    source = FAMILY.render(BF3_STAGED)
    assert "cp.async.cg.shared.global" in source
    assert "stage_in(0);" in source
    assert "__ldg" not in source
    # not in lockstep (no producers), not where the staging does not fit
    rej = FAMILY.apply(Candidate(BF3_LOCKSTEP), "apply_async_copy(true)")
    assert isinstance(rej, Rejection)
    assert rej.reason == "bf16_async_copy_producers"
    rej = FAMILY.apply(Candidate(BF3), "apply_async_copy(true)")  # three stages + staging
    assert isinstance(rej, Rejection)
    assert rej.reason == "smem_over_limit"
    # the tf32x3 kernels still refuse it
    rej = FAMILY.apply(Candidate(TF), "apply_async_copy(true)")
    assert isinstance(rej, Rejection)
    assert rej.reason == "tensor_core_kernel"


def _sass_counts(sass: str) -> dict[str, int]:
    return {"HGMMA_BF16": len(re.findall(r"HGMMA\.64x\d+x16\.F32\.BF16", sass)),
            "HGMMA": len(re.findall(r"\bHGMMA\b", sass)),
            "HMMA": len(re.findall(r"\bHMMA\b", sass)),
            "LDL": len(re.findall(r"\bLDL\b", sass)), "STL": len(re.findall(r"\bSTL\b", sass))}


def test_every_variant_compiles_for_sm90a_with_bf16_hgmma_and_no_spills(
        compiler: Compiler, full: bool) -> None:
    """Every variant under ``--full`` (``make test-full``); else a stratified sample: each value
    of each parameter, with and without ``setmaxnreg`` (7 of 52)."""
    points = sample_unless_full(
        bf16_variants(), full, lambda p: [("setmaxnreg", "setmaxnreg" in FAMILY.render(p))])
    with ThreadPoolExecutor(compiler.workers) as pool:  # nvcc runs outside the GIL
        results = list(pool.map(lambda p: compile_candidate(compiler, FAMILY, p), points))
    tool = cuobjdump()
    for p, r in zip(points, results, strict=True):
        assert r.status == "ok", (p.to_dict(), r.error)
        assert r.arch == "sm_90a"
        assert r.spill_bytes == 0, (p.to_dict(), r.spill_bytes)
        assert r.regs_per_thread is not None
        if "setmaxnreg" in FAMILY.render(p):  # the launch count setmaxnreg's arithmetic assumes
            assert r.regs_per_thread == ws_launch_registers(p.threads), p.to_dict()
        if tool is None:
            continue
        assert r.cubin_path is not None
        sass = subprocess.run([tool, "-sass", r.cubin_path], capture_output=True, text=True,
                              check=True).stdout
        counts = _sass_counts(sass)
        assert counts["HGMMA_BF16"] > 0, (p.to_dict(), counts)
        assert counts["HGMMA"] == counts["HGMMA_BF16"], counts
        assert counts["HMMA"] == counts["LDL"] == counts["STL"] == 0, counts
