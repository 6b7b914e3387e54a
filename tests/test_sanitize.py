"""The compute-sanitizer gate (``worker/sanitize.py``, ``tuneforge sanitize``).

CPU tests: compute-sanitizer's reports read into the record (samples below, each labelled with
where it comes from), the verdict rules (a report that is incomplete, garbled or contradicted by
its target is never a pass), the time limit, the shapes the gate runs, storage with the
candidate (API record, ``export --format json``), the CLI's error paths, the migration, and the
planted kernels compiled with the real nvcc.

GPU tests (``pytest -m gpu tests/test_sanitize.py``, on a host with compute-sanitizer): a planted
racy kernel is flagged by racecheck, a planted out-of-bounds kernel by memcheck, the baseline and
tuned kernels pass both; raw reports go to ``$TUNEFORGE_GPU_OUT/sanitize/``.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from replay_support import create, new_database, run
from sanitize_support import migration_round_trip
from sqlalchemy import select
from typer.testing import CliRunner

from agent.sanitize import record_result, wanted
from cli.main import app as cli_app
from core.models import Campaign, Candidate, Event
from core.settings import get_settings
from kernels.base import Action, LaunchConfig
from kernels.base import Candidate as Point
from kernels.gemm_bias_relu import FAMILY
from kernels.gemm_bias_relu.checks import GATE_SHAPES, block_tile, tiled_shape
from kernels.gemm_bias_relu.shape import Shape
from worker.compile import Compiler
from worker.sanitize import (
    DEFAULT_TOOLS,
    ERROR_EXITCODE,
    ReportError,
    gate_shapes,
    judge,
    launcher_result,
    overall_status,
    parse_report,
    parse_tools,
    plan_launches,
    run_tool,
    summary_line,
    tool_command,
)
from worker.sanitize_launch import MARKER

# ---- report samples -------------------------------------------------------------------------
# Compute Sanitizer documentation (docs.nvidia.com/compute-sanitizer, "Example Use of
# Suppressions", run with the suppressions file): a clean memcheck run.
MEMCHECK_CLEAN = """\
========= COMPUTE-SANITIZER
========= ERROR SUMMARY: 0 errors
"""

# Compute Sanitizer documentation, "memcheck_demo Output with Memcheck (Debug Build)",
# verbatim, the application's own lines included; the detail lines indented as the tool prints
# them (the HTML page collapses the leading spaces).
MEMCHECK_OOB_DOCS = """\
========= COMPUTE-SANITIZER
Mallocing memory
========= Invalid __global__ write of size 4 bytes
=========     at unaligned_kernel()+0x100 in memcheck_demo.cu:34
=========     by thread (0,0,0) in block (0,0,0)
=========     Address 0x7cc43aa00001 is misaligned
=========     and is inside the nearest allocation at 0x7cc43aa00000 of size 4 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: run_unaligned() [0xacd4] in memcheck_demo
=========         Host Frame: main [0xae61] in memcheck_demo
=========
Running unaligned_kernel: no error
========= Invalid __global__ write of size 4 bytes
=========     at out_of_bounds_function()+0xb0 in memcheck_demo.cu:39
=========     by thread (0,0,0) in block (0,0,0)
=========     Address 0x87654320 is out of bounds
=========     and is 137,179,965,340,896 bytes before the nearest allocation at 0x7cc43a800000 \
of size 1,024 bytes
=========     Device Frame: out_of_bounds_kernel()+0x30 in memcheck_demo.cu:44
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: run_out_of_bounds() [0xadb6] in memcheck_demo
=========         Host Frame: main [0xae66] in memcheck_demo
=========
Running out_of_bounds_kernel: no error
========= ERROR SUMMARY: 2 errors
"""

# A real capture quoted in the docstring of a public compute-sanitizer log parser (a deliberate
# out-of-bounds __global__ write, `nvcc -lineinfo`, `--show-backtrace device`): the newer
# "Access at … is out of bounds" wording, and the API error that follows a fault.
MEMCHECK_OOB_CAPTURED = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at oob_write_kernel(int *, int)+0x70 in oob_test.cu:7
=========     by thread (31,0,0) in block (0,0,0)
=========     Access at 0x503600080 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x503600000 of size 128 bytes
=========
========= Program hit cudaErrorLaunchFailure (error 719) due to "unspecified launch failure" \
on CUDA API call to cudaDeviceSynchronize.
=========
========= ERROR SUMMARY: 3 errors
"""

