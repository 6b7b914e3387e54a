"""Families a team declares without Python: a directory (``family.json`` and its CUDA files) or
the same content as one JSON body.

- :func:`load_spec_dir` reads a directory into one JSON-able dict (file texts under
  ``files``);
- :func:`validate_spec` checks a spec and returns its normal form, or raises
  :class:`SpecError` (``.field``, ``.problem``) for the first problem, before anything is stored
  or compiled;
- :func:`spec_hash` and :func:`family_key` (``name@hash12``) identify one version by content;
- :func:`build_family` makes the :class:`SpecFamily` (a ``KernelFamily``) of a spec;
- :func:`from_kernel_tuner` turns a Kernel Tuner-style description into a spec.

The spec format is documented in ``docs/FAMILIES.md`` ("Write your own family"). Pure: the
standard library and Jinja2; the only I/O is :func:`load_spec_dir` reading the directory.
"""

from __future__ import annotations

from kernels.userspec.errors import SpecError
from kernels.userspec.family import (
    SpecFamily,
    SpecParams,
    build_family,
    family_from_normal,
)
from kernels.userspec.files import MAX_FILE_BYTES, MAX_TOTAL_BYTES, SPEC_FILE, load_spec_dir
from kernels.userspec.kt import from_kernel_tuner
from kernels.userspec.source import render_point
from kernels.userspec.validate import (
    MAX_POINTS,
    canonical_json,
    family_key,
    spec_hash,
    validate_spec,
)

__all__ = [
    "MAX_FILE_BYTES", "MAX_POINTS", "MAX_TOTAL_BYTES", "SPEC_FILE", "SpecError", "SpecFamily",
    "SpecParams", "build_family", "canonical_json", "family_from_normal", "family_key",
    "from_kernel_tuner", "load_spec_dir", "render_point", "spec_hash", "validate_spec",
]
