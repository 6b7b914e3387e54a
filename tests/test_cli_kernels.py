"""The ``tuneforge`` console script: actions, render, compile (real processes, real exit codes)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernels.gemm_bias_relu import FAMILY, GemmParams

SEED_NAMES = (
    "apply_tiling", "apply_vectorize", "apply_register_block", "apply_unroll",
    "change_block_config", "apply_shared_memory_load", "avoid_bank_conflict", "revert_last",
)
RECORD_KEYS = {
    "status", "seconds", "regs_per_thread", "smem_bytes", "spill_bytes", "max_smem_limit",
    "error", "cache_hit",
}
_SCRIPT = Path(sys.executable).with_name("tuneforge")
COMMAND = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "cli.main"]

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")


@pytest.fixture(scope="module")
def cli_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One TUNEFORGE_HOME for the module's CLI runs, so repeated compiles share a cache."""
    return tmp_path_factory.mktemp("cli-home")


def tuneforge(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUNEFORGE_")}
    env["TUNEFORGE_HOME"] = str(home)
    env["COLUMNS"] = "80"  # rich must still print errors on one line
    return subprocess.run(
        [*COMMAND, *args], capture_output=True, text=True, env=env, timeout=120,
    )


def one_json_line(stdout: str) -> dict[str, object]:
    lines = stdout.splitlines()
    assert len(lines) == 1, stdout
    record = json.loads(lines[0])
    assert isinstance(record, dict)
    return record


def test_actions_json_lists_the_action_space(cli_home: Path) -> None:
    done = tuneforge(cli_home, "actions", "--json")
    assert done.returncode == 0, done.stderr
    specs = json.loads(done.stdout)
    assert isinstance(specs, list)
    for spec in specs:
        assert isinstance(spec["name"], str)
        assert isinstance(spec["args"], list)
        for arg in spec["args"]:
            assert arg["name"]
            assert isinstance(arg["choices"], list)
            assert arg["choices"]
    names = [s["name"] for s in specs]
    assert set(SEED_NAMES) <= set(names)
    assert "apply_coalesce" in names
    by_name = {s["name"]: s for s in specs}
    assert by_name["apply_tiling"]["args"][0]["choices"] == [8, 16, 32, 64]
    assert by_name["apply_shared_memory_load"]["args"][0]["choices"] == [False, True]


def test_actions_table(cli_home: Path) -> None:
    done = tuneforge(cli_home, "actions")
    assert done.returncode == 0, done.stderr
    assert "change_block_config" in done.stdout
    assert "revert_last" in done.stdout


def test_render_without_params_prints_the_baseline(cli_home: Path) -> None:
    done = tuneforge(cli_home, "render")
    assert done.returncode == 0, done.stderr
    assert "gemm_bias_relu" in done.stdout
    assert done.stdout == FAMILY.render(FAMILY.baseline)


def test_render_with_smem_params(cli_home: Path) -> None:
    done = tuneforge(cli_home, "render", "--params", '{"smem": true}')
    assert done.returncode == 0, done.stderr
    assert done.stdout == FAMILY.render(GemmParams(smem=True))
    assert "extern __shared__" in done.stdout
    assert done.stdout != FAMILY.render(FAMILY.baseline)


def test_render_with_actions(cli_home: Path) -> None:
    done = tuneforge(cli_home, "render", "--actions",
                     "apply_shared_memory_load(true); avoid_bank_conflict(4)")
    assert done.returncode == 0, done.stderr
    assert done.stdout == FAMILY.render(GemmParams(smem=True, pad=4))


@needs_nvcc
def test_compile_json_ok_then_cached(cli_home: Path) -> None:
    actions = "apply_coalesce(true);apply_shared_memory_load(true);apply_tiling(32)"
    done = tuneforge(cli_home, "compile", "--actions", actions, "--json")
    assert done.returncode == 0, done.stderr + done.stdout
    record = one_json_line(done.stdout)
    assert RECORD_KEYS <= set(record)
    assert record["status"] == "ok"
    assert record["error"] is None
    assert isinstance(record["regs_per_thread"], int)
    assert record["regs_per_thread"] > 0
    assert record["smem_bytes"] == GemmParams(coalesced=True, smem=True, tile_k=32).smem_bytes
    assert record["spill_bytes"] == 0
    assert record["max_smem_limit"] == 232448
    assert record["arch"] == "sm_90"
    assert record["cache_hit"] is False
    again = one_json_line(tuneforge(cli_home, "compile", "--actions", actions, "--json").stdout)
    assert again["cache_hit"] is True
    assert again["regs_per_thread"] == record["regs_per_thread"]


@needs_nvcc
def test_compile_chain_ending_in_a_noop_still_compiles(cli_home: Path) -> None:
    actions = "apply_coalesce(true);apply_shared_memory_load(true);apply_tiling(16)"
    done = tuneforge(cli_home, "compile", "--actions", actions, "--json")
    assert one_json_line(done.stdout)["status"] == "ok"


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["render", "--params", "{bad"], "--params"),
        (["compile", "--params", '{"smem": tru}', "--json"], "--params"),
        (["compile", "--params", "[1, 2]"], "--params"),
        (["compile", "--params", '{"tile_m": 16}'], "tile_m"),
        (["compile", "--params", '{"smem": 1}'], "smem"),
        (["compile", "--actions", "apply_magic(3)"], "apply_magic"),
        (["render", "--actions", "apply_tiling(7)"], "tile_size=7"),
        (["compile", "--actions", "apply_tiling(16"], "apply_tiling(16"),
        (["compile", "--arch", "sm_42"], "sm_42"),
    ],
)
def test_bad_input_exits_2_with_one_line_naming_it(
    cli_home: Path, args: list[str], named: str
) -> None:
    done = tuneforge(cli_home, *args)
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error:")
    assert named in lines[0]
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