# Constructed: the first error of MEMCHECK_OOB_CAPTURED, then the total and the
# "N errors were not printed" line compute-sanitizer adds past --print-limit (the line's
# wording as public gates match it).
MEMCHECK_PRINT_LIMIT = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at oob_write_kernel(int *, int)+0x70 in oob_test.cu:7
=========     by thread (31,0,0) in block (0,0,0)
=========     Access at 0x503600080 is out of bounds
=========
========= ERROR SUMMARY: 1,258 errors
========= ERROR SUMMARY: 1,208 errors were not printed. Use --print-limit option to adjust \
the number of printed errors
"""

# The clean racecheck summary, character for character as public CI gates assert it.
RACECHECK_CLEAN = """\
========= COMPUTE-SANITIZER
========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)
"""

# Compute Sanitizer documentation, "Block-level Hazards" (block_error, analysis report),
# verbatim.
RACECHECK_BLOCK_ERROR = """\
========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at sumKernel(int *, int *)+0x90 in \
/home/cuda/github/compute-sanitizer-samples/Racecheck/block_error.cu:41
=========     and Read access at sumKernel(int *, int *)+0x100 in \
/home/cuda/github/compute-sanitizer-samples/Racecheck/block_error.cu:51 [508 hazards]
=========
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
"""

# An older racecheck (CUDA 11 era) analysis report, warnings only, from a public repository's
# test data; trimmed to its last three reports and the summary.
RACECHECK_WARNINGS = """\
========= COMPUTE-SANITIZER
========= WARN: Race reported between Read access at 0x00000170 in ./race.cu:4:test(int*, int*)
=========     and Write access at 0x00000148 in ./race.cu:3:test(int*, int*) [4 hazards]
=========     and Write access at 0x000001a8 in ./race.cu:4:test(int*, int*) [4 hazards]
=========
========= WARN: Race reported between Write access at 0x00000148 in ./race.cu:3:test(int*, int*)
=========     and Write access at 0x00000148 in ./race.cu:3:test(int*, int*) [124 hazards]
=========     and Read access at 0x00000170 in ./race.cu:4:test(int*, int*) [4 hazards]
=========
========= WARN: Race reported between Write access at 0x000001a8 in ./race.cu:4:test(int*, int*)
=========     and Write access at 0x000001a8 in ./race.cu:4:test(int*, int*) [124 hazards]
=========     and Read access at 0x00000170 in ./race.cu:4:test(int*, int*) [4 hazards]
=========
========= RACECHECK SUMMARY: 12 hazards displayed (0 errors, 12 warnings)
"""

# Compute Sanitizer documentation, "Warp-level Hazards" (warp_error, --racecheck-report
# hazard): the hazard report verbatim; the summary line constructed (the page omits it).
RACECHECK_HAZARD_REPORT = """\
========= COMPUTE-SANITIZER
========= Warning: (Warp Level Programming) Potential RAW hazard detected at __shared__ 0x8c \
in block (0,0,0) :
=========     Write Thread (35,0,0) at sumKernel(int *, int *)+0x90 in \
/home/cuda/github/compute-sanitizer-samples/Racecheck/warp_error.cu:44
=========     Read Thread (32,0,0) at sumKernel(int *, int *)+0x120 in \
/home/cuda/github/compute-sanitizer-samples/Racecheck/warp_error.cu:56
=========     Current Value : 35
=========
========= RACECHECK SUMMARY: 1 hazard displayed (0 errors, 1 warning)
"""

# Compute Sanitizer documentation, "Initcheck error suppression", verbatim ("[...]" included).
INITCHECK_ERROR = """\
========= COMPUTE-SANITIZER
========= Uninitialized __global__ memory read of size 4 bytes
========= at mult(int *, int *, int)+0x60
========= by thread (122,0,0) in block (0,0,0)
========= Address 0x7f936fa001e8
[...]
========= ERROR SUMMARY: 1 error
"""

# Compute Sanitizer documentation, "Divergent Threads" (synccheck): one report verbatim; the
# summary constructed from the page's "32 errors like the following are reported".
SYNCCHECK_ERROR = """\
========= COMPUTE-SANITIZER
========= Barrier error detected. Divergent thread(s) in block.
=========     at [clone myKernel(int *, int *)] outlineSync()+0x11f0 in test.cu:42
=========     by thread (32,0,0) in block (0,0,0)
=========     Device Frame: myKernel(int *, int *)+0xe40 in test.cu:60
=========
========= ERROR SUMMARY: 32 errors
"""

# Compute Sanitizer documentation, "Memory Footprint": the line a tool prints when it could not
# track a launch; with a constructed zero summary after it.
INTERNAL_ERROR = """\
========= COMPUTE-SANITIZER
========= Internal Sanitizer Error: The Sanitizer encountered an error while launching \
kernel_name and didn't track the launch. Errors might go undetected. (Unable to allocate \
enough memory to perform the requested operation)
========= ERROR SUMMARY: 0 errors
"""


#: Reports captured on the lent H200 by this file's GPU tests (each file's header says which).
CAPTURED = Path(__file__).resolve().parent / "data" / "sanitizer"


def captured(name: str) -> str:
    return (CAPTURED / f"{name}.log").read_text()


# ---- reading reports ------------------------------------------------------------------------
def test_clean_memcheck_and_racecheck_reports_are_not_flagged() -> None:
    mem = parse_report("memcheck", MEMCHECK_CLEAN)
    assert (mem["errors"], mem["flagged"], mem["messages"]) == (0, False, [])
    race = parse_report("racecheck", RACECHECK_CLEAN)
    assert (race["hazards"], race["hazard_errors"], race["hazard_warnings"]) == (0, 0, 0)
    assert race["flagged"] is False


def test_memcheck_out_of_bounds_reports_are_flagged_with_their_first_messages() -> None:
    docs = parse_report("memcheck", MEMCHECK_OOB_DOCS)
    assert docs["errors"] == 2
    assert docs["flagged"]
    assert docs["kinds"] == {"memory_access": 2}
    assert docs["messages"][1].startswith("Invalid __global__ write of size 4 bytes | at "
                                          "out_of_bounds_function()+0xb0 in memcheck_demo.cu:39")
    assert "Address 0x87654320 is out of bounds" in docs["messages"][1]
    assert not any("Host Frame" in m for m in docs["messages"])  # host frames are noise
    captured = parse_report("memcheck", MEMCHECK_OOB_CAPTURED)
    assert captured["errors"] == 3
    assert captured["kinds"] == {"memory_access": 1, "api_error": 1}
    assert "Access at 0x503600080 is out of bounds" in captured["messages"][0]


def test_how_the_target_ended_does_not_hide_or_replace_the_findings() -> None:
    # the lines compute-sanitizer adds when its target exits non-zero (wording from the
    # documentation's "Memory Footprint" section), after the findings of a faulting kernel
    ended = MEMCHECK_OOB_CAPTURED.replace(
        "========= ERROR SUMMARY", "========= Error: process didn't terminate successfully\n"
        "========= Target application returned an error\n========= ERROR SUMMARY")
    found = parse_report("memcheck", ended)
    assert found["errors"] == 3
    assert found["flagged"]
    assert found["kinds"] == {"memory_access": 1, "api_error": 1}


def test_reports_captured_on_the_h200_read_as_they_should() -> None:
    race = parse_report("racecheck", captured("racecheck_planted_race"))
    assert (race["hazards"], race["hazard_errors"], race["hazard_warnings"]) == (1 + 1, 1, 1)
    assert race["flagged"]
    assert race["raw_hazards"] == sum(int(n) for n in re.findall(
        r"\[(\d+) hazards\]", captured("racecheck_planted_race")))
    assert race["messages"][0].startswith("Error: Race reported between Write access at "
                                          "gemm_bias_relu+0x3b0 in kernel.cu:14 | and Read "
                                          "access at gemm_bias_relu+0x3c0 in kernel.cu:16")
    generated = parse_report("racecheck", captured("racecheck_generated_no_barrier"))
    assert (generated["hazard_errors"], generated["hazard_warnings"]) == (2, 0)
    assert "operator ()(const float *) const+0xb50 in kernel.cu:135" in generated["messages"][0]
    oob = parse_report("memcheck", captured("memcheck_planted_out_of_bounds"))
    assert (oob["errors"], oob["not_printed"], oob["findings_printed"]) == (257, 207, 3)
    assert oob["kinds"] == {"memory_access": 3}
    assert oob["messages"][0] == (
        "Invalid __global__ write of size 4 bytes | at gemm_bias_relu+0x1040 in kernel.cu:12 | "
        "by thread (0,3,0) in block (4,8,0) | Access to 0x7f16d483b90c is out of bounds")
    assert parse_report("memcheck", captured("memcheck_clean"))["flagged"] is False
    clean = parse_report("racecheck", captured("racecheck_clean"))
    assert (clean["hazards"], clean["flagged"]) == (0, False)
    # cut anywhere before its summary, a captured report is an error, never a pass
    for name, tool in (("racecheck_clean", "racecheck"), ("memcheck_clean", "memcheck")):
        with pytest.raises(ReportError):
            parse_report(tool, captured(name).rsplit("=========", 1)[0])


def test_the_total_counts_errors_past_the_print_limit() -> None:
    found = parse_report("memcheck", MEMCHECK_PRINT_LIMIT)
    assert found["errors"] == 1258  # thousands separators read
    assert found["not_printed"] == 1208
    assert found["findings_printed"] == 1


def test_racecheck_hazards_errors_and_warnings_are_counted() -> None:
    block = parse_report("racecheck", RACECHECK_BLOCK_ERROR)
    assert (block["hazards"], block["hazard_errors"], block["hazard_warnings"]) == (1, 1, 0)
    assert block["raw_hazards"] == 508
    assert block["flagged"]
    assert block["messages"][0].startswith("Error: Race reported between Write access at "
                                           "sumKernel(int *, int *)+0x90")
    assert block["messages"][0].endswith("block_error.cu:51 [508 hazards]")
    warn = parse_report("racecheck", RACECHECK_WARNINGS)
    assert (warn["hazards"], warn["hazard_errors"], warn["hazard_warnings"]) == (12, 0, 12)
    # warp-level races are warnings: on Volta and later they are real races, so they flag
    assert warn["flagged"]
    assert warn["kinds"] == {"race": 3}
    hazard = parse_report("racecheck", RACECHECK_HAZARD_REPORT)
    assert hazard["kinds"] == {"hazard": 1}
    assert hazard["flagged"]
    assert "Write Thread (35,0,0)" in hazard["messages"][0]


def test_initcheck_and_synccheck_reports() -> None:
    init = parse_report("initcheck", INITCHECK_ERROR)
    assert init["errors"] == 1
    assert init["kinds"] == {"uninitialized": 1}
    sync = parse_report("synccheck", SYNCCHECK_ERROR)
    assert sync["errors"] == 32
    assert sync["kinds"] == {"barrier": 1}


@pytest.mark.parametrize(("tool", "text", "why"), [
    ("memcheck", "", "no compute-sanitizer output"),
    ("memcheck", "Mallocing memory\nSegmentation fault (core dumped)\n",
     "no compute-sanitizer output"),
    ("memcheck", "========= COMPUTE-SANITIZER\n", "no ERROR SUMMARY line"),
    ("memcheck", MEMCHECK_OOB_DOCS.split("========= ERROR SUMMARY")[0], "no ERROR SUMMARY"),
    ("racecheck", RACECHECK_BLOCK_ERROR.split("========= RACECHECK SUMMARY")[0],
     "no RACECHECK SUMMARY line"),
    ("racecheck", RACECHECK_CLEAN[: len(RACECHECK_CLEAN) - 20], "unreadable summary line"),
    ("memcheck", MEMCHECK_CLEAN.replace("0 errors", "zero errors"), "unreadable summary line"),
    ("memcheck", MEMCHECK_CLEAN + MEMCHECK_CLEAN, "2 ERROR SUMMARY lines"),
    ("memcheck", RACECHECK_CLEAN, "unreadable summary line"),  # another tool's report
    ("racecheck", MEMCHECK_CLEAN, "no RACECHECK SUMMARY line"),
    ("memcheck", MEMCHECK_OOB_DOCS.replace("ERROR SUMMARY: 2 errors", "ERROR SUMMARY: 0 errors"),
     "counts 0 but 2 finding"),
    ("racecheck", RACECHECK_BLOCK_ERROR.replace("1 hazard displayed (1 error",
                                                "0 hazards displayed (0 errors"),
     "printed 1 race reports but its summary displays 0"),
    ("memcheck", INTERNAL_ERROR, "did not check everything"),
    ("memcheck", "========= COMPUTE-SANITIZER\n========= Error: Target application terminated "
     "before first instrumented API call\n========= ERROR SUMMARY: 0 errors\n",
     "did not check everything"),
    ("memcheck", "\x00\x9f\x1b[0m=====\x00garbage\n", "no compute-sanitizer output"),
    ("memcheck", "========= COMPUTE-SANITIZER\n========= \x00\x9f\x1b garbage ERR\x00R SUMM\n",
     "no ERROR SUMMARY line"),
])
def test_a_truncated_or_garbled_report_is_an_error_never_a_pass(tool: str, text: str,
                                                                why: str) -> None:
    with pytest.raises(ReportError, match=why):
        parse_report(tool, text)


def test_unknown_tools_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown sanitizer tool 'leakcheck'"):
        parse_report("leakcheck", MEMCHECK_CLEAN)
    with pytest.raises(ValueError, match="leakcheck"):
        parse_tools("memcheck,leakcheck")
    with pytest.raises(ValueError, match="no sanitizer tool"):
        parse_tools(" , ")
    assert parse_tools("racecheck, memcheck,racecheck") == ("racecheck", "memcheck")


# ---- the verdict ----------------------------------------------------------------------------
OK_3 = {"status": "ok", "launches": [
    {"shape": [1, 1, 1], "passed": True, "rel_err": 0.0, "unwritten": 0, "nonfinite": 0}] * 3}


def test_a_clean_complete_run_whose_target_finished_passes() -> None:
    run_ = judge("memcheck", MEMCHECK_CLEAN, exit_code=0, launcher=OK_3, launches=3)
    assert run_["status"] == "passed"
    assert run_["errors"] == 0
    assert run_["error"] is None


@pytest.mark.parametrize(("launcher", "exit_code", "why"), [
    (None, 0, "printed no result line"),
    ({"status": "unavailable", "error": "no usable CUDA device"}, 2, "ended with unavailable"),
    ({"status": "ok", "launches": OK_3["launches"][:2]}, 0, "ran 2 of 3 launches"),
    ({"status": "ok", "launches": [*OK_3["launches"][:2], {
        "shape": [515, 516, 204], "passed": False, "rel_err": 0.31, "unwritten": 0,
        "nonfinite": 0}]}, 0, "output under memcheck is wrong at 515x516x204"),
    (OK_3, ERROR_EXITCODE, f"found nothing but exited {ERROR_EXITCODE}"),
])
def test_a_clean_report_whose_target_did_not_finish_is_an_error(
        launcher: dict[str, Any] | None, exit_code: int, why: str) -> None:
    run_ = judge("memcheck", MEMCHECK_CLEAN, exit_code=exit_code, launcher=launcher, launches=3)
    assert run_["status"] == "error"
    assert why in run_["error"]


def test_findings_flag_whatever_became_of_the_target() -> None:
    # memcheck stops a faulting kernel: the target sees the fault, the report has the cause
    fault = {"status": "fault", "error": "LaunchError: cuCtxSynchronize failed"}
    run_ = judge("memcheck", MEMCHECK_OOB_CAPTURED, exit_code=3, launcher=fault, launches=3)
    assert run_["status"] == "flagged"
    assert run_["errors"] == 3
    race = judge("racecheck", RACECHECK_BLOCK_ERROR, exit_code=ERROR_EXITCODE, launcher=OK_3,
                 launches=3)
    assert race["status"] == "flagged"
    assert race["hazard_errors"] == 1


def test_a_run_killed_at_its_limit_or_with_an_unreadable_report_is_an_error() -> None:
    killed = judge("racecheck", RACECHECK_CLEAN, exit_code=-9, launcher=OK_3, launches=3,
                   timed_out=True, timeout_s=600.0)
    assert killed["status"] == "error"
    assert "killed after 600 s" in killed["error"]
    refused = judge("memcheck", "========= COMPUTE-SANITIZER\n========= Error: Debugger "
                    "interface initialization failed\n", exit_code=1, launcher=None, launches=3)
    assert refused["status"] == "error"
    assert "it last said: Error: Debugger interface initialization failed" in refused["error"]
    gone = judge("racecheck", "", exit_code=1, launches=3,
                 launcher={"status": "unavailable", "error": "pycuda cannot be imported"})
    assert gone["status"] == "error"
    assert "could not parse the racecheck report" in gone["error"]
    assert "pycuda cannot be imported" in gone["error"]


def test_overall_status_and_summary() -> None:
    passed = {"status": "passed", "errors": 0}
    flagged = {"status": "flagged", "hazards": 1, "hazard_errors": 1, "hazard_warnings": 0}
    error = {"status": "error"}
    assert overall_status([passed, passed]) == "passed"
    assert overall_status([passed, error]) == "error"
    assert overall_status([error, flagged]) == "flagged"
    assert overall_status([]) == "error"
    line = summary_line({"tools": {"memcheck": passed, "racecheck": flagged}})
    assert line == ("memcheck: passed (0 errors); racecheck: flagged (1 hazards: 1 errors, "
                    "0 warnings)")


def test_launcher_result_takes_the_last_marked_line() -> None:
    out = f"noise\n{MARKER}{json.dumps({'status': 'fault'})}\nmore\n" \
          f"{MARKER}{json.dumps({'status': 'ok', 'launches': []})}\n"
    assert launcher_result(out) == {"status": "ok", "launches": []}
    assert launcher_result("no marker here\n") is None
    assert launcher_result(f"{MARKER}{{not json\n")["status"] == "garbled"  # type: ignore[index]


def test_tool_options_follow_what_the_installed_version_knows() -> None:
    full = frozenset({"target-processes", "show-backtrace", "report-api-errors", "padding",
                      "racecheck-report", "check-exit-code", "destroy-on-device-error"})
    mem = tool_command("cs", "memcheck", Path("/tmp/m.log"), full)
    assert mem[:9] == ["cs", "--tool", "memcheck", "--log-file", "/tmp/m.log",
                       "--error-exitcode", str(ERROR_EXITCODE), "--print-limit", "50"]
    assert ["--padding", "4096"] == mem[mem.index("--padding"):mem.index("--padding") + 2]
    assert "--report-api-errors" in mem
    assert "--racecheck-report" not in mem
    assert ["--destroy-on-device-error", "kernel"] == mem[
        mem.index("--destroy-on-device-error"):mem.index("--destroy-on-device-error") + 2]
    assert ["--check-exit-code", "no"] == mem[
        mem.index("--check-exit-code"):mem.index("--check-exit-code") + 2]
    race = tool_command("cs", "racecheck", Path("/tmp/r.log"), full)
    assert "--padding" not in race
    assert "--destroy-on-device-error" not in race
    assert "--racecheck-report" in race
    bare = tool_command("cs", "memcheck", Path("/tmp/m.log"), frozenset())
    assert len(bare) == 9  # only the options every version has


# ---- shapes ---------------------------------------------------------------------------------
def test_the_tiled_shape_has_several_tiles_and_tails_for_every_kind_of_kernel() -> None:
    import random

    points = [FAMILY.baseline, *tuned_points().values(),
              *FAMILY.sample(random.Random(3), 300)]
    for p in points:
        bm = p.tc_block_m if p.tf32x3 else p.block_m  # the template's own tile, to compare
        bn = p.tc_block_n if p.tf32x3 else p.block_n  # with what the launch probe found
        assert block_tile(FAMILY, p) == (bm, bn), p
        shape = tiled_shape(FAMILY, p)
        assert shape is not None
        assert shape.m // bm >= 2, (p, shape)
        assert shape.m % bm or bm == 1, (p, shape)
        assert shape.n // bn >= 2, (p, shape)
        assert shape.n % bn or bn <= 4, (p, shape)
        assert shape.n % 4 == 0, (p, shape)  # the vector paths run
        assert shape.k % 4 == 0, (p, shape)
        assert shape.k // p.tile_k >= 3, (p, shape)
        assert shape.k % p.tile_k, (p, shape)
    odd = GATE_SHAPES[1]
    assert odd.n % 2  # the scalar fallbacks run
    assert odd.k % 2


def test_memcheck_also_runs_the_campaign_shape_and_given_shapes_replace_all() -> None:
    campaign = Shape(4096, 4096, 4096)
    tiled = Shape(35, 36, 52)
    assert tiled_shape(FAMILY, FAMILY.baseline) == tiled  # 16 x 16 tiles, tile_k 16
    family_shapes = FAMILY.sanitizer_shapes(FAMILY.baseline)
    assert family_shapes == [*GATE_SHAPES, tiled]
    assert gate_shapes("memcheck", campaign, None, family_shapes) == [*GATE_SHAPES, tiled,
                                                                      campaign]
    assert gate_shapes("racecheck", campaign, None, family_shapes) == [*GATE_SHAPES, tiled]
    mine = [Shape(64, 65, 66)]
    assert gate_shapes("memcheck", campaign, mine, family_shapes) == mine
    launches, refused = plan_launches(FAMILY, FAMILY.baseline, "memcheck", campaign)
    assert [s for s, _ in launches] == [*GATE_SHAPES, tiled, campaign]
    assert refused == {}
    assert all(isinstance(lc, LaunchConfig) for _, lc in launches)


def test_a_kernel_that_refuses_the_gate_shapes_runs_at_the_campaign_shape() -> None:
    class FixedShape:
        """A family whose kernel was compiled for one shape (its launch refuses the others)."""

        name = FAMILY.name

        def __init__(self, shape: Shape) -> None:
            self.shape = shape

        def launch(self, params: Any, shape: Shape) -> Any:
            from kernels.base import Rejection

            if shape != self.shape:
                return Rejection("shape_mismatch", f"compiled for {self.shape}, not {shape}")
            return FAMILY.launch(params, shape)

        def sanitizer_shapes(self, params: Any) -> list[Any]:
            from kernels.gemm_bias_relu.checks import sanitizer_shapes

            return sanitizer_shapes(self, params)

    campaign = Shape(1024, 1024, 1024)
    fixed = FixedShape(campaign)
    assert tiled_shape(fixed, FAMILY.baseline) is None
    launches, refused = plan_launches(fixed, FAMILY.baseline, "racecheck", campaign)
    assert [s for s, _ in launches] == [campaign]
    assert set(refused) == {str(s) for s in GATE_SHAPES}
    given, refused = plan_launches(fixed, FAMILY.baseline, "racecheck", campaign,
                                   [Shape(64, 64, 64)])
    assert given == []
    assert "shape_mismatch" in refused["64x64x64"]


# ---- the time limit and the tool's plumbing (a stand-in for compute-sanitizer) ---------------
def _pids_matching(pattern: str) -> list[int]:
    done = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True)
    return [int(p) for p in done.stdout.split()]


def baseline_launch() -> LaunchConfig:
    launch = FAMILY.launch(FAMILY.baseline, Shape(1, 1, 1))
    assert isinstance(launch, LaunchConfig)
    return launch


def _fake_sanitizer(path: Path, body: str) -> str:
    """An executable that answers --help/--version like compute-sanitizer, then runs ``body``
    (with $LOG the --log-file path and "$@" the target command)."""
    path.write_text(
        "#!/bin/bash\n"
        'if [ "$1" = "--help" ]; then echo "  --padding --target-processes --show-backtrace";'
        " exit 0; fi\n"
        'if [ "$1" = "--version" ]; then echo "Version 0000.0.0 (stand-in)"; exit 0; fi\n'
        "while [ $# -gt 0 ]; do case \"$1\" in --log-file) LOG=$2; shift 2;; --*) shift 2;;"
        " *) break;; esac; done\n" + body)
    path.chmod(0o755)
    return str(path)


def test_a_tool_run_past_its_limit_is_killed_with_its_children(tmp_path: Path) -> None:
    token = f"{secrets.randbelow(10**8):08d}"
    exe = _fake_sanitizer(tmp_path / "slow-sanitizer", f"sleep 71.{token} &\nsleep 72.{token}\n"
                                                        "wait\n")
    pattern = f"sleep 7[12]\\.{token}"
    try:
        start = time.monotonic()
        run_ = run_tool(exe, "racecheck", tmp_path / "k.cubin",
                        [(Shape(1, 1, 1), baseline_launch())], family=FAMILY,
                        timeout_s=1.5)
        elapsed = time.monotonic() - start
        assert run_["status"] == "error"
        assert "killed after 1.5 s" in run_["error"]
        assert 1.4 <= elapsed < 10.0
        deadline = time.monotonic() + 3.0
        while _pids_matching(pattern) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _pids_matching(pattern) == [], "a process of the tool survived its time limit"
    finally:
        for pid in _pids_matching(pattern):  # only the sleeps this test started
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.mark.parametrize(("report", "status", "why"), [
    (RACECHECK_CLEAN, "error", "ended with unavailable"),
    (RACECHECK_BLOCK_ERROR, "flagged", None),
])
def test_the_report_comes_from_the_log_file_and_the_verdict_from_report_and_target(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, report: str, status: str,
        why: str | None) -> None:
    # the stand-in writes a report, then runs the real launcher with no GPU visible: a clean
    # report is still not a pass when the target did not run its launches
    (tmp_path / "report.log").write_text(report)
    monkeypatch.setenv("TF_FAKE_REPORT", str(tmp_path / "report.log"))
    exe = _fake_sanitizer(tmp_path / "sanitizer",
                          'cp "$TF_FAKE_REPORT" "$LOG"\nCUDA_VISIBLE_DEVICES= exec "$@"\n')
    keep = tmp_path / "keep"
    run_ = run_tool(exe, "racecheck", tmp_path / "k.cubin",
                    [(Shape(1, 1, 1), baseline_launch())], family=FAMILY,
                    timeout_s=60, keep=keep)
    assert run_["status"] == status, run_
    assert run_["launcher"]["status"] == "unavailable"
    assert run_["exit_code"] == 2
    if why:
        assert why in run_["error"]
    assert (keep / "racecheck.log").read_text() == report
    assert "--log-file" in (keep / "racecheck.out.txt").read_text()


# ---- storage, API record, export ------------------------------------------------------------
def _record(tools: dict[str, str]) -> dict[str, Any]:
    """A gate record built from sample reports by the same functions a GPU run uses."""
    runs = {}
    samples = {("memcheck", "passed"): MEMCHECK_CLEAN, ("racecheck", "passed"): RACECHECK_CLEAN,
               ("racecheck", "flagged"): RACECHECK_BLOCK_ERROR}
    for tool, want in tools.items():
        runs[tool] = judge(tool, samples[(tool, want)], exit_code=0, launcher=OK_3,
                           launches=3)
        assert runs[tool]["status"] == want
    record: dict[str, Any] = {"version": 1, "status": overall_status(runs.values()),
                              "tools": runs, "sanitizer_version": "2025.3.0.0 (sample)"}
    record["ok"] = record["status"] == "passed"
    record["summary"] = summary_line(record)
    return record


@pytest.fixture
def replay_campaign(tmp_path: Path) -> tuple[str, Any, str]:
    """A finished replay campaign on an SQLite file: (url, sessions, campaign id)."""
    url, sessions = new_database(tmp_path)
    campaign_id = create(sessions, budget_iterations=4)
    run(sessions, campaign_id)
    return url, sessions, campaign_id


def test_the_record_is_stored_with_the_candidate_and_shown_by_api_and_export(
        replay_campaign: tuple[str, Any, str], monkeypatch: pytest.MonkeyPatch) -> None:
    from http_support import served

    from api import security
    from api.main import create_app

    url, sessions, campaign_id = replay_campaign
    with sessions.begin() as s:
        team, key = security.create_team(s, name="sanitize-team")
        campaign = s.get(Campaign, campaign_id)
        campaign.team_id = team.id
        best_id = campaign.best_id
        record_result(s, best_id, _record({"memcheck": "passed", "racecheck": "flagged"}))
    with sessions() as s:
        stored = s.get(Candidate, best_id).sanitizer
        event = s.scalars(select(Event).where(Event.campaign_id == campaign_id,
                                              Event.kind == "sanitized")).one()
    assert stored["status"] == "flagged"
    assert stored["candidate_id"] == best_id
    assert stored["tools"]["racecheck"]["hazard_errors"] == 1
    assert event.payload["status"] == "flagged"
    assert event.payload["candidate_id"] == best_id

    monkeypatch.setenv("TUNEFORGE_DATABASE_URL", url)
    get_settings.cache_clear()
    with served(create_app()) as client:
        got = client.get(f"/api/v1/campaigns/{campaign_id}/candidates/{best_id}",
                         headers={"X-API-Key": key})
        assert got.status_code == 200, got.text
        assert got.json()["sanitizer"]["tools"]["racecheck"]["status"] == "flagged"
        other = next(c for c in client.get(f"/api/v1/campaigns/{campaign_id}/candidates",
                                           headers={"X-API-Key": key}).json()["items"]
                     if c["id"] != best_id)
        assert client.get(f"/api/v1/campaigns/{campaign_id}/candidates/{other['id']}",
                          headers={"X-API-Key": key}).json()["sanitizer"] is None
    path = url.split("///", 1)[1]
    exported = CliRunner().invoke(cli_app, ["export", campaign_id[:8], "--format", "json",
                                            "--db", path], catch_exceptions=False)
    assert exported.exit_code == 0, exported.output
    doc = json.loads(exported.stdout)
    by_id = {c["id"]: c for c in doc["candidates"]}
    assert by_id[best_id]["sanitizer"]["summary"].startswith("memcheck: passed (0 errors); "
                                                             "racecheck: flagged")
    assert doc["campaign"]["sanitize"] is False


def test_the_service_wants_the_gate_only_for_a_done_gpu_campaign_that_asked(
        replay_campaign: tuple[str, Any, str]) -> None:
    _url, sessions, campaign_id = replay_campaign
    with sessions.begin() as s:
        campaign = s.get(Campaign, campaign_id)
        assert wanted(s, campaign) is None  # did not ask
        campaign.sanitize = True
        assert wanted(s, campaign) is None  # a replay campaign has no GPU to run on
        campaign.backend = "gpu"
        assert wanted(s, campaign) == campaign.best_id
        record_result(s, campaign.best_id, _record({"memcheck": "passed"}))
        assert wanted(s, campaign) is None  # already checked
        s.rollback()


def test_a_campaign_asking_for_the_gate_needs_the_gpu_backend(tmp_path: Path) -> None:
    from agent.engine import lifecycle, locking

    _url, sessions = new_database(tmp_path)
    with sessions.begin() as s, pytest.raises(locking.CampaignError, match="sanitize"):
        lifecycle.create_campaign(s, lifecycle.CampaignSpec(sanitize=True), backend="replay")
    with sessions.begin() as s:
        created = lifecycle.create_campaign(s, lifecycle.CampaignSpec(sanitize=True), backend="gpu")
        assert created.sanitize is True


def test_the_service_plans_the_gate_and_stores_what_the_gpu_worker_reports(
        replay_campaign: tuple[str, Any, str]) -> None:
    from agent import driver
    from worker import jobs

    _url, sessions, campaign_id = replay_campaign
    with sessions.begin() as s:
        campaign = s.get(Campaign, campaign_id)
        assert driver.plan(s, campaign).sanitize == []
        campaign.sanitize, campaign.backend = True, "gpu"
        best_id = campaign.best_id
        assert driver.plan(s, campaign).sanitize == [(best_id, "gpu.sm_90")]
        job = jobs.start_sanitize(s, best_id)
        assert job is not None
        assert (job.candidate_id, job.backend, job.shape) == (best_id, "gpu",
                                                              Shape(4096, 4096, 4096))
        assert job.source == s.get(Candidate, best_id).source
    # what a GPU worker reports when it cannot run the gate: an error record, stored
    settings = get_settings().model_copy(update={"backend": "replay"})
    replay_worker = jobs.run_sanitize(jobs.WorkerRuntime(settings, "gpu"), job)
    assert replay_worker["status"] == "error"
    assert "a replay worker cannot run compute-sanitizer" in replay_worker["error"]
    with sessions.begin() as s:
        driver.on_sanitized(s, best_id, replay_worker)
        assert s.get(Candidate, best_id).sanitizer["status"] == "error"
        assert driver.plan(s, s.get(Campaign, campaign_id)).sanitize == []  # recorded once
        assert jobs.start_sanitize(s, best_id) is None  # a redelivered message does nothing


def test_a_gpu_worker_without_compute_sanitizer_records_why(
        replay_campaign: tuple[str, Any, str], tmp_path: Path) -> None:
    import shutil

    from worker import jobs

    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH")
    _url, sessions, campaign_id = replay_campaign
    with sessions.begin() as s:
        campaign = s.get(Campaign, campaign_id)
        campaign.backend = "gpu"
        job = jobs.start_sanitize(s, campaign.best_id)
    assert job is not None
    settings = get_settings().model_copy(update={
        "backend": "gpu", "compute_sanitizer": str(tmp_path / "no-such-sanitizer")})
    runtime = jobs.WorkerRuntime(settings, "gpu")
    try:
        record = jobs.run_sanitize(runtime, job)  # compiles the source with nvcc first
    finally:
        runtime.close()
    assert record["status"] == "error"
    assert "compute-sanitizer is not on PATH" in record["error"]


# ---- the CLI's error paths ------------------------------------------------------------------
def tf(*args: str) -> Any:
    return CliRunner().invoke(cli_app, list(args), catch_exceptions=False)


def test_cli_refuses_a_campaign_without_a_best_kernel(tmp_path: Path) -> None:
    url, sessions = new_database(tmp_path)
    campaign_id = create(sessions)  # queued: nothing measured yet
    result = tf("sanitize", campaign_id[:8], "--db", url)
    assert result.exit_code == 2
    assert "has no accepted best kernel" in result.stderr
    assert "Traceback" not in result.output


@pytest.mark.parametrize(("args", "why"), [
    (["--tools", "memcheck,leakcheck"], "--tools: unknown sanitizer tool(s) leakcheck"),
    (["--shape", "12x12"], "--shape: shape must look like MxNxK"),
    (["--candidate", "zzzz"], "no candidate(s) of campaign"),
])
def test_cli_bad_input_exits_with_one_line_naming_it(
        replay_campaign: tuple[str, Any, str], args: list[str], why: str) -> None:
    url, _sessions, campaign_id = replay_campaign
    result = tf("sanitize", campaign_id[:8], "--db", url, *args)
    assert result.exit_code in (2, 4)
    assert why in result.stderr
    assert "Traceback" not in result.output


def test_cli_unknown_campaign_and_missing_database(tmp_path: Path,
                                                   replay_campaign: tuple[str, Any, str]) -> None:
    url = replay_campaign[0]
    assert tf("sanitize", "ffffffff", "--db", url).exit_code == 4
    missing = tf("sanitize", "ffffffff", "--db", str(tmp_path / "none.db"))
    assert missing.exit_code == 2
    assert "no database at" in missing.stderr


def test_cli_without_compute_sanitizer_or_gpu_exits_2_and_stores_nothing(
        replay_campaign: tuple[str, Any, str], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    url, sessions, campaign_id = replay_campaign
    monkeypatch.setenv("TUNEFORGE_COMPUTE_SANITIZER", str(tmp_path / "no-such-sanitizer"))
    get_settings.cache_clear()
    missing = tf("sanitize", campaign_id[:8], "--db", url)
    assert missing.exit_code == 2
    assert "no-such-sanitizer not found" in missing.stderr
    # a compute-sanitizer that exists, on a host whose GPU probe fails
    exe = _fake_sanitizer(tmp_path / "sanitizer", "exit 0\n")
    monkeypatch.setenv("TUNEFORGE_COMPUTE_SANITIZER", exe)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # no GPU, also on a host that has one
    get_settings.cache_clear()
    no_gpu = tf("sanitize", campaign_id[:8], "--db", url)
    assert no_gpu.exit_code == 2
    assert "no usable GPU here" in no_gpu.stderr
    with sessions() as s:
        assert all(c.sanitizer is None for c in s.scalars(select(Candidate)))


# ---- the migration --------------------------------------------------------------------------
def test_the_migration_adds_and_removes_the_columns_keeping_the_rows(tmp_path: Path) -> None:
    migration_round_trip(f"sqlite:///{tmp_path / 'm.db'}")


# ---- planted kernels ------------------------------------------------------------------------
#: A shared-memory tiled GEMM with the barrier between writing the tiles and reading them
#: removed: thread (tx, ty) reads Bs[kk][tx], written by thread (tx, kk) of another warp
#: (read-after-write race); the barrier after the reads stays.
RACY = r'''
#define T 16
extern "C" __global__ void __launch_bounds__(256)
gemm_bias_relu(const float* __restrict__ A, const float* __restrict__ B,
               const float* __restrict__ bias, float* __restrict__ C, int M, int N, int K)
{
    __shared__ float As[T][T];
    __shared__ float Bs[T][T];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * T + ty, col = blockIdx.x * T + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += T) {
        As[ty][tx] = (row < M && k0 + tx < K) ? A[(size_t)row * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(size_t)(k0 + ty) * N + col] : 0.0f;
        // PLANTED: no __syncthreads() here
        for (int kk = 0; kk < T; ++kk) acc = fmaf(As[ty][kk], Bs[kk][tx], acc);
        __syncthreads();
    }
    if (row < M && col < N) C[(size_t)row * N + col] = fmaxf(acc + bias[col], 0.0f);
}
'''

#: One output per thread, with the row guard off by one: the threads of row M (which exists
#: whenever M is not a multiple of the block height) write one row past the end of C.
OUT_OF_BOUNDS = r'''
extern "C" __global__ void __launch_bounds__(256)
gemm_bias_relu(const float* __restrict__ A, const float* __restrict__ B,
               const float* __restrict__ bias, float* __restrict__ C, int M, int N, int K)
{
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row > M || col >= N) return;  // PLANTED: row == M passes
    const int r = min(row, M - 1);    // reads stay inside A: only the store is out of bounds
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc = fmaf(A[(size_t)r * K + k], B[(size_t)k * N + col], acc);
    C[(size_t)row * N + col] = fmaxf(acc + bias[col], 0.0f);
}
'''

#: The staged-tile path's barrier between storing a tile and computing on it.
TILE_BARRIER = "        store_tile(tf_smem);\n        __syncthreads();\n"


def tiled_point() -> Any:
    """A single-buffered shared-memory point of the family (coalesced, 4x4 register block)."""
    node = FAMILY.apply_chain([Action.parse(a) for a in (
        "apply_coalesce(true)", "apply_shared_memory_load(true)", "apply_register_block(4, 4)")])
    assert isinstance(node, Point)
    return node.params


def racy_generated_source() -> str:
    """The family's tiled kernel with its store -> compute barrier taken out."""
    source = FAMILY.render(tiled_point())
    assert source.count(TILE_BARRIER) == 1, "the template's tile barrier moved: update the test"
    return source.replace(TILE_BARRIER, "        store_tile(tf_smem);\n")


