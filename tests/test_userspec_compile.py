"""A family's kernels compiled when it is registered (``tuneforge family add``, the store's
``register``, ``POST /families`` through it) and by ``tuneforge compile``: the baseline and the
reference, with the real nvcc under the registration's limits. A family that cannot compile is
refused with nvcc's first lines and the field, and nothing is stored; a kernel and its reference
kept in one file (the common layout) compile, the reference with the baseline's ``#define``
lines; a reference in a file of its own compiles as written."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from sqlalchemy import func, select
from typer.testing import CliRunner

from cli.main import app
from core.db import session_scope
from core.models import Family
from kernels.userspec import build_family, load_spec_dir

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")

ONE_FILE = Path(__file__).resolve().parent / "data" / "families" / "scaled_transpose"
runner = CliRunner()


def run(*args: str) -> tuple[int, str, str]:
    done = runner.invoke(app, list(args), env={"COLUMNS": "200"})
    return done.exit_code, done.stdout, done.stderr


def copy_family(tmp_path: Path, name: str = "fam") -> Path:
    return Path(shutil.copytree(ONE_FILE, tmp_path / name))


def stored(db: str) -> int:
    with session_scope(f"sqlite:///{db}") as session:
        return int(session.scalar(select(func.count()).select_from(Family)) or 0)


def test_kernel_and_reference_in_one_file_register_and_compile(tmp_path: Path) -> None:
    """The reference uses the tunables' macros (tile[TILE][TILE + PAD]): it is compiled with
    the baseline's #define lines, at family add and in tuneforge compile."""
    db = str(tmp_path / "runs.db")
    code, out, err = run("family", "add", str(ONE_FILE), "--db", db)
    assert code == 0, err
    assert "scaled_transpose v1 registered" in out
    family = build_family(load_spec_dir(ONE_FILE))
    assert "\n#define TILE 32\n#define PAD 1\n" in family.reference_source()
    code, out, err = run("compile", "--kernel", "scaled_transpose", "--db", db, "--json")
    assert code == 0, err + out
    record = json.loads(out)
    assert record["status"] == "ok"
    assert record["reference"] == {"status": "ok", "error": None}


def test_a_reference_that_cannot_compile_is_refused_at_family_add(tmp_path: Path) -> None:
    root = copy_family(tmp_path)
    kernel = root / "transpose.cu"
    text = kernel.read_text()
    at = text.index("scaled_transpose_ref")
    kernel.write_text(text[:at] + text[at:].replace("TILE + PAD", "TILE + SKEW"))
    db = str(tmp_path / "runs.db")
    code, out, err = run("family", "add", str(root), "--db", db)
    assert code == 2, out
    line = err.strip()
    assert len(line.splitlines()) == 1, err
    assert line.startswith("error: kernel.source: nvcc cannot compile the baseline point")
    assert 'transpose.cu(13): error: identifier "SKEW" is undefined' in line
    assert stored(db) == 0


def test_a_reference_in_its_own_file_that_reads_an_undefined_macro_is_refused(
        tmp_path: Path) -> None:
    root = copy_family(tmp_path)
    spec = json.loads((root / "family.json").read_text())
    text = (root / "transpose.cu").read_text()
    at = text.index('extern "C" __global__ void scaled_transpose_ref')
    (root / "transpose.cu").write_text(text[:at])
    (root / "reference.cu").write_text(text[at:].replace("TILE + PAD", "WIDTH"))
    spec["reference"]["source"] = "reference.cu"
    (root / "family.json").write_text(json.dumps(spec))
    db = str(tmp_path / "runs.db")
    code, _, err = run("family", "add", str(root), "--db", db)
    assert code == 2
    assert err.startswith("error: reference.source: nvcc cannot compile the reference kernel "
                          "scaled_transpose_ref (reference.cu compiled as written, without the "
                          "tunables: keep the reference in the kernel's file"), err
    assert 'reference.cu(3): error: identifier "WIDTH" is undefined' in err
    assert stored(db) == 0


