"""``tuneforge tune`` on the replay backend: the JSON summary, the files, and bad input."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from typer.testing import CliRunner

from cli.main import app

_SCRIPT = Path(sys.executable).with_name("tuneforge")
COMMAND = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "cli.main"]
POINT_KEYS = {"params", "avg_us", "throughput_tflops"}


def tuneforge(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The console script in a child process, as a user runs it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUNEFORGE_")}
    env["TUNEFORGE_HOME"] = str(home)
    env["COLUMNS"] = "80"
    return subprocess.run([*COMMAND, *args], capture_output=True, text=True, env=env,
                          timeout=300)


def test_tune_json_on_replay(tmp_path: Path, tuneforge_home: Path) -> None:
    board = tmp_path / "board.json"
    board.write_text(json.dumps({"entries": [1000.0, {"tflops": 60.0}, 9000.0, 200_000.0]}))
    db, out = tmp_path / "t.db", tmp_path / "out"
    done = tuneforge(tuneforge_home, "tune", "--backend", "replay", "--budget", "15",
                     "--seed", "2", "--db", str(db), "--out", str(out), "--leaderboard",
                     str(board), "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert isinstance(result, dict)
    assert result["status"] == "done"
    assert result["evaluations"] == 15
    assert result["backend"] == "replay"
    assert result["gpu"] == "NVIDIA H200"
    best, baseline = result["best"], result["baseline"]
    assert POINT_KEYS <= set(best)
    assert POINT_KEYS <= set(baseline)
    assert baseline["params"]["coalesced"] is False
    assert baseline["params"]["smem"] is False
    assert best["avg_us"] < baseline["avg_us"] / 5
    assert best["throughput_tflops"] == pytest.approx(2 * 4096**3 / best["avg_us"] / 1e6,
                                                      rel=1e-3)
    assert result["speedup_vs_baseline"] == pytest.approx(baseline["avg_us"] / best["avg_us"],
                                                          rel=1e-3)
    # behind every entry faster than the best (1000 µs, 60 TFLOP/s, 9000 µs, 200 ms)
    ahead = sum([best["avg_us"] > 1000.0, best["throughput_tflops"] < 60.0,
                 best["avg_us"] > 9000.0, best["avg_us"] > 200_000.0])
    assert result["rank_est"] == ahead + 1
    cu = next(Path(f) for f in result["files"] if f.endswith(".cu"))
    png = next(Path(f) for f in result["files"] if f.endswith(".png"))
    header, source = cu.read_text().split("\n", 1)
    assert json.loads(header.removeprefix("// "))["params"] == best["params"]
    assert "__global__" in source
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert png.stat().st_size > 10_000
    # the campaign is in the database the user named
    with create_engine(f"sqlite:///{db}").connect() as conn:
        row = conn.execute(text("SELECT evaluations, best_us, status FROM campaigns WHERE id = "
                                ":id"), {"id": result["campaign_id"]}).one()
    assert tuple(row) == (15, pytest.approx(best["avg_us"], rel=1e-6), "done")
    # the path to the best, with the agent's reasons: the baseline, then accepted steps that
    # each beat their incumbent, the last one the best
    steps = result["steps"]
    assert steps[0]["action"] == "baseline"
    assert len(steps) >= 3
    assert all(st["speedup"] > 1.0 and st["reason"] for st in steps[1:])
    assert steps[-1]["iteration"] == best["iteration"]
    shown = tuneforge(tuneforge_home, "tune", "--backend", "replay", "--budget", "15",
                      "--seed", "2", "--db", str(db), "--out", str(out))
    assert shown.returncode == 0, shown.stderr
    assert "how it got there:" in shown.stdout
    assert steps[1]["action"] in shown.stdout


def test_the_replay_walks_a_gpu_campaigns_tensor_core_path(tmp_path: Path,
                                                            tuneforge_home: Path) -> None:
    """Without a GPU the default campaign replays what GPU campaigns measured on the H200, the
    tensor-core path among it: past the SIMT kernels to the bf16x3 split pass, ahead of cuBLAS
    fp32 (4x); the banner names the GPU, every date the rows come from and how many there
    are."""
    done = tuneforge(tuneforge_home, "tune", "--backend", "replay", "--budget", "60",
                     "--db", str(tmp_path / "t.db"), "--out", str(tmp_path / "out"), "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    best = result["best"]["params"]
    assert best["wgmma"], best
    assert best["bf16_split"] == 3, best
    assert best["split_pass"], best
    assert result["pct_of_vendor"] > 300
    assert not [s for s in result["steps"] if s["action"] == "not_measured"]
    banner = " ".join(re.sub(r"[│╭╮╰╯─]", " ", done.stderr).split())
    assert "taken on 2026-11-29 and 2026-12-02: 3212 points at 4096x4096x4096" in banner
    # the tuner-efficiency benchmarks keep the sub-space measured whole
    from core.replay import ReplayDataset
    from kernels import get_family

    data = ReplayDataset(get_family("gemm_bias_relu").replay_datasets()[0])
    whole = data.complete_space()
    assert len(whole.points) == data.meta["space_size"] < len(data.points)
    assert not any(row["params"].get("wgmma") for row in whole.points.values())


def test_tune_on_a_fresh_machine_creates_its_home(tmp_path: Path) -> None:
    # the README's first command on a machine that never ran tuneforge: no ~/.tuneforge, no
    # --db; the embedded SQLite file goes under a home folder that does not exist yet
    home = tmp_path / "fresh" / ".tuneforge"
    done = tuneforge(home, "tune", "--backend", "replay", "--budget", "3", "--out",
                     str(tmp_path / "out"), "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert (result["status"], result["evaluations"]) == ("done", 3)
    with create_engine(f"sqlite:///{home / 'tuneforge.db'}").connect() as conn:
        assert conn.execute(text("SELECT status FROM campaigns WHERE id = :id"),
                            {"id": result["campaign_id"]}).scalar_one() == "done"


def test_bad_input_from_the_console_script(tuneforge_home: Path, tmp_path: Path) -> None:
    done = tuneforge(tuneforge_home, "tune", "--policy", "foo", "--db", str(tmp_path / "x.db"))
    assert done.returncode == 2
    assert done.stderr.strip() == "error: unknown policy 'foo'; known: expert, optuna, random, llm"
    assert done.stdout == ""


@pytest.mark.parametrize(("args", "message"), [
    (["--shape", "0x1x1"], "error: --shape: shape.m must be in [1, 65536], got 0"),
    (["--shape", "2048x2048x2048", "--backend", "replay"],
     "error: --shape: the replay dataset has no measurement at shape 2048x2048x2048; "
     "it has 4096x4096x4096"),
    (["--backend", "gpu"], "error: --backend gpu: "),
    (["--leaderboard", "{missing}"], "error: --leaderboard {missing}: [Errno 2] No such file"),
    (["--leaderboard", "{not_json}"], "error: --leaderboard {not_json}: Expecting value"),
    (["--leaderboard", "{empty}"], "error: --leaderboard {empty}: expected a JSON list"),
], ids=["zero-shape", "shape-not-in-replay", "gpu-without-gpu", "board-missing",
        "board-not-json", "board-empty"])
def test_bad_input_exits_2_with_one_line_naming_it(tmp_path: Path, args: list[str],
                                                   message: str) -> None:
    if args == ["--backend", "gpu"]:
        try:
            import pycuda.driver  # noqa: F401
            pytest.skip("pycuda is importable here: a GPU may be present")
        except ImportError:
            pass
    paths = {"missing": str(tmp_path / "nope.json"), "not_json": str(tmp_path / "board.txt"),
             "empty": str(tmp_path / "empty.json")}
    Path(paths["not_json"]).write_text("fastest: 1 ms\n")
    Path(paths["empty"]).write_text("[]")
    args = [a.format(**paths) for a in args]
    message = message.format(**paths)
    result = CliRunner().invoke(app, ["tune", "--budget", "3", "--db", str(tmp_path / "t.db"),
                                      "--out", str(tmp_path / "out"), *args],
                                env={"COLUMNS": "300"})
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(message), lines[0]
    assert not (tmp_path / "out").exists()


def test_an_optuna_campaign_spends_its_budget_when_tpe_only_repeats(
        tmp_path: Path, tuneforge_home: Path) -> None:
    """When none of TPE's draws is fresh (explored, or not measured at the replay's shape) the
    policy fills its batch with uniform unexplored points instead, so the campaign spends its
    whole budget (a 300-evaluation GEMM replay campaign used to stop at 159 with 2337 points
    unexplored). Softmax at 8192x8192 meets it from the first batches of one: seed 0's 60
    evaluations are 23 of TPE and 36 of the fallback, each of those a batch that would have
    ended the campaign."""
    db = tmp_path / "optuna.db"
    done = tuneforge(tuneforge_home, "tune", "--backend", "replay", "--kernel", "softmax",
                     "--policy", "optuna", "--budget", "60", "--seed", "0", "--db", str(db),
                     "--out", str(tmp_path / "out"), "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["evaluations"] == 60, result["reason"]
    assert result["reason"] == "iteration budget of 60 spent"
    with create_engine(f"sqlite:///{db}").connect() as conn:
        actions: dict[str, int] = dict(conn.execute(text(
            "SELECT action, count(*) FROM candidates GROUP BY action")).all())
        # batches of one: an iteration of the fallback alone is one TPE found nothing in
        alone = conn.execute(text(
            "SELECT count(*) FROM (SELECT iteration FROM candidates GROUP BY iteration "
            "HAVING min(action) = 'random_point()' AND max(action) = 'random_point()')")).scalar()
    assert actions.get("optuna_tpe()", 0) > 10
    assert actions.get("random_point()", 0) > 0  # the fallback, labelled as such
    assert alone is not None
    assert alone > 10


def test_one_db_option_takes_a_path_or_a_url_on_every_command(
        tmp_path: Path, tuneforge_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``tune --db sqlite:///…`` writes that file (it made a folder named ``sqlite:``), and
    ``campaigns``, ``report``, ``export`` and ``db check`` read it by path or by URL alike."""
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "runs.db"
    runner = CliRunner()
    done = runner.invoke(app, ["tune", "--backend", "replay", "--budget", "3", "--db",
                               f"sqlite:///{db}", "--out", str(tmp_path / "out"), "--json"],
                         env={"COLUMNS": "300"})
    assert done.exit_code == 0, done.output
    campaign_id = json.loads(done.stdout.splitlines()[-1])["campaign_id"]
    assert db.is_file()
    assert not (tmp_path / "sqlite:").exists()
    for given in (str(db), f"sqlite:///{db}", "runs.db"):
        listed = runner.invoke(app, ["campaigns", "--db", given, "--json"])
        assert listed.exit_code == 0, listed.output
        assert [c["id"] for c in json.loads(listed.stdout)] == [campaign_id]
        exported = runner.invoke(app, ["export", campaign_id[:8], "--db", given])
        assert exported.exit_code == 0, exported.output
        assert "__global__" in exported.stdout
        checked = runner.invoke(app, ["db", "check", "--db", given])
        assert checked.exit_code == 0, checked.output
    reported = runner.invoke(app, ["report", campaign_id[:8], "--db", f"sqlite:///{db}",
                                   "--out", str(tmp_path / "report")])
    assert reported.exit_code == 0, reported.output
    assert (tmp_path / "report" / "report.md").is_file()


