"""bench/sustained_clock.py: nvidia-smi's samples and peer_quality's progress lines joined into
each timing's clock and power (no GPU: the lines are the tools' own formats)."""

from __future__ import annotations

from bench.sustained_clock import parse_samples, summarize, windows

SMI = [
    "2026/12/05 12:00:00.000, 1980, 420.10, 700.00, 41, 0x0000000000000000",
    "2026/12/05 12:00:01.000, 1980, 450.00, 700.00, 42, 0x0000000000000000",
    "2026/12/05 12:00:02.000, 1755, 699.50, 700.00, 55, 0x0000000000000004",
    "2026/12/05 12:00:03.000, 1740, 700.20, 700.00, 57, 0x0000000000000004",
    "2026/12/05 12:00:04.000, 1800, 690.00, 700.00, 58, 0x0000000000000000",
    "2026/12/05 12:00:05.0",  # the sampler killed mid-line
]


def test_samples_parse_and_a_cut_line_is_skipped() -> None:
    samples = parse_samples(SMI)
    assert len(samples) == 5
    assert samples[2]["sm_mhz"] == 1755
    assert samples[2]["power_w"] == 699.5
    assert int(samples[3]["reasons"]) == 4
    assert samples[1]["reasons"] == 0
    assert samples[1]["t"] - samples[0]["t"] == 1.0


def test_each_progress_line_gives_its_window_and_its_clock() -> None:
    samples = parse_samples(SMI)
    t0 = samples[0]["t"]
    stamped = [
        (t0 + 0.5, "peers: gemm_bias_relu 4096x4096x4096 cuBLAS fp32: 2726.3 us, ok (0.5 s)"),
        (t0 + 4.2, "ours: 4096x4096x4096 acc s8: ok 672.4 us (3.0 s)"),
        (t0 + 4.3, "Triton autotuning done"),  # not a timing: no window
    ]
    found = windows(stamped)
    assert [(w["who"], w["shape"], w["label"]) for w in found] == [
        ("peers", "4096x4096x4096", "cuBLAS fp32"), ("ours", "4096x4096x4096", "acc s8")]
    row = summarize(found[1], samples)
    # window 1.2 .. 4.2 s, its first 20 % left out: the samples at 2, 3 and 4 s
    assert row["samples"] == 3
    assert row["sm_mhz"] == 1755
    assert row["power_w"] == 699.5
    assert abs(row["power_capped"] - 2 / 3) < 1e-9
    assert row["temp_c"] == 58
    empty = summarize(found[0], samples)  # 0.0 .. 0.5 s past its first 20 %: no sample
    assert empty["samples"] == 0
    assert "sm_mhz" not in empty
