"""The compile path with the real nvcc (no GPU needed): every seed transform compiles, ptxas
figures, the cache, error summaries, the time limit."""

from __future__ import annotations

import hashlib
import os
import random
import secrets
import signal
import subprocess
import time
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.evaluation import CompileResult
from kernels.base import Action, Candidate, Rejection
from kernels.gemm_bias_relu import DOMAINS, FAMILY, GemmParams
from worker.compile import (
    ERROR_SUMMARY_CHARS,
    Compiler,
    compile_candidate,
    compiler_from_settings,
    parse_ptxas,
    summarize_error,
    unsafe_include,
)

ROOT = Candidate(FAMILY.baseline)
SEED_NAMES = (
    "apply_tiling", "apply_vectorize", "apply_register_block", "apply_unroll",
    "change_block_config", "apply_shared_memory_load", "avoid_bank_conflict", "revert_last",
)
BROKEN_SOURCE = (
    'extern "C" __global__ void broken(float* x) {\n'
    "    x[threadIdx.x] = tf_no_such_symbol * 2.0f;\n"
    "}\n"
)


def submit(compiler: Compiler, params: GemmParams) -> Future[CompileResult]:
    return compiler.submit(FAMILY.render(params), entry=FAMILY.name,
                           dynamic_smem_bytes=params.smem_bytes,
                           arch=FAMILY.compile_arch(params, compiler.arch))


def any_action() -> st.SearchStrategy[Action]:
    """A transform uniformly, then one of its concrete actions (from the registry's domains)."""
    specs = list(FAMILY.transforms)
    return st.sampled_from(specs).flatmap(lambda spec: st.sampled_from(list(spec.actions())))


@dataclass(frozen=True)
class Compiled:
    label: str
    params: GemmParams
    result: CompileResult


@pytest.fixture(scope="module")
def seed_results(compiler: Compiler) -> list[Compiled]:
    """Every seed transform (and apply_coalesce) with every argument, applied to the baseline
    and, for the shared-memory transforms, to the baseline with staging on; compiled in the
    pool. Results that are rejections are not compiled."""
    smem = FAMILY.apply(ROOT, "apply_shared_memory_load(true)")
    assert isinstance(smem, Candidate)
    starts = [("baseline", ROOT), ("smem", smem)]
    jobs: dict[GemmParams, tuple[str, Future[CompileResult]]] = {}
    for start_name, start in starts:
        for spec in FAMILY.transforms:
            if start_name == "smem" and spec.name not in ("apply_tiling", "avoid_bank_conflict"):
                continue
            for action in spec.actions():
                result = FAMILY.apply(start, action)
                if isinstance(result, Rejection) or result.params in jobs:
                    continue
                jobs[result.params] = (f"{start_name} -> {action}", submit(compiler, result.params))
    if FAMILY.baseline not in jobs:
        jobs[FAMILY.baseline] = ("baseline", submit(compiler, FAMILY.baseline))
    return [Compiled(label, params, fut.result()) for params, (label, fut) in jobs.items()]


def test_every_seed_transform_compiles(seed_results: list[Compiled]) -> None:
    labels = {c.label.split(" -> ")[-1].split("(")[0] for c in seed_results}
    # every seed transform but revert_last (a rejection on the baseline) produced kernels
    assert labels >= set(SEED_NAMES) - {"revert_last"} | {"apply_coalesce", "baseline"}
    assert len(seed_results) >= 50
    failed = [f"{c.label}: {c.result.status}: {c.result.error}"
              for c in seed_results if c.result.status != "ok"]
    assert failed == []


def test_compile_figures_are_parsed(seed_results: list[Compiled]) -> None:
    smem_kernels = 0
    for c in seed_results:
        r = c.result
        assert isinstance(r.regs_per_thread, int), c.label
        assert r.regs_per_thread > 0, c.label
        assert isinstance(r.spill_bytes, int), c.label
        assert r.spill_bytes >= 0, c.label
        assert isinstance(r.stack_bytes, int), c.label
        assert r.smem_bytes == c.params.smem_bytes, c.label  # dynamic only, no static smem
        assert r.source_hash == hashlib.sha256(FAMILY.render(c.params).encode()).hexdigest()
        assert r.arch == "sm_90"
        assert r.cubin()[:4] == b"\x7fELF", c.label
        smem_kernels += c.params.smem
    assert smem_kernels >= 7
    summary = seed_results[0].result.summary(FAMILY.max_smem_limit("sm_90"))
    assert summary["status"] == "ok"
    assert summary["max_smem_limit"] == 232448


