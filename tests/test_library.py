"""The team's library on the replay: the best known point a shape with its provenance, the
dispatch rule at measured and unmeasured shapes, and a probe that measures a fallback once —
through ``tuneforge library`` as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agent.library import ALTERNATES, TIE

_SCRIPT = Path(sys.executable).with_name("tuneforge")
COMMAND = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "cli.main"]


def tuneforge(home: Path, *args: str, code: int = 0) -> Any:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUNEFORGE_")}
    env.update({"TUNEFORGE_HOME": str(home), "COLUMNS": "80"})
    done = subprocess.run([*COMMAND, *args], capture_output=True, text=True, env=env,
                          timeout=600)
    assert done.returncode == code, done.stderr
    return json.loads(done.stdout.splitlines()[-1]) if code == 0 and "--json" in args \
        else done


@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A local database where a softmax set tuned three of the replay's shapes."""
    home = tmp_path_factory.mktemp("library")
    db = str(home / "lib.db")
    tuneforge(home, "tune", "--backend", "replay", "--kernel", "softmax", "--shapes",
              "8192x8192,65536x128,16x262144", "--budget", "60", "--db", db, "--out",
              str(home / "out"), "--json")
    return home, db


def test_the_library_holds_each_shapes_best_with_its_provenance(tuned: tuple[Path, str]
                                                                 ) -> None:
    home, db = tuned
    lib = tuneforge(home, "library", "show", "--kernel", "softmax", "--db", db, "--json")
    assert lib["gpu"] == "NVIDIA H200"
    assert [e["shape"] for e in lib["entries"]] == ["16x262144", "8192x8192", "65536x128"]
    for e in lib["entries"]:
        assert e["backend"] == "replay"
        assert e["avg_us"] > 0
        assert e["vendor_us"] > 0
        assert e["x_vendor"] == pytest.approx(e["vendor_us"] / e["avg_us"], rel=1e-3)
        assert e["commit"]
        assert e["measured_at"].startswith("20")
        assert len(e["campaign_id"]) == 32
    # each shape's near-ties: other points within TIE of its best, fastest first, distinct
    ties = [a for e in lib["entries"] for a in e["alternates"]]
    assert ties, "sixty evaluations at three shapes measured no two points within 3 %"
    for e in lib["entries"]:
        times = [a["avg_us"] for a in e["alternates"]]
        assert times == sorted(times)
        assert all(e["avg_us"] <= t <= e["avg_us"] * (1 + TIE) for t in times)
        assert len(e["alternates"]) <= ALTERNATES
        seen = [e["params"], *[a["params"] for a in e["alternates"]]]
        assert len({json.dumps(p, sort_keys=True) for p in seen}) == len(seen)
        assert all(len(a["candidate_id"]) == 32 for a in e["alternates"])
    shown = tuneforge(home, "library", "show", "--kernel", "softmax", "--db", db)
    assert "8192x8192" in shown.stdout
    assert f"3 shapes · {len(ties)} near-ties" in shown.stdout
    assert max(len(line) for line in shown.stdout.splitlines()) <= 80


def test_the_dispatch_rule(tuned: tuple[Path, str]) -> None:
    home, db = tuned

    def pick(shape: str) -> dict[str, Any]:
        return dict(tuneforge(home, "library", "pick", "--kernel", "softmax", "--shape",
                              shape, "--db", db, "--json"))

    measured = pick("8192x8192")
    assert (measured["rule"], measured["kind"], measured["measured_at_shape"]) == \
        (1, "point", True)
    # the replay's best at 65536x128 is slower than torch there: the vendor runs
    slower = pick("65536x128")
    assert (slower["rule"], slower["kind"]) == (1, "vendor")
    assert slower["vendor_us"] < slower["avg_us"]
    near = pick("65536x129")
    assert (near["rule"], near["kind"], near["measured_at_shape"]) == (2, "point", False)
    assert near["from_shape"] == "65536x128"
    far = pick("16384x2048")
    assert far["rule"] == 2
    assert far["from_shape"] == "8192x8192"
    empty = tuneforge(home, "library", "pick", "--kernel", "gemm_bias_relu", "--shape",
                      "512x512x512", "--db", db, "--json")
    assert (empty["rule"], empty["kind"]) == (3, "vendor")
    bad = tuneforge(home, "library", "pick", "--kernel", "softmax", "--shape", "0x5",
                    "--db", db, code=2)
    assert bad.stderr.count("error:") == 1


