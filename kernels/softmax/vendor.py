"""The softmax family's vendor baseline: ``torch.softmax(x, -1)`` in fp32.

Run by the vendor subprocess (``worker/vendor.py``), which passes torch in: this module imports
nothing itself, so the family stays pure.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def prepare(torch: Any, dims: dict[str, int]) -> Callable[[], Any]:
    """``x`` (normal, rows x cols, fp32 on the GPU) and a function that runs
    ``torch.softmax(x, -1)`` once into a fixed ``y`` (aten's ``_softmax.out``, the kernel
    ``torch.softmax`` runs), so that the harness can poison ``y`` before each call as the
    evaluation child poisons a candidate's output (``once.outputs``)."""
    rows, cols = dims["rows"], dims["cols"]
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(0)
    x = torch.randn(rows, cols, device=dev, dtype=torch.float32, generator=gen)
    y = torch.empty_like(x)

    def once() -> Any:
        return torch.ops.aten._softmax.out(x, -1, False, out=y)

    once.outputs = [y]  # type: ignore[attr-defined]
    return once
