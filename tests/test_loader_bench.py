"""bench/loader_bench.py's figures from its rows, on the CPU: the order of the shapes and the
summary (geometric means over the vendor and the peer, at shapes with and without an entry)
recomputed from a recorded run's rows, and its printed table."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from repo import ROOT

from bench.loader_bench import alternate, print_table, summary

RECORD = ROOT / "runs/2026-12-05-5dd5e49-loader-peer/r/loader_bench.json"
#: every recorded run whose figures the docs cite (H100 at 5dd5e49, H200 at e77de8c)
RECORDS = [RECORD, ROOT / "runs/2026-12-05-e77de8c-composition/r/loader_bench.json"]


def test_alternate_takes_the_two_in_turn_and_keeps_the_rest() -> None:
    assert alternate([1, 2, 3], ["a"]) == [1, "a", 2, 3]
    assert alternate([], ["a", "b"]) == ["a", "b"]
    assert alternate([1], []) == [1]


@pytest.mark.parametrize("record", RECORDS, ids=lambda p: p.parts[-3])
def test_summary_recomputes_the_recorded_figures(record: Path) -> None:
    report = json.loads(record.read_text())
    for family, recorded in report["families"].items():
        found = summary(recorded["rows"])
        for key, value in found.items():
            assert value == pytest.approx(recorded[key], rel=1e-12), (family, key)
        tuned = [r["x_peer"] for r in recorded["rows"] if r["entry"] is not None]
        assert found["tuned_geomean_x_peer"] == pytest.approx(
            math.exp(sum(map(math.log, tuned)) / len(tuned)))


def test_summary_of_a_run_cut_before_any_fallback_shape() -> None:
    row = {"entry": "tuned", "x_vendor": 2.0, "x_vendor_sustained": 1.5, "x_peer": 1.2,
           "x_peer_sustained": 0.8, "peer_passed": True, "loader_call_us": 10.0,
           "vendor_call_us": 12.0}
    found = summary([row])
    assert found["tuned_geomean_x_vendor"] == pytest.approx(2.0)
    assert found["tuned_sustained_geomean_x_peer"] == pytest.approx(0.8)
    assert math.isnan(found["untuned_geomean_x_peer"])
    assert math.isnan(found["untuned_worst_x_vendor"])
    assert math.isnan(found["fallback_added_us_median"])


def test_a_peer_wrong_or_failed_at_a_shape_counts_in_none_of_its_means() -> None:
    base = {"entry": "tuned", "x_vendor": 2.0, "x_vendor_sustained": 2.0,
            "loader_call_us": 10.0, "vendor_call_us": 12.0}
    rows = [{**base, "x_peer": 1.5, "x_peer_sustained": 1.5, "peer_passed": True},
            {**base, "x_peer": 0.5, "x_peer_sustained": 0.5, "peer_passed": False},
            {**base, "x_peer": None, "x_peer_sustained": None, "peer_passed": False,
             "peer_error": "TorchRuntimeError: fake tensor"}]
    found = summary(rows)
    assert found["tuned_geomean_x_peer"] == pytest.approx(1.5)
    assert found["tuned_sustained_geomean_x_peer"] == pytest.approx(1.5)
    assert found["tuned_geomean_x_vendor"] == pytest.approx(2.0)


def test_the_table_prints_the_recorded_run(capsys: pytest.CaptureFixture[str]) -> None:
    report = json.loads(RECORD.read_text())
    print_table(report)
    out = capsys.readouterr().out
    assert "x vendor / x torch.compile" in out
    assert "x vendor / x cuBLAS bf16x3 composed" in out
    assert "tuned 1.093 / 1.906" in out


def test_the_composition_peers_parts_keep_what_bf16_drops() -> None:
    """The split every composition peer makes: hi + lo holds x to bf16's rounding of the
    remainder (about 2^-16 of x), where hi alone is off by up to 2^-9; so the three products
    meet the 1e-4 contract that a split whose low parts were folded away (hi only) misses."""
    torch = pytest.importorskip("torch")
    from bench.loader_timing import bf16_parts

    gen = torch.Generator().manual_seed(7)
    a, b = torch.randn(64, 256, generator=gen), torch.randn(256, 48, generator=gen)
    a_hi, a_lo = bf16_parts(torch, a)
    b_hi, b_lo = bf16_parts(torch, b)
    assert a_hi.dtype is torch.bfloat16
    assert a_lo.dtype is torch.bfloat16
    rel = ((a_hi.double() + a_lo.double() - a.double()).abs() / a.double().abs()).max()
    assert float(rel) <= 2.0 ** -16
    assert float(((a_hi.double() - a.double()).abs() / a.double().abs()).max()) > 2.0 ** -10
    ref = a.double() @ b.double()
    scale = a.double().abs() @ b.double().abs()
    three = (a_hi.double() @ b_hi.double() + a_hi.double() @ b_lo.double()
             + a_lo.double() @ b_hi.double())
    assert float(((three - ref).abs() / scale).max()) < 1e-4
    assert float(((a_hi.double() @ b_hi.double() - ref).abs() / scale).max()) > 1e-4
