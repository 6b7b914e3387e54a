"""bench/ncu_sections.py's reading of Nsight Compute's raw CSV (no GPU, no ncu needed)."""

from __future__ import annotations

import pytest

from bench.ncu_sections import summarize
from worker.ncu import raw_rows

# the shape of `ncu --csv --page raw` (a banner line, the header, the units, one row per kernel)
RAW = "\n".join([
    "==PROF== Connected to process 1234",
    '"ID","Kernel Name","gpu__time_duration.sum","sm__throughput.avg.pct_of_peak_sustained_'
    'elapsed","gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",'
    '"sm__warps_active.avg.pct_of_peak_sustained_active",'
    '"sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",'
    '"sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active",'
    '"sm__inst_executed_pipe_fp64.avg.pct_of_peak_sustained_active",'
    '"smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio",'
    '"smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",'
    '"smsp__average_warps_issue_stalled_wait_per_issue_active.ratio",'
    '"smsp__average_warps_issue_stalled_sleeping_per_issue_active.ratio"',
    '"","","msecond","%","%","%","%","%","%","ratio","ratio","ratio","ratio"',
    '"0","warmup","9.99","1","1","1","1","1","1","9","9","9","9"',
    '"1","gemm_bias_relu","1.7316","61.20","48.05","12.49","47.9","6.30","0.00",'
    '"1.25","0.40","3,102.5","0"',
])


def test_the_last_kernel_and_its_units_are_read() -> None:
    values, units = raw_rows(RAW)
    assert values["Kernel Name"] == "gemm_bias_relu"  # the profiled launch, not the first row
    assert units["gpu__time_duration.sum"] == "msecond"


def test_the_summary_converts_orders_and_filters() -> None:
    s = summarize(*raw_rows(RAW))
    assert s["duration_us"] == pytest.approx(1731.6)
    assert (s["sm_throughput_pct"], s["achieved_occupancy_pct"]) == (61.2, 12.49)
    # pipes over 1 %, busiest first; fp64 (0 %) is left out
    assert s["pipes_pct"] == {"tensor_op_gmma": 47.9, "alu": 6.3}
    # stall reasons largest first, thousands separators read, zero ones dropped
    assert list(s["stalls_cycles_per_issue"].items()) == [
        ("wait", 3102.5), ("barrier", 1.25), ("long_scoreboard", 0.4)]


@pytest.mark.parametrize(("unit", "value"), [("ns", "1,731,600"), ("nsecond", "1731600"),
                                             ("us", "1731.6"), ("msecond", "1.7316")])
def test_the_duration_is_read_in_any_unit_ncu_writes(unit: str, value: str) -> None:
    text = RAW.replace('"","","msecond"', f'"","","{unit}"').replace('"1.7316"', f'"{value}"')
    assert summarize(*raw_rows(text))["duration_us"] == pytest.approx(1731.6)


def test_no_kernel_is_an_error() -> None:
    with pytest.raises(ValueError, match="no profiled kernel"):
        raw_rows("==PROF== Disconnected\n")


def test_the_launch_program_reads_a_spec_with_the_split_k_launch() -> None:
    import sys

    from worker.ncu import launch_command, launch_spec

    launch = {"grid": [32, 16, 4], "block": [128, 2, 1], "dynamic_smem_bytes": 132096,
              "workspace_bytes": 4096}
    signature = {"buffers": [{"name": "x", "dtype": "float32", "role": "in", "count": 8}],
                 "scalars": []}
    assert launch_command("spec.json") == [sys.executable, "-m", "worker.ncu_launch",
                                           "spec.json"]
    assert launch_spec("k.cubin", "gemm_bias_relu", signature, launch) == {
        "cubin": "k.cubin", "kernel": "gemm_bias_relu", "seed": 0, "signature": signature,
        "launch": launch}
