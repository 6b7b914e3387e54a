"""The compile path: nvcc to a cubin, ptxas figures, a time limit, an on-disk cache, a pool.

No GPU needed. ``Compiler.compile`` never raises for a bad kernel: a compile error, a timeout or
a crash of nvcc is a recorded status with a short error summary. nvcc runs in a scratch
directory of its own (its working directory, holding only the source) in its own process group,
killed with its children at the time limit; a source whose ``#include`` names an absolute path,
climbs with ``..`` or is computed by a macro is refused before nvcc runs (:func:`unsafe_include`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict
from functools import lru_cache
from pathlib import Path
from typing import Any

from core.evaluation import CompileResult
from kernels.base import Rejection
from kernels.family import reference_setup
from worker import launch_contract as lc
from worker.cubin_params import ParamsCheck, params_mismatch

BASE_FLAGS: tuple[str, ...] = ("-cubin", "-O3", "-Xptxas", "-v", "-lineinfo")
ERROR_SUMMARY_CHARS = 400


_PTXAS_REGS = re.compile(r"Used (\d+) registers")
_PTXAS_SMEM = re.compile(r"(\d+) bytes smem")
_PTXAS_FRAME = re.compile(
    r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads"
)
_ERROR_LINE = re.compile(r"(error|fatal)[^\n]*", re.IGNORECASE)
#: a directive that reads a file: ``#``, ``%:`` (a digraph) or ``??=`` (a trigraph), then
#: ``include``, ``include_next`` or ``embed``, with blanks or block comments before and between
_FILE_DIRECTIVE = re.compile(
    r"[ \t]*(?:/\*.*?\*/[ \t]*)*(?:#|%:|\?\?=)[ \t]*(?:/\*.*?\*/[ \t]*)*"
    r"(include_next|include|embed)\b[ \t]*(?:/\*.*?\*/[ \t]*)*(.*)")
_OPERAND = re.compile(r'(?:"([^"]*)"|<([^>]*)>)')


def _logical_lines(source: str) -> list[tuple[int, str]]:
    """The source's lines joined at backslash-newlines, as the preprocessor joins them, each
    with the number of its first physical line."""
    out: list[tuple[int, str]] = []
    pending, first = "", 0
    for number, text in enumerate(source.split("\n"), 1):
        text = text.removesuffix("\r")
        if not pending:
            first = number
        if text.endswith("\\"):
            pending += text[:-1]
            continue
        out.append((first, pending + text))
        pending = ""
    if pending:
        out.append((first, pending))
    return out


def unsafe_include(source: str) -> dict[str, Any] | None:
    """The first file directive of ``source`` that could read outside the scratch directory
    nvcc runs in, or None: a path that is absolute (``/…``, ``\\…``, ``C:…``) or has a
    ``..`` component, or an operand that is not a literal ``"…"`` or ``<…>`` (a macro could
    expand to either). A directive inside a block comment or a raw string is refused too
    (refusing is the safe error). ``{"reason": "unsafe_include", "message", "line",
    "include"}`` for a refusal."""
    for line, text in _logical_lines(source):
        match = _FILE_DIRECTIVE.match(text)
        if match is None:
            continue
        directive, operand = match.group(1), match.group(2).strip()
        literal = _OPERAND.match(operand)
        if literal is None:
            why = "is not a literal \"file\" or <file> (a macro may name any path)"
        else:
            path = literal.group(1) if literal.group(1) is not None else literal.group(2)
            if path.startswith(("/", "\\")) or re.match(r"[A-Za-z]:", path):
                why = "names an absolute path"
            elif ".." in re.split(r"[/\\]", path):
                why = "climbs out of the source's directory with '..'"
            else:
                continue
        return {"reason": "unsafe_include", "line": line, "include": operand[:200],
                "message": f"line {line}: #{directive} {operand[:80]} {why}; a kernel may "
                           "include only files of its own, by relative paths"}
    return None


def parse_ptxas(log: str, entry: str | None = None) -> dict[str, Any]:
    """Registers, static smem, stack and spills of ``entry`` (or the first function) from the
    ``-Xptxas -v`` report."""
    section = log
    if entry is not None:
        marker = f"Compiling entry function '{entry}'"
        at = log.find(marker)
        if at >= 0:
            nxt = log.find("Compiling entry function", at + len(marker))
            section = log[at: nxt if nxt >= 0 else len(log)]
    figures: dict[str, Any] = {}
    if m := _PTXAS_REGS.search(section):
        figures["regs_per_thread"] = int(m.group(1))
    figures["static_smem_bytes"] = int(m.group(1)) if (m := _PTXAS_SMEM.search(section)) else 0
    if m := _PTXAS_FRAME.search(section):
        figures["stack_bytes"] = int(m.group(1))
        figures["spill_store_bytes"] = int(m.group(2))
        figures["spill_load_bytes"] = int(m.group(3))
    return figures


def summarize_error(log: str) -> str:
    """The first error lines of a compiler log, short enough to show and to feed an agent."""
    lines = [m.group(0).strip() for m in _ERROR_LINE.finditer(log)]
    text = " | ".join(dict.fromkeys(lines)) if lines else log.strip().splitlines()[-1:]
    if isinstance(text, list):
        text = text[0] if text else "compiler failed without output"
    return text[:ERROR_SUMMARY_CHARS]


@lru_cache(maxsize=8)
def nvcc_version(nvcc: str) -> str:
    """``nvcc --version``'s last line, part of every cache key ('unavailable' if it fails)."""
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "unavailable"
    lines = out.stdout.strip().splitlines()
    return lines[-1] if lines else "unknown"


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


