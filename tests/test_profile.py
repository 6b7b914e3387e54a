"""Profile figures that need no GPU: ncu's CSV, occupancy, the light profile's honesty."""

from __future__ import annotations

import pytest

from core.arch import theoretical_occupancy
from core.evaluation import CompileResult
from kernels.gemm_bias_relu import FAMILY
from kernels.gemm_bias_relu.params import GemmParams
from worker.evaluate import light_profile
from worker.ncu import METRICS, parse_raw_csv

H200 = {"max_threads_per_sm": 2048, "max_regs_per_sm": 65536, "max_blocks_per_sm": 32,
        "max_smem_per_sm": 233472, "compute_capability": "9.0", "sm_count": 132,
        "clock_khz": 1980000}

RAW = (
    '==PROF== Connected to process 4242 (/usr/bin/python3.12)\n'
    '"ID","Process ID","Process Name","Kernel Name","'
    + '","'.join(METRICS.values()) + '"\n'
    '"","","","","%","%","%","",""\n'
    '"0","4242","python3","gemm_bias_relu","24.61","71.3","48.02","33,554,432","1,024"\n'
    '==PROF== Disconnected from process 4242\n'
)


def test_parse_ncu_raw_csv_reads_thousands_separators() -> None:
    values = parse_raw_csv(RAW)
    assert values[METRICS["bank_conflicts_ld"]] == 33554432
    assert values[METRICS["bank_conflicts_st"]] == 1024
    assert values[METRICS["sm_occupancy_pct"]] == 24.61


def test_parse_ncu_output_without_a_kernel_is_an_error() -> None:
    with pytest.raises(ValueError, match="no profiled kernel"):
        parse_raw_csv("==ERROR== The application returned an error code (1).\n")


def test_theoretical_occupancy_matches_the_design_figures() -> None:
    # 128 registers/thread at 256 threads limits the SM to 2 blocks = 25 %
    occ, limiter = theoretical_occupancy(256, 128, 8192, H200)
    assert (occ, limiter) == (25.0, "registers")
    occ, limiter = theoretical_occupancy(256, 32, 0, H200)
    assert (occ, limiter) == (100.0, "threads")
    occ, limiter = theoretical_occupancy(128, 40, 100_000, H200)
    assert limiter == "shared_memory"
    assert occ == 12.5


def test_light_profile_says_why_ncu_figures_are_null() -> None:
    params = GemmParams(smem=True, coalesced=True, reg_m=8, reg_n=8)
    compiled = CompileResult("ok", 1.0, regs_per_thread=96, static_smem_bytes=0,
                             dynamic_smem_bytes=params.smem_bytes, spill_store_bytes=0,
                             spill_load_bytes=0)
    profile = light_profile(FAMILY, params, compiled, H200, None)
    assert profile["regs_per_thread"] == 96
    assert profile["sources"]["regs_per_thread"] == "ptxas"
    assert profile["theoretical_occupancy_pct"] is not None
    for name in ("sm_occupancy_pct", "memory_throughput_pct", "sm_busy_pct",
                 "shared_mem_bank_conflicts"):
        assert profile[name] is None
        assert "Nsight Compute not run" in profile["missing"][name]
    assert FAMILY.name == "gemm_bias_relu"
