"""Reports and exports of a campaign, and the dashboard's data endpoint: ``tuneforge report``,
``tuneforge export --format cu|json|t4|kt`` and ``tuneforge campaigns`` on a local database,
``GET /campaigns/{id}/points``, the dashboard's pages and vendored files."""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from dashboard_support import (
    FAILURES,
    TeamDb,
    create_campaign,
    finished_campaign,
    run_campaign,
    team_database,
)
from http_support import served
from repo import ROOT
from sqlalchemy import select
from typer.testing import CliRunner

from agent.exports import STATUS_COLOURS
from api.main import create_app
from cli.main import app as cli_app
from core import formats
from core.models import Campaign, Candidate
from core.settings import get_settings
from core.statuses import CANDIDATE_FINAL
from kernels import get_family

STATIC = ROOT / "api" / "static"


@pytest.fixture(scope="module")
def done(tmp_path_factory: pytest.TempPathFactory) -> tuple[TeamDb, str]:
    """A finished campaign with failures, in a folder of its own (the browser tests' server
    holds theirs open: a second team and campaign written into it lost theirs under xdist)."""
    return finished_campaign(tmp_path_factory.mktemp("reports-campaign"))


@pytest.fixture
def db_path(done: tuple[TeamDb, str]) -> Path:
    return Path(done[0].url.split("///", 1)[1])


def candidates(db: TeamDb, campaign_id: str) -> list[Candidate]:
    with db.sessions() as s:
        return list(s.scalars(select(Candidate).where(Candidate.campaign_id == campaign_id)
                              .order_by(Candidate.iteration)).all())


def tf(*args: str) -> Any:
    """Run the CLI in-process."""
    return CliRunner().invoke(cli_app, list(args), catch_exceptions=False)


# ---- the data endpoint and the pages --------------------------------------------------------
@pytest.fixture
def client(done: tuple[TeamDb, str], monkeypatch: pytest.MonkeyPatch) -> Iterator[httpx.Client]:
    monkeypatch.setenv("TUNEFORGE_DATABASE_URL", done[0].url)
    get_settings.cache_clear()
    with served(create_app()) as c:
        yield c


def test_points_carry_every_candidate_with_its_decision_and_time(
        client: httpx.Client, done: tuple[TeamDb, str]) -> None:
    db, cid = done
    rows = candidates(db, cid)
    body = client.get(f"/api/v1/campaigns/{cid}/points", headers={"X-API-Key": db.key}).json()
    assert body["total"] == len(rows) == 40
    assert list(body["status_colours"].items()) == list(STATUS_COLOURS.items())  # the dashboard's
    assert [p["id"] for p in body["items"]] == [c.id for c in rows]
    assert body["unit"] == "TFLOP/s"
    assert body["vendor"].startswith("cuBLAS fp32")
    assert body["vendor_throughput"] == pytest.approx(50.42, abs=0.01)  # recorded on the H200
    assert body["peak"] == pytest.approx(66.9, abs=0.1)  # the FP32 FMA peak of the H200
    assert body["peak_label"] == "FP32 FMA peak"
    by_iteration = {p["iteration"]: p for p in body["items"]}
    for iteration, status in FAILURES.items():
        point = by_iteration[iteration]
        assert point["status"] == status
        assert point["throughput"] is None
        assert not point["accepted"]
        assert status in point["decision"]["reason"]
    best = next(p for p in body["items"] if p["id"] == next(c for c in rows if c.accepted
                                                             and c.iteration > 30).id)
    assert best["accepted"]
    assert "above the 0.5% threshold" in best["decision"]["reason"]
    assert all(p["elapsed_s"] is not None and p["elapsed_s"] >= 0 for p in body["items"])
    elapsed = [p["elapsed_s"] for p in body["items"]]
    assert elapsed == sorted(elapsed)  # one evaluator: results come in iteration order
    page = client.get(f"/api/v1/campaigns/{cid}/points?limit=7&offset=35",
                      headers={"X-API-Key": db.key}).json()
    assert [p["iteration"] for p in page["items"]] == [35, 36, 37, 38, 39]


