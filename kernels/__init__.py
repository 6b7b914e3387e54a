"""Kernel families: templates, parameter spaces, transforms (the action space), constraints and
reference semantics. Pure: the standard library and Jinja2 only, no I/O beyond reading the
package's own templates, no GPU."""

from __future__ import annotations

from typing import Any

FAMILY_NAMES = ("gemm_bias_relu",)


def get_family(name: str) -> Any:
    """The family object called ``name``; ``ValueError`` names the known ones."""
    if name == "gemm_bias_relu":
        from kernels.gemm_bias_relu import FAMILY

        return FAMILY
    raise ValueError(f"unknown kernel family {name!r}; known: {', '.join(FAMILY_NAMES)}")
