"""bench/merge_replay.py: a session's campaign rows merged into a shipped replay dataset."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from repo import ROOT


def write(path: Path, meta: dict[str, Any], rows: list[dict[str, Any]]) -> Path:
    text = "".join(json.dumps(r) + "\n" for r in [meta, *rows])
    path.write_bytes(gzip.compress(text.encode(), mtime=0))
    return path


def row(shape: str, us: float, **params: Any) -> dict[str, Any]:
    return {"params": {"block_threads": 256, "row_threads": 256, "vec": 4, "passes": 1,
                       "chunks": 4, **params}, "shape": shape, "status": "ok",
            "perf": {"avg_us": us}}


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "bench" / "merge_replay.py"), *args],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_new_rows_replace_the_points_they_measure_again_and_join_the_rest(
        tmp_path: Path) -> None:
    meta = {"kind": "meta", "family": "softmax", "commit": "abc", "note": "first",
            "device": {"name": "old"}, "date": "2026-12-01", "campaigns": 2,
            "vendor_us": {"8x4096": 10.0, "16x8192": 20.0}, "domains": {}, "shapes": [],
            "measured": 2}
    old = write(tmp_path / "old.jsonl.gz", meta,
                [row("8x4096", 5.0), row("16x8192", 9.0, unroll=1)])
    new_meta = {"kind": "meta", "device": {"name": "new"}, "date": "2026-12-03",
                "campaigns": 1, "vendor_us": {"8x4096": 11.0, "16x8192": 99.0}}
    # the first row: the same point as old's first (the default unroll written out), faster
    new = write(tmp_path / "new.jsonl.gz", new_meta,
                [row("8x4096", 4.0, unroll=1), row("8x4096", 6.0, cluster=2, spread=True,
                                                    block_threads=256, row_threads=256)])
    out = tmp_path / "out.jsonl.gz"
    done = run("--kernel", "softmax", "--dataset", str(old), "--out", str(out), "--tag",
               "2026-12-01 call1", "--note", "a tree", str(new))
    assert done.returncode == 0, done.stderr
    assert "2 rows, 1 earlier rows replaced; 3 in all" in done.stdout
    lines = [json.loads(line) for line in gzip.open(out, "rt")]
    merged_meta, rows = lines[0], lines[1:]
    assert sorted((r["shape"], r["perf"]["avg_us"]) for r in rows) == [
        ("16x8192", 9.0), ("8x4096", 4.0), ("8x4096", 6.0)]
    assert merged_meta["measured"] == 3
    assert merged_meta["campaigns"] == 3
    assert merged_meta["device"] == {"name": "new"}
    assert merged_meta["vendor_us"] == {"8x4096": 11.0, "16x8192": 20.0}  # only where measured
    assert merged_meta["commit"] == "abc; 2026-12-01 call1 (at 8x4096)"
    assert "1 of the earlier rows measured again replaced" in merged_meta["note"]
    assert merged_meta["domains"]["spread"] == [False, True]   # the default listed too
    assert merged_meta["shapes"] == ["16x8192", "8x4096"]
    # the same inputs give the same bytes; the same tag twice is refused
    again = tmp_path / "again.jsonl.gz"
    run("--kernel", "softmax", "--dataset", str(old), "--out", str(again), "--tag",
        "2026-12-01 call1", "--note", "a tree", str(new))
    assert again.read_bytes() == out.read_bytes()
    twice = run("--kernel", "softmax", "--dataset", str(out), "--tag", "2026-12-01 call1",
                str(new))
    assert twice.returncode != 0
    assert "run once" in twice.stderr


@pytest.mark.parametrize("bad", ["", '{"kind": "meta"}\n{"kind": "meta"}\n'])
def test_a_file_without_one_meta_line_is_refused(tmp_path: Path, bad: str) -> None:
    path = tmp_path / "bad.jsonl.gz"
    path.write_bytes(gzip.compress(bad.encode()))
    done = run("--kernel", "softmax", "--dataset", str(path), "--tag", "t")
    assert done.returncode != 0
    assert "meta lines, not one" in done.stderr