def test_rejected_point_reports_numbers(cli_home: Path) -> None:
    params = '{"smem": true, "block_x": 256, "block_y": 4, "reg_m": 8, "tile_k": 64}'
    done = tuneforge(cli_home, "compile", "--params", params, "--json")
    assert done.returncode == 1
    record = one_json_line(done.stdout)
    assert RECORD_KEYS <= set(record)
    assert record["status"] == "rejected"
    assert isinstance(record["max_smem_limit"], int)
    assert record["max_smem_limit"] == 232448
    rejection = record["rejection"]
    assert isinstance(rejection, dict)
    assert rejection["reason"] == "smem_over_limit"
    assert isinstance(rejection["smem_bytes"], int)
    assert rejection["smem_bytes"] > record["max_smem_limit"]
    assert record["error"]


def test_rejected_transform_chain_reports_the_reason(cli_home: Path) -> None:
    done = tuneforge(cli_home, "compile", "--actions", "change_block_config(256, 8)", "--json")
    assert done.returncode == 1
    record = one_json_line(done.stdout)
    assert record["status"] == "rejected"
    assert isinstance(record["max_smem_limit"], int)
    rejection = record["rejection"]
    assert isinstance(rejection, dict)
    assert rejection["reason"] == "threads_per_block"
    assert rejection["threads_per_block"] == 2048


def test_arch_changes_the_smem_limit(cli_home: Path) -> None:
    params = '{"smem": true, "reg_m": 8, "reg_n": 8, "tile_k": 64, "pad": 4}'
    done = tuneforge(cli_home, "compile", "--arch", "sm_75", "--params", params, "--json")
    assert done.returncode == 1
    record = one_json_line(done.stdout)
    assert record["status"] == "rejected"
    assert record["max_smem_limit"] == 65536


def test_render_refuses_a_rejected_point(cli_home: Path) -> None:
    done = tuneforge(cli_home, "render", "--params", '{"block_x": 256, "block_y": 8}')
    assert done.returncode == 1
    assert "threads_per_block" in done.stderr
    assert done.stdout == ""


@needs_nvcc
def test_compile_reports_the_arch_a_wgmma_point_is_built_for(cli_home: Path) -> None:
    actions = "apply_tf32x3(true);change_block_config(64, 4);apply_wgmma(128)"
    done = tuneforge(cli_home, "compile", "--actions", actions, "--json")
    assert done.returncode == 0, done.stderr + done.stdout
    record = one_json_line(done.stdout)
    assert record["status"] == "ok"
    assert record["arch"] == "sm_90a"
    assert record["spill_bytes"] == 0
