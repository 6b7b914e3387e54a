"""``bench/gpu_sets_heldout.sh``'s flow on the replay, up to the GPU: ``bench/shape_sets.py``
(a weighted softmax set against one campaign a shape, its database kept), then
``bench/library_held_out.py`` on that database: the held-out shapes it chooses (outside the
set, near and far as stated, the same for a seed), the bundle ``library export --shapes``
writes for them (each held-out shape the nearest valid set best, or the vendor), read by the
loader as a user loads it; and the helpers the measuring process uses, which import nothing of
tuneforge."""

from __future__ import annotations

import json
import math
import sys
import warnings
from pathlib import Path

import pytest
from repo import ROOT

from bench.library_held_out import (
    NEAR,
    held_out_shapes,
    main,
    text_of,
)
from bench.loader_bench import MAX_SOFTMAX_ELEMENTS
from bench.shape_sets import main as shape_sets

SET = "8192x8192,16384x1024,2048x65536"


def distance(a: dict[str, int], b: dict[str, int]) -> float:
    return sum(abs(math.log(a[n] / b[n])) for n in a)


def test_a_kept_replay_set_its_held_out_shapes_and_their_bundle(tmp_path: Path) -> None:
    keep = tmp_path / "keep"
    weighted = SET.replace("16384x1024", "16384x1024:2")
    assert shape_sets(["--kernel", "softmax", "--shapes", weighted, "--budget", "8",
                       "--set-budget", "20", "--keep", str(keep), "--out",
                       str(tmp_path / "sets")]) == 0
    sets = json.loads((tmp_path / "sets" / "shape-sets.json").read_text())
    assert sets["complete"]
    assert sorted(sets["separate"]) == sorted(SET.split(","))
    assert [r["shape"] for r in sets["shapes"]][0] == "16384x1024"  # the heaviest first
    assert sets["totals"]["set_again"]["gpu_seconds"] == 0.0
    assert sets["totals"]["set_again"]["same_bests"]
    assert sets["targets"]["reach"] == all(r["set_over_separate"] >= 0.98
                                           for r in sets["shapes"])

    out = tmp_path / "out"
    assert main(["--kernel", "softmax", "--db", str(keep / "set.db"), "--home", str(keep),
                 "--held-out", "10", "--seed", "7", "--no-measure", "--out", str(out),
                 "--work", str(tmp_path / "work")]) == 0
    record = json.loads((out / "held-out.json").read_text())
    cases = record["cases"]
    in_set = [c["shape"] for c in cases if c["class"] == "in_set"]
    held = [c for c in cases if c["class"] != "in_set"]
    assert sorted(text_of(s) for s in in_set) == sorted(SET.split(","))
    assert len(held) == 10
    assert sum(c["class"] == "near" for c in held) == 5
    texts = [text_of(c["shape"]) for c in held]
    assert len(set(texts)) == 10
    assert not set(texts) & set(SET.split(","))
    for case in held:
        shape = case["shape"]
        far = min(distance(shape, s) for s in in_set)
        assert case["distance"] == pytest.approx(far, abs=1e-3)
        assert (far <= NEAR) == (case["class"] == "near"), case
        assert shape["rows"] <= 65536
        assert shape["cols"] <= 262144
        assert shape["rows"] * shape["cols"] <= MAX_SOFTMAX_ELEMENTS
    tuned_dims = [c["shape"] for c in cases if c["class"] == "in_set"]
    assert held_out_shapes("softmax", tuned_dims, 10, 7) == \
        [{k: c[k] for k in ("shape", "class", "distance", "nearest_set_shape")} for c in held]

    # the bundle: a set shape's entry is its best where it beat the vendor; a held-out shape's,
    # when it has one, is the best of one of its three nearest set shapes (the dispatch rule)
    dispatch = json.loads((out / "dispatch.json").read_text())
    entries = {text_of(e["shape"]): e for e in dispatch["entries"]}
    assert dispatch["fallback"] == "vendor"
    library = {text_of(c["shape"]): c for c in cases if c["class"] == "in_set"}
    for text, case in library.items():
        beat = case["library_vendor_us"] > case["library_us"]
        assert (text in entries) == beat, text
        assert case["source"] == ("tuned" if beat else "fallback")
    with_entry = 0
    for case in held:
        entry = entries.get(text_of(case["shape"]))
        assert case["source"] == (entry["source"] if entry else "fallback")
        if entry is None:
            continue
        with_entry += 1
        assert entry["source"] in ("nearest", "rule_book")
        assert not entry["measured_at_shape"]
        if entry["source"] == "nearest":
            three = sorted(in_set, key=lambda s: distance(case["shape"], s))[:3]
            assert entry["provenance"]["from_shape"] in [text_of(s) for s in three], case
    assert with_entry >= 5  # the near shapes at least: the set's bests launch there

    # the loader, as a user loads it, says what runs at every shape: its entry or the vendor
    sys.path.insert(0, str(tmp_path / "work" / "bundle-softmax"))
    try:
        import torch
        import tuneforge_loader

        lib = tuneforge_loader.load(tmp_path / "work" / "bundle-softmax")
        for case in cases:
            x = torch.empty(case["shape"]["rows"], case["shape"]["cols"], device="meta")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", tuneforge_loader.FallbackWarning)
                looked = lib.softmax.lookup(x)
            if case["source"] == "fallback":
                assert looked.entry is None, case
                assert looked.runs.startswith("vendor"), case
            else:
                assert looked.entry is not None
                assert looked.entry["source"] == case["source"]
    finally:
        sys.path.remove(str(tmp_path / "work" / "bundle-softmax"))
        sys.modules.pop("tuneforge_loader", None)


def test_the_measuring_helpers_check_and_import_nothing_of_tuneforge() -> None:
    """``bench/loader_timing.py`` tells a right softmax from a wrong one, and importing it
    (as the measuring process does) imports none of the product's packages."""
    import subprocess

    import torch

    from bench import loader_timing

    x = torch.randn(64, 300, dtype=torch.float64).float()
    good = torch.softmax(x, -1)
    bad = good.clone()
    bad[3, 7] += 1e-3
    assert loader_timing.scaled_error(torch, "softmax", good, [x])["max_scaled_err"] < 1e-5
    assert loader_timing.scaled_error(torch, "softmax", bad, [x])["max_scaled_err"] > 1e-4
    root = ROOT
    probe = ("import sys, bench.loader_timing; from bench.library_held_out import "
             "tuneforge_modules; print(','.join(tuneforge_modules()))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=root, capture_output=True,
                          text=True, timeout=60, check=True)
    assert done.stdout.strip() == ""


def test_a_comparison_in_two_halves_takes_the_first_halfs_campaigns(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--separate-only`` then ``--separate-from``: the second half runs only the shapes the
    first lacks, then the set; a record of another comparison is refused before any run."""
    first = tmp_path / "first"
    assert shape_sets(["--kernel", "softmax", "--shapes", "8192x8192,16384x1024",
                       "--budget", "6", "--separate-only", "--out", str(first)]) == 0
    earlier = str(first / "shape-sets.json")
    half = json.loads((first / "shape-sets.json").read_text())
    assert sorted(half["separate"]) == ["16384x1024", "8192x8192"]
    assert not half["complete"]
    assert half["totals"].keys() == {"separate"}

    second = tmp_path / "second"
    assert shape_sets(["--kernel", "softmax", "--shapes", SET, "--budget", "6",
                       "--set-budget", "12", "--separate-from", earlier,
                       "--out", str(second)]) == 0
    whole = json.loads((second / "shape-sets.json").read_text())
    assert whole["complete"]
    assert sorted(whole["separate"]) == sorted(SET.split(","))
    for shape in ("8192x8192", "16384x1024"):  # taken, not run again
        assert whole["separate"][shape] == half["separate"][shape]
    assert whole["totals"]["separate"]["campaigns"] == 3
    assert "separate 2048x65536" in capsys.readouterr().out
    assert whole["totals"]["set_again"]["gpu_seconds"] == 0.0

    for wrong, says in ((["--kernel", "softmax", "--budget", "7", "--shapes", SET],
                         "its budget is 6, not 7"),
                        (["--kernel", "gemm_bias_relu", "--budget", "6", "--shapes",
                          "64x64x64"], "its kernel is 'softmax'"),
                        (["--kernel", "softmax", "--budget", "6", "--shapes", "2048x65536"],
                         "shapes outside the set: 16384x1024, 8192x8192")):
        with pytest.raises(SystemExit):
            shape_sets([*wrong, "--separate-from", earlier, "--out", str(tmp_path / "no")])
        assert says in capsys.readouterr().err
        assert not (tmp_path / "no").exists()


def test_the_report_leaves_a_wrong_peer_out_of_the_peers_means() -> None:
    from bench.library_held_out import report

    base = {"class": "near", "passed": True, "x_vendor": 1.2, "x_vendor_sustained": 1.1,
            "source_seen": "tuned"}
    rows = [{**base, "x_peer": 2.0, "x_peer_sustained": 3.0, "peer_passed": True},
            {**base, "x_peer": 0.5, "x_peer_sustained": 0.5, "peer_passed": False},
            {**base, "peer_error": "RuntimeError: no fake kernel"}]
    near = report({}, rows)["near"]
    assert near["gm_x_peer_flushed"] == 2.0
    assert near["gm_x_peer_sustained"] == 3.0
    assert near["peer_rows"] == 1
    assert near["shapes"] == 3