@settings(max_examples=25, deadline=None)
@given(actions=st.lists(any_action(), min_size=3, max_size=12))
def test_random_walks_never_hit_an_nvcc_error(actions: list[Action], compiler: Compiler) -> None:
    """A chain of transforms from the baseline ends in a Candidate that compiles, or in a
    Rejection with a reason. Walking on past rejections (as an agent does) also only reaches
    points that compile."""
    outcome = FAMILY.apply_chain(actions)
    node = ROOT
    for action in actions:
        step = FAMILY.apply(node, action)
        if isinstance(step, Rejection):
            assert step.reason
            assert step.message
            continue
        node = step
    if isinstance(outcome, Rejection):
        assert outcome.reason
        assert outcome.message
    else:
        assert outcome.params == node.params  # no rejection on the way: the same walk
    assert FAMILY.validate(node.params) is None
    result = compile_candidate(compiler, FAMILY, node.params)
    assert result.status == "ok", (node.lineage(), result.error)
    assert result.smem_bytes == node.params.smem_bytes


def test_random_valid_points_compile(compiler: Compiler) -> None:
    """Deep points the walks rarely reach: a fixed sample of the valid space compiles."""
    rng = random.Random(2024)
    points: list[GemmParams] = []
    while len(points) < 24:
        params = GemmParams(**{n: rng.choice(d) for n, d in DOMAINS.items()}).canonical()
        if FAMILY.validate(params) is None and params not in points:
            points.append(params)
    futures = [submit(compiler, p) for p in points]
    failed = [f"{p}: {f.result().status}: {f.result().error}"
              for p, f in zip(points, futures, strict=True) if f.result().status != "ok"]
    assert failed == []


def test_second_compile_is_a_cache_hit(tmp_path: Path) -> None:
    params = GemmParams(coalesced=True, vec=2, unroll=2)
    source = FAMILY.render(params)
    first = Compiler(tmp_path / "cache").compile(source, entry=FAMILY.name)
    assert first.status == "ok"
    assert not first.cache_hit
    second = Compiler(tmp_path / "cache").compile(source, entry=FAMILY.name)  # a new process
    assert second.status == "ok"
    assert second.cache_hit
    assert second.regs_per_thread == first.regs_per_thread
    assert second.cubin() == first.cubin()
    assert second.source_hash == first.source_hash


def test_compile_many_keeps_the_order(compiler: Compiler) -> None:
    points = [FAMILY.baseline, GemmParams(coalesced=True), GemmParams(unroll=4)]
    sources = [FAMILY.render(p) for p in points]
    results = compiler.compile_many(sources, entry=FAMILY.name)
    assert [r.source_hash for r in results] == [
        hashlib.sha256(s.encode()).hexdigest() for s in sources
    ]
    assert all(r.status == "ok" for r in results)


def test_compile_error_is_a_short_summary_naming_the_problem(compiler: Compiler) -> None:
    result = compiler.compile(BROKEN_SOURCE, entry="broken")
    assert result.status == "error"
    assert result.error is not None
    assert "tf_no_such_symbol" in result.error
    assert "undefined" in result.error
    assert len(result.error) <= ERROR_SUMMARY_CHARS
    assert "tf_no_such_symbol" in result.log
    assert result.regs_per_thread is None
    with pytest.raises(RuntimeError, match="error"):
        result.cubin()
    # the same broken source is not compiled again
    again = compiler.compile(BROKEN_SOURCE, entry="broken")
    assert again.status == "error"
    assert again.cache_hit
    assert again.error == result.error


def test_long_compile_error_is_cut_to_the_limit(compiler: Compiler) -> None:
    body = "\n".join(f"    x[{i}] = tf_undefined_{i:04d}_with_a_rather_long_name;"
                     for i in range(60))
    source = f'extern "C" __global__ void many(float* x) {{\n{body}\n}}\n'
    result = compiler.compile(source)
    assert result.status == "error"
    assert result.error is not None
    assert 0 < len(result.error) <= ERROR_SUMMARY_CHARS
    assert result.error.startswith("error")
    assert "tf_undefined_0000" in result.error


def test_summarize_error_without_error_lines() -> None:
    assert summarize_error("") == "compiler failed without output"
    assert summarize_error("line one\nSegmentation violation\n") == "Segmentation violation"


def test_parse_ptxas_picks_the_entry() -> None:
    log = (
        "ptxas info    : 0 bytes gmem\n"
        "ptxas info    : Compiling entry function 'helper' for 'sm_90'\n"
        "ptxas info    : Function properties for helper\n"
        "    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads\n"
        "ptxas info    : Used 12 registers, used 0 barriers, 64 bytes smem\n"
        "ptxas info    : Compiling entry function 'gemm_bias_relu' for 'sm_90'\n"
        "ptxas info    : Function properties for gemm_bias_relu\n"
        "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
        "ptxas info    : Used 40 registers, used 1 barriers\n"
    )
    assert parse_ptxas(log, "gemm_bias_relu") == {
        "regs_per_thread": 40, "static_smem_bytes": 0, "stack_bytes": 0,
        "spill_store_bytes": 0, "spill_load_bytes": 0,
    }
    assert parse_ptxas(log)["regs_per_thread"] == 12
    assert parse_ptxas(log, "helper")["static_smem_bytes"] == 64