def test_a_baseline_that_cannot_compile_is_refused(tmp_path: Path) -> None:
    root = copy_family(tmp_path)
    kernel = root / "transpose.cu"
    kernel.write_text(kernel.read_text().replace("2.0f * in[", "2.0f * missing_scale * in[", 1))
    db = str(tmp_path / "runs.db")
    code, _, err = run("family", "add", str(root), "--db", db)
    assert code == 2
    assert "kernel.source: nvcc cannot compile the baseline point {'TILE': 32, 'PAD': 1}" in err
    assert 'identifier "missing_scale" is undefined' in err
    assert stored(db) == 0


def test_a_preprocessor_bomb_is_stopped_at_the_compile_limit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """2**26 tokens from 27 macros: nvcc is killed at family_compile_timeout_s."""
    monkeypatch.setenv("TUNEFORGE_FAMILY_COMPILE_TIMEOUT_S", "3")
    root = copy_family(tmp_path)
    bomb = "#define A0 +1\n" + "".join(f"#define A{i} A{i - 1} A{i - 1}\n" for i in range(1, 27))
    kernel = root / "transpose.cu"
    kernel.write_text(bomb + kernel.read_text().replace("2.0f * in[", "(0 A26) * in[", 1))
    db = str(tmp_path / "runs.db")
    start = time.monotonic()
    code, _, err = run("family", "add", str(root), "--db", db)
    took = time.monotonic() - start
    assert code == 2
    assert "kernel.source: nvcc did not finish compiling the baseline point" in err
    assert "nvcc killed after 3 s" in err
    assert took < 15, took
    assert stored(db) == 0


def test_the_same_content_again_compiles_nothing(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A stored version is answered as it was, without nvcc (a broken nvcc does not matter)."""
    db = str(tmp_path / "runs.db")
    assert run("family", "add", str(ONE_FILE), "--db", db)[0] == 0
    monkeypatch.setenv("TUNEFORGE_NVCC", str(tmp_path / "no-such-nvcc"))
    code, out, err = run("family", "add", str(ONE_FILE), "--db", db)
    assert code == 0, err
    assert "already registered" in out


def test_the_named_shape_form_takes_upper_case_dimension_names(tmp_path: Path) -> None:
    """Dims R and C: --shape R=64,C=64 gets past the shape (to the no-GPU hint on a machine
    without one; to a campaign on one with a GPU)."""
    db = str(tmp_path / "runs.db")
    assert run("family", "add", str(ONE_FILE), "--db", db)[0] == 0
    code, _, err = run("tune", "--kernel", "scaled_transpose", "--db", db,
                       "--shape", "R=64,C=64", "--budget", "2")
    assert "--shape" not in err, err
    code, _, err = run("tune", "--kernel", "scaled_transpose", "--db", db,
                       "--shape", "R=8192,K=8192", "--budget", "2")
    assert code == 2
    assert "--shape: shape: unknown dimension(s) K; missing C (dimensions: R, C)" in err


@pytest.mark.parametrize(("prefix", "replace", "words"), [
    ("template <int N> struct S { static __device__ int v() { return S<N + 1>::v() + 1; } };\n",
     ("2.0f * in[", "(float)S<0>::v() * in["), "error: excessive recursion at instantiation"),
    ("", ("tile[TILE][TILE + PAD]", "tile[TILE * 64][TILE + PAD]"), "uses too much shared data"),
    ("#error this family is not finished\n", ("", ""), "error: #error this family is not finished"),
    ("__device__ int f(int x) { return x +; }\n", ("", ""), "error: expected an expression"),
])
def test_kernels_nvcc_refuses_are_refused_with_its_message(
        tmp_path: Path, prefix: str, replace: tuple[str, str], words: str) -> None:
    root = copy_family(tmp_path)
    kernel = root / "transpose.cu"
    kernel.write_text(prefix + kernel.read_text().replace(*replace, 1))
    db = str(tmp_path / "runs.db")
    code, _, err = run("family", "add", str(root), "--db", db)
    assert code == 2, err
    assert err.startswith("error: kernel.source: nvcc cannot compile the baseline point"), err
    assert words in err, err
    assert stored(db) == 0