def test_history_credits_the_campaign_that_reached_a_tied_best_first(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch
                                                                     ) -> None:
    """Two replay campaigns reach the same best time: /history names the one that finished
    first, whichever row the database returns first."""
    db = team_database(tmp_path / "ties.db", team="ties")
    first, second = create_campaign(db, budget=30), create_campaign(db, budget=30)
    for cid in (first, second):
        run_campaign(db, cid, faults=False)
    monkeypatch.setenv("TUNEFORGE_DATABASE_URL", db.url)
    get_settings.cache_clear()
    base = dt.datetime(2026, 11, 30, tzinfo=dt.UTC)
    for earlier, later in ((second, first), (first, second)):
        with db.sessions.begin() as s:
            rows = {c: s.get_one(Campaign, c) for c in (first, second)}
            rows[earlier].finished_at = base
            rows[later].finished_at = base + dt.timedelta(minutes=5)
            bests = {s.get_one(Candidate, row.best_id).avg_us for row in rows.values()}
        assert len(bests) == 1  # the tie this test is about
        with served(create_app()) as client:
            entries = client.get("/api/v1/history", headers={"X-API-Key": db.key}).json()
        assert len(entries) == 1
        assert entries[0]["campaign_id"] == earlier
        assert entries[0]["campaigns"] == 2


def test_history_of_a_team_family_by_name_holds_every_version(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch
                                                                ) -> None:
    """/history?kernel=NAME named the latest version's campaigns only; each version is its own
    kernel (other code), so each keeps its own entries, which say their version."""
    from core import families
    from kernels.userspec import load_spec_dir

    db = team_database(tmp_path / "versions.db", team="versions")
    spec = load_spec_dir(Path(__file__).resolve().parent / "data" / "families" / "vscale")
    with db.sessions.begin() as s:
        keys = [families.register(s, spec=spec, team_id=db.team_id).key,
                families.register(s, spec={**spec, "description": "y = 2 x, v2"},
                                  team_id=db.team_id).key]
    ids = [create_campaign(db, budget=4), create_campaign(db, budget=4)]
    for cid in ids:
        run_campaign(db, cid, faults=False)
    with db.sessions.begin() as s:  # the two campaigns as campaigns of the two versions
        for cid, key in zip(ids, keys, strict=True):
            row = s.get_one(Campaign, cid)
            row.kernel, row.dims = key, {"n": 4096}
    monkeypatch.setenv("TUNEFORGE_DATABASE_URL", db.url)
    get_settings.cache_clear()
    with served(create_app()) as client:
        def history(kernel: str) -> list[dict[str, Any]]:
            got = client.get("/api/v1/history", params={"kernel": kernel},
                             headers={"X-API-Key": db.key})
            assert got.status_code == 200, got.text
            return list(got.json())

        both = history("vscale")
        assert sorted((e["kernel"], e["family"], e["family_version"]) for e in both) == sorted(
            [(keys[0], "vscale", 1), (keys[1], "vscale", 2)])
        assert [e["family_version"] for e in history("vscale@v1")] == [1]
        assert [e["kernel"] for e in history(keys[1])] == [keys[1]]
        builtin = history("gemm_bias_relu")
        assert builtin == []


def test_points_need_the_owning_teams_key(client: httpx.Client, done: tuple[TeamDb, str],
                                          tmp_path: Path) -> None:
    db, cid = done
    assert client.get(f"/api/v1/campaigns/{cid}/points").status_code == 401
    from api import security

    with db.sessions.begin() as s:
        _team, other_key = security.create_team(s, name=f"other-{tmp_path.name[-6:]}")
    response = client.get(f"/api/v1/campaigns/{cid}/points", headers={"X-API-Key": other_key})
    assert response.status_code == 404


def test_pages_load_without_a_key_and_forbid_foreign_scripts(client: httpx.Client) -> None:
    assert client.get("/", follow_redirects=False).headers["location"] == "/ui/"
    for path in ("/ui/", "/ui/campaigns/whatever", "/ui/history", "/ui/sets/whatever",
                 "/ui/library"):
        page = client.get(path)
        assert page.status_code == 200, path
        assert "<title>tuneforge" in page.text, path
        assert "script-src 'self'" in page.headers["content-security-policy"]
    script = client.get("/ui/static/campaign.js")
    assert script.status_code == 200
    assert "X-API-Key" in client.get("/ui/static/app.js").text


def test_vendored_libraries_are_plain_files_with_their_licences(client: httpx.Client) -> None:
    vendor = STATIC / "vendor"
    for lib, files in {"uplot": ["uPlot.iife.min.js", "uPlot.min.css", "LICENSE"],
                       "diff": ["diff.min.js", "LICENSE"],
                       "diff2html": ["diff2html.min.js", "diff2html.min.css", "LICENSE.md"]
                       }.items():
        for name in files:
            assert (vendor / lib / name).stat().st_size > 500, f"{lib}/{name}"
            assert client.get(f"/ui/static/vendor/{lib}/{name}").status_code == 200
    manifest = (vendor / "README.md").read_text()
    assert all(f"{lib}@" in manifest for lib in ("uplot", "diff", "diff2html"))