class Compiler:
    """Compiles CUDA sources to cubins with a cache, a time limit and a thread pool."""

    def __init__(
        self,
        cache_dir: Path,
        *,
        nvcc: str = "nvcc",
        arch: str = "sm_90",
        timeout_s: float = 120.0,
        extra_flags: Sequence[str] = (),
        workers: int = 0,
    ) -> None:
        self.cache_dir = Path(cache_dir)
        self.nvcc = nvcc
        self.arch = arch
        self.timeout_s = timeout_s
        self.flags = [*BASE_FLAGS, *extra_flags]
        self.workers = workers or os.cpu_count() or 1
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    @property
    def gencode(self) -> list[str]:
        """The target flags of the compiler's own arch."""
        return gencode_flags(self.arch)

    def cache_key(self, source: str, arch: str | None = None) -> str:
        """Covers everything that changes the cubin: source, nvcc version, arch, flags."""
        blob = json.dumps(
            [hashlib.sha256(source.encode()).hexdigest(), nvcc_version(self.nvcc),
             gencode_flags(arch or self.arch), self.flags]
        )
        return hashlib.sha256(blob.encode()).hexdigest()

    def compile(self, source: str, *, entry: str | None = None,
                dynamic_smem_bytes: int = 0, arch: str | None = None,
                params: ParamsCheck | None = None) -> CompileResult:
        """Compile ``source`` for ``arch`` (default the compiler's; a kernel that uses the
        ``a`` features of its GPU asks for ``sm_90a``, say); a hit in the cache costs no nvcc
        run; a source with an unsafe ``#include`` is ``rejected`` without one. With ``params``,
        a cubin whose kernel declares other parameters than the launch passes is an ``error``
        that says both (the cache keeps the compile itself)."""
        result = self._compile(source, entry=entry, dynamic_smem_bytes=dynamic_smem_bytes,
                               arch=arch)
        if params is None or result.status != "ok" or result.cubin_path is None:
            return result
        mismatch = params_mismatch(Path(result.cubin_path).read_bytes(), params)
        if mismatch is None:
            return result
        return dataclasses.replace(result, status="error", error=mismatch, cubin_path=None)

    def _compile(self, source: str, *, entry: str | None, dynamic_smem_bytes: int,
                 arch: str | None) -> CompileResult:
        refusal = unsafe_include(source)
        if refusal is not None:
            result = CompileResult.rejected(refusal, dynamic_smem_bytes)
            result.source_hash = hashlib.sha256(source.encode()).hexdigest()
            result.arch = arch or self.arch
            return result
        key = self.cache_key(source, arch)
        entry_dir = self.cache_dir / key[:2] / key
        meta_path = entry_dir / "result.json"
        if meta_path.exists():
            data = json.loads(meta_path.read_text())
            result = CompileResult(**data)
            result.cache_hit = True
            result.dynamic_smem_bytes = dynamic_smem_bytes  # a launch property, not the cubin's
            result.cubin_path = str(entry_dir / "kernel.cubin") if result.status == "ok" else None
            return result
        result = self._run_nvcc(source, entry=entry, dynamic_smem_bytes=dynamic_smem_bytes,
                                arch=arch or self.arch)
        # a timeout, a signal-killed nvcc or a missing executable may pass next time: not cached
        if result.status == "ok" or (result.status == "error" and result.log):
            self._store(entry_dir, result)
        return result

    def _run_nvcc(self, source: str, *, entry: str | None,
                  dynamic_smem_bytes: int, arch: str) -> CompileResult:
        source_hash = hashlib.sha256(source.encode()).hexdigest()
        gencode = gencode_flags(arch)
        common: dict[str, Any] = {
            "source_hash": source_hash, "arch": arch,
            "nvcc_version": nvcc_version(self.nvcc), "flags": [*gencode, *self.flags],
            "dynamic_smem_bytes": dynamic_smem_bytes,
        }
        with tempfile.TemporaryDirectory(prefix="tf-nvcc-") as tmp:
            src = Path(tmp) / "kernel.cu"
            out = Path(tmp) / "kernel.cubin"
            src.write_text(source)
            cmd = [self.nvcc, *gencode, *self.flags, str(src), "-o", str(out)]
            start = time.perf_counter()
            try:
                proc = subprocess.Popen(
                    cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                    start_new_session=True, cwd=tmp,
                )
            except OSError as exc:
                return CompileResult("error", 0.0, error=f"cannot run {self.nvcc}: {exc}",
                                     **common)
            try:
                raw, _ = proc.communicate(timeout=self.timeout_s)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                return CompileResult(
                    "timeout", time.perf_counter() - start,
                    error=f"nvcc killed after {self.timeout_s:g} s", **common,
                )
            finally:
                if proc.poll() is None:
                    _kill_group(proc)
            seconds = time.perf_counter() - start
            log = raw.decode(errors="replace")
            if proc.returncode < 0:
                return CompileResult("error", seconds, error=f"nvcc killed by signal "
                                     f"{-proc.returncode}", **common)
            if proc.returncode != 0 or not out.exists():
                return CompileResult("error", seconds, error=summarize_error(log),
                                     log=log[-20000:] or "nvcc failed without output", **common)
            figures = parse_ptxas(log, entry)
            result = CompileResult("ok", seconds, log=log[-20000:], **figures, **common)
            result.cubin_path = str(out)
            # the temp dir vanishes: keep the bytes until _store writes them
            result._cubin_bytes = out.read_bytes()  # type: ignore[attr-defined]
            return result

    def _store(self, entry_dir: Path, result: CompileResult) -> None:
        entry_dir.mkdir(parents=True, exist_ok=True)
        blob = getattr(result, "_cubin_bytes", None)
        if blob is not None:
            tmp = entry_dir / f"kernel.cubin.{os.getpid()}.{threading.get_ident()}"
            tmp.write_bytes(blob)
            tmp.replace(entry_dir / "kernel.cubin")
            result.cubin_path = str(entry_dir / "kernel.cubin")
            del result._cubin_bytes  # type: ignore[attr-defined]
        data = asdict(result)
        data["cache_hit"] = False
        data["cubin_path"] = None
        tmp_meta = entry_dir / f"result.json.{os.getpid()}.{threading.get_ident()}"
        tmp_meta.write_text(json.dumps(data))
        tmp_meta.replace(entry_dir / "result.json")

    # ---- the pool ------------------------------------------------------------------------
    def submit(self, source: str, *, entry: str | None = None,
               dynamic_smem_bytes: int = 0, arch: str | None = None,
               params: ParamsCheck | None = None) -> Future[CompileResult]:
        """Compile in the background (one nvcc per pool thread; nvcc runs outside the GIL)."""
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="nvcc")
        return self._pool.submit(self.compile, source, entry=entry,
                                 dynamic_smem_bytes=dynamic_smem_bytes, arch=arch,
                                 params=params)

    def compile_many(self, sources: Iterable[str], *, entry: str | None = None
                     ) -> list[CompileResult]:
        """Compile several sources in parallel, results in order."""
        futures = [self.submit(s, entry=entry) for s in sources]
        return [f.result() for f in futures]

    def close(self) -> None:
        """Stop the pool (waits for running compiles)."""
        with self._lock:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
                self._pool = None


