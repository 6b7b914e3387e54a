"""A user family's CUDA: what its source may contain, how its includes are inlined, and how a
point renders (``#define`` macros, or Jinja2 in a locked-down sandbox).

What nvcc sees is one text with every ``#include "..."`` of the family's own files inlined:
the compiler never opens a file of the user's. That text is checked again after rendering, so
no template branch, macro trick or comment can bring back a path, host code or a directive
the spec check refused.
"""

from __future__ import annotations

import contextvars
import json
import re
import time
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

from kernels.userspec.files import MAX_TOTAL_BYTES, check_file_name

#: ``#include <...>`` headers of the CUDA toolkit a kernel may use (device-side, header-only).
ALLOWED_SYSTEM_INCLUDES = (
    "stdint.h", "cstdint", "cuda_fp16.h", "cuda_bf16.h", "math_constants.h",
    "cooperative_groups.h", "mma.h", "cuda_pipeline.h",
)
#: Deepest chain of includes.
MAX_INCLUDE_DEPTH = 8
#: Largest rendered source in bytes.
MAX_RENDERED_BYTES = 2 * MAX_TOTAL_BYTES
#: Calls and ``range`` iterations one Jinja render may spend.
RENDER_BUDGET = 100_000
#: Most CPU one Jinja render may spend, in seconds of its thread's CPU time (checked at every
#: call, filter and chunk): a wall clock would refuse a good template on a busy host.
RENDER_SECONDS = 0.5
#: Longest string or list a Jinja operator may build.
MAX_JINJA_SEQUENCE = 64 * 1024
#: Functions a Jinja template may call besides its own macros.
JINJA_FUNCTIONS = ("range", "min", "max", "abs", "ceil_div")
#: Filters a Jinja template may use.
JINJA_FILTERS = ("int", "abs", "round", "string", "length", "join")

_STRIP = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*([A-Za-z_]\w*)(.*)$")
_QUOTED = re.compile(r'^\s*"([^"]*)"\s*$')
_ANGLED = re.compile(r"^\s*<([^>]*)>\s*$")
_HOST_CODE: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\bmain\s*\("), "a main function: the source holds kernels only, no host code"),
    (re.compile(r"<<<"), "a kernel launch (<<< >>>): the service launches the kernel"),
    (re.compile(r"\bcuda[A-Z]\w*\s*\("), "a CUDA runtime call: the source holds kernels only"),
    (re.compile(r"\b(?:fopen|popen|system|fork|dlopen|execv\w*|execl\w*)\s*\("),
     "a host library call: the source holds kernels only"),
)


class SourceError(ValueError):
    """A source refused: ``problem`` says why (the caller names the field)."""


def strip_comments(text: str, *, strings: bool = False) -> str:
    """``text`` without comments (newlines kept, so line numbers hold); ``strings``: string
    and character literals emptied too."""
    def repl(match: re.Match[str]) -> str:
        token = match.group(0)
        if token.startswith("/"):
            return "\n" * token.count("\n") if token.startswith("/*") else ""
        return token[0] * 2 if strings else token

    return _STRIP.sub(repl, text)


def logical_lines(text: str) -> list[tuple[int, str]]:
    """``(first line index, text)`` of each logical line (backslash continuations joined)."""
    out: list[tuple[int, str]] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        start, line = i, lines[i]
        while line.endswith("\\") and i + 1 < len(lines):
            i += 1
            line = line[:-1] + lines[i]
        out.append((start, line))
        i += 1
    return out


