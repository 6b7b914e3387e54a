"""The CLI's bad input, command by command: each exits non-zero (2: bad input, 4: no such
campaign, 1: a point the space rejects) with one stderr line naming the option and the problem,
no traceback, and nothing written (no database, no output folder). Through the real ``tuneforge``
app (Typer's runner, in-process: the console script is the same object); ``tuneforge submit``
against a server is in ``tests/service/test_bad_input.py``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.main import app
from core.db import upgrade_database

#: (args, exit code, words of the one line that says what is wrong). ``{db}`` is a migrated
#: database with no campaign, ``{missing}`` a path that does not exist, ``{nan_board}`` a
#: leaderboard holding NaN, ``{out}`` where an output would go (it must stay absent).
CASES: list[tuple[list[str], int, str]] = [
    # tune: sizes, names, budgets, tolerances — each refused before anything runs
    (["tune", "--shape", "0x4x4"], 2, "error: --shape: shape.m must be in [1, 65536], got 0"),
    (["tune", "--shape", "axb"], 2,
     "shape must look like MxNxK (e.g. 4096x4096x4096) or m=...,n=...,k=..., got 'axb'"),
    (["tune", "--shape", "-1x2x3"], 2, "shape must look like MxNxK"),
    (["tune", "--shape", "4096x4096"], 2, "shape must look like MxNxK"),
    (["tune", "--shape", "70000x1x1"], 2,
     "error: --shape: shape.m must be in [1, 65536], got 70000"),
    (["tune", "--shape", "m=1,n=2"], 2, "error: --shape: shape: missing k (dimensions: m, n, k)"),
    (["tune", "--shape", "65536x65536x65536"], 2,
     "error: --shape: 65536x65536x65536 needs 112.1 GiB for A, B, bias, C and the fp64 "
     "reference, more than the 80 GiB a campaign may use (TUNEFORGE_GPU_MEMORY_GIB)"),
    (["tune", "--policy", "genius"], 2,
     "error: unknown policy 'genius'; known: expert, optuna, random, llm"),
    (["tune", "--budget", "0"], 2, "error: --budget: Input should be greater than or equal to 1"),
    (["tune", "--budget", "-3"], 2, "error: --budget: Input should be greater than or equal to 1"),
    (["tune", "--budget", "200000"], 2,
     "error: --budget: Input should be less than or equal to 100000"),
    (["tune", "--budget", "ten"], 2,
     "Invalid value for '--budget': Input should be a valid integer"),  # Typer's usage error
    (["tune", "--backend", "tpu"], 2, "error: --backend must be auto, gpu or replay, not 'tpu'"),
    (["tune", "--tolerance", "nan"], 2, "error: --tolerance: Input should be a finite number"),
    (["tune", "--tolerance", "inf"], 2, "error: --tolerance: Input should be a finite number"),
    (["tune", "--tolerance", "-1e-4"], 2, "error: --tolerance: Input should be greater than 0"),
    (["tune", "--tolerance", "0.5"], 2,
     "error: --tolerance: Input should be less than or equal to 0.1"),
    (["tune", "--wall-seconds", "-1"], 2, "error: --wall-seconds: Input should be greater than 0"),
    (["tune", "--settle-after", "-1"], 2,
     "error: --settle-after: Input should be greater than or equal to 0"),
    (["tune", "--gpu-seconds", "nan"], 2, "error: --gpu-seconds: Input should be a finite number"),
    (["tune", "--threshold", "500"], 2,
     "error: --threshold: Input should be less than or equal to 100"),
    (["tune", "--seed", "-1"], 2, "error: --seed: Input should be greater than or equal to 0"),
    (["tune", "--actions", "apply_magic"], 2,
     "error: --actions: unknown action(s) 'apply_magic'; known: apply_tiling"),
    (["tune", "--start-from", "worst"], 2, "error: --start-from: Input should be 'best'"),
    (["tune", "--gpus", "x"], 2, "error: --gpus must list GPU indices like 0,1, got 'x'"),
    (["tune", "--profile", "heavy"], 2, "error: --profile must be light or full, not 'heavy'"),
    (["tune", "--kernel", "conv2d"], 2,
     "error: --kernel: unknown kernel family 'conv2d'; known: gemm_bias_relu"),
    (["tune", "--leaderboard", "{nan_board}"], 2,
     "error: --leaderboard: leaderboard times must be finite numbers > 0 (µs)"),
    (["tune", "--colour", "blue"], 2, "No such option: --colour"),
    # tune: where it would write, checked before the first evaluation
    (["tune", "--out", "/proc/x"], 2,
     "error: --out /proc/x: cannot create a folder in /proc: No such file or directory"),
    (["tune", "--out", "{nan_board}/sub"], 2,
     "error: --out {nan_board}/sub: {nan_board} is a file, not a folder"),
    # an empty path is the current folder to the OS: refused, not written into
    (["tune", "--out", ""], 2,
     "error: --out is empty: give a path (or leave the option out for its default)"),
    (["report", "zzzz", "--db", "{db}", "--out", ""], 2, "error: --out is empty"),
    (["export", "zzzz", "--db", "{db}", "--out", ""], 2, "error: --out is empty"),
    (["family", "import-kt", "{nan_board}", "--out", ""], 2, "error: --out is empty"),
    (["tune", "--db", "{nan_board}"], 2, "error: --db {nan_board} is not an SQLite database"),
    (["tune", "--db", "{corrupt}"], 2,
     "error: --db {corrupt}: cannot open it as a database: file is not a database"),
    (["tune", "--db", "nonsense://x"], 2,
     "error: --db 'nonsense://x' is neither a database URL nor a file"),
    # render / compile: unknown actions and parameters, bad arch
    (["render", "--actions", "apply_magic(2)"], 2,
     "error: --actions: unknown action 'apply_magic'; known actions: apply_tiling"),
    (["render", "--actions", "apply_unroll(3)"], 2,
     "error: --actions: apply_unroll(3): factor=3 is outside its domain [1, 2, 4, 8]"),
    (["render", "--actions", "apply_unroll(x)"], 2, "argument 'x' is not an integer or bool"),
    (["render", "--actions", "apply_unroll("], 2,
     "error: --actions: cannot parse action 'apply_unroll('"),
    (["render", "--params", "{block_x: 32}"], 2, "error: --params is not valid JSON"),
    (["render", "--params", "[32, 8]"], 2,
     "error: --params must be a JSON object of parameter names to values"),
    (["render", "--params", '{"colour": 1}'], 2,
     "error: --params: unknown parameter(s) ['colour']"),
    (["render", "--params", '{"block_x": NaN}'], 2,
     "error: --params: parameter block_x must be an integer, got nan"),
    (["render", "--params", '{"smem": "yes"}'], 2,
     "error: --params: parameter smem must be true/false, got 'yes'"),
    (["render", "--params", '{"block_x": 7}'], 2,
     "error: --params: block_x=7 is outside [8, 16, 32, 64, 128, 256]"),
    (["compile", "--params", '{"block_x": 7}', "--json"], 2,
     "error: --params: block_x=7 is outside"),
    (["render", "--actions", "apply_tiling(16);apply_register_block(8, 8)"], 1,
     "error: rejected: "),  # a chain the space refuses: a valid input, no kernel
    (["render", "--kernel", "conv2d"], 2, "error: --kernel: unknown kernel family 'conv2d'"),
    (["compile", "--arch", "sm_1", "--json"], 2, "error: --arch: unknown arch 'sm_1'; known:"),
    (["compile", "--arch", "", "--json"], 2, "error: --arch: unknown arch ''"),
    (["compile", "--actions", "apply_magic()", "--json"], 2,
     "error: --actions: unknown action 'apply_magic'"),
    # evaluate
    (["evaluate", "--shape", "0x1x1"], 2, "error: --shape: shape.m must be in [1, 65536], got 0"),
    (["evaluate", "--shape", "99999999x8x8"], 2,
     "error: --shape: shape.m must be in [1, 65536], got 99999999"),
    (["evaluate", "--tolerance", "nan"], 2, "error: --tolerance: Input should be a finite number"),
    (["evaluate", "--tolerance", "-1"], 2, "error: --tolerance: Input should be greater than 0"),
    (["evaluate", "--backend", "tpu"], 2, "error: --backend must be auto, gpu or replay"),
    (["evaluate", "--profile", "heavy"], 2, "error: --profile must be light or full"),
    (["evaluate", "--actions", "apply_magic()"], 2,
     "error: --actions: unknown action 'apply_magic'"),
    (["evaluate", "--params", "{"], 2, "error: --params is not valid JSON"),
    (["evaluate", "--params", '{"block_x": 7}'], 2, "error: --params: block_x=7 is outside"),
    # campaigns, report and export of a local database
    (["export", "0000", "--db", "{missing}"], 2, "error: no database at {missing}"),
    (["export", "0000", "--format", "pdf", "--db", "{db}"], 2,
     "error: --format must be one of cu, json, t4, kt, not 'pdf'"),
    (["export", "zzzz", "--db", "{db}", "--out", "{out}/x.cu"], 4,
     "error: no campaign 'zzzz' in {db}"),
    (["report", "zzzz", "--db", "{db}", "--out", "{out}"], 4, "error: no campaign 'zzzz' in {db}"),
    (["campaigns", "--db", "{nan_board}"], 2,
     "error: --db {nan_board} is not an SQLite database"),
    (["campaigns", "--db", "{corrupt}"], 2,
     "error: --db {corrupt}: cannot open it as a database: file is not a database"),
    (["campaigns", "--db", "{out}"], 2, "error: no database at {out}"),
    (["campaigns", "--db", "sqlite:///{missing}"], 2, "error: no database at {missing}"),
    (["report", "zzzz", "--db", "{nan_board}"], 2, "is not an SQLite database"),
    (["export", "zzzz", "--db", "{nan_board}"], 2, "is not an SQLite database"),
    (["sanitize", "zzzz", "--db", "{nan_board}"], 2, "is not an SQLite database"),
    (["db", "check", "--db", "{nan_board}"], 2, "is not an SQLite database"),
    (["campaigns", "--db", "{db}", "--key", "tf_x"], 2,
     "error: give either --db (a local database) or --url/--key (the service), not both"),
    (["db", "check", "--db", "{missing}"], 2, "error: no database at {missing}"),
    (["db", "check", "--db", "nonsense://x"], 2,
     "error: --db 'nonsense://x' is neither a database URL nor a file"),
    (["db", "check", "--db", "{empty}"], 2, "no such table: campaigns (not a tuneforge database?"),
    # a database tuneforge does not store in: one line, not the driver's missing module
    (["campaigns", "--db", "mysql://u@localhost/runs"], 2,
     "error: --db mysql://u@localhost/runs: tuneforge stores in SQLite or PostgreSQL only, "
     "not mysql"),
    (["report", "zzzz", "--db", "mysql://u:pw@localhost/runs"], 2,
     "error: --db mysql://u:***@localhost/runs: tuneforge stores in SQLite or PostgreSQL only"),
    (["tune", "--db", "oracle://u@localhost/runs"], 2,
     "tuneforge stores in SQLite or PostgreSQL only, not oracle"),
    (["campaigns", "--db", "postgresql+psycopg://postgres@127.0.0.1:1/none"], 2,
     "error: --db postgresql+psycopg://postgres@127.0.0.1:1/none: cannot open it as a "
     "database: connection failed"),
    # service commands, before they start anything
    (["submit", "{missing}"], 2, "error: {missing}: [Errno 2] No such file or directory"),
    (["submit", "{nan_board}", "--url", "http://127.0.0.1:9"], 2,
     "error: no API key: set TUNEFORGE_API_KEY or pass --key"),
    (["serve", "--port", "99999"], 2,
     "error: --port must be a TCP port number 0..65535, got 99999"),
    (["serve", "--port", "-1"], 2, "error: --port must be a TCP port number 0..65535, got -1"),
    (["serve", "--workers", "0"], 2, "error: --workers must be at least 1, got 0"),
    (["worker", "--role", "boss"], 2,
     "error: --role must be one of compile, gpu, agent, not 'boss'"),
    (["worker", "--role", "gpu", "--gpus", "0,x"], 2,
     "error: --gpus must list GPU indices like 0,1, got '0,x'"),
    (["worker", "--role", "gpu", "--backend", "tpu"], 2,
     "error: --backend must be gpu or replay, not 'tpu'"),
    # the API stamps TUNEFORGE_BACKEND on every campaign: a worker of another backend fails them
    (["worker", "--role", "gpu", "--backend", "replay"], 2,
     "error: --backend replay is not TUNEFORGE_BACKEND (gpu), the backend the API gives every "
     "campaign: export TUNEFORGE_BACKEND=replay for the API and every worker"),
]


def files(folder: Path) -> list[str]:
    """The files under ``folder`` (SQLite's -wal and -shm beside a database it opened aside)."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")
                  if not p.name.endswith(("-wal", "-shm")))


