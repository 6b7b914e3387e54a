"""The family's own files: how they are named, how large they may be, and reading them from a
spec directory (the only I/O of :mod:`kernels.userspec`)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from kernels.userspec.errors import SpecError

#: The spec file of a family directory.
SPEC_FILE = "family.json"
#: Largest file of a family (its spec, a source, an include) in bytes.
MAX_FILE_BYTES = 256 * 1024
#: Largest sum of a family's files in bytes.
MAX_TOTAL_BYTES = 1024 * 1024
#: Most files a family may have.
MAX_FILES = 32
_FILE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*(/[A-Za-z0-9_][A-Za-z0-9_.\-]*)*$")


def check_file_name(name: Any, field: str) -> str:
    """``name`` if it is a relative path inside the family (``kernel.cu``, ``inc/tile.cuh``):
    no absolute path, no ``..`` or ``.`` part, no backslash, at most 200 characters."""
    if not isinstance(name, str) or not name:
        raise SpecError(field, f"a file name must be non-empty text, got {name!r}")
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        raise SpecError(field, f"absolute path {name!r}: files are named relative to the "
                               "family's directory")
    parts = name.split("/")
    if ".." in parts or "." in parts or "\\" in name:
        raise SpecError(field, f"{name!r} leaves the family's directory or is not a plain "
                               "relative path ('..', '.' and '\\' are refused)")
    if len(name) > 200 or not _FILE_NAME.match(name):
        raise SpecError(field, f"file name {name!r} may use letters, digits, '_', '-', '.' "
                               "and '/' between parts, at most 200 characters")
    return name


def check_file_text(name: str, text: Any, field: str) -> str:
    """``text`` if it is text within :data:`MAX_FILE_BYTES` without NUL bytes."""
    if not isinstance(text, str):
        raise SpecError(field, f"the text of {name!r} must be a string")
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_FILE_BYTES:
        raise SpecError(field, f"{name!r} is {size} bytes (at most {MAX_FILE_BYTES})")
    if "\x00" in text:
        raise SpecError(field, f"{name!r} contains a NUL byte")
    return text


def named_files(spec: dict[str, Any]) -> list[tuple[str, str]]:
    """``(file name, field)`` of every file the spec names: the kernel source, the reference
    source and the includes (unchecked names: :func:`check_file_name` checks them)."""
    out: list[tuple[str, str]] = []
    kernel = spec.get("kernel")
    if isinstance(kernel, dict) and "source" in kernel:
        out.append((kernel["source"], "kernel.source"))
    reference = spec.get("reference")
    if isinstance(reference, dict) and "source" in reference:
        out.append((reference["source"], "reference.source"))
    includes = spec.get("includes", [])
    if isinstance(includes, list):
        out += [(name, f"includes[{i}]") for i, name in enumerate(includes)]
    return out


def load_spec_dir(path: str | Path) -> dict[str, Any]:
    """The spec of a family directory as one JSON-able dict: ``family.json`` with the text of
    every file it names (kernel source, reference source, includes) under ``files``
    (``{name: text}``) — the same content the API takes as a JSON body. Not validated beyond
    the files (:func:`kernels.userspec.validate_spec` does the rest); :class:`SpecError` for
    a missing or unreadable file, a name that leaves the directory (absolute, ``..``, a
    symlink pointing out), a file over :data:`MAX_FILE_BYTES` or all over
    :data:`MAX_TOTAL_BYTES`."""
    root = Path(path)
    if not root.is_dir():
        raise SpecError("path", f"{str(root)!r} is not a directory")
    base = root.resolve()
    spec_path = root / SPEC_FILE
    try:
        raw = _read(base, spec_path, SPEC_FILE, SPEC_FILE)
        spec = json.loads(raw, parse_constant=_no_nan,
                          parse_int=lambda token: _bounded_int(raw, token))
    except json.JSONDecodeError as exc:
        raise SpecError(SPEC_FILE, f"is not JSON: {exc.msg} at line {exc.lineno} column "
                                   f"{exc.colno}") from None
    if not isinstance(spec, dict):
        raise SpecError(SPEC_FILE, "must hold a JSON object")
    if "files" in spec:
        raise SpecError("files", f"{SPEC_FILE} names its files; their text is read from the "
                                 "directory, not embedded")
    files: dict[str, str] = {}
    total = 0
    for name, field in named_files(spec):
        check_file_name(name, field)
        if name in files:
            continue
        text = _read(base, root / name, name, field)
        total += len(text.encode())
        if total > MAX_TOTAL_BYTES:
            raise SpecError(field, f"the family's files exceed {MAX_TOTAL_BYTES} bytes in all")
        files[name] = text
    return {**spec, "files": files}


def _no_nan(token: str) -> Any:
    raise SpecError(SPEC_FILE, f"{token} is not JSON")


#: Most characters of an integer in a spec file (no field takes a larger one).
MAX_INT_DIGITS = 64


def _bounded_int(text: str, token: str) -> int:
    if len(token) > MAX_INT_DIGITS:
        hit = re.search(rf"(?<![0-9.eE+\-]){re.escape(token)}(?![0-9])", text)
        pos = hit.start() if hit else 0
        line = text.count("\n", 0, pos) + 1
        column = pos - (text.rfind("\n", 0, pos) + 1) + 1
        keys = re.findall(r'"((?:[^"\\]|\\.){1,64})"\s*:', text[max(0, pos - 4096):pos])
        near = f" (field {keys[-1]!r})" if keys else ""
        raise SpecError(SPEC_FILE, f"an integer of {len(token)} characters at line {line} "
                                   f"column {column}{near}: at most {MAX_INT_DIGITS}")
    return int(token)


def _read(base: Path, path: Path, name: str, field: str) -> str:
    resolved = path.resolve()
    if not resolved.is_relative_to(base):
        raise SpecError(field, f"{name!r} leaves the family's directory (through a symlink)")
    if not resolved.is_file():
        raise SpecError(field, f"{name!r} does not exist in the family's directory"
                        if not resolved.exists() else f"{name!r} is not a regular file")
    size = resolved.stat().st_size
    if size > MAX_FILE_BYTES:
        raise SpecError(field, f"{name!r} is {size} bytes (at most {MAX_FILE_BYTES})")
    try:
        text = resolved.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(field, f"{name!r} is not UTF-8 text: {exc.reason}") from None
    except OSError as exc:
        raise SpecError(field, f"{name!r} cannot be read: {exc.strerror}") from None
    if name == SPEC_FILE:
        return text
    return check_file_text(name, text, field)