def scan(text: str, own_files: Mapping[str, str] | None) -> list[tuple[int, str]]:
    """Check a source; the ``(line index, file name)`` of each ``#include "..."`` of the
    family's own files. ``own_files`` None: no such include is allowed (rendered text).
    :class:`SourceError` for host code, a directive or include that is not allowed."""
    if "??=" in text or "%:" in strip_comments(text, strings=True):
        raise SourceError("digraph or trigraph directives (%: ??=) are not allowed")
    bare = strip_comments(text)
    found: list[tuple[int, str]] = []
    for index, line in logical_lines(bare):
        match = _DIRECTIVE.match(line)
        if match is None:
            continue
        directive, rest = match.group(1), match.group(2)
        if directive in ("include_next", "import", "embed"):
            raise SourceError(f"#{directive} is not allowed (line {index + 1})")
        if directive != "include":
            continue
        if lines_of(bare, index).endswith("\\"):
            raise SourceError(f"an #include split over lines is not allowed (line {index + 1})")
        quoted, angled = _QUOTED.match(rest), _ANGLED.match(rest)
        if angled:
            if angled.group(1) not in ALLOWED_SYSTEM_INCLUDES:
                raise SourceError(f"#include <{angled.group(1)}> is not allowed (line "
                                  f"{index + 1}); system headers allowed: "
                                  f"{', '.join(ALLOWED_SYSTEM_INCLUDES)}")
            continue
        if not quoted:
            raise SourceError(f"#include must name a file in quotes or angle brackets "
                              f"(line {index + 1})")
        name = quoted.group(1)
        try:
            check_file_name(name, "include")
        except ValueError as exc:
            raise SourceError(f"#include \"{name}\" (line {index + 1}): "
                              f"{getattr(exc, 'problem', exc)}") from None
        if own_files is None or name not in own_files:
            raise SourceError(f"#include \"{name}\" (line {index + 1}) is not one of the "
                              "family's includes")
        found.append((index, name))
    code = strip_comments(text, strings=True)
    for pattern, why in _HOST_CODE:
        hit = pattern.search(code)
        if hit:
            at = code.count("\n", 0, hit.start()) + 1
            raise SourceError(f"{why} (line {at}: {hit.group(0).strip()!r})")
    return found


def lines_of(text: str, index: int) -> str:
    """Line ``index`` of ``text``."""
    return text.split("\n")[index]


def inline(text: str, name: str, files: Mapping[str, str], depth: int = 0) -> str:
    """``text`` (the file ``name``) with each ``#include "x"`` of the family's files replaced
    by x's own inlined text between ``#line`` markers (compile errors keep their file and
    line)."""
    if depth > MAX_INCLUDE_DEPTH:
        raise SourceError(f"includes nest deeper than {MAX_INCLUDE_DEPTH} (a cycle?) at "
                          f"{name!r}")
    includes = dict(scan(text, files))
    if not includes:
        return text
    lines = text.split("\n")
    out: list[str] = []
    for index, line in enumerate(lines):
        if index in includes:
            child = includes[index]
            out += [f'#line 1 "{child}"', inline(files[child], child, files, depth + 1),
                    f'#line {index + 2} "{name}"']
        else:
            out.append(line)
    result = "\n".join(out)
    if len(result.encode()) > MAX_RENDERED_BYTES:
        raise SourceError(f"the source with its includes exceeds {MAX_RENDERED_BYTES} bytes")
    return result


def final_check(text: str) -> str:
    """The rendered text nvcc will see, checked as a whole: no include of a file, no host
    code, within :data:`MAX_RENDERED_BYTES`."""
    if len(text.encode()) > MAX_RENDERED_BYTES:
        raise SourceError(f"the rendered source exceeds {MAX_RENDERED_BYTES} bytes")
    scan(text, None)
    return text


def macro_prelude(values: Mapping[str, int | bool]) -> str:
    """``#define NAME value`` for each tunable (a bool as 1 or 0)."""
    return "".join(f"#define {k} {int(v)}\n" for k, v in values.items())


# ---- the Jinja2 sandbox ----------------------------------------------------------------------
_budget: contextvars.ContextVar[list[float]] = contextvars.ContextVar("userspec_render_budget")


def _spend(amount: int) -> None:
    left = _budget.get()
    left[0] -= max(1, amount)
    if left[0] < 0:
        raise SourceError(f"the template spends more than {RENDER_BUDGET} calls and loop "
                          "iterations")
    _check_clock()


def _check_clock() -> None:
    if time.thread_time() > _budget.get()[1]:
        raise SourceError(f"the template takes more than {RENDER_SECONDS:g} s of CPU to render")


def _range(*args: int) -> range:
    values = range(*args)
    _spend(len(values))
    return values


def _sized(value: Any) -> Any:
    if isinstance(value, str | list | tuple) and len(value) > MAX_JINJA_SEQUENCE:
        raise SourceError(f"a template value grows past {MAX_JINJA_SEQUENCE} elements")
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 1 << 64:
        raise SourceError("a template number exceeds 2**64")
    return value


class _Sandbox(ImmutableSandboxedEnvironment):
    """Jinja2's immutable sandbox, with arithmetic bounded and every call counted."""

    intercepted_binops = frozenset({"**", "*", "+", "%", "//", "/", "-"})

    def call_binop(self, context: jinja2.runtime.Context, op: str, left: Any, right: Any
                   ) -> Any:
        if op == "**" and isinstance(right, int | float) and right > 64:
            raise SourceError(f"exponent {right} is too large in a template")
        if op == "%" and isinstance(left, str):
            raise SourceError("string formatting with % is not allowed in a template")
        if op == "*" and (isinstance(left, str | list | tuple)
                          or isinstance(right, str | list | tuple)):
            count = right if isinstance(left, str | list | tuple) else left
            seq = left if isinstance(left, str | list | tuple) else right
            if isinstance(count, int) and len(seq) * count > MAX_JINJA_SEQUENCE:
                raise SourceError(f"a template value grows past {MAX_JINJA_SEQUENCE} elements")
        return _sized(super().call_binop(context, op, left, right))

    def call(__self, __context: jinja2.runtime.Context, __obj: Any,  # noqa: N805
             *args: Any, **kwargs: Any) -> Any:
        _spend(1)
        return _sized(super().call(__context, __obj, *args, **kwargs))


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _bounded_filter(fn: Any) -> Any:
    """``fn`` (a filter) that pays for each element it reads and whose result is held to
    :data:`MAX_JINJA_SEQUENCE` (``join`` of a long range is refused before it is built)."""
    passes = 1 if hasattr(fn, "jinja_pass_arg") else 0

    def bounded(*args: Any, **kwargs: Any) -> Any:
        first = args[1 if passes else 0] if len(args) > passes else None
        size = len(first) if isinstance(first, str | list | tuple | range) else 1
        if isinstance(first, list | tuple | range) and size > MAX_JINJA_SEQUENCE:
            raise SourceError(f"a template value grows past {MAX_JINJA_SEQUENCE} elements")
        _spend(size)
        return _sized(fn(*args, **kwargs))

    for attr in ("jinja_pass_arg",):  # keep how Jinja passes the context or environment
        if hasattr(fn, attr):
            setattr(bounded, attr, getattr(fn, attr))
    return bounded


def _environment() -> _Sandbox:
    env = _Sandbox(undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                   keep_trailing_newline=True, autoescape=False)
    env.globals.clear()
    env.globals.update({"range": _range, "min": min, "max": max, "abs": abs,
                        "ceil_div": _ceil_div})
    env.filters = {k: _bounded_filter(v) for k, v in env.filters.items() if k in JINJA_FILTERS}
    return env


ENVIRONMENT = _environment()