@pytest.fixture(scope="module")
def migrated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A database migrated to head with no campaign, made once (each case gets a copy)."""
    db = tmp_path_factory.mktemp("migrated") / "runs.db"
    upgrade_database(f"sqlite:///{db}")
    return db


@pytest.mark.parametrize(("args", "code", "words"), CASES,
                         ids=[f"{i:02d}-{' '.join(c[0])[:40]}" for i, c in enumerate(CASES)])
def test_bad_input_is_one_line_naming_it(tmp_path: Path, tuneforge_home: Path, migrated: Path,
                                         args: list[str], code: int, words: str) -> None:
    db = tmp_path / "runs.db"
    shutil.copyfile(migrated, db)
    (tmp_path / "empty.db").write_bytes(b"")
    (tmp_path / "board.json").write_text("[NaN, 1000]")
    # SQLite's header, then garbage: a damaged database file
    (tmp_path / "corrupt.db").write_bytes(b"SQLite format 3\x00" + b"\xff" * 200)
    paths = {"db": str(db), "missing": str(tmp_path / "missing.json"),
             "empty": str(tmp_path / "empty.db"), "nan_board": str(tmp_path / "board.json"),
             "out": str(tmp_path / "out"), "corrupt": str(tmp_path / "corrupt.db")}

    def fill(text: str) -> str:
        for name, path in paths.items():
            text = text.replace(f"{{{name}}}", path)
        return text

    args = [fill(a) for a in args]
    words = fill(words)
    if args[0] == "tune":  # where a campaign would write, were it to start
        for option, path in (("--out", paths["out"]), ("--db", str(tmp_path / "t.db"))):
            if option not in args:
                args += [option, path]
    before = files(tmp_path)
    result = CliRunner().invoke(app, args, env={"COLUMNS": "300", "TUNEFORGE_API_KEY": ""})
    assert result.exit_code == code, (result.exit_code, result.output)
    assert result.exception is None or isinstance(result.exception, SystemExit), \
        repr(result.exception)
    assert "Traceback" not in result.stderr, result.stderr
    assert [line for line in result.stderr.splitlines() if words in line], result.stderr
    if result.stderr.startswith("error:"):  # ours (Typer's usage errors come in a box)
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert files(tmp_path) == before  # nothing written
    assert not list(tuneforge_home.iterdir()), list(tuneforge_home.iterdir())


@pytest.fixture
def empty_postgres() -> Iterator[str]:
    """A Postgres database without tuneforge's tables (what the server's ``postgres``
    database is), dropped at the end."""
    from service.service_stack import create_database, drop_database

    url = create_database("tuneforge_bad_input")
    try:
        yield url
    finally:
        drop_database(url)


def test_a_database_without_tuneforge_tables_is_one_line_naming_the_command(
        empty_postgres: str, tuneforge_home: Path) -> None:
    # `campaigns --db postgresql+psycopg://…/postgres` printed an 85-line traceback
    runner = CliRunner()
    for args in (["campaigns"], ["report", "zzzz"], ["export", "zzzz"], ["db", "check"],
                 ["kernels"]):
        result = runner.invoke(app, [*args, "--db", empty_postgres], env={"COLUMNS": "300"})
        assert result.exit_code == 2, (args, result.output)
        assert "Traceback" not in result.stderr
        assert result.stderr.count("\n") == 1, result.stderr
        assert "has no tuneforge tables: create them with `TUNEFORGE_DATABASE_URL=" in \
            result.stderr
    # a read migrates nothing: the database is still without tables
    from sqlalchemy import inspect

    from core.db import get_engine

    assert inspect(get_engine(empty_postgres)).get_table_names() == []
    # an older version's tables: what to run to bring them up to date
    upgrade_database(empty_postgres, "20261201_dims")
    result = runner.invoke(app, ["campaigns", "--db", empty_postgres], env={"COLUMNS": "300"})
    assert result.exit_code == 2, result.output
    assert "holds tuneforge's tables of an older version (migration 20261201_dims): bring " \
        "them up to date with `TUNEFORGE_DATABASE_URL=" in result.stderr
    # the command the line names, run as a user copies it, makes the database readable
    command = result.stderr.split("`")[1]
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "TUNEFORGE_HOME": str(tuneforge_home),
                                            "PATH": f"{Path(sys.executable).parent}:"
                                                    f"{os.environ['PATH']}"})
    assert done.returncode == 0, done.stderr
    result = runner.invoke(app, ["campaigns", "--db", empty_postgres, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == []
