"""The compute-sanitizer gate: run a compiled candidate under memcheck, racecheck (and synccheck,
initcheck) on the GPU, and judge the reports.

Each tool runs :mod:`worker.sanitize_launch` in its own process group, killed at a time limit;
the tool's report goes to a log file (``--log-file``), the launcher's result line to stdout, and
both are judged together (:func:`judge`): a tool run *passes* only when its report is complete
(its summary line is there and agrees with the findings printed above it), it found nothing,
and the launcher ran every launch to the end. A report that cannot be read, a run that was
killed, a target that died: ``error`` with the reason, never a pass.

Shapes. A kernel takes its dimensions at run time (one cubin for every shape), so a reduced
shape runs the same code; what a shape decides is which branches run (full tiles or tails,
vector or scalar loads, …). Every tool runs the family's ``sanitizer_shapes(params)`` (a GEMM:
1 x 1 x 1, primes, and two block tiles with tails in every direction); memcheck also runs the
campaign's shape (its cost is a constant factor of the kernel's time), racecheck and the others
do not (racecheck tracks every shared-memory byte: minutes at 4096³). A kernel compiled for one
shape refuses the others: every tool runs that shape. ``shapes=`` replaces all of them.

Launches go through the shared launch contract (:mod:`worker.launch_contract`): each one is
sent with the family's resolved signature and its reference kernel's launch, and the launcher
checks the output against the family's float64 reference.

Plain functions and dicts (no pydantic): this module runs on GPU hosts with a lean Python.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from kernels.base import Dims, LaunchConfig, Rejection
from kernels.family import DEFAULT_TOLERANCE, reference_setup
from worker.sanitize_launch import MARKER

PROJECT_ROOT = Path(__file__).resolve().parent.parent
RECORD_VERSION = 1
TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck")
DEFAULT_TOOLS = ("memcheck", "racecheck")
#: Tools that also run the campaign's shape (when the caller gives one).
FULL_SHAPE_TOOLS = frozenset({"memcheck"})
#: compute-sanitizer's exit code when the target succeeded but the tool found errors.
ERROR_EXITCODE = 86
#: Errors printed in full (the summary counts them all).
PRINT_LIMIT = 50
MAX_MESSAGES = 5
#: Bytes of padding memcheck puts after every allocation, so that a read or write just past
#: the end of a buffer cannot land in a neighbouring buffer unseen.
PADDING_BYTES = 4096


class SanitizerUnavailable(RuntimeError):
    """compute-sanitizer or a usable GPU is missing here."""


class ReportError(ValueError):
    """A sanitizer report that cannot be read as a complete one (never a pass)."""


# ---- reading reports ------------------------------------------------------------------------
_PREFIX = re.compile(r"^={3,} ?")
_NUM = r"(\d[\d,]*)"
_ERROR_SUMMARY = re.compile(rf"^ERROR SUMMARY: {_NUM} errors?\s*$")
_NOT_PRINTED = re.compile(rf"^ERROR SUMMARY: {_NUM} errors? (?:was|were) not printed")
_RACE_SUMMARY = re.compile(
    rf"^RACECHECK SUMMARY: {_NUM} hazards? displayed \({_NUM} errors?, {_NUM} warnings?\)\s*$")
_HAZARDS = re.compile(rf"\[{_NUM} hazards?\]")
#: Headlines of findings, by tool family (memcheck, racecheck analysis and hazard reports,
#: synccheck, initcheck, and errors any tool may print).
_FINDINGS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("memory_access", re.compile(
        r"^(?:Potential )?[Ii]nvalid __(?:global|shared|local|generic)__ "
        r"(?:read|write|atomic)")),
    ("misaligned", re.compile(r"^Misaligned")),
    ("hardware_exception", re.compile(
        r"^(?:Warp|Lane|Device) (?:Illegal|Misaligned|Out-of-range|Hardware|Invalid)|"
        r"^Out-of-range|^Illegal|^Hardware exception")),
    ("malloc_free", re.compile(r"^Malloc/Free error")),
    ("race", re.compile(r"^(?:Error|ERROR|Warning|WARNING|WARN|Info|INFO): Race reported")),
    ("hazard", re.compile(
        r"^(?:Error|ERROR|Warning|WARNING|WARN|Info|INFO): (?:\([^)]*\) )?Potential "
        r"(?:RAW|WAR|WAW) hazard")),
    ("barrier", re.compile(r"^Barrier error detected|^Warpgroup MMA sequence error")),
    ("uninitialized", re.compile(r"^Uninitialized __(?:global|shared)__ memory")),
    ("api_error", re.compile(r"^Program hit ")),
    ("leak", re.compile(r"^Leaked ")),
)
#: Lines that say the tool did not check everything it was asked to. (How the target ended —
#: "process didn't terminate successfully", "Target application returned an error" — is the
#: launcher's result line's to say: memcheck stops a faulting kernel on purpose.)
_INCOMPLETE = re.compile(r"Internal Sanitizer Error|didn't track the launch|"
                         r"Errors might go undetected|before first instrumented API call|"
                         r"No attachable process", re.IGNORECASE)


def _count(text: str) -> int:
    return int(text.replace(",", ""))


def sanitizer_lines(text: str) -> list[str]:
    """The report's lines without their ``=========`` prefix (other lines dropped)."""
    out = []
    for raw in text.splitlines():
        m = _PREFIX.match(raw)
        if m is not None:
            out.append(raw[m.end():].rstrip())
    return out