def check_template(text: str) -> jinja2.Template:
    """The compiled template of ``text``, refused (:class:`SourceError`) if it uses what the
    sandbox does not allow: attribute access, ``~`` concatenation, includes, imports,
    extends, loops over anything but ``range(...)``, recursive loops, calls of other functions
    than :data:`JINJA_FUNCTIONS` and the template's own macros, filters other than
    :data:`JINJA_FILTERS`."""
    try:
        tree = ENVIRONMENT.parse(text)
    except jinja2.TemplateSyntaxError as exc:
        raise SourceError(f"template syntax error at line {exc.lineno}: {exc.message}") from None
    macros = {m.name for m in tree.find_all(nodes.Macro)}
    for node in tree.find_all(nodes.Node):
        where = f" (line {node.lineno})" if getattr(node, "lineno", None) else ""
        if isinstance(node, nodes.Getattr | nodes.Getitem):
            raise SourceError(f"attribute and item access are not allowed in a template{where}")
        if isinstance(node, nodes.Concat):
            raise SourceError(f"'~' concatenation is not allowed in a template{where}")
        if isinstance(node, nodes.Extends | nodes.Include | nodes.Import | nodes.FromImport):
            raise SourceError(f"{type(node).__name__.lower()} is not allowed in a template: "
                              f"use #include \"file\" of the family's includes{where}")
        if isinstance(node, nodes.For):
            ok = (isinstance(node.iter, nodes.Call) and isinstance(node.iter.node, nodes.Name)
                  and node.iter.node.name == "range")
            if not ok or node.recursive:
                raise SourceError(f"a template loop must iterate over range(...){where}")
        if isinstance(node, nodes.Call):
            callee = node.node
            if not (isinstance(callee, nodes.Name)
                    and (callee.name in JINJA_FUNCTIONS or callee.name in macros)):
                raise SourceError(f"only {', '.join(JINJA_FUNCTIONS)} and the template's "
                                  f"macros may be called{where}")
        if isinstance(node, nodes.Filter) and node.name not in JINJA_FILTERS:
            raise SourceError(f"filter {node.name!r} is not allowed (allowed: "
                              f"{', '.join(JINJA_FILTERS)}){where}")
    try:
        return ENVIRONMENT.from_string(text)
    except jinja2.TemplateError as exc:
        raise SourceError(f"template error: {exc}") from None


def render_template(template: jinja2.Template, values: Mapping[str, Any]) -> str:
    """``template`` rendered with ``values`` inside the budget; :class:`SourceError` for an
    undefined name, a refused operation, a spent budget or a text past
    :data:`MAX_RENDERED_BYTES`."""
    token = _budget.set([RENDER_BUDGET, time.thread_time() + RENDER_SECONDS])
    try:
        parts: list[str] = []
        size = 0
        for chunk in template.generate(**values):
            size += len(chunk)
            if size > MAX_RENDERED_BYTES:
                raise SourceError(f"the rendered source exceeds {MAX_RENDERED_BYTES} bytes")
            _check_clock()
            parts.append(chunk)
        return "".join(parts)
    except SourceError:
        raise
    except jinja2.UndefinedError as exc:
        raise SourceError(f"template: {exc.message}") from None
    except jinja2.exceptions.SecurityError as exc:
        raise SourceError(f"template refused by the sandbox: {exc}") from None
    except (jinja2.TemplateError, ArithmeticError, TypeError, ValueError, RecursionError,
            OverflowError) as exc:
        raise SourceError(f"template failed: {type(exc).__name__}: {exc}") from None
    finally:
        _budget.reset(token)


@lru_cache(maxsize=64)
def compiled_template(text: str) -> jinja2.Template:
    """:func:`check_template` of ``text``, once for each text (the last 64 kept)."""
    return check_template(text)


def render_point(spec: Mapping[str, Any], values: Mapping[str, Any]) -> str:
    """The CUDA source nvcc compiles for the point ``values`` of a normalized spec: a header
    line, the tunables as ``#define`` lines (``macros``) or the Jinja template rendered with
    them, the family's includes inlined, all checked again (:func:`final_check`)."""
    files = spec["files"]
    kernel = spec["kernel"]
    own = {n: files[n] for n in spec["includes"]}
    text = files[kernel["source"]]
    params = json.dumps(dict(values), sort_keys=True)
    header = f"// tuneforge user family {spec['name']}: {params}\n"
    if kernel["template"] == "jinja":
        body = render_template(compiled_template(text), values)
        prelude = ""
    else:
        body = text
        prelude = macro_prelude(values)
    inlined = inline(body, kernel["source"], own)
    return final_check(f'{header}{prelude}#line 1 "{kernel["source"]}"\n{inlined}')
