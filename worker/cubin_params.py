"""A kernel's parameters as its cubin declares them, held against the launch contract.

The launch contract packs a candidate's arguments by a pycuda format (``P`` a buffer, then each
scalar's code: :func:`worker.launch_contract.kernel_format`); pycuda packs them as C does, each
at its natural alignment. A kernel that declares other parameters than its family's signature
(a scalar missing, an ``int`` where the signature passes a ``double``) would read garbage or
fault on the GPU, far from the cause. nvcc records every entry's parameters in the cubin's ELF
section ``.nv.info.<kernel>`` (attribute ``EIATTR_KPARAM_INFO``: ordinal, offset, size), so the
compile step compares offsets and sizes and names the difference. Types of the same size (a
``float`` for an ``int``) are not told apart. Standard library only.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

#: ``.nv.info`` record formats (the byte before the attribute code): a record of the first three
#: takes 4 bytes (the value, if any, in the last two), an ``SVAL`` 4 bytes and its payload
_EIFMT_NVAL, _EIFMT_BVAL, _EIFMT_HVAL, _EIFMT_SVAL = 1, 2, 3, 4
#: one parameter: index, ordinal, offset, then flags whose bits 18.. hold its size
_EIATTR_KPARAM_INFO = 0x17
#: the bytes of all the parameters (a half value): the records are read right if they add up
_EIATTR_CBANK_PARAM_SIZE = 0x19
#: bytes a pycuda code packs (native sizes on the 64-bit hosts the GPU side runs on)
_CODE_NAMES = {"P": "pointer", "f": "float32", "d": "float64", "i": "int32", "q": "int64",
               "I": "uint32", "Q": "uint64"}


@dataclass(frozen=True)
class ParamsCheck:
    """What a compiled module's ``kernel`` must take: one of ``formats`` (pycuda formats; a
    candidate's with and without the trailing workspace pointer)."""

    kernel: str
    formats: tuple[str, ...]


def _sections(blob: bytes) -> dict[str, bytes]:
    """The sections of a 64-bit little-endian ELF file by name (``ValueError`` if it is not)."""
    if blob[:4] != b"\x7fELF" or blob[4] != 2 or blob[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF file")
    (shoff,) = struct.unpack_from("<Q", blob, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", blob, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", blob, shoff + i * shentsize) for i in range(shnum)]
    names_at = headers[shstrndx][4]
    out = {}
    for name, _type, _flags, _addr, offset, size in headers:
        start = names_at + name
        out[blob[start:blob.index(b"\0", start)].decode()] = blob[offset:offset + size]
    return out


def kernel_params(cubin: bytes, kernel: str) -> list[tuple[int, int]] | None:
    """``(offset, size)`` of each parameter of ``kernel``, in order; ``None`` when the cubin
    has no such entry or its records cannot be read (nothing is then claimed)."""
    try:
        info = _sections(cubin).get(f".nv.info.{kernel}")
    except (ValueError, struct.error, IndexError):
        return None
    if info is None:
        return None
    found: dict[int, tuple[int, int]] = {}
    total = None
    at = 0
    while at + 4 <= len(info):
        fmt, attr = info[at], info[at + 1]
        if fmt == _EIFMT_SVAL:
            (size,) = struct.unpack_from("<H", info, at + 2)
            payload = info[at + 4:at + 4 + size]
            if attr == _EIATTR_KPARAM_INFO and len(payload) >= 12:
                _index, ordinal, offset, flags = struct.unpack_from("<IHHI", payload)
                found[ordinal] = (offset, (flags >> 18) & 0x3FFF)
            at += 4 + size
        elif fmt in (_EIFMT_NVAL, _EIFMT_BVAL, _EIFMT_HVAL):
            if attr == _EIATTR_CBANK_PARAM_SIZE and fmt == _EIFMT_HVAL:
                (total,) = struct.unpack_from("<H", info, at + 2)
            at += 4
        else:
            return None
    if sorted(found) != list(range(len(found))):
        return None
    params = [found[i] for i in range(len(found))]
    end = params[-1][0] + params[-1][1] if params else 0
    if total is not None and total != end:
        return None
    return params


def format_layout(fmt: str) -> list[tuple[int, int]]:
    """``(offset, size)`` of each argument pycuda packs for ``fmt`` (native alignment)."""
    out, offset = [], 0
    for code in fmt:
        size = struct.calcsize(code)
        offset = -(-offset // size) * size
        out.append((offset, size))
        offset += size
    return out


def _describe(layout: list[tuple[int, int]]) -> str:
    if not layout:
        return "no parameters"
    return ", ".join(f"{size} B at {offset}" for offset, size in layout)


def params_mismatch(cubin: bytes, check: ParamsCheck) -> str | None:
    """Why ``check.kernel`` of ``cubin`` does not take what the launch passes, or ``None`` (its
    parameters match one of the formats, or the cubin does not say)."""
    declared = kernel_params(cubin, check.kernel)
    if declared is None:
        return None
    if any(declared == format_layout(fmt) for fmt in check.formats):
        return None
    fmt = check.formats[0]
    passed = ", ".join(_CODE_NAMES.get(code, code) for code in fmt)
    return (f"kernel {check.kernel} declares {len(declared)} parameter(s) "
            f"({_describe(declared)}) but the signature passes {len(fmt)}: {passed} "
            f"({_describe(format_layout(fmt))}); declare the buffers in order, then the "
            "scalars with their types")