def parse_report(tool: str, text: str) -> dict[str, Any]:
    """The figures of one tool's report; :class:`ReportError` when it is not a complete one.

    Complete means: exactly one summary line of the tool's kind (``ERROR SUMMARY: N errors``;
    racecheck's ``RACECHECK SUMMARY: N hazards displayed (E errors, W warnings)``), no line
    saying the tool skipped work, and a summary that does not count zero while findings were
    printed above it. Findings are the report's headlines (``Invalid __global__ write …``,
    ``Error: Race reported between …``); the first few are kept with their detail lines.
    """
    if tool not in TOOLS:
        raise ValueError(f"unknown sanitizer tool {tool!r}; known: {', '.join(TOOLS)}")
    lines = sanitizer_lines(text)
    if not lines:
        raise ReportError(f"no compute-sanitizer output in the {tool} report "
                          f"({len(text)} characters)")
    findings: list[dict[str, Any]] = []
    kinds: dict[str, int] = {}
    incomplete: list[str] = []
    summaries: list[re.Match[str]] = []
    not_printed = 0
    raw_hazards = 0
    other_errors = 0
    current: dict[str, Any] | None = None
    summary_re = _RACE_SUMMARY if tool == "racecheck" else _ERROR_SUMMARY
    for line in lines:
        body = line.strip()
        if not body:
            current = None
            continue
        if _INCOMPLETE.search(body):
            incomplete.append(body[:300])
        if (m := _NOT_PRINTED.match(body)) is not None:
            not_printed += _count(m.group(1))
            continue
        if (m := summary_re.match(body)) is not None:
            summaries.append(m)
            continue
        if tool == "racecheck" and (m := _ERROR_SUMMARY.match(body)) is not None:
            other_errors += _count(m.group(1))  # errors outside racecheck's own summary
            continue
        if body.startswith("LEAK SUMMARY"):
            continue
        if body.startswith(("ERROR SUMMARY", "RACECHECK SUMMARY")):
            raise ReportError(f"unreadable summary line in the {tool} report: {body[:200]!r}")
        if (m := _HAZARDS.search(body)) is not None:
            raw_hazards += _count(m.group(1))
        kind = next((k for k, pattern in _FINDINGS if pattern.match(body)), None)
        if kind is not None and line == line.lstrip():
            kinds[kind] = kinds.get(kind, 0) + 1
            current = {"kind": kind, "text": body[:300], "details": []}
            findings.append(current)
            continue
        if current is not None and len(current["details"]) < 4 and not body.startswith(
                ("Saved host backtrace", "Host Frame")):
            current["details"].append(body[:300])
    if len(summaries) != 1:
        want = "RACECHECK SUMMARY" if tool == "racecheck" else "ERROR SUMMARY"
        if summaries:
            raise ReportError(f"{len(summaries)} {want} lines in the {tool} report, one "
                              "expected: it is garbled (or covers several processes)")
        raise ReportError(f"no {want} line in the {tool} report: it is incomplete (the tool "
                          "or its target ended before the summary, or the text is garbled)")
    if incomplete:
        raise ReportError(f"the {tool} report says it did not check everything: "
                          f"{incomplete[0]}")
    summary = summaries[0]
    result: dict[str, Any] = {"tool": tool, "findings_printed": len(findings),
                              "kinds": kinds, "not_printed": not_printed,
                              "messages": [_message(f) for f in findings[:MAX_MESSAGES]]}
    if tool == "racecheck":
        displayed, errors, warnings = (_count(summary.group(i)) for i in (1, 2, 3))
        result.update(hazards=displayed, hazard_errors=errors, hazard_warnings=warnings,
                      raw_hazards=raw_hazards or None, errors=errors + warnings + other_errors)
        counted = displayed + other_errors
        race_findings = kinds.get("race", 0) + kinds.get("hazard", 0)
        if race_findings > displayed:
            raise ReportError(f"racecheck printed {race_findings} race reports but its summary "
                              f"displays {displayed}: the report is garbled")
    else:
        counted = _count(summary.group(1))
        result["errors"] = counted
    if counted == 0 and findings and any(f["kind"] != "leak" for f in findings):
        raise ReportError(f"the {tool} summary counts 0 but {len(findings)} finding(s) are "
                          f"printed above it ({findings[0]['text'][:120]}): the report is "
                          "garbled")
    result["flagged"] = counted > 0
    return result