def gencode_flags(arch: str) -> list[str]:
    """nvcc's target flags for ``arch``; ``sm_90a`` needs the ``-gencode`` form (HOPPER.md)."""
    if arch.endswith("a"):
        num = arch.removeprefix("sm_")
        return [f"-gencode=arch=compute_{num},code=sm_{num}"]
    return [f"-arch={arch}"]


def target_arch(family: Any, params: Any, arch: str) -> str:
    """The arch ``family`` builds ``params`` for on a GPU of ``arch`` (its ``compile_arch``: a
    kernel that uses the ``a`` features of its GPU asks for ``sm_90a``, say)."""
    return str(family.compile_arch(params, arch))


def compiler_from_settings(settings: Any, *, arch: str | None = None) -> Compiler:
    """A :class:`Compiler` configured from :class:`core.settings.Settings`."""
    return Compiler(
        settings.cache_dir,
        nvcc=settings.nvcc,
        arch=arch or settings.arch,
        timeout_s=settings.compile_timeout_s,
        extra_flags=settings.nvcc_extra_flags,
        workers=settings.compile_workers,
    )


def candidate_params(family: Any, params: Any) -> ParamsCheck | None:
    """What the launch contract passes ``params``' kernel: the signature's buffers and scalars,
    then a workspace pointer when its launch has one (either is taken: the launch decides per
    shape); ``None`` when the point launches at neither its own shape nor the default one."""
    dims = family.fixed_dims(params) or family.default_dims
    launch = family.launch(params, dims)
    if isinstance(launch, Rejection):
        return None
    base = lc.kernel_format(family.signature.resolve(dims))
    return ParamsCheck(launch.kernel_name, (base, base + "P"))


def reference_params(family: Any) -> ParamsCheck:
    """What the launch contract passes the family's reference kernel (its style's format)."""
    dims = family.edge_shapes[0]
    style = reference_setup(family)["style"]
    return ParamsCheck(family.reference_launch(dims).kernel_name,
                       (lc.reference_format(family.signature.resolve(dims), style),))


def compile_candidate(compiler: Compiler, family: Any, params: Any) -> CompileResult:
    """Validate ``params`` for the compiler's arch, render and compile (entry: the family's
    kernel name, dynamic shared memory: the family's figure for ``params``, parameters: the
    signature's, :func:`candidate_params`); a point the space refuses comes back ``rejected``
    with its numbers and no nvcc run."""
    dynamic = int(family.dynamic_smem_bytes(params))
    rejection = family.validate(params, compiler.arch)
    if rejection is not None:
        data = rejection.to_dict()
        data.setdefault("max_smem_limit", family.max_smem_limit(compiler.arch))
        return CompileResult.rejected(data, dynamic)
    return compiler.compile(family.render(params), entry=family.name,
                            dynamic_smem_bytes=dynamic,
                            arch=target_arch(family, params, compiler.arch),
                            params=candidate_params(family, params))