def test_cache_key_covers_arch_flags_source_and_nvcc(tmp_path: Path) -> None:
    source = FAMILY.render(FAMILY.baseline)
    base = Compiler(tmp_path)
    key = base.cache_key(source)
    assert Compiler(tmp_path).cache_key(source) == key
    assert Compiler(tmp_path, arch="sm_80").cache_key(source) != key
    assert Compiler(tmp_path, arch="sm_90a").cache_key(source) != key
    assert Compiler(tmp_path, extra_flags=["-DTF_X=1"]).cache_key(source) != key
    assert Compiler(tmp_path, extra_flags=["-DTF_X=2"]).cache_key(source) != Compiler(
        tmp_path, extra_flags=["-DTF_X=1"]).cache_key(source)
    assert base.cache_key(source + "\n") != key
    fake = tmp_path / "other-nvcc"
    fake.write_text("#!/bin/sh\necho 'Build cuda_99.9.r99.9/compiler.0_0'\n")
    fake.chmod(0o755)
    assert Compiler(tmp_path, nvcc=str(fake)).cache_key(source) != key
    assert Compiler(tmp_path, arch="sm_90a").gencode == ["-gencode=arch=compute_90a,code=sm_90a"]


def test_other_arch_is_not_served_from_the_cache(tmp_path: Path) -> None:
    # a cache of its own: the session's is shared by the workers of an xdist run
    source = FAMILY.render(FAMILY.baseline)
    assert Compiler(tmp_path).compile(source, entry=FAMILY.name).status == "ok"
    other = Compiler(tmp_path, arch="sm_80").compile(source, entry=FAMILY.name)
    assert other.status == "ok"
    assert not other.cache_hit
    assert other.arch == "sm_80"
    assert "-arch=sm_80" in other.flags


def _pids_matching(pattern: str) -> list[int]:
    done = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True)
    return [int(p) for p in done.stdout.split()]


def test_timeout_kills_the_compiler_and_its_children(tmp_path: Path) -> None:
    token = f"{secrets.randbelow(10**8):08d}"
    child, itself = f"sleep 61.{token}", f"sleep 62.{token}"
    fake = tmp_path / "slow-nvcc"
    fake.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = "--version" ]; then echo "Build cuda_0.0.slow"; exit 0; fi\n'
        f"{child} &\n"
        f"{itself}\n"
        "wait\n"
    )
    fake.chmod(0o755)
    pattern = f"sleep 6[12]\\.{token}"
    slow = Compiler(tmp_path / "cache", nvcc=str(fake), timeout_s=1.5)
    source = FAMILY.render(FAMILY.baseline)
    try:
        start = time.monotonic()
        result = slow.compile(source)
        elapsed = time.monotonic() - start
        assert result.status == "timeout"
        assert result.error is not None
        assert "1.5" in result.error
        assert 1.4 <= elapsed < 5.0
        deadline = time.monotonic() + 3.0
        while _pids_matching(pattern) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _pids_matching(pattern) == [], "a sleep of the fake nvcc survived the timeout"
        # a timeout may pass next time: it is not cached
        assert not list((tmp_path / "cache").rglob("result.json"))
        again = slow.compile(source)
        assert again.status == "timeout"
        assert not again.cache_hit
    finally:
        for pid in _pids_matching(pattern):  # only the sleeps this test started
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_missing_nvcc_is_an_error_not_an_exception(tmp_path: Path) -> None:
    result = Compiler(tmp_path, nvcc=str(tmp_path / "no-nvcc")).compile("// nothing\n")
    assert result.status == "error"
    assert result.error is not None
    assert "no-nvcc" in result.error


def test_rejected_point_is_not_compiled(tmp_path: Path) -> None:
    params = GemmParams(smem=True, reg_m=8, reg_n=8, tile_k=64, pad=4)
    result = compile_candidate(Compiler(tmp_path / "cache", arch="sm_75"), FAMILY, params)
    assert result.status == "rejected"
    assert result.rejection is not None
    assert result.rejection["reason"] == "smem_over_limit"
    assert result.rejection["max_smem_limit"] == 65536
    assert result.smem_bytes == params.smem_bytes
    assert not (tmp_path / "cache").exists()  # nvcc never ran, nothing was cached


