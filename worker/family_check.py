"""A user family compiled before it is stored: its baseline point and its reference kernel, with
nvcc through :class:`worker.compile.Compiler` (its time limit and cache), in parallel.

Registration (the API, ``tuneforge family add``) runs this module as a child process,
``python -m worker.family_check``, under a wall-clock and an address-space limit
(``core.families.compile_check``): the spec goes in as JSON on stdin, one JSON line comes out,
``{"ok": true}`` or ``{"field", "problem"}`` with the first lines of nvcc's message. The API
never imports it (the import contract keeps ``api`` off ``worker``); ``tuneforge compile``
calls :func:`check_family` itself.
"""

from __future__ import annotations

import json
import re
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from core.evaluation import CompileResult
from worker.compile import Compiler, compile_candidate, compiler_from_settings, reference_params

#: Lines of nvcc's message a refusal quotes.
MESSAGE_LINES = 3


def first_lines(log: str, source_name: str) -> str:
    """nvcc's first error lines (at most :data:`MESSAGE_LINES`), each with its file and line,
    the scratch directory's path left out."""
    picked = [re.sub(r"/tmp/tf-nvcc-[^/\s]+/kernel\.cu", source_name, line.strip())
              for line in log.splitlines() if re.search(r"\b(error|fatal)\b", line, re.I)
              and "detected in the compilation" not in line]
    return " | ".join(picked[:MESSAGE_LINES])[:600]


def _problem(what: str, source_name: str, result: CompileResult) -> str:
    if result.status == "timeout":
        return f"nvcc did not finish compiling {what} within its limit ({result.error})"
    if result.status == "rejected":
        return f"{what} is refused before compiling: {result.error}"
    message = first_lines(result.log or "", source_name) or result.error or "no message"
    return f"nvcc cannot compile {what}: {message}"


def compile_reference(compiler: Compiler, family: Any) -> CompileResult:
    """The family's reference kernel compiled as a GPU worker compiles it (its source as
    :meth:`reference_source` gives it, its parameters checked against the launch)."""
    return compiler.compile(family.reference_source(), params=reference_params(family))


def check_family(family: Any, compiler: Compiler) -> dict[str, str] | None:
    """None when the baseline and the reference both compile; else ``{"field", "problem"}``
    for the first that does not (the baseline's field is ``kernel.source``, the reference's
    ``reference.source``)."""
    with ThreadPoolExecutor(2, thread_name_prefix="family-check") as pool:
        baseline = pool.submit(compile_candidate, compiler, family, family.baseline)
        reference = pool.submit(compile_reference, compiler, family)
        spec = family.spec
        results = (("kernel.source", f"the baseline point {family.baseline.to_dict()}",
                    spec["kernel"]["source"], baseline.result()),
                   ("reference.source", f"the reference kernel {spec['reference']['kernel']}"
                                        f"{_reference_how(family)}",
                    spec["reference"]["source"], reference.result()))
    for field, what, name, result in results:
        if result.status != "ok":
            return {"field": field, "problem": _problem(what, name, result)}
    return None


def _reference_how(family: Any) -> str:
    spec = family.spec
    if spec["reference"]["source"] == spec["kernel"]["source"]:
        return " (the kernel's file as the baseline point renders it)"
    return (f" ({spec['reference']['source']} compiled as written, without the tunables: "
            "keep the reference in the kernel's file to compile it with the baseline's "
            "values, or define what it reads in its own file)")


def main() -> None:
    """Read ``{"spec": ...}`` on stdin, write ``{"ok": true}`` or ``{"field", "problem"}``."""
    from core.settings import get_settings
    from kernels.userspec import SpecError, build_family

    request = json.loads(sys.stdin.read())
    try:
        family = build_family(request["spec"])
    except SpecError as exc:
        sys.stdout.write(json.dumps(exc.to_dict()) + "\n")
        return
    settings = get_settings()
    compiler = compiler_from_settings(settings)
    compiler.timeout_s = float(request.get("timeout_s", compiler.timeout_s))
    found = check_family(family, compiler)
    sys.stdout.write(json.dumps(found or {"ok": True}) + "\n")


if __name__ == "__main__":
    main()
