"""The peers benchmark without a GPU: which shapes and points it times, what a bad command line
is told, which Triton launches it sets against ours, and the table it prints last; a user's
family (examples/transpose) built from its spec directory, its peers judged bit for bit on CPU
tensors, and the Triton transpose run by Triton's interpreter where Triton is installed."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from repo import ROOT

from bench.peer_families import (
    LIBRARY_PEER,
    LibraryCall,
    check_bundles,
    has_entry,
    library_peer,
    load_library,
    softmax_variants,
)
from bench.peer_quality import build_parser, plan
from bench.peer_table import (
    format_library_table,
    format_table,
    library_rows,
    peer_problems,
    summary_rows,
    vendor_noise,
)
from bench.peers import judge, parse_jobs
from kernels import get_family

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
    """``--campaigns``: at each shape of a ``tuneforge tune --db`` file (here a replay shape
    set, as a user runs it) the fastest correct candidate, the library's entry, its shape among
    the peers' shapes."""
    db = tmp_path / "tune.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUNEFORGE_")}
    env["TUNEFORGE_HOME"] = str(tmp_path)
    done = subprocess.run([*TUNE, "tune", "--backend", "replay", "--kernel", "softmax",
                           "--shapes", "16384x1024,65536x128", "--budget", "16", "--db",
                           str(db), "--out", str(tmp_path / "o"), "--json"], cwd=ROOT,
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout.splitlines()[-1])
    bests = {s["shape"]: s["best"] for s in summary["shapes"]}
    _, shapes, points = _plan("--family", "softmax", "--campaigns", str(db), "--no-replay")
    found = {str(p.dims): p for p in points["softmax"]}
    assert set(found) == {"16384x1024", "65536x128"}
    softmax = get_family("softmax")
    with sqlite3.connect(db) as con:
        rows = con.execute(
            "SELECT c.dims, d.params, d.avg_us FROM candidates d JOIN campaigns c "
            "ON c.id = d.campaign_id WHERE d.status = 'ok' AND d.avg_us IS NOT NULL").fetchall()
    for shape, best in bests.items():
        assert found[shape].label == "library entry (replay)"
        at_shape = [(us, json.loads(params)) for dims, params, us in rows
                    if str(softmax.make_dims(json.loads(dims))) == shape]
        fastest_us = min(us for us, _ in at_shape)
        assert fastest_us <= best["avg_us"]
        # the point timed is a fastest correct candidate there, maybe not the incumbent
        assert any(params == found[shape].params.to_dict() and us == fastest_us
                   for us, params in at_shape)
    assert {"16384x1024", "65536x128"} <= {str(d) for d in shapes["softmax"]}
    # --shapes narrows the databases' entries to the shapes asked for
    _, shapes, points = _plan("--family", "softmax", "--campaigns", str(db), "--no-replay",
                              "--shapes", "65536x128,8192x8192")
    assert [str(p.dims) for p in points["softmax"]] == ["65536x128"]
    assert [str(d) for d in shapes["softmax"]] == ["65536x128", "8192x8192"]
    with pytest.raises(ValueError, match="no point to time in --campaigns"):
        _plan("--family", "softmax", "--campaigns", str(db), "--no-replay",
              "--shapes", "8192x8192")
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
    for script, args in (("peer_quality.py", ["--family", "softmax", "--out", "unused"]),
                         ("peers.py", ["--job", "softmax=64x64", "--json-out", "unused"])):
        done = subprocess.run([sys.executable, f"bench/{script}", *args, "--bundle", "docs"],
                              cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert done.returncode == 2, script
        assert "--bundle docs: not a bundle" in done.stderr, script


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


# ---- a user's family: the transpose of examples/transpose ----------------------------------
@pytest.fixture
def transpose_key() -> Any:
    """The registry key of examples/transpose's family, unregistered again afterwards (plan()
    registers it in this process)."""
    from kernels import unregister_family
    from kernels.userspec import build_family, load_spec_dir

    key = build_family(load_spec_dir(SPEC_DIR)).name
    yield key
    unregister_family(key)


def test_a_spec_family_is_built_registered_and_swept_at_its_default_shape(
        tmp_path: Path, transpose_key: str) -> None:
    from kernels import get_family

    extra = tmp_path / "points.json"
    extra.write_text(json.dumps([{"label": "baseline", "shape": "4096x2048",
                                  "params": {"tile_x": 32, "tile_y": 8, "rows": 1, "vec": 1,
                                             "use_smem": False, "pad": 0, "tiles": 1}},
                                 {"kernel": transpose_key, "label": "by key", "shape": "33x7",
                                  "params": {"tile_x": 32, "tile_y": 32, "rows": 4, "vec": 1,
                                             "use_smem": True, "pad": 1, "tiles": 1}}]))
    families, shapes, points = _plan("--family", "transpose", "--spec", str(SPEC_DIR),
                                     "--points", str(extra))
    assert list(families) == ["transpose"]
    assert families["transpose"].name == transpose_key
    assert get_family(transpose_key) is families["transpose"]
    # no replay dataset: the spec's default_dims, then the points' shapes (m x n)
    assert [str(d) for d in shapes["transpose"]] == ["8192x8192", "4096x2048", "33x7"]
    assert dict(shapes["transpose"][1]) == {"m": 4096, "n": 2048}
    assert [(p.label, str(p.dims)) for p in points["transpose"]] == [
        ("baseline", "4096x2048"), ("by key", "33x7")]
    _, shapes, _ = _plan("--family", "transpose", "--spec", str(SPEC_DIR), "--points",
                         str(extra), "--no-replay", "--shapes", "2048x8192")
    assert [str(d) for d in shapes["transpose"]] == ["2048x8192", "4096x2048", "33x7"]
    # every --spec's family joins the default run, in the built-in ones' order
    extra.write_text(json.dumps([{**e, "kernel": "transpose"} for e in json.loads(
        extra.read_text())]))
    families, _, _ = _plan("--spec", str(SPEC_DIR), "--points", str(extra))
    assert list(families) == ["transpose", "softmax", "gemm_bias_relu"]


def test_a_spec_familys_campaigns_are_found_by_its_registry_key(
        tmp_path: Path, transpose_key: str) -> None:
    """A campaign stores its family's registry key (``transpose@hash12``), not the spec name
    that ``--family`` and the peers go by."""
    from agent.engine.lifecycle import CampaignSpec, create_campaign
    from core.db import session_factory, upgrade_database
    from core.models import Candidate
    from kernels import register_family
    from kernels.userspec import build_family, load_spec_dir

    register_family(build_family(load_spec_dir(SPEC_DIR)), replace=True)
    db = tmp_path / "tune.db"
    upgrade_database(f"sqlite:///{db}")
    best = {"tile_x": 32, "tile_y": 32, "rows": 4, "vec": 4, "use_smem": True, "pad": 1,
            "tiles": 2}
    with session_factory(f"sqlite:///{db}").begin() as s:
        for dims, us in (({"m": 8192, "n": 8192}, 700.0), ({"m": 4096, "n": 4096}, 180.0)):
            campaign = create_campaign(s, CampaignSpec(kernel=transpose_key, dims=dims),
                                       backend="gpu", device={"name": "H100"})
            s.flush()
            cand = Candidate(campaign_id=campaign.id, iteration=3, params=best,
                             params_key=f"k{us}", status="ok", avg_us=us)
            s.add(cand)
            s.flush()
            campaign.best_id = cand.id
            # measured 0.5 % faster than the incumbent, inside the acceptance threshold: the
            # library's entry all the same, and what is timed
            s.add(Candidate(campaign_id=campaign.id, iteration=4, params={**best, "pad": 0},
                            params_key=f"f{us}", status="ok", avg_us=us * 0.995,
                            accepted=False))
            # faster still, but wrong: never
            s.add(Candidate(campaign_id=campaign.id, iteration=5, params={**best, "rows": 8},
                            params_key=f"w{us}", status="wrong", avg_us=us * 0.5))
    assert campaign.kernel == transpose_key
    _, shapes, points = _plan("--family", "transpose", "--spec", str(SPEC_DIR), "--campaigns",
                              str(db), "--no-replay")
    assert sorted((str(p.dims), p.label, p.params.to_dict() == {**best, "pad": 0})
                  for p in points["transpose"]) == [("4096x4096", "library entry", True),
                                                    ("8192x8192", "library entry", True)]
    # the family's default shape, then the campaign's other shape
    assert [str(d) for d in shapes["transpose"]] == ["8192x8192", "4096x4096"]
    _, shapes, points = _plan("--family", "transpose", "--spec", str(SPEC_DIR), "--campaigns",
                              str(db), "--no-replay", "--shapes", "8192x8192")
    assert [str(p.dims) for p in points["transpose"]] == ["8192x8192"]
    assert [str(d) for d in shapes["transpose"]] == ["8192x8192"]
    # a database with campaigns of other families only: told where it looked, not to give
    # the --campaigns it gave
    other = tmp_path / "other.db"
    upgrade_database(f"sqlite:///{other}")
    with session_factory(f"sqlite:///{other}").begin() as s:
        campaign = create_campaign(s, CampaignSpec(kernel="softmax",
                                                   dims={"rows": 64, "cols": 64}),
                                   backend="gpu", device={"name": "H100"})
        s.flush()
        cand = Candidate(campaign_id=campaign.id, iteration=1, params={}, params_key="k",
                         status="ok", avg_us=5.0)
        s.add(cand)
        s.flush()
        campaign.best_id = cand.id
    with pytest.raises(ValueError, match=rf"no point to time in --campaigns \(campaigns of "
                                         rf"{transpose_key}\): the campaigns' shapes and "
                                         "families must be those running"):
        _plan("--family", "transpose", "--spec", str(SPEC_DIR), "--campaigns", str(other),
              "--no-replay", "--shapes", "8192x8192")


@pytest.mark.parametrize(("argv", "said"), [
    (["--family", "transpose", "--no-replay", "--points", "p.json"],
     "--family transpose: unknown kernel family 'transpose'.* give it with --spec DIR"),
    (["--family", "transpose", "--spec", str(SPEC_DIR)],
     r"no point to time in the replay datasets \(transpose: 0\).*--points or --campaigns"),
    (["--family", "transpose", "--spec", str(SPEC_DIR), "--shapes", "8192"], "--shapes"),
])
def test_a_bad_transpose_command_line_is_told_what_is_missing(
        argv: list[str], said: str, transpose_key: str) -> None:
    with pytest.raises(ValueError, match=said):
        _plan(*argv)


def test_the_command_line_asks_for_the_spec_of_a_user_family() -> None:
    done = subprocess.run([sys.executable, "bench/peer_quality.py", "--family", "transpose",
                           "--out", "unused"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2
    assert "--family transpose: unknown kernel family 'transpose'" in done.stderr
    assert "give it with --spec DIR" in done.stderr


def test_a_spec_named_as_a_peer_family_with_other_dimensions_is_refused(
        tmp_path: Path) -> None:
    import re

    for name in ("transpose.cu", "reference.cu", "vec_access.cuh"):
        (tmp_path / name).write_text((SPEC_DIR / name).read_text())
    spec = json.loads((SPEC_DIR / "family.json").read_text())

    def renamed(text: str) -> str:  # the dimension m called h in an expression
        return re.sub(r"\bm\b", "h", text)

    spec["dims"][0]["name"] = "h"
    spec["default_dims"] = {"h": 8192, "n": 8192}
    spec["edge_shapes"] = [{"h": e["m"], "n": e["n"]} for e in spec["edge_shapes"]]
    for b in spec["signature"]["buffers"]:
        b["count"] = renamed(b["count"])
    for sc in spec["signature"]["scalars"]:
        sc["value"] = renamed(sc["value"])
    spec["launch"]["grid"] = [renamed(g) for g in spec["launch"]["grid"]]
    spec["reference"]["grid"] = [renamed(g) for g in spec["reference"]["grid"]]
    spec["metric"]["work"] = renamed(spec["metric"]["work"])
    (tmp_path / "family.json").write_text(json.dumps(spec))
    from kernels.userspec import build_family, load_spec_dir

    other = build_family(load_spec_dir(tmp_path))
    assert other.display_name == "transpose"
    assert [d.name for d in other.dims] == ["h", "n"]
    try:
        with pytest.raises(ValueError, match="--spec: 'transpose': its dimensions are h, n; "
                                             "its peers read m, n"):
            _plan("--family", "transpose", "--spec", str(tmp_path))
    finally:
        from kernels import unregister_family

        unregister_family(other.name)


def test_the_peers_process_builds_a_spec_family_for_its_jobs(transpose_key: str) -> None:
    from bench.peer_families import spec_families

    jobs = parse_jobs(["transpose=8192x8192,33x7"], spec_families([SPEC_DIR]))
    assert [(n, [dict(d) for d in dims]) for n, dims in jobs] == [
        ("transpose", [{"m": 8192, "n": 8192}, {"m": 33, "n": 7}])]
    with pytest.raises(ValueError, match="--job 'transpose=64x64': unknown kernel family.*"
                                         "--spec DIR"):
        parse_jobs(["transpose=64x64"])
    done = subprocess.run([sys.executable, "bench/peers.py", "--job", "transpose=64",
                           "--spec", "examples/transpose", "--json-out", "unused"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "--job 'transpose=64': shape must look like" in done.stderr


def test_the_textbook_triton_transpose_comes_first_then_its_neighbours() -> None:
    from bench.peer_families import transpose_variants

    variants = transpose_variants()
    assert variants[0] == ("triton", 32, 32, 4)
    assert {v[1:] for v in variants[1:]} == {(32, 32, 8), (64, 64, 4), (64, 64, 8),
                                            (64, 32, 4), (32, 64, 4)}
    assert [v[0] for v in variants[1:3]] == ["triton b32x32 w8", "triton b64x64 w4"]
    assert len({v[0] for v in variants}) == len(variants)
    assert all(v[0].startswith("triton") for v in variants)


# the transpose's peers checked on the CPU by the harness's own rule
def _transpose_case(torch: Any, m: int = 37, n: int = 70) -> tuple[Any, Any, Any]:
    from bench.peer_families import FAMILIES
    from kernels.base import Dims

    family = FAMILIES["transpose"]
    dims = Dims({"m": m, "n": n})
    checks = [(dist, family.inputs(torch, dims, 1 + i, dist, device="cpu"))
              for i, dist in enumerate(family.check_dists)]
    return family, dims, checks


def test_the_transpose_check_is_exact() -> None:
    torch = pytest.importorskip("torch")
    family, _, checks = _transpose_case(torch)
    inputs = checks[0][1]
    x = inputs["input"]
    assert list(inputs) == ["input"]  # the family's input buffer's name
    assert x.shape == (37, 70)
    assert x.dtype == torch.float32
    exact = family.errors(torch, x.t().contiguous(), inputs)
    assert exact == {"rel_err": 0.0, "max_scaled_err": 0.0, "nonfinite": 0, "unequal": 0}
    flipped = x.t().contiguous()
    flipped[5, 3] = -flipped[5, 3]
    wrong = family.errors(torch, flipped, inputs)
    assert wrong["unequal"] == 1
    assert wrong["max_scaled_err"] == pytest.approx(2 * abs(float(x[3, 5])))
    assert wrong["rel_err"] > 0
    # a view of the input, or an untransposed copy, is wrong everywhere
    for y in (x.t(), x.clone()):
        assert family.errors(torch, y, inputs)["max_scaled_err"] == float("inf")


def test_the_harness_fails_a_transpose_that_is_off_by_one_ulp() -> None:
    """The harness's default tolerance (1e-4) would pass a rounding; the transpose's peers are
    judged at 0 with no element unequal."""
    torch = pytest.importorskip("torch")
    from bench.peer_families import Peer, transpose_variants
    from bench.peers import TOLERANCE, check_peer, judge

    family, dims, checks = _transpose_case(torch)
    peers = {p.name: p for p in family.peers(torch, dims, None)}
    assert list(peers)[0] == "torch transpose"
    assert {"torch.compile", "copy"} <= set(peers)
    assert peers["copy"].exact
    assert {n for n in peers if n.startswith("triton")} == {v[0] for v in transpose_variants()}
    for name in ("torch transpose", "copy"):
        verdict = check_peer(torch, family, peers[name], peers[name].make(torch, dims), checks)
        assert verdict["passed"], (name, verdict)
        assert verdict["tolerance"] == 0.0

    def nudged(torch: Any, dims: Any) -> Any:
        def runner(inputs: dict[str, Any]) -> Any:
            def once() -> Any:
                y = inputs["input"].t().contiguous()
                y[2, 9] = torch.nextafter(y[2, 9], torch.tensor(float("inf")))
                return y
            return once
        return runner

    verdict = check_peer(torch, family, Peer("nudged", nudged), nudged(torch, dims), checks)
    assert not verdict["passed"]
    assert verdict["unequal"] == 1
    assert 0 < verdict["max_scaled_err"] < 1e-5  # within the default tolerance, still wrong
    assert judge(verdict["cases"], TOLERANCE)["passed"] is False  # unequal fails at any tolerance
    line = peer_problems({"families": {"transpose": {"shapes": {"37x70": {"peers": {
        "nudged": {"correctness": verdict}}}}}}})
    assert line[0].startswith("transpose 37x70 nudged: wrong (rel ")
    assert line[0].endswith(", 1 unequal)")


def test_the_transpose_table_reads_as_softmax_does() -> None:
    peers = {"shapes": {"8192x8192": {"peers": {
        "torch transpose": _peer(260.0, 250.0), "torch.compile": _peer(240.0, 235.0, 230.0),
        "triton": _peer(250.0, 245.0), "triton b64x64 w8": _peer(220.0, 226.0, 221.0),
        "triton b32x64 w4": _peer(150.0, 150.0, passed=False), "copy": _peer(190.0, 185.0),
        "torch transpose again": _peer(262.0, 251.0)}}}}
    ours = [{"label": "campaign best", "shape": "8192x8192", "status": "ok",
             "perf": {"avg_us": 200.0}, "sustained": {"us_per_launch": 190.0},
             "correctness": {"rel_err": 0.0, "max_scaled_err": 0.0}}]
    row = summary_rows("transpose", ours, peers)[0]
    assert row["x"] == {"torch transpose": (1.3, round(250 / 190, 3)),
                        "torch.compile": (1.2, round(230 / 190, 3)),
                        "triton": (1.25, round(245 / 190, 3)),
                        "triton best": (1.1, round(221 / 190, 3))}
    assert row["pct_copy"] == (95.0, round(100 * 185 / 190, 1))
    lines = format_table("transpose", [row], "NVIDIA H100")
    assert lines[0].endswith("· torch: y.copy_(x.t())")
    assert lines[1].split()[3:] == ["us", "x", "torch", "x", "compile", "x", "triton", "x",
                                    "tri", "best", "%", "copy", "err"]
    assert lines[2].split()[3:9] == ["200.0/190.0", "1.30/1.32", "1.20/1.21", "1.25/1.29",
                                     "1.10/1.16", "95.0/97.4"]
    assert lines[2].split()[-1] == "0.0e+00"
    assert vendor_noise("transpose", {"families": {"transpose": peers}}) == (
        "torch transpose timed twice a shape: spread up to 0.8 %")


def test_the_triton_transpose_imports_without_a_gpu_and_runs_in_the_interpreter() -> None:
    """Where Triton is installed: the module imports with no GPU, and the kernel, run by
    Triton's interpreter on CPU tensors, transposes every edge shape at every launch."""
    pytest.importorskip("triton")
    pytest.importorskip("torch")
    import importlib

    peer_triton = importlib.import_module("bench.peer_triton")
    assert callable(peer_triton.transpose)
    script = (
        "import torch\n"
        "from bench import peer_triton\n"
        "from bench.peer_families import transpose_variants\n"
        "for m, n in [(1, 1), (7, 33), (33, 7), (130, 66), (3, 1025)]:\n"
        "    x = torch.randn(m, n)\n"
        "    for _, bm, bn, w in transpose_variants():\n"
        "        y = torch.full((n, m), float('nan'))\n"
        "        peer_triton.transpose(x, y, bm, bn, w)\n"
        "        assert torch.equal(y, x.t()), (m, n, bm, bn, w)\n"
        "print('exact')\n")
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, env=env, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "exact"


def test_the_library_is_set_against_the_peers_in_their_own_harness() -> None:
    peers = {"shapes": {"16384x1024": {"peers": {
        **PEERS["shapes"]["16384x1024"]["peers"], LIBRARY_PEER: _peer(36.0, 34.5, 34.0)}},
        "65536x128": {"peers": {"torch.softmax": _peer(21.0, 19.0)}},
        "32768x512": {"peers": {LIBRARY_PEER: _peer(30.0, 29.0, passed=False)}}}}
    rows = library_rows("softmax", peers, summary_rows("softmax", OURS, peers))
    assert [r["shape"] for r in rows] == ["16384x1024", "32768x512"]
    row = rows[0]
    # the library's sustained time is the faster of its loop and its graph replays, as a peer's
    assert (row["us"], row["sustained_us"]) == (36.0, 34.0)
    assert row["x"]["torch.compile"] == (round(36.4 / 36.0, 3), round(36.0 / 34.0, 3))
    assert row["x"]["triton best"] == (round(35.0 / 36.0, 3), 1.0)
    assert row["pct_copy"] == (round(100 * 36.3 / 36.0, 1), round(100 * 34.8 / 34.0, 1))
    # the child timed our fastest point there at 38.7 / 36.0 µs
    assert row["child"] == (round(38.7 / 36.0, 3), round(36.0 / 34.0, 3))
    assert rows[1]["us"] is None
    assert "wrong" in rows[1]["error"]
    lines = format_library_table("softmax", rows, "NVIDIA H100 80GB HBM3")
    assert "peers' harness" in lines[0]
    assert "child" in lines[1]
    assert lines[2].split()[:2] == ["16384x1024", "36.0/34.0"]
    assert lines[2].split()[-2] == "1.07/1.06"  # child
    assert lines[3].split()[0] == "32768x512"
    assert "wrong" in lines[3]
    assert lines[-1].split()[:3] == ["geomean", "1", "shape(s)"]
    assert format_library_table("softmax", [], "NVIDIA H100 80GB HBM3") == []


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
def test_a_bundle_is_read_by_its_own_loader_and_timed_where_it_has_an_entry(
        compiler: Any, tmp_path: Path) -> None:
    from bundle_support import build

    softmax = get_family("softmax")
    path = build(compiler, tmp_path / "lib", softmax, ["65536x128"])
    assert check_bundles([str(path)], ["gemm_bias_relu", "softmax"]) == {
        "softmax": path.resolve()}
    with pytest.raises(ValueError, match="its family 'softmax' is not one timed here"):
        check_bundles([str(path)], ["gemm_bias_relu"])
    with pytest.raises(ValueError, match="a second bundle of 'softmax'"):
        check_bundles([str(path), str(path)], ["softmax"])
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "dispatch.json").write_text("{}")
    with pytest.raises(ValueError, match="half: not a bundle"):
        check_bundles([str(tmp_path / "half")], ["softmax"])
    kernel = load_library(path.resolve(), "softmax")
    assert has_entry(kernel, softmax.parse_dims("65536x128"))
    assert not has_entry(kernel, softmax.parse_dims("16384x1024"))
    peer = library_peer(kernel, path)
    assert peer.name == LIBRARY_PEER
    assert peer.notes == {"bundle": str(path)}
    torch = pytest.importorskip("torch")
    once = peer.make(torch, softmax.parse_dims("65536x128"))({"x": torch.empty(65536, 128)})
    entry = dispatch_entry(path, "65536x128")
    assert isinstance(once, LibraryCall)
    assert once.runs == f"point {entry['point']} (tuned)"  # what the harness records


def dispatch_entry(bundle: Path, shape: str) -> dict[str, Any]:
    data = json.loads((bundle / "dispatch.json").read_text())
    return next(e for e in data["entries"]
                if "x".join(str(v) for v in e["shape"].values()) == shape)