# ---- user code: the scratch directory, the limit, the includes -----------------------------
def recording_nvcc(tmp_path: Path) -> tuple[Path, Path]:
    """A fake nvcc that writes its working directory and what it holds to a log, then fails;
    the log's path tells whether it ran."""
    log = tmp_path / "nvcc-ran.log"
    fake = tmp_path / "recording-nvcc"
    fake.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = "--version" ]; then echo "Build cuda_0.0.recording"; exit 0; fi\n'
        f'{{ pwd; ls -A; }} > "{log}"\n'
        "exit 1\n"
    )
    fake.chmod(0o755)
    return fake, log


UNSAFE_INCLUDES = {
    "absolute quoted": ('#include "/etc/passwd"\n', 1, "absolute path"),
    "absolute system": ("#include </etc/shadow>\n", 1, "absolute path"),
    "parent quoted": ('#include "../secret.h"\n', 1, "'..'"),
    "parent inside a path": ("#include <cuda/../../../etc/hosts>\n", 1, "'..'"),
    "parent with backslashes": ('#include "..\\..\\x.h"\n', 1, "'..'"),
    "windows drive": ('#include "C:/x.h"\n', 1, "absolute path"),
    "spaces and comments": ('  # /* c */ include /* d */ "/etc/passwd"\n', 1, "absolute path"),
    "continued line": ('#inc\\\nlude "/etc/passwd"\n', 1, "absolute path"),
    "digraph": ('%:include "/etc/passwd"\n', 1, "absolute path"),
    "include_next": ("#include_next </etc/passwd>\n", 1, "absolute path"),
    "embed": ('#embed "/dev/urandom"\n', 1, "absolute path"),
    "computed by a macro": ('#define F "/etc/passwd"\n#include F\n', 2, "not a literal"),
    "after safe ones": ('#include <stdint.h>\n\n#include "../x.h"\n', 3, "'..'"),
    "inside a block comment": ('/*\n#include "/etc/passwd"\n*/\n', 2, "absolute path"),
}


@pytest.mark.parametrize("case", list(UNSAFE_INCLUDES), ids=list(UNSAFE_INCLUDES))
def test_an_unsafe_include_is_refused_before_nvcc_runs(tmp_path: Path, case: str) -> None:
    header, line, why = UNSAFE_INCLUDES[case]
    source = header + 'extern "C" __global__ void k(float* y) { y[0] = 1.f; }\n'
    fake, log = recording_nvcc(tmp_path)
    result = Compiler(tmp_path / "cache", nvcc=str(fake)).compile(source, entry="k")
    assert result.status == "rejected"
    assert result.failure_status == "rejected"
    assert result.rejection is not None
    assert result.rejection["reason"] == "unsafe_include"
    assert result.rejection["line"] == line
    assert why in (result.error or "")
    assert f"line {line}:" in (result.error or "")
    assert not log.exists()  # nvcc never ran
    assert not (tmp_path / "cache").exists()  # and nothing was cached


def test_safe_includes_pass_the_scan_and_compile(compiler: Compiler) -> None:
    source = (
        "#include <stdint.h>\n"
        '#include "cuda_fp16.h"\n'
        '// #include "/etc/passwd" in a line comment is no directive\n'
        'static const char* note = "#include </etc/passwd>";\n'
        'extern "C" __global__ void k(float* y) { y[0] = (float)sizeof(uint32_t); }\n'
    )
    assert unsafe_include(source) is None
    result = compiler.compile(source, entry="k")
    assert result.status == "ok", result.error


def test_nvcc_runs_in_a_scratch_directory_holding_only_the_source(tmp_path: Path) -> None:
    fake, log = recording_nvcc(tmp_path)
    result = Compiler(tmp_path / "cache", nvcc=str(fake)).compile("// a kernel\n")
    assert result.status == "error"
    cwd, *entries = log.read_text().splitlines()
    assert Path(cwd).name.startswith("tf-nvcc-")
    assert not Path(cwd).is_relative_to(tmp_path)  # not the cache, not the caller's directory
    assert entries == ["kernel.cu"]
    assert not Path(cwd).exists()  # removed after the run


def test_nvcc_keeps_its_120_s_limit_by_default(tmp_path: Path) -> None:
    from core.settings import get_settings

    assert Compiler(tmp_path).timeout_s == 120.0
    assert compiler_from_settings(get_settings()).timeout_s == 120.0


# ---- regressions of defects found and fixed ------------------------------------------------


def test_cached_result_reports_the_callers_dynamic_smem(tmp_path: Path) -> None:
    params = GemmParams(smem=True, coalesced=True)
    comp = Compiler(tmp_path)
    plain = comp.compile(FAMILY.render(params), entry=FAMILY.name)
    assert plain.status == "ok"
    via_family = compile_candidate(comp, FAMILY, params)
    assert via_family.cache_hit
    assert via_family.smem_bytes == params.smem_bytes == 2048