def _message(finding: dict[str, Any]) -> str:
    return " | ".join([finding["text"], *finding["details"][:3]])[:600]


def judge(tool: str, report: str, *, exit_code: int | None, launcher: dict[str, Any] | None,
          launches: int, timed_out: bool = False, timeout_s: float | None = None,
          output_tail: str = "") -> dict[str, Any]:
    """One tool run's verdict from its report, its exit code and the launcher's result line.

    ``flagged`` when the tool found something (whatever became of the target: memcheck stops a
    faulting kernel), ``passed`` only when the report is complete and clean, the exit code is
    0 and the launcher ran all ``launches`` with correct output; anything else is ``error``.
    """
    run: dict[str, Any] = {"tool": tool, "status": "error", "exit_code": exit_code,
                           "launcher": launcher, "error": None}
    if timed_out:
        run["error"] = f"killed after {timeout_s:g} s (time limit): not checked to the end"
        return run
    try:
        figures = parse_report(tool, report)
    except ReportError as exc:
        why = str(exc)
        said = [ln.strip() for ln in sanitizer_lines(report) if ln.strip()]
        if said and "SUMMARY" not in said[-1]:
            why += f"; it last said: {said[-1][:200]}"
        if launcher is not None and launcher.get("status") not in (None, "ok"):
            why += f"; the target said {launcher.get('status')}: {launcher.get('error')}"
        elif output_tail.strip():
            why += f"; last output: {output_tail.strip().splitlines()[-1][:200]}"
        run["error"] = f"could not parse the {tool} report: {why}"
        return run
    run.update({k: v for k, v in figures.items() if k != "tool"})
    if figures["flagged"]:
        run["status"] = "flagged"
        return run
    if launcher is None:
        run["error"] = (f"{tool} found nothing, but the target printed no result line (exit "
                        f"{exit_code}): it did not run to the end")
        return run
    if launcher.get("status") != "ok":
        run["error"] = (f"{tool} found nothing, but the target ended with "
                        f"{launcher.get('status')}: {launcher.get('error')}")
        return run
    ran = launcher.get("launches") or []
    if len(ran) != launches:
        run["error"] = f"the target ran {len(ran)} of {launches} launches"
        return run
    wrong = [r for r in ran if not r.get("passed")]
    if wrong:
        w = wrong[0]
        run["error"] = (f"the kernel's output under {tool} is wrong at "
                        f"{'x'.join(map(str, w['shape']))} (norm-relative error "
                        f"{w.get('rel_err'):.3g}, {w.get('unwritten')} unwritten, "
                        f"{w.get('nonfinite')} NaN/Inf): not a pass")
        return run
    if exit_code != 0:
        run["error"] = f"{tool} found nothing but exited {exit_code}"
        return run
    run["status"] = "passed"
    return run


