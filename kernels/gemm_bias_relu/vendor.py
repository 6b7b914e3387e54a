"""The GEMM's vendor baseline: cuBLAS fp32 (TF32 off) ``torch.addmm`` + ``relu_``.

Run by the vendor subprocess (``worker/vendor.py``), which passes torch in: this module imports
nothing itself, so the family stays pure.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def inputs(torch: Any, dims: dict[str, int]) -> tuple[Any, Any, Any]:
    """``A`` (M x K), ``B`` (K x N) and ``bias`` (N), normal and seeded, fp32 on the GPU: what
    the vendor baseline and its peers (``bench/gemm_speed.py``'s composition) run on."""
    m, n, k = dims["m"], dims["n"], dims["k"]
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(0)
    a = torch.randn(m, k, device=dev, generator=gen)
    b = torch.randn(k, n, device=dev, generator=gen)
    bias = torch.randn(n, device=dev, generator=gen)
    return a, b, bias


def prepare(torch: Any, dims: dict[str, int]) -> Callable[[], Any]:
    """Inputs on the GPU for ``dims`` and a function that runs the vendor's operator once."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    a, b, bias = inputs(torch, dims)
    out = torch.empty(dims["m"], dims["n"], device=a.device)

    def once() -> Any:
        return torch.addmm(bias, a, b, out=out).relu_()

    once.outputs = [out]  # type: ignore[attr-defined]  # poisoned before each timed call
    return once
