"""The peers benchmark without a GPU: which shapes and points it times, what a bad command line
is told, which Triton launches it sets against ours, and the table it prints last."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.peer_families import softmax_variants
from bench.peer_quality import build_parser, plan
from bench.peer_table import format_table, peer_problems, summary_rows, vendor_noise
from bench.peers import judge, parse_jobs

ROOT = Path(__file__).resolve().parents[1]
_SCRIPT = Path(sys.executable).with_name("tuneforge")
TUNE = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "cli.main"]
SOFTMAX_SWEEP = ["65536x128", "32768x512", "16384x1024", "65536x1024", "8192x4096", "8192x8192",
                 "4096x32768", "2048x65536", "1024x131072", "16x262144", "256x262144"]
GEMM_SWEEP = ["4096x4096x4096", "8192x8192x8192", "3000x5000x2000", "2048x2048x8192"]


def _plan(*argv: str) -> tuple[dict[str, Any], dict[str, list[Any]], dict[str, list[Any]]]:
    return plan(build_parser().parse_args([*argv, "--out", "unused"]))


def test_the_default_run_covers_both_sweeps_with_a_measured_point_at_every_shape() -> None:
    families, shapes, points = _plan()
    assert list(families) == ["softmax", "gemm_bias_relu"]
    assert [str(d) for d in shapes["softmax"]] == SOFTMAX_SWEEP
    assert [str(d) for d in shapes["gemm_bias_relu"]] == GEMM_SWEEP
    assert [str(p.dims) for p in points["softmax"]] == SOFTMAX_SWEEP
    assert {p.label for p in points["softmax"]} == {"replay best"}
    gemm = points["gemm_bias_relu"]
    assert [(str(p.dims), p.label) for p in gemm] == [
        ("4096x4096x4096", "replay best")] + [
        (s, "replay best at 4096x4096x4096") for s in GEMM_SWEEP[1:]]
    assert len({json.dumps(p.params.to_dict(), sort_keys=True) for p in gemm}) == 1


def test_points_from_a_file_add_their_shapes(tmp_path: Path) -> None:
    extra = tmp_path / "points.json"
    extra.write_text(json.dumps([{"label": "mine", "shape": "100x3000",
                                  "params": {"block_threads": 128, "row_threads": 128}}]))
    _, shapes, points = _plan("--family", "softmax", "--points", str(extra), "--no-replay")
    assert [(p.label, str(p.dims)) for p in points["softmax"]] == [("mine", "100x3000")]
    assert str(shapes["softmax"][-1]) == "100x3000"


@pytest.mark.parametrize(("argv", "said"), [
    (["--shapes", "64x64"], "--shapes: give exactly one --family"),
    (["--family", "softmax", "--shapes", "0x64"], "--shapes"),
    (["--family", "softmax", "--no-replay"], "--no-replay needs --points"),
])
def test_a_bad_command_line_is_told_which_option(argv: list[str], said: str) -> None:
    with pytest.raises(ValueError, match=said):
        _plan(*argv)


def test_a_points_entry_of_no_running_family_is_named(tmp_path: Path) -> None:
    extra = tmp_path / "points.json"
    extra.write_text(json.dumps([{"label": "x", "shape": "64x64", "params": {}}]))
    with pytest.raises(ValueError, match="entry 0: kernel None"):
        _plan("--points", str(extra))


def test_campaign_bests_come_from_a_tune_database(tmp_path: Path) -> None:
    """``--campaigns``: the best of each campaign in a ``tuneforge tune --db`` file (here a
    replay shape set, as a user runs it), its shape among the peers' shapes."""
    db = tmp_path / "tune.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUNEFORGE_")}
    env["TUNEFORGE_HOME"] = str(tmp_path)
    done = subprocess.run([*TUNE, "tune", "--backend", "replay", "--kernel", "softmax",
                           "--shapes", "16384x1024,65536x128", "--budget", "16", "--db",
                           str(db), "--out", str(tmp_path / "o"), "--json"], cwd=ROOT,
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout.splitlines()[-1])
    bests = {s["shape"]: s["best"]["params"] for s in summary["shapes"]}
    _, shapes, points = _plan("--family", "softmax", "--campaigns", str(db), "--no-replay",
                              "--shapes", "8192x8192")
    found = {str(p.dims): p for p in points["softmax"]}
    assert set(found) == {"16384x1024", "65536x128"}
    for shape, params in bests.items():
        assert found[shape].label == "campaign best (replay)"
        assert found[shape].params.to_dict() == params
    assert [str(d) for d in shapes["softmax"]] == ["8192x8192", "16384x1024", "65536x128"]
    with pytest.raises(ValueError, match="--campaigns .*: no such database"):
        _plan("--family", "softmax", "--campaigns", str(tmp_path / "none.db"))