def test_a_pick_from_entries_read_once_is_the_pick(tuned: tuple[Path, str]) -> None:
    """``library export --shapes`` and a service probe read the entries once for all their
    shapes: every rule answers as a pick that reads them itself."""
    from agent import library
    from core.db import session_scope

    _, db = tuned
    with session_scope(f"sqlite:///{db}") as s:
        known = library.entries(s, team_id=None, kernel="softmax")
        for shape in ("8192x8192", "65536x128", "65536x129", "16384x2048", "3x5"):
            alone = library.pick(s, team_id=None, kernel="softmax", shape=shape)
            assert library.pick(s, team_id=None, kernel="softmax", shape=shape,
                                known=known) == alone
            assert library.fallback_points(s, team_id=None, kernel="softmax", shape=shape,
                                           known=known) == \
                library.fallback_points(s, team_id=None, kernel="softmax", shape=shape)
        assert {library.pick(s, team_id=None, kernel="softmax", shape=shape,
                             known=known).rule for shape in ("8192x8192", "65536x129")} == {1, 2}


def test_a_probe_measures_the_fallback_once(tuned: tuple[Path, str]) -> None:
    home, db = tuned
    before = tuneforge(home, "library", "pick", "--kernel", "softmax", "--shape",
                       "8192x4096", "--db", db, "--json")
    assert before["rule"] == 2
    probed = tuneforge(home, "library", "probe", "--kernel", "softmax", "--shapes",
                       "8192x4096", "--backend", "replay", "--db", db, "--json")
    assert probed[0]["shape"] == "8192x4096"
    assert probed[0]["evaluations"] >= 2  # the baseline and the fallback point
    after = tuneforge(home, "library", "pick", "--kernel", "softmax", "--shape",
                      "8192x4096", "--db", db, "--json")
    assert after["rule"] == 1
    assert after["measured_at_shape"] is True


def test_the_library_exports_a_bundle_a_program_loads(tuned: tuple[Path, str]) -> None:
    home, db = tuned
    out = home / "bundle"
    plain = home / "bundle-measured"
    done = tuneforge(home, "library", "export", "--kernel", "softmax", "--db", db, "--shapes",
                     "65536x129,16384x2048", "--out", str(plain), "--json")
    # a pick never measured at its shape is left to the vendor unless asked for
    assert sorted(done["unmeasured"]) == ["16384x2048", "65536x129"]
    measured_only = json.loads((plain / "dispatch.json").read_text())
    assert {e["source"] for e in measured_only["entries"]} == {"tuned"}
    assert all(e["shape"]["rows"] != 65536 or e["shape"]["cols"] != 129
               for e in measured_only["entries"])
    done = tuneforge(home, "library", "export", "--kernel", "softmax", "--db", db, "--shapes",
                     "65536x129,16384x2048", "--unmeasured", "--out", str(out), "--json")
    assert done["family"] == "softmax"
    data = json.loads((out / "dispatch.json").read_text())
    entries = {f"{e['shape']['rows']}x{e['shape']['cols']}": e for e in data["entries"]}
    # measured shapes where a point beat the vendor, and the program's other shapes' picks;
    # 65536x128, where the vendor ran faster, is left to the loader's vendor fallback
    assert "65536x128" not in entries
    assert entries["8192x8192"]["source"] == "tuned"
    assert entries["8192x8192"]["measured_at_shape"] is True
    assert entries["65536x129"]["source"] == "nearest"
    assert entries["65536x129"]["measured_at_shape"] is False
    assert (out / "tuneforge_loader.py").exists()
    assert (out / "tuneforge_dispatch.h").read_text().count("65536") >= 1
    for point in data["points"].values():
        assert (out / point["cubin"]).stat().st_size > 1000
    # the near-ties go with each tuned entry: their points compiled, their launches at the
    # shape, their times those the library shows
    shown = {e["shape"]: e for e in tuneforge(home, "library", "show", "--kernel", "softmax",
                                               "--db", db, "--json")["entries"]}
    carried = 0
    for text, entry in entries.items():
        alternates = entry["alternates"]
        if entry["source"] != "tuned":
            assert alternates == []
            continue
        assert [a["measured_us"] for a in alternates] == \
            [a["avg_us"] for a in shown[text]["alternates"]]
        for alt in alternates:
            assert alt["point"] != entry["point"]
            assert data["points"][alt["point"]]["params"] in \
                [a["params"] for a in shown[text]["alternates"]]
            assert alt["launch"]["grid"]
            assert alt["launch"]["kernel_name"]
            carried += 1
    assert carried > 0
    again = tuneforge(home, "library", "export", "--kernel", "softmax", "--db", db, "--out",
                      str(out), code=2)
    assert "not an empty folder" in again.stderr