def launcher_result(stdout: str) -> dict[str, Any] | None:
    """The launcher's last result line, or None when it printed none."""
    found = None
    for line in stdout.splitlines():
        if line.startswith(MARKER):
            try:
                found = json.loads(line[len(MARKER):])
            except json.JSONDecodeError:
                found = {"status": "garbled", "error": line[:200]}
    return found


# ---- the tool -------------------------------------------------------------------------------
def sanitizer_path(configured: str = "compute-sanitizer") -> str | None:
    """The compute-sanitizer executable (a name on PATH or a path), if there is one."""
    if os.sep in configured:
        return configured if os.access(configured, os.X_OK) else None
    found = shutil.which(configured)
    if found:
        return found
    default = "/usr/local/cuda/bin/compute-sanitizer"
    return default if configured == "compute-sanitizer" and os.access(default, os.X_OK) \
        else None


def _run_quick(cmd: list[str], timeout_s: float = 60.0) -> str:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout + done.stderr


@lru_cache(maxsize=4)
def sanitizer_version(exe: str) -> str:
    """``Version 2025.3.0.0 …`` from ``--version`` ('unknown' if it cannot be read)."""
    text = _run_quick([exe, "--version"])
    m = re.search(r"Version\s+(\S.*)$", text, re.MULTILINE)
    if m:
        return m.group(1).strip()[:120]
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1][:120] if lines else "unknown"


@lru_cache(maxsize=4)
def sanitizer_options(exe: str) -> frozenset[str]:
    """The long options this compute-sanitizer knows (from ``--help``)."""
    return frozenset(re.findall(r"--([a-z][a-z0-9-]+)", _run_quick([exe, "--help"])))


def tool_command(exe: str, tool: str, log_file: Path, options: frozenset[str]) -> list[str]:
    """compute-sanitizer's options for one tool (optional ones only where this version has
    them)."""
    cmd = [exe, "--tool", tool, "--log-file", str(log_file), "--error-exitcode",
           str(ERROR_EXITCODE), "--print-limit", str(PRINT_LIMIT)]
    if "target-processes" in options:
        cmd += ["--target-processes", "application-only"]
    if "show-backtrace" in options:
        cmd += ["--show-backtrace", "device"]
    if "check-exit-code" in options:  # the launcher's exit is judged from its result line
        cmd += ["--check-exit-code", "no"]
    if tool in ("memcheck", "synccheck") and "destroy-on-device-error" in options:
        # stop the faulting kernel, not the context: the other launches still run and are
        # checked, and the launcher still prints its result line
        cmd += ["--destroy-on-device-error", "kernel"]
    if tool == "memcheck":
        # the launcher checks every API call itself (pycuda raises): API errors would only
        # report pycuda's own probing, never the kernel
        if "report-api-errors" in options:
            cmd += ["--report-api-errors", "no"]
        if "padding" in options:
            cmd += ["--padding", str(PADDING_BYTES)]
    if tool == "racecheck" and "racecheck-report" in options:
        cmd += ["--racecheck-report", "analysis"]
    return cmd