def test_the_command_line_refuses_before_touching_a_gpu() -> None:
    done = subprocess.run([sys.executable, "bench/peer_quality.py", "--family", "softmax",
                           "--shapes", "64", "--out", "unused"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2
    assert "--shapes" in done.stderr
    done = subprocess.run([sys.executable, "bench/peers.py", "--job", "conv=64x64",
                           "--json-out", "unused"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2
    assert "--job 'conv=64x64'" in done.stderr


def test_a_case_that_counts_unequal_elements_passes_only_with_none() -> None:
    """An exact family's check counts the elements that differ: one is wrong at any tolerance
    (a rounding within 1e-4 included), and the problems line says how many."""
    exact = {"rel_err": 0.0, "max_scaled_err": 0.0, "nonfinite": 0, "unequal": 0}
    off = {"rel_err": 1e-9, "max_scaled_err": 2e-8, "nonfinite": 0, "unequal": 3}
    assert judge([exact], 0.0)["passed"]
    assert judge([exact], 0.0)["unequal"] == 0
    assert not judge([exact, off])["passed"]  # within the default tolerance, still wrong
    assert not judge([{**off, "unequal": 0}], 0.0)["passed"]  # any difference at tolerance 0
    assert judge([{**off, "unequal": 0}])["passed"]
    assert "unequal" not in judge([{"rel_err": 0.0, "max_scaled_err": 0.0, "nonfinite": 0}])
    wrong = judge([exact, off], 0.0)
    assert peer_problems({"families": {"f": {"shapes": {"8x8": {"peers": {
        "p": {"correctness": wrong}}}}}}}) == ["f 8x8 p: wrong (rel 1e-09, scaled 2e-08, "
                                               "3 unequal)"]


def test_jobs_name_their_family_and_shapes() -> None:
    jobs = parse_jobs(["softmax=16x262144,8192x8192", "gemm_bias_relu=3000x5000x2000"])
    assert [(n, [str(d) for d in dims]) for n, dims in jobs] == [
        ("softmax", ["16x262144", "8192x8192"]), ("gemm_bias_relu", ["3000x5000x2000"])]
    with pytest.raises(ValueError, match="--job 'softmax=': no shape"):
        parse_jobs(["softmax="])


@pytest.mark.parametrize(("cols", "textbook", "others"), [
    (128, ("row", 128, 4), {("row", 128, 2), ("row", 128, 8)}),
    (1024, ("row", 1024, 4), {("row", 1024, 2), ("row", 1024, 8)}),
    (2048, ("row", 2048, 8), {("row", 2048, 4), ("row", 2048, 16)}),
    (8192, ("row", 8192, 16), {("row", 8192, 8), ("row", 8192, 32), ("loop", 4096, 8)}),
    (32768, ("row", 32768, 16), {("row", 32768, 8), ("row", 32768, 32), ("loop", 4096, 8)}),
    (32769, ("loop", 4096, 8), {("loop", 2048, 4), ("loop", 8192, 16)}),
    (262144, ("loop", 4096, 8), {("loop", 2048, 4), ("loop", 8192, 16)}),
])
def test_the_textbook_triton_launch_comes_first_then_its_neighbours(
        cols: int, textbook: tuple[str, int, int], others: set[tuple[str, int, int]]) -> None:
    variants = softmax_variants(cols)
    assert variants[0] == ("triton", *textbook)
    assert {v[1:] for v in variants[1:]} == others
    assert len({v[0] for v in variants}) == len(variants)
    assert all(v[0].startswith("triton") for v in variants)


def _peer(us: float, sustained: float | None = None, graph: float | None = None,
          passed: bool = True) -> dict[str, Any]:
    return {"avg_us": us, "sustained_us": sustained, "graph_us": graph,
            "correctness": {"passed": passed}}


PEERS = {"shapes": {"16384x1024": {"peers": {
    "torch.softmax": _peer(39.0, 38.0), "torch.compile": _peer(36.4, 40.0, 36.0),
    "triton": _peer(36.3, 36.5), "triton row w8": _peer(35.0, 36.8, 34.0),
    "triton row w2": _peer(20.0, 20.0, passed=False), "copy": _peer(36.3, 35.0, 34.8),
    "torch.softmax again": _peer(39.4, 38.0)}}}}
OURS: list[dict[str, Any]] = [{"label": "replay best", "shape": "16384x1024", "status": "ok",
         "perf": {"avg_us": 38.7}, "sustained": {"us_per_launch": 36.0},
         "correctness": {"rel_err": 3.9e-7, "max_scaled_err": 1.2e-6}},
        {"label": "replay best", "shape": "16x262144", "status": "wrong",
         "error": "normal: 12 unwritten"}]


def test_ours_is_set_against_each_peer_flushed_and_sustained() -> None:
    row = summary_rows("softmax", OURS, PEERS)[0]
    assert row["x"]["torch.softmax"] == (round(39.0 / 38.7, 3), round(38.0 / 36.0, 3))
    # a peer's sustained time is the faster of its back-to-back calls and its graph replays
    assert row["x"]["torch.compile"] == (round(36.4 / 38.7, 3), 1.0)
    # the best Triton launch: the fastest that passed its check (not the wrong w2)
    assert row["x"]["triton best"] == (round(35.0 / 38.7, 3), round(34.0 / 36.0, 3))
    assert row["pct_copy"] == (93.8, 96.7)


def test_the_table_ends_with_the_geometric_means_and_says_why_a_row_is_empty() -> None:
    lines = format_table("softmax", summary_rows("softmax", OURS, PEERS), "NVIDIA H200")
    assert "x compile" in lines[1]
    assert "% copy" in lines[1]
    assert lines[2].split()[:3] == ["16384x1024", "replay", "best"]
    assert "0.90/0.94" in lines[2]
    assert "93.8/96.7" in lines[2]
    assert "wrong: normal: 12 unwritten" in lines[3]
    assert lines[-1].split()[0] == "geomean"
    assert lines[-1].split()[-3] == "0.94/1.00"  # x torch.compile


def test_the_gemm_table_gives_tflops_instead_of_a_copy() -> None:
    ours = [{"label": "best", "shape": "4096x4096x4096", "status": "ok",
             "perf": {"avg_us": 660.0}, "sustained": {"us_per_launch": 700.0}}]
    peers = {"shapes": {"4096x4096x4096": {"peers": {
        "cuBLAS fp32": _peer(2730.0, 2800.0), "cuBLAS bf16x3": _peer(1100.0, 1150.0),
        "Triton bf16x3": {"error": "OutOfResources"}}}}}
    lines = format_table("gemm_bias_relu", summary_rows("gemm_bias_relu", ours, peers), "H200")
    assert "TFLOP/s" in lines[1]
    assert "x Tri bf16x3" in lines[1]
    assert lines[2].split()[-2:] == ["208.2", "-"]
    assert "4.14/4.00" in lines[2]
    assert " -/- " in lines[2]


def test_the_gemm_table_sets_every_composition_beside_ours_and_a_wrong_one_aside() -> None:
    ours = [{"label": "best", "shape": "4096x4096x4096", "status": "ok",
             "perf": {"avg_us": 674.0}, "sustained": {"us_per_launch": 736.0}}]
    peers = {"shapes": {"4096x4096x4096": {"peers": {
        "cuBLAS fp32": _peer(2728.0, 2728.0), "cuBLAS bf16x3": _peer(747.0, 779.0),
        "cuBLAS bf16x3 chained": _peer(757.0, 855.0, 775.0),
        "cuBLAS bf16x3 + split": _peer(1033.0, 1057.0),
        # Inductor's split with its rounding folded away: fast, and judged wrong
        "compiled bf16x3 + split": _peer(642.7, 648.1, passed=False),
        "Triton bf16x3": _peer(1340.0, 1334.0)}}}}
    lines = format_table("gemm_bias_relu", summary_rows("gemm_bias_relu", ours, peers), "H200")
    assert "cuB3: three cuBLAS bf16 GEMMs" in lines[0]
    assert lines[1].split()[4:10] == ["x", "cuBLAS", "x", "cuB3", "ahead", "x"]
    cells = lines[2].split()
    assert cells[3:9] == ["4.05/3.71", "1.11/1.06", "1.12/1.05", "1.53/1.44", "-/-",
                           "1.99/1.81"]


def test_problems_and_noise_are_reported() -> None:
    peers = {"families": {"softmax": {"shapes": {
        **PEERS["shapes"], "16x262144": {"shape": "16x262144", "skipped": "deadline"},
        "256x262144": {"peers": {"triton": {"error": "OutOfResources: shared memory"},
                                 "copy": {**_peer(1.0), "graph_error": "capture failed"}}}}}}}
    assert peer_problems(peers) == [
        "softmax 16384x1024 triton row w2: wrong (rel None, scaled None)",
        "softmax 16x262144: skipped (deadline)",
        "softmax 256x262144 triton: OutOfResources: shared memory",
        "softmax 256x262144 copy: no graph (capture failed)"]
    assert vendor_noise("softmax", peers) == ("torch.softmax timed twice a shape: spread up "
                                              "to 1.0 %")


def test_the_geometric_means_take_our_fastest_point_at_each_shape() -> None:
    slower = {**OURS[0], "label": "triton-like w4", "perf": {"avg_us": 77.4},
              "sustained": {"us_per_launch": 72.0}}
    lines = format_table("softmax", summary_rows("softmax", [OURS[0], slower], PEERS), "H200")
    assert lines[3].split()[:3] == ["16384x1024", "triton-like", "w4"]
    assert "our best at 1 shape(s)" in lines[-1]
    assert lines[-1].split()[-3] == "0.94/1.00"  # x torch.compile: the replay best's alone


# ---- a user's family, built from its spec directory ----------------------------------------
SPEC_DIR = ROOT / "examples" / "transpose"


@pytest.fixture
def spec_family() -> Any:
    """examples/transpose's family, built and registered by ``--spec``'s code, unregistered
    again afterwards."""
    from bench.peer_families import spec_families
    from kernels import get_family, unregister_family

    family = spec_families([SPEC_DIR])["transpose"]
    assert get_family(family.name) is family  # registered under its registry key
    yield family
    unregister_family(family.name)


def test_a_user_family_sweeps_its_default_shape_and_takes_points_by_either_name(
        tmp_path: Path, spec_family: Any) -> None:
    from bench.peer_quality import load_points, sweep_shapes

    assert spec_family.name.startswith("transpose@")
    assert [str(d) for d in sweep_shapes("transpose", spec_family)] == ["8192x8192"]
    extra = tmp_path / "points.json"
    params = {"tile_x": 32, "tile_y": 32, "rows": 4, "vec": 1, "use_smem": True, "pad": 1,
              "tiles": 1}
    extra.write_text(json.dumps([
        {"kernel": "transpose", "label": "by name", "shape": "4096x2048", "params": params},
        {"kernel": spec_family.name, "label": "by key", "shape": "33x7", "params": params},
        {"label": "the one family", "shape": "7x33", "params": params}]))
    found = load_points(extra, {"transpose": spec_family})
    assert [(p.label, dict(p.dims)) for p in found["transpose"]] == [
        ("by name", {"m": 4096, "n": 2048}), ("by key", {"m": 33, "n": 7}),
        ("the one family", {"m": 7, "n": 33})]


def test_a_family_without_peers_is_refused_by_name(spec_family: Any) -> None:
    from bench.peer_families import peers_of
    from kernels import get_family

    with pytest.raises(ValueError, match="--family 'conv': no peers for it"):
        _plan("--family", "conv")
    with pytest.raises(ValueError, match=r"--spec .*none: path: .* is not a directory"):
        _plan("--spec", str(ROOT / "examples" / "none"))
    with pytest.raises(ValueError, match="its dimensions are m, n, k; its peers read rows, "
                                         "cols"):
        peers_of("softmax", get_family("gemm_bias_relu"))
    with pytest.raises(ValueError, match="--job 'conv=64x64': FAMILY=SHAPE"):
        parse_jobs(["conv=64x64"], {"conv": spec_family})