@pytest.mark.parametrize("out", ["/proc/x", "{file}", "{file}/sub"])
def test_an_out_folder_that_cannot_be_written_stops_tune_before_it_starts(
        tmp_path: Path, tuneforge_home: Path, out: str) -> None:
    """The campaign used to run to the end and then fail in three tracebacks, no files."""
    (tmp_path / "file").write_text("not a folder\n")
    out = out.format(file=tmp_path / "file")
    done = tuneforge(tuneforge_home, "tune", "--backend", "replay", "--budget", "50",
                     "--db", str(tmp_path / "t.db"), "--out", out)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"error: --out {out}: "), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "replay backend" not in done.stderr  # nothing ran
    assert not (tmp_path / "t.db").exists()


def test_tables_keep_ids_and_names_whole_at_80_columns(tmp_path: Path,
                                                       tuneforge_home: Path) -> None:
    """``tuneforge campaigns | cat`` cut ids to 5 characters and ``tuneforge actions | cat`` cut
    action names; the other columns wrap or give way instead."""
    db = tmp_path / "t.db"
    ids = []
    for seed in ("1", "2"):
        done = tuneforge(tuneforge_home, "tune", "--backend", "replay", "--budget", "3",
                         "--seed", seed, "--db", str(db), "--out", str(tmp_path / "out"),
                         "--json")
        assert done.returncode == 0, done.stderr
        ids.append(json.loads(done.stdout.splitlines()[-1])["campaign_id"])
    listed = tuneforge(tuneforge_home, "campaigns", "--db", str(db))  # COLUMNS=80, a pipe
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80, listed.stdout
    for campaign_id in ids:
        assert [line for line in lines if line.split()[:1] == [campaign_id[:8]]], listed.stdout
    assert "4096x4096x4096" in listed.stdout
    assert "NVIDIA H200" in listed.stdout
    assert "…" not in listed.stdout
    names = [spec["name"] for spec in json.loads(
        tuneforge(tuneforge_home, "actions", "--json").stdout)]
    table = tuneforge(tuneforge_home, "actions").stdout
    assert max(len(line) for line in table.splitlines()) <= 80, table
    rows = [line.split("│")[1].strip() for line in table.splitlines()
            if line.startswith("│") and line.split("│")[1].strip()]
    assert rows == names
