"""``tuneforge family`` in embedded mode (a temporary ``--db``): add, list, show, import-kt, a
bad spec's exit 2 naming the field, and ``--kernel`` of the other commands finding the family
in the database. Through the real app (Typer's runner, in-process)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from repo import ROOT
from typer.testing import CliRunner

from cli.main import app

SPEC_DIR = ROOT / "tests" / "data" / "families" / "vscale"
KT_FILE = ROOT / "tests" / "data" / "families" / "vadd_kt.json"

runner = CliRunner()


def run(*args: str) -> tuple[int, str, str]:
    done = runner.invoke(app, list(args), env={"COLUMNS": "80"})
    return done.exit_code, done.stdout, done.stderr


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "runs.db")


def test_add_list_show(db: str, tmp_path: Path) -> None:
    code, out, err = run("family", "add", str(SPEC_DIR), "--db", db)
    assert code == 0, err
    assert "vscale v1 registered: key vscale@" in out
    # the next step it suggests names the database the family went into
    assert f"tune it: tuneforge tune --kernel vscale --db {db}" in out
    code, out, err = run("family", "add", str(SPEC_DIR), "--db", db, "--json")
    assert code == 0, err
    first = json.loads(out)
    assert (first["version"], first["created"]) == (1, False)
    changed = tmp_path / "vscale2"
    shutil.copytree(SPEC_DIR, changed)
    kernel = changed / "kernel.cu"
    kernel.write_text(kernel.read_text().replace("// y = 2 x", "// y = 2 x, version two"))
    code, out, err = run("family", "add", str(changed), "--db", db, "--json")
    assert code == 0, err
    second = json.loads(out)
    assert second["version"] == 2
    assert second["key"] != first["key"]

    code, out, err = run("family", "list", "--db", db, "--json")
    assert code == 0, err
    listed = {f["name"]: f for f in json.loads(out)}
    assert listed["vscale"]["version"] == 2
    assert listed["vscale"]["key"] == second["key"]
    assert listed["gemm_bias_relu"]["origin"] == "builtin"
    code, out, err = run("family", "list", "--db", db)
    assert code == 0, err
    assert {"vscale", "v2", "built-in"} <= set(out.split()), out
    assert max(len(line) for line in out.splitlines()) <= 80

    code, out, err = run("family", "show", "vscale@v1", "--db", db)
    assert code == 0, err
    assert first["key"] in out
    assert "BLOCK" in out
    assert "64, 128, 256" in out
    assert max(len(line) for line in out.splitlines()) <= 80
    code, out, err = run("family", "show", "vscale", "--db", db, "--json")
    assert code == 0, err
    assert [v["version"] for v in json.loads(out)["all_versions"]] == [1, 2]
    code, _, err = run("family", "show", "nope", "--db", db)
    assert code == 4
    assert "unknown kernel family 'nope'" in err


def test_kernel_options_find_the_family(db: str) -> None:
    assert run("family", "add", str(SPEC_DIR), "--db", db)[0] == 0
    code, out, err = run("render", "--kernel", "vscale", "--db", db,
                         "--params", '{"BLOCK": 256, "ITEMS": 4}')
    assert code == 0, err
    assert "2.0f * x[j]" in out
    assert "256" in out
    code, out, err = run("actions", "--kernel", "vscale@v1", "--db", db, "--json")
    assert code == 0, err
    origins = {a["name"]: a["origin"] for a in json.loads(out)}
    # the set_* actions are made from the tunables, not written by the expert (they read
    # "expert" before)
    assert origins["set_BLOCK"] == origins["set_ITEMS"] == "generated"
    assert "expert" not in origins.values()
    code, _, err = run("render", "--kernel", "vscale@v7", "--db", db)
    assert code == 2
    assert "--kernel: kernel family 'vscale' has no version v7" in err


def test_a_spec_tolerance_is_its_campaigns_default(tmp_path: Path) -> None:
    from kernels import get_family
    from kernels.family import DEFAULT_TOLERANCE, campaign_tolerance
    from kernels.userspec import build_family, load_spec_dir

    folder = tmp_path / "loose"
    shutil.copytree(SPEC_DIR, folder)
    data = json.loads((folder / "family.json").read_text())
    data["correctness"] = {"rule": "norm", "tolerance": 1e-3}
    (folder / "family.json").write_text(json.dumps(data))
    loose = build_family(load_spec_dir(folder))
    assert campaign_tolerance(loose, None) == 1e-3
    assert campaign_tolerance(loose, 2e-5) == 2e-5
    assert campaign_tolerance(get_family("softmax"), None) == DEFAULT_TOLERANCE == 1e-4


def test_kernels_lists_the_team_families_beside_the_built_ins(db: str,
                                                               tuneforge_home: Path) -> None:
    # `tuneforge kernels` listed the built-ins only: a registered family was invisible there
    code, out, err = run("kernels", "--db", db)
    assert code == 2
    assert f"no database at {Path(db).resolve()}" in err
    assert run("family", "add", str(SPEC_DIR), "--db", db)[0] == 0
    code, out, err = run("kernels", "--db", db, "--json")
    assert code == 0, err
    listed = {f["name"]: f for f in json.loads(out)}
    assert listed["softmax"]["origin"] == "builtin"
    assert listed["vscale"]["origin"] == "team"
    assert listed["vscale"]["key"].startswith("vscale@")
    code, out, err = run("kernels", "--db", db)
    assert code == 0, err
    assert "vscale v1 (yours)" in out
    assert max(len(line) for line in out.splitlines()) <= 80
    # no --db and no default database yet: the built-ins, and no database is created
    code, out, err = run("kernels", "--json")
    assert code == 0, err
    assert {f["origin"] for f in json.loads(out)} == {"builtin"}
    assert not list(tuneforge_home.glob("*.db"))


def test_kernels_names_each_familys_vendor_baseline(db: str) -> None:
    # the README says `tuneforge kernels` shows the vendor baseline: it had no such column
    assert run("family", "add", str(SPEC_DIR), "--db", db)[0] == 0
    code, out, err = run("kernels", "--db", db)
    assert code == 0, err
    assert "vendor" in out.splitlines()[2]  # the header
    rows = {line.split("│")[1].strip(): line for line in out.splitlines()
            if line.startswith("│") and line.split("│")[1].strip()}
    assert "cuBLAS fp32" in rows["gemm_bias_relu"]
    assert "torch.softmax" in rows["softmax"]
    assert " none " in rows["vscale v1 (yours)"]  # a user's family has no vendor baseline
    assert max(len(line) for line in out.splitlines()) <= 80
    code, out, err = run("kernels", "--db", db, "--json")
    listed = {f["name"]: f for f in json.loads(out)}
    assert listed["softmax"]["vendor"].startswith("torch.softmax")
    assert listed["vscale"]["vendor"] is None


def test_show_says_what_one_checks_after_registering(db: str) -> None:
    # only --json had the restrictions, the launch, the reference, the baseline and the
    # tolerance: what one reads back after `family add` to see the spec was taken as meant
    examples = ROOT / "examples" / "transpose"
    assert run("family", "add", str(examples), "--db", db)[0] == 0
    code, out, err = run("family", "show", "transpose", "--db", db)
    assert code == 0, err
    assert max(len(line) for line in out.splitlines()) <= 80
    rows: dict[str, str] = {}
    label = ""
    for line in out.splitlines():
        cells = line.split("│")
        if len(cells) == 4:  # │ label │ value │
            label = cells[1].strip() or label
            rows[label] = f"{rows.get(label, '')} {cells[2].strip()}".strip()
    spec = json.loads((examples / "family.json").read_text())
    for restriction in spec["restrictions"]:
        assert restriction in rows["restrictions"]
    assert "grid (ceil_div(n, tile_x), ceil_div(ceil_div(m, tile_y), tiles), 1)" in \
        rows["launch"]
    assert "block (tile_x // vec, tile_y // rows, 1)" in rows["launch"]
    assert rows["reference"].startswith(
        "transpose_reference in reference.cu, writes float64; grid")
    assert rows["baseline"] == ("tile_x=32, tile_y=8, rows=1, vec=1, use_smem=false, pad=0, "
                                "tiles=1")
    assert rows["correctness"].startswith("exact: every element equal to the reference")
    assert rows["vendor"].startswith("none")
    # a rule with a tolerance says the one its campaigns run at
    code, out, err = run("family", "show", "softmax", "--db", db)
    assert code == 0, err
    assert "scaled, tolerance 0.0001" in out
    assert "torch.softmax" in out
    code, out, err = run("family", "show", "transpose", "--db", db, "--json")
    shown = json.loads(out)
    assert (shown["tolerance"], shown["baseline"]["tile_x"]) == (1e-4, 32)


@pytest.mark.parametrize(("edit", "words"), [
    (lambda spec: {**spec, "tunables": {"BLOCK": []}}, "error: tunables.BLOCK: "),
    (lambda spec: {**spec, "kernel": {**spec["kernel"], "source": "../kernel.cu"}},
     "error: kernel.source: "),
    (lambda spec: {**spec, "name": "softmax"}, "error: name: "),
])
def test_a_bad_spec_exits_2_naming_the_field(db: str, tmp_path: Path, edit: object,
                                             words: str) -> None:
    bad = tmp_path / "bad"
    shutil.copytree(SPEC_DIR, bad)
    spec = json.loads((bad / "family.json").read_text())
    (bad / "family.json").write_text(json.dumps(edit(spec)))  # type: ignore[operator]
    code, out, err = run("family", "add", str(bad), "--db", db)
    assert code == 2, (out, err)
    assert words in " ".join(err.split()), err
    code, out, err = run("family", "list", "--db", db, "--json")
    assert [f for f in json.loads(out) if f["origin"] == "team"] == []


def test_import_kt_writes_a_directory_or_registers(db: str, tmp_path: Path) -> None:
    out_dir = tmp_path / "from_kt"
    code, out, err = run("family", "import-kt", str(KT_FILE), "--out", str(out_dir))
    assert code == 0, err
    assert (out_dir / "family.json").is_file()
    code, out, err = run("family", "add", str(out_dir), "--db", db, "--json")
    assert code == 0, err
    added = json.loads(out)
    code, out, err = run("family", "import-kt", str(KT_FILE), "--db", db, "--json")
    assert code == 0, err
    assert json.loads(out)["key"] == added["key"]  # the same content: the same version
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({**json.loads(KT_FILE.read_text()), "tune_params": {}}))
    code, _, err = run("family", "import-kt", str(broken), "--db", db)
    assert code == 2, err
    assert "error: tune_params: " in " ".join(err.split()), err


def test_the_example_family_end_to_end_on_the_cli(db: str) -> None:
    """examples/transpose: registered, shown, and its macro-transforms rendered by --kernel."""
    example = ROOT / "examples" / "transpose"
    code, out, err = run("family", "add", str(example), "--db", db, "--json")
    assert code == 0, err
    assert json.loads(out)["name"] == "transpose"
    code, out, err = run("family", "show", "transpose", "--db", db, "--json")
    assert code == 0, err
    shown = json.loads(out)
    assert [d["name"] for d in shown["dim_bounds"]] == ["m", "n"]
    assert "apply_shared_memory_transpose" in shown["transform_names"]
    code, out, err = run("render", "--kernel", "transpose", "--db", db,
                         "--actions", "apply_shared_memory_transpose();apply_tiling(32)")
    assert code == 0, err
    assert "#define use_smem 1\n" in out
    assert "#define tile_y 32\n" in out
    # no GPU and no replay dataset: tune says so and names the command that works here
    code, out, err = run("tune", "--kernel", "transpose", "--db", db, "--backend", "replay",
                         "--budget", "2")
    assert code == 2, (code, out, err)
    assert "ships no replay dataset" in err
    assert "tuneforge compile --kernel transpose" in err


def test_without_a_gpu_the_hint_is_a_command_that_runs(tmp_path: Path) -> None:
    # the hint said `tuneforge compile --kernel transpose` without the --db it needs: copied
    # as given, that failed with "unknown kernel family"
    import shlex

    db = str(tmp_path / "my runs.db")
    assert run("family", "add", str(ROOT / "examples" / "transpose"), "--db", db)[0] == 0
    code, _, err = run("tune", "--kernel", "transpose", "--db", db, "--out",
                       str(tmp_path / "out"), "--backend", "replay")  # as without a GPU
    assert code == 2
    hint = err.split("`")[1]
    assert hint == f"tuneforge compile --kernel transpose --db {shlex.quote(db)}"
    code, out, err = run(*shlex.split(hint)[1:], "--json")
    assert code == 0, err
    assert json.loads(out)["status"] == "ok"
    # the actions it would tune with: the set_* ones made from its tunables, and its own
    code, out, err = run("actions", "--kernel", "transpose", "--db", db, "--json")
    origins = {a["name"]: a["origin"] for a in json.loads(out)}
    assert origins["set_tile_x"] == "generated"
    assert origins["apply_tiling"] == "declared"
