"""The GEMM speed benchmarks' shared parts without a GPU: the baselines say why they have no
figure, and a kernel's flushed and sustained figures are set against both baselines'."""

from __future__ import annotations

import importlib.util

import pytest

from bench.gemm_speed import baselines, print_table, ratio
from bench.kernel_quality import summarize
from kernels.gemm_bias_relu.shape import Shape


def test_the_baselines_measure_or_say_why() -> None:
    found = baselines(Shape(64, 64, 64), min_ms=1.0)
    assert found["flops"] == 2.0 * 64 ** 3
    for name in ("cublas", "composition"):
        figures = found[name]
        if importlib.util.find_spec("torch") is None:
            assert "No module named 'torch'" in figures["error"], figures
        else:  # a machine with torch: a figure, or the reason there is none (no GPU)
            assert figures.get("error") or (figures["avg_us"] > 0
                                            and figures["sustained_us"] > 0), figures


def test_a_row_is_set_against_both_baselines_flushed_and_sustained(
        capsys: pytest.CaptureFixture[str]) -> None:
    base = {"cublas": {"avg_us": 2700.0, "sustained_us": 2800.0},
            "composition": {"avg_us": 1350.0, "sustained_us": 1400.0, "mode": "m"},
            "flops": 2.0 * 4096 ** 3}
    row = {"label": "bf16x3", "shape": "4096x4096x4096", "status": "ok",
           "perf": {"avg_us": 675.0, "throughput_tflops": 203.6},
           "sustained": {"us_per_launch": 700.0},
           "correctness": {"rel_err": 1e-5, "max_scaled_err": 2e-5}, "regs": 168}
    figures = summarize(row, base)
    assert figures["x_cublas"] == 4.0
    assert figures["x_cublas_sustained"] == 4.0
    assert figures["x_composition"] == 2.0
    assert figures["x_composition_sustained"] == 2.0
    # a baseline without a figure gives no ratio, never a made-up one
    assert summarize(row, {"cublas": {"error": "no GPU"}, "composition": {}})["x_cublas"] is None
    assert ratio(None, 1.0) is None
    print_table([row], {"4096x4096x4096": base}, {"name": "H200"}, 250.0)
    line = next(x for x in capsys.readouterr().out.splitlines() if "bf16x3" in x)
    assert line.split()[1:8] == ["675.0", "203.6", "4.00", "2.00", "700.0", "4.00", "2.00"]