# ---- report -----------------------------------------------------------------------------------
def test_report_writes_both_plots_and_a_summary_with_the_accepted_steps(
        done: tuple[TeamDb, str], db_path: Path, tmp_path: Path) -> None:
    db, cid = done
    out = tmp_path / "report"
    result = tf("report", cid[:8], "--db", str(db_path), "--out", str(out))
    assert result.exit_code == 0, result.output
    for name in ("convergence-iteration.png", "convergence-time.png"):
        png = (out / name).read_bytes()
        assert png.startswith(b"\x89PNG"), name
        assert len(png) > 20_000, name
    md = (out / "report.md").read_text()
    rows = candidates(db, cid)
    accepted = [c for c in rows if c.accepted]
    section = md.split("## Accepted steps")[1].split("## Transforms that paid")[0]
    steps = [line for line in section.splitlines() if line.startswith("| ") and
             line.split("|")[1].strip().isdigit()]
    assert [int(s.split("|")[1]) for s in steps] == [c.iteration for c in accepted]
    # each step's speed-up over the incumbent, as the TFLOP/s show it (the column was "gain":
    # the time saved, "+81.20%" for a kernel 5.3 times faster)
    assert "| speed-up vs incumbent (#) |" in section
    for line, cand in zip(steps[1:], accepted[1:], strict=True):
        improvement = (cand.decision or {})["improvement_pct"]
        against = (cand.decision or {})["incumbent_iteration"]
        assert line.split("|")[5].strip() == \
            f"{1 / (1 - improvement / 100):.2f}x (#{against})", line
    # each step names the kernel it was applied to: one transform accepted twice is two steps
    iteration_of = {c.id: c.iteration for c in rows}
    assert "| iteration | parent | action |" in section
    for line, cand in zip(steps, accepted, strict=True):
        parent = iteration_of.get(cand.parent_id) if cand.parent_id else None
        assert line.split("|")[2].strip() == ("–" if parent is None else str(parent)), line
    for cand in accepted[1:]:
        assert cand.reason is not None
        assert cand.reason.replace("|", "\\|") in section
        assert "above the 0.5% threshold" in section
    assert "speedup over the baseline: **" in md
    # the speed against the vendor's reads as a speed: × vendor, never "% of its time"
    with db.sessions() as s:
        campaign = s.get(Campaign, cid)
        assert campaign is not None
        assert campaign.vendor_us is not None
        assert campaign.best_us is not None
        ratio = campaign.vendor_us / campaign.best_us
    assert f"- against the vendor: **{ratio:.2f}× cuBLAS fp32**" in md
    assert "of the vendor's time" not in md
    paid = md.split("## Transforms that paid")[1].split("## Outcomes")[0]
    assert "`apply_coalesce`" in paid
    assert "![convergence-time](convergence-time.png)" in md
    outcomes = Counter(c.status for c in rows)
    for status, count in outcomes.items():
        assert f"| {status} | {count} |" in md


# ---- exports ----------------------------------------------------------------------------------
def evaluated(db: TeamDb, cid: str) -> list[Candidate]:
    return [c for c in candidates(db, cid) if c.status in CANDIDATE_FINAL]


def test_t4_export_holds_every_evaluated_candidate(done: tuple[TeamDb, str], db_path: Path,
                                                    tmp_path: Path) -> None:
    db, cid = done
    result = tf("export", cid, "--db", str(db_path), "--format", "t4", "--out",
                str(tmp_path / "t4.json"))
    assert result.exit_code == 0, result.output
    doc = json.loads((tmp_path / "t4.json").read_text())
    assert doc["schema_version"] == "1.0.0"
    rows = evaluated(db, cid)
    assert len(doc["results"]) == len(rows) == 40
    for result_, cand in zip(doc["results"], rows, strict=True):
        assert set(result_) >= {"configuration", "times", "invalidity", "correctness",
                                "objectives", "measurements", "timestamp"}
        assert result_["configuration"] == cand.params
        names = {m["name"]: m["value"] for m in result_["measurements"]}
        assert names["candidate_id"] == cand.id
        assert names["iteration"] == cand.iteration
        if cand.status == "ok":
            assert result_["invalidity"] == "correct"
            assert result_["correctness"] == 1
            assert names["time"] == pytest.approx((cand.avg_us or 0) / 1000)
            assert len(result_["times"]["runtimes"]) == 3
        else:
            assert result_["invalidity"] == formats.T4_INVALIDITY[cand.status] != "correct"
            assert result_["correctness"] == 0
            assert "time" not in names
    assert {r["invalidity"] for r in doc["results"]} == {"correct", "compile", "correctness",
                                                         "runtime", "timeout"}