def _kill_group(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def _env(gpu: str) -> dict[str, str]:
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=gpu, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join(
        [str(PROJECT_ROOT), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
    return env


def probe_gpu(gpu: str = "0", timeout_s: float = 120.0) -> dict[str, Any]:
    """The GPU the gate would run on (name, arch); :class:`SanitizerUnavailable` if none."""
    try:
        done = subprocess.run([sys.executable, "-m", "worker.sanitize_launch", "--probe"],
                              capture_output=True, text=True, timeout=timeout_s,
                              env=_env(gpu), cwd=str(PROJECT_ROOT))
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SanitizerUnavailable(f"the GPU probe failed: {exc}") from None
    result = launcher_result(done.stdout)
    if result is None or result.get("status") != "ok":
        why = (result or {}).get("error") or (done.stderr.strip().splitlines() or
                                              ["no output"])[-1]
        raise SanitizerUnavailable(str(why)[:300])
    return result


def launch_spec(family: Any, shape: Dims, launch: LaunchConfig) -> dict[str, Any]:
    """One entry of the launcher's spec: the shape's values, the family's resolved signature,
    the candidate's launch and the reference kernel's."""
    return {"shape": list(shape.values_tuple()), "signature": family.signature.resolve(shape),
            "launch": launch.to_dict(),
            "reference_launch": family.reference_launch(shape).to_dict()}


def run_tool(exe: str, tool: str, cubin: Path,
             launches: Sequence[tuple[Dims, LaunchConfig]], *, family: Any, gpu: str = "0",
             timeout_s: float = 600.0, seed: int = 0, reference: Path | None = None,
             keep: Path | None = None, tolerance: float = DEFAULT_TOLERANCE) -> dict[str, Any]:
    """Run one tool over ``launches`` of ``family``'s kernel (one process for all of them),
    killed with its process group at ``timeout_s``; ``reference``: the family's reference
    cubin (without it the outputs are checked for unwritten and NaN/Inf elements only);
    ``keep``: a folder for the raw report and the target's output."""
    with tempfile.TemporaryDirectory(prefix="tf-sanitize-") as tmp:
        spec_path = Path(tmp) / "spec.json"
        log_path = Path(tmp) / f"{tool}.log"
        spec: dict[str, Any] = {
            "cubin": str(cubin), "seed": seed, "tolerance": tolerance,
            "launches": [launch_spec(family, s, lc) for s, lc in launches]}
        if reference is not None:
            spec["reference_cubin"] = str(reference)
            spec["reference_kernel"] = family.reference_launch(launches[0][0]).kernel_name \
                if launches else ""
            style = reference_setup(family)
            spec["reference_style"] = style["style"]
            spec["reference_outputs_dtype"] = style["outputs_dtype"]
        spec_path.write_text(json.dumps(spec))
        cmd = [*tool_command(exe, tool, log_path, sanitizer_options(exe)), sys.executable,
               "-m", "worker.sanitize_launch", str(spec_path)]
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=_env(gpu), cwd=str(PROJECT_ROOT), start_new_session=True)
        timed_out = False
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
            out, err = proc.communicate()
        finally:
            if proc.poll() is None:
                _kill_group(proc)
        seconds = time.perf_counter() - start
        report = log_path.read_text(errors="replace") if log_path.exists() else ""
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        (keep / f"{tool}.log").write_text(report)
        (keep / f"{tool}.out.txt").write_text(f"$ {' '.join(cmd)}\nexit {proc.returncode}\n"
                                              f"--- stdout\n{out}\n--- stderr\n{err}\n")
    run = judge(tool, report, exit_code=proc.returncode, launcher=launcher_result(out),
                launches=len(launches), timed_out=timed_out, timeout_s=timeout_s,
                output_tail=(err or out)[-2000:])
    run["shapes"] = [str(s) for s, _ in launches]
    run["seconds"] = round(seconds, 2)
    return run


# ---- the gate -------------------------------------------------------------------------------
def gate_shapes(tool: str, campaign_shape: Dims | None, shapes: Sequence[Dims] | None = None,
                family_shapes: Sequence[Dims] = ()) -> list[Dims]:
    """The shapes ``tool`` runs: ``shapes`` when given, else the family's sanitizer shapes of
    the point (and the campaign's shape for :data:`FULL_SHAPE_TOOLS`)."""
    if shapes:
        return list(dict.fromkeys(shapes))
    out = list(family_shapes)
    if campaign_shape is not None and tool in FULL_SHAPE_TOOLS:
        out.append(campaign_shape)
    return list(dict.fromkeys(out))


def plan_launches(family: Any, params: Any, tool: str, campaign_shape: Dims | None,
                  shapes: Sequence[Dims] | None = None
                  ) -> tuple[list[tuple[Dims, LaunchConfig]], dict[str, str]]:
    """The launches ``tool`` runs, and the shapes the kernel refused (shape -> why).

    Shapes given by the caller must all launch (a refusal is reported, and the run is an
    error). Of the default ones (``family.sanitizer_shapes(params)``), those the kernel refuses
    are left out and reported; a kernel that refuses every one (one compiled for a fixed
    shape) runs at the campaign's shape, for every tool: the only shape it can run at.
    """
    launches: list[tuple[Dims, LaunchConfig]] = []
    refused: dict[str, str] = {}

    def launch(shape: Dims) -> None:
        found = family.launch(params, shape)
        if isinstance(found, Rejection):
            refused[str(shape)] = f"{found.reason}: {found.message}"
        else:
            launches.append((shape, found))

    family_shapes = () if shapes else tuple(family.sanitizer_shapes(params))
    for shape in gate_shapes(tool, campaign_shape, shapes, family_shapes):
        launch(shape)
    if not shapes and not launches and campaign_shape is not None:
        launch(campaign_shape)
    return launches, refused


def reference_cubin(family: Any, arch: str, nvcc: str = "nvcc") -> bytes:
    """The family's float64 reference kernel compiled for ``arch`` (cached on disk);
    :class:`SanitizerUnavailable` when it does not compile."""
    from worker.compile import Compiler, reference_params

    compiler = Compiler(Path(tempfile.gettempdir()) / "tuneforge-reference-cubins", nvcc=nvcc,
                        arch=arch.removesuffix("a"), workers=1)
    result = compiler.compile(family.reference_source(), params=reference_params(family))
    if result.status != "ok":
        raise SanitizerUnavailable(f"the {family.name} reference kernel does not compile: "
                                   f"{result.error}")
    return result.cubin()


def parse_tools(text: str | Iterable[str]) -> tuple[str, ...]:
    """``"memcheck,racecheck"`` → a tuple of known tools (``ValueError`` names a bad one)."""
    names = [t.strip() for t in (text.split(",") if isinstance(text, str) else text)]
    names = [t for t in names if t]
    if not names:
        raise ValueError("no sanitizer tool given")
    unknown = [t for t in names if t not in TOOLS]
    if unknown:
        raise ValueError(f"unknown sanitizer tool(s) {', '.join(unknown)}; known: "
                         f"{', '.join(TOOLS)}")
    return tuple(dict.fromkeys(names))


def overall_status(runs: Iterable[dict[str, Any]]) -> str:
    """``flagged`` if any tool flagged, else ``error`` if any could not judge, else
    ``passed``."""
    statuses = [r["status"] for r in runs]
    if "flagged" in statuses:
        return "flagged"
    if "error" in statuses or not statuses:
        return "error"
    return "passed"


def summary_line(record: dict[str, Any]) -> str:
    """One line: each tool's verdict and counts."""
    parts = []
    for tool, run in record.get("tools", {}).items():
        if run["status"] == "error":
            parts.append(f"{tool}: error")
        elif tool == "racecheck":
            parts.append(f"{tool}: {run['status']} ({run.get('hazards')} hazards: "
                         f"{run.get('hazard_errors')} errors, {run.get('hazard_warnings')} "
                         "warnings)")
        else:
            parts.append(f"{tool}: {run['status']} ({run.get('errors')} errors)")
    return "; ".join(parts)


def error_record(reason: str) -> dict[str, Any]:
    """The record of a gate that could not run at all (no GPU, no tool, no cubin)."""
    return {"version": RECORD_VERSION, "status": "error", "ok": False, "tools": {},
            "error": reason, "summary": f"not checked: {reason}",
            "checked_at": dt.datetime.now(dt.UTC).isoformat()}


def check(family: Any, params: Any, cubin: bytes, *, tools: Sequence[str] = DEFAULT_TOOLS,
          campaign_shape: Dims | None = None, shapes: Sequence[Dims] | None = None,
          gpu: str = "0", exe: str | None = None, timeout_s: float = 600.0,
          device: dict[str, Any] | None = None, keep: Path | None = None,
          reference: bytes | None = None, tolerance: float = DEFAULT_TOLERANCE
          ) -> dict[str, Any]:
    """The sanitizer record of one compiled point: every tool in turn, then the verdict
    (each output judged against the reference at the campaign's ``tolerance``).

    ``device`` is :func:`probe_gpu`'s answer (probed here when not given);
    :class:`SanitizerUnavailable` when the tool or the GPU is missing. ``reference``: the
    family's reference cubin (compiled here for the device when not given). ``keep``: a folder
    for each tool's raw report.
    """
    exe = exe or sanitizer_path()
    if exe is None:
        raise SanitizerUnavailable("compute-sanitizer is not on PATH (it comes with the CUDA "
                                   "toolkit; TUNEFORGE_COMPUTE_SANITIZER names another one)")
    device = device or probe_gpu(gpu)
    started = dt.datetime.now(dt.UTC)
    runs: dict[str, dict[str, Any]] = {}
    if reference is None:
        reference = reference_cubin(family, str(device.get("arch") or "sm_90"))
    with tempfile.TemporaryDirectory(prefix="tf-sanitize-cubin-") as tmp:
        cubin_path = Path(tmp) / "kernel.cubin"
        cubin_path.write_bytes(cubin)
        reference_path = Path(tmp) / "reference.cubin"
        reference_path.write_bytes(reference)
        for tool in tools:
            launches, refused = plan_launches(family, params, tool, campaign_shape, shapes)
            if not launches or (shapes and refused):
                runs[tool] = {"tool": tool, "status": "error", "shapes": [], "seconds": 0.0,
                              "refused_shapes": refused,
                              "error": "the kernel cannot launch at " + "; ".join(
                                  f"{k} ({v})" for k, v in refused.items())}
                continue
            runs[tool] = run_tool(exe, tool, cubin_path, launches, family=family, gpu=gpu,
                                  timeout_s=timeout_s, reference=reference_path, keep=keep,
                                  tolerance=tolerance)
            if refused:
                runs[tool]["refused_shapes"] = refused
    status = overall_status(runs.values())
    record = {
        "version": RECORD_VERSION, "status": status, "ok": status == "passed",
        "tools": runs, "sanitizer": exe, "sanitizer_version": sanitizer_version(exe),
        "device": {"name": device.get("name"), "arch": device.get("arch")},
        "kernel": family.name, "checked_at": started.isoformat(),
        "seconds": round(sum(r.get("seconds", 0.0) for r in runs.values()), 2),
        "shapes_rule": "given by the caller" if shapes else
                       "the family's sanitizer shapes of the point, those the kernel accepts; "
                       "memcheck also the campaign's shape (the only one of a kernel compiled "
                       "for a fixed shape)",
    }
    record["summary"] = summary_line(record)
    return record


def gate(compiler: Any, family: Any, params: Any, source: str, *, campaign_shape: Dims,
         tolerance: float, gpu: str, exe: str | None, timeout_s: float,
         tools: Sequence[str] = DEFAULT_TOOLS, shapes: Sequence[Dims] | None = None,
         device: dict[str, Any] | None = None) -> dict[str, Any]:
    """The gate on a stored candidate: compile its stored source again exactly as the campaign
    did (a cache hit), then :func:`check` it on ``gpu``; a gate that cannot run is an
    ``error`` record saying why. Used by the service's GPU workers, ``tuneforge tune
    --sanitize`` and ``tuneforge sanitize`` alike."""
    from worker.compile import candidate_params, reference_params, target_arch

    compiled = compiler.compile(
        source, entry=family.name, dynamic_smem_bytes=int(family.dynamic_smem_bytes(params)),
        arch=target_arch(family, params, compiler.arch), params=candidate_params(family, params))
    if compiled.status != "ok":
        return error_record(f"the source did not compile again: {compiled.status}: "
                            f"{compiled.error}")
    reference = compiler.compile(family.reference_source(), params=reference_params(family))
    if reference.status != "ok":
        return error_record(f"the reference kernel did not compile: {reference.error}")
    try:
        return check(family, params, compiled.cubin(), tools=tools, campaign_shape=campaign_shape,
                     shapes=shapes, gpu=gpu, exe=exe, timeout_s=timeout_s, device=device,
                     reference=reference.cubin(), tolerance=tolerance)
    except SanitizerUnavailable as exc:
        return error_record(str(exc))