def tuned_points() -> dict[str, Any]:
    """Tuned kernels of the family: a register-blocked, vectorized, double-buffered SIMT one
    and a 3xTF32 tensor-core one."""
    out = {}
    for name, chain in {
        "simt_8x4_vec4_db": ("apply_coalesce(true)", "apply_shared_memory_load(true)",
                             "apply_register_block(8, 4)", "apply_vectorize(4)",
                             "apply_double_buffer(2)", "apply_block_swizzle(4)"),
        "tf32x3": ("apply_tf32x3(true)", "change_block_config(64, 2)"),
    }.items():
        node = FAMILY.apply_chain([Action.parse(a) for a in chain])
        assert isinstance(node, Point), (name, node)
        assert FAMILY.validate(node.params) is None
        out[name] = node.params
    return out


def planted_launch(shape: Shape) -> LaunchConfig:
    """16 x 16 threads, one output each."""
    return LaunchConfig(FAMILY.name, (-(-shape.n // 16), -(-shape.m // 16), 1), (16, 16, 1), 0)


def test_planted_and_tuned_kernels_compile_with_nvcc(compiler: Compiler) -> None:
    sources = {"racy": RACY, "out_of_bounds": OUT_OF_BOUNDS,
               "racy_generated": racy_generated_source(),
               **{n: FAMILY.render(p) for n, p in tuned_points().items()}}
    results = {name: compiler.compile(src, entry=FAMILY.name) for name, src in sources.items()}
    for name, result in results.items():
        assert result.status == "ok", (name, result.error)
        assert result.cubin()[:4] == b"\x7fELF", name


# ---- on the GPU -----------------------------------------------------------------------------
OUT = Path(os.environ.get("TUNEFORGE_GPU_OUT", "/tmp/tf-gpu-out")) / "sanitize"
EDGE = Shape(131, 257, 61)


@pytest.fixture(scope="module")
def sanitizer() -> str:
    from worker.sanitize import sanitizer_path

    exe = sanitizer_path(get_settings().compute_sanitizer)
    if exe is None:
        pytest.skip("compute-sanitizer is not on PATH")
    return exe


def _save(name: str, data: Any) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{name}.json").write_text(json.dumps(data, indent=1, default=str))


def _cubin(compiler: Compiler, source: str, tmp_path: Path, smem: int = 0) -> Path:
    result = compiler.compile(source, entry=FAMILY.name, dynamic_smem_bytes=smem)
    assert result.status == "ok", result.error
    path = tmp_path / "kernel.cubin"
    path.write_bytes(result.cubin())
    return path


@pytest.mark.gpu
def test_planted_race_is_flagged_by_racecheck(compiler: Compiler, sanitizer: str,
                                              tmp_path: Path) -> None:
    run_ = run_tool(sanitizer, "racecheck", _cubin(compiler, RACY, tmp_path),
                    [(EDGE, planted_launch(EDGE))], family=FAMILY, timeout_s=300,
                    keep=OUT / "racy")
    _save("racy", run_)
    assert run_["status"] == "flagged", run_
    assert run_["hazard_errors"] >= 1
    assert any("Race reported" in m for m in run_["messages"]), run_["messages"]


@pytest.mark.gpu
def test_generated_kernel_without_its_tile_barrier_is_flagged_by_racecheck(
        compiler: Compiler, sanitizer: str, tmp_path: Path) -> None:
    params = tiled_point()
    launch = FAMILY.launch(params, EDGE)
    assert isinstance(launch, LaunchConfig)
    cubin = _cubin(compiler, racy_generated_source(), tmp_path, params.smem_bytes)
    run_ = run_tool(sanitizer, "racecheck", cubin, [(EDGE, launch)], family=FAMILY,
                    timeout_s=300, keep=OUT / "racy_generated")
    _save("racy_generated", run_)
    assert run_["status"] == "flagged", run_
    assert run_["hazard_errors"] + run_["hazard_warnings"] >= 1


@pytest.mark.gpu
def test_planted_out_of_bounds_store_is_flagged_by_memcheck(compiler: Compiler, sanitizer: str,
                                                            tmp_path: Path) -> None:
    assert EDGE.m % 16  # the extra row exists
    run_ = run_tool(sanitizer, "memcheck", _cubin(compiler, OUT_OF_BOUNDS, tmp_path),
                    [(EDGE, planted_launch(EDGE))], family=FAMILY, timeout_s=300,
                    keep=OUT / "out_of_bounds")
    _save("out_of_bounds", run_)
    assert run_["status"] == "flagged", run_
    assert run_["errors"] >= 1
    assert run_["kinds"].get("memory_access", 0) >= 1
    assert any("Invalid __global__ write" in m for m in run_["messages"]), run_["messages"]


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["baseline", "simt_8x4_vec4_db", "tf32x3"])
def test_baseline_and_tuned_kernels_pass_memcheck_and_racecheck(
        compiler: Compiler, sanitizer: str, name: str) -> None:
    from worker.sanitize import check

    params = FAMILY.baseline if name == "baseline" else tuned_points()[name]
    compiled = compiler.compile(FAMILY.render(params), entry=FAMILY.name,
                                dynamic_smem_bytes=params.smem_bytes)
    assert compiled.status == "ok", compiled.error
    record = check(FAMILY, params, compiled.cubin(), tools=DEFAULT_TOOLS,
                   campaign_shape=Shape(1024, 1024, 1024), exe=sanitizer, timeout_s=300,
                   keep=OUT / name)
    _save(name, record)
    assert record["status"] == "passed", json.dumps(record, indent=1, default=str)
    tiled = str(tiled_shape(FAMILY, params))
    assert record["tools"]["memcheck"]["shapes"] == [*map(str, GATE_SHAPES), tiled,
                                                     "1024x1024x1024"]
    assert record["tools"]["racecheck"]["shapes"] == [*map(str, GATE_SHAPES), tiled]
    for run_ in record["tools"].values():
        assert all(r["passed"] for r in run_["launcher"]["launches"])


@pytest.mark.gpu
def test_tune_with_sanitize_then_the_cli_check_stores_the_latest(tmp_path: Path,
                                                                 sanitizer: str) -> None:
    db = tmp_path / "gpu.db"
    tuned = tf("tune", "--backend", "gpu", "--budget", "4", "--shape", "512x512x512", "--db",
               str(db), "--sanitize", "--json", "--out", str(tmp_path / "out"))
    assert tuned.exit_code == 0, tuned.output
    summary = json.loads(tuned.stdout.strip().splitlines()[-1])
    _save("tune_sanitize", summary)
    assert summary["sanitizer"]["status"] == "passed", summary["sanitizer"]
    campaign_id = summary["campaign_id"]
    checked = tf("sanitize", campaign_id[:8], "--db", str(db), "--tools",
                 "racecheck,synccheck,initcheck", "--shape", "129x131x67", "--json")
    _save("cli_sanitize", checked.stdout)
    assert checked.exit_code == 0, checked.output
    record = json.loads(checked.stdout.strip().splitlines()[-1])
    assert list(record["tools"]) == ["racecheck", "synccheck", "initcheck"]
    # stored with the best kernel, the latest check replacing the first (export json and the
    # API show this column: CPU tests; the GPU machine has no FastAPI)
    from core.db import session_factory

    with session_factory(f"sqlite:///{db}")() as s:
        campaign = s.get(Campaign, campaign_id)
        assert campaign is not None
        assert campaign.sanitize is True
        best = s.get(Candidate, campaign.best_id)
        assert best is not None
        assert best.sanitizer is not None
        assert best.sanitizer["checked_at"] == record["checked_at"]
        assert best.sanitizer["candidate_id"] == best.id
        kinds = [e.kind for e in s.scalars(select(Event).where(
            Event.campaign_id == campaign_id).order_by(Event.id))]
    assert kinds.count("sanitized") == 2