def test_t4_export_validates_against_kernel_tuners_schema(done: tuple[TeamDb, str],
                                                          db_path: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    kernel_tuner = pytest.importorskip("kernel_tuner")
    schema_path = Path(kernel_tuner.__file__).parent / "schema/T4/1.0.0/results-schema.json"
    result = tf("export", done[1], "--db", str(db_path), "--format", "t4")
    jsonschema.validate(json.loads(result.stdout), json.loads(schema_path.read_text()))


def test_kt_export_holds_every_evaluated_candidate(done: tuple[TeamDb, str], db_path: Path,
                                                   tmp_path: Path) -> None:
    db, cid = done
    path = tmp_path / "cache.json"
    result = tf("export", cid[:10], "--db", str(db_path), "--format", "kt", "--out", str(path))
    assert result.exit_code == 0, result.output
    text = path.read_text()
    assert text.endswith("}}}")  # Kernel Tuner takes any other ending for an unclosed cache
    cache = json.loads(text)
    keys = cache["tune_params_keys"]
    assert keys[:4] == ["block_x", "block_y", "coalesced", "smem"]
    assert cache["device_name"] == "NVIDIA H200"
    assert cache["problem_size"] == [4096] * 3
    rows = evaluated(db, cid)
    assert len(cache["cache"]) == len(rows) == 40
    family = get_family("gemm_bias_relu")  # the campaign of `done`
    for cand in rows:
        # every field at its value, the ones a stored point leaves out at their defaults
        point = family.params_from_dict(cand.params)
        values = [int(v) if isinstance(v, bool) else v for v in
                  (getattr(point, k) for k in keys)]
        entry = cache["cache"][",".join(map(str, values))]
        assert all(entry[k] == v for k, v in zip(keys, values, strict=True))
        assert all(v in cache["tune_params"][k] for k, v in zip(keys, values, strict=True))
        if cand.status == "ok":
            assert entry["time"] == pytest.approx((cand.avg_us or 0) / 1000)
        elif cand.status == "compile_error":
            assert entry["time"] == "CompilationFailedConfig"
        else:
            assert entry["time"] == "RuntimeFailedConfig"


def test_kt_export_is_read_by_kernel_tuner(done: tuple[TeamDb, str], db_path: Path,
                                           tmp_path: Path) -> None:
    util = pytest.importorskip("kernel_tuner.util")
    path = tmp_path / "cache.json"
    tf("export", done[1], "--db", str(db_path), "--format", "kt", "--out", str(path))
    data = util.read_cache(str(path), open_cache=False)
    failed = [e for e in data["cache"].values() if "__error__" in e]
    assert len(data["cache"]) == 40
    assert len(failed) == 40 - sum(
        c.status == "ok" for c in evaluated(done[0], done[1]))


def test_cu_and_json_exports(done: tuple[TeamDb, str], db_path: Path) -> None:
    db, cid = done
    cu = tf("export", cid[:8], "--db", str(db_path))
    assert cu.exit_code == 0, cu.output
    header, _, source = cu.stdout.partition("\n")
    provenance = json.loads(header.removeprefix("// "))
    assert provenance["campaign_id"] == cid
    assert provenance["launch"]["block"]
    assert "__global__" in source
    history = json.loads(tf("export", cid[:8], "--db", str(db_path), "--format", "json").stdout)
    assert history["campaign"]["id"] == cid
    assert len(history["candidates"]) == 40
    assert all(c["feedback"]["status"] == c["status"] for c in history["candidates"])


def test_campaigns_lists_and_errors_say_what_to_do(done: tuple[TeamDb, str], db_path: Path,
                                                   tmp_path: Path) -> None:
    db, cid = done
    listed = json.loads(tf("campaigns", "--db", str(db_path), "--json").stdout)
    assert cid in [c["id"] for c in listed]
    missing = tf("report", "00000000", "--db", str(db_path))
    assert missing.exit_code == 4
    assert "tuneforge campaigns" in missing.stderr
    nofile = tf("export", cid, "--db", str(tmp_path / "nope.db"))
    assert nofile.exit_code == 2
    assert "tuneforge tune --db" in nofile.stderr
    badfmt = tf("export", cid, "--db", str(db_path), "--format", "csv")
    assert badfmt.exit_code == 2
    assert "cu, json, t4, kt" in badfmt.stderr
    empty = team_database(tmp_path / "empty.db")
    assert "no campaign yet" in tf("campaigns", "--db", empty.url.split("///")[1]).stderr


def test_an_output_that_cannot_be_written_is_one_error_line(done: tuple[TeamDb, str],
                                                             db_path: Path,
                                                             tmp_path: Path) -> None:
    """``--out`` in a file's place, or a folder for a file: one line naming the path, exit 2
    (a traceback before)."""
    _db, cid = done
    a_file = tmp_path / "best.cu"
    a_file.write_text("// mine\n")
    src = ["--db", str(db_path)]
    for args, words in (
            (["report", cid, "--out", str(a_file), *src],
             f"error: --out {a_file} is a file: a report is a folder (report.md and two PNGs)"),
            (["report", cid, "--out", str(a_file / "report"), *src],
             f"error: cannot write {a_file / 'report'}: "),
            (["export", cid, "--out", str(tmp_path), *src],
             f"error: cannot write {tmp_path}: Is a directory"),
            (["export", cid, "--format", "json", "--out", str(a_file / "all.json"), *src],
             f"error: cannot write {a_file / 'all.json'}: "),
    ):
        result = CliRunner().invoke(cli_app, args, env={"COLUMNS": "300"})
        assert result.exit_code == 2, (args, result.output)
        assert result.exception is None or isinstance(result.exception, SystemExit), \
            repr(result.exception)
        assert "Traceback" not in result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, (args, result.stderr)
        assert lines[0].startswith(words), (args, result.stderr)
    assert a_file.read_text() == "// mine\n"


def test_formats_are_pure_and_order_parameters_by_domain() -> None:
    rows: list[dict[str, Any]] = [
            {"params": {"b": True, "a": 4}, "status": "ok", "gpu_seconds": 0.5,
             "perf": {"avg_us": 2000.0, "runs_us": [1999.0, 2000.0, 2001.0],
                      "throughput": 1.5, "unit": "TFLOP/s"}, "compile": {"seconds": 0.2}},
            {"params": {"b": False, "a": 8}, "status": "rejected"}]
    cache = formats.kt_cache(rows, domains={"a": (4, 8), "b": (False, True)}, device_name="X",
                             kernel_name="k", problem_size=[1, 2, 3], timestamp="t")
    assert cache["tune_params_keys"] == ["a", "b"]
    assert cache["tune_params"]["b"] == [0, 1]
    assert cache["cache"]["4,1"]["time"] == 2.0
    assert cache["cache"]["4,1"]["GFLOP/s"] == 1500.0
    assert cache["cache"]["8,0"]["time"] == "InvalidConfig"
    assert formats.kt_cache_text(cache).endswith("}}}")
    t4 = formats.t4_results(rows)
    assert [r["invalidity"] for r in t4["results"]] == ["correct", "constraints"]
    assert t4["results"][0]["times"]["runtimes"] == [1.999, 2.0, 2.001]
    assert {"name": "GFLOP/s", "value": 1500.0, "unit": "GFLOP/s"} in \
        t4["results"][0]["measurements"]
    # a bytes metric keeps its own unit
    rows[0]["perf"] = {**rows[0]["perf"], "throughput": 3900.0, "unit": "GB/s"}
    assert formats.kt_cache(rows, domains={"a": (4, 8), "b": (False, True)}, device_name="X",
                            kernel_name="k", problem_size=[1, 2], timestamp="t"
                            )["cache"]["4,1"]["GB/s"] == 3900.0


def test_every_command_has_help_with_examples() -> None:
    from typer.main import get_command

    root = get_command(cli_app)
    assert "Example" in tf("--help").stdout
    commands = root.commands  # type: ignore[attr-defined]
    names = [[name] for name in commands if name != "admin"]
    names += [["admin", name] for name in commands["admin"].commands]
    assert {"export", "report", "campaigns"} <= {name[0] for name in names}
    for name in names:
        result = tf(*name, "--help")
        assert result.exit_code == 0, name
        assert "Example" in result.stdout, name


def test_report_of_a_campaign_without_candidates_warns_nothing(tmp_path: Path) -> None:
    """A campaign that failed before its first candidate (a shape the replay never measured):
    its plots are empty frames saying so; matplotlib's "No artists with labels found to put in
    legend" warning reached the user's terminal."""
    import warnings

    from agent.exports import convergence_png

    campaign = {"shape": {"m": 1024, "n": 1024, "k": 1024}, "kernel": "gemm_bias_relu",
                "policy": "expert", "backend": "replay", "gpu": None, "vendor_us": None}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for by in ("iteration", "elapsed_s"):
            path = convergence_png(campaign, [], tmp_path / f"{by}.png", by=by)
            assert path.stat().st_size > 0


def test_a_split_precision_best_is_held_against_its_schemes_tensor_core_ceiling(
        tmp_path: Path, tuneforge_home: Path) -> None:
    # the dashboard's GEMM card said "best is 308 % of peak" against the FP32 FMA peak, a peak
    # the bf16x3 kernel is not bound by; and `report` said "207.32% of the vendor's time"
    db = tmp_path / "t.db"
    done = tf("tune", "--budget", "40", "--db", str(db), "--out", str(tmp_path / "o"), "--json")
    assert done.exit_code == 0, done.output
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["best"]["params"]["bf16_split"] == 3  # the replay's best: bf16x3
    rate = result["best"]["throughput"]
    done = tf("report", result["campaign_id"], "--db", str(db), "--out", str(tmp_path / "r"))
    assert done.exit_code == 0, done.output
    ceiling = 989.4 / 3  # the H200's dense BF16 tensor-core peak over bf16x3's 3 products
    md = (tmp_path / "r" / "report.md").read_text()
    assert f"| bf16x3 ceiling | | {ceiling:.2f} | |" in md
    assert f"runs at {100 * rate / ceiling:.0f}% of its bf16x3 ceiling" in md
    assert "FP32 FMA peak" not in md
    assert f"{result['pct_of_vendor'] / 100:.2f}× cuBLAS fp32" in done.stderr
    assert "vendor's time" not in done.stderr
    # the campaign's point page (what the dashboard draws) and the best's perf block agree
    from agent.exports import campaign_ceiling
    from core.db import session_factory

    with session_factory(f"sqlite:///{db}")() as s:
        campaign = s.get(Campaign, result["campaign_id"])
        assert campaign is not None
        assert campaign_ceiling(campaign) == (pytest.approx(ceiling), "bf16x3 ceiling")
        best = s.get(Candidate, campaign.best_id)
        assert best is not None
        assert best.perf is not None
        assert best.perf["peak"] == pytest.approx(ceiling, abs=1e-3)
        assert best.perf["pct_of_peak"] == pytest.approx(100 * rate / ceiling, abs=0.05)
        assert "dense BF16 tensor-core peak on the datasheet / 3" in best.perf["peak_source"]
        baseline = s.get(Candidate, campaign.baseline_id)
        assert baseline is not None
        assert baseline.perf is not None
        assert baseline.perf["peak"] == pytest.approx(66.9, abs=0.1)  # SIMT: the FP32 FMA peak
    done = tf("campaigns", "--db", str(db))
    assert f"{result['pct_of_vendor'] / 100:.2f}×" in done.stdout


def test_each_gemm_scheme_has_its_own_ceiling_and_an_unknown_device_none() -> None:
    from core.arch import ceiling
    from kernels.family import point_peak

    family = get_family("gemm_bias_relu")
    h200 = {"name": "NVIDIA H200", "sm_count": 132, "compute_capability": "9.0",
            "clock_khz": 1980000}
    base = family.baseline.to_dict()
    tc = {**base, "tf32x3": True, "wgmma": 128, "block_x": 128, "block_y": 2}
    expected = {"fp32": (base, "FP32 FMA peak", 66.9), "tf32x3": (tc, "tf32x3 ceiling", 164.9),
                "bf16x3": ({**tc, "bf16_split": 3}, "bf16x3 ceiling", 329.8),
                "bf16x6": ({**tc, "bf16_split": 6}, "bf16x6 ceiling", 164.9)}
    for scheme, (params, label, value) in expected.items():
        peak = point_peak(family, family.params_from_dict(params))
        assert peak.label == label, scheme
        assert ceiling(peak, h200)[0] == pytest.approx(value, abs=0.1), scheme
    # a device without datasheet tensor-core figures: no ceiling, and the reason
    peak = point_peak(family, family.params_from_dict({**tc, "bf16_split": 3}))
    none, why = ceiling(peak, {"name": "NVIDIA RTX 9999", "compute_capability": "9.0"})
    assert none is None
    assert "not in the datasheet table" in why
