"""The error class of each precision scheme of the GEMM, and which schemes a tolerance admits.

A scheme's error class is the worst of the pass rule's two figures (norm-relative error, and each
element's error over Σ|a·b| + |bias|) over normal, uniform [0, 1) and mixed-magnitude inputs at
K = 4096 and 8192 (M = N = 2048), measured on the GPU by ``bench/precision_calibration.py`` with
one representative kernel a scheme (:data:`REPRESENTATIVES`). The expert offers a scheme only
where its class times :data:`MARGIN` fits the campaign's tolerance; the correctness gate still
judges every candidate.

:data:`MEASURED` holds the calibration run's figures (the script prints the literal to paste,
with its date, GPU and commit in :data:`MEASURED_ON`). Until a scheme has its measured figures,
:data:`FIRST_ESTIMATE` stands in (where each comes from: docs/GPU.md#correctness-calibration).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kernels.gemm_bias_relu.params import PRECISION_SCHEMES

#: K of the calibration shapes (M = N = 2048)
CALIBRATION_KS = (4096, 8192)
#: a scheme is offered where its error class times this fits the tolerance
MARGIN = 3.0
#: the schemes a rule may offer, most preferred first: bf16x3 (three bf16 products at twice
#: TF32's MMA rate), bf16x6 (six bf16 products: tf32x3's MMA time, operands split once per tile),
#: tf32x3 (three TF32 products, the kernel the tensor-core path arrives at, so always measured);
#: ``fp32`` is the SIMT kernel
PREFERENCE = ("bf16x3", "bf16x6", "tf32x3")


@dataclass(frozen=True)
class ErrorClass:
    """The worst errors of a scheme on the calibration inputs."""

    rel_err: float
    max_scaled_err: float

    @property
    def worst(self) -> float:
        """The larger of the two figures (the pass rule bounds both by the tolerance)."""
        return max(self.rel_err, self.max_scaled_err)


_WS = {"tf32x3": True, "wgmma": 128, "block_x": 128, "block_y": 2, "mma_window": 4}
#: one kernel a scheme, measured by the calibration (the campaigns' kernels of each scheme)
REPRESENTATIVES: dict[str, dict[str, Any]] = {
    "tf32x3": {**_WS, "stages": 1, "producers": 2},
    "bf16x3": {**_WS, "stages": 2, "producers": 2, "bf16_split": PRECISION_SCHEMES["bf16x3"]},
    "bf16x6": {**_WS, "stages": 1, "producers": 1, "bf16_split": PRECISION_SCHEMES["bf16x6"]},
    "fp32": {"smem": True, "coalesced": True, "block_x": 16, "block_y": 16, "tile_k": 16,
             "reg_m": 8, "reg_n": 8, "vec": 4},
}

#: Stand-ins for a scheme the calibration has not measured, each from an earlier measurement
#: on the H200 (docs/GPU.md#correctness-calibration).
FIRST_ESTIMATE: dict[str, ErrorClass] = {
    "tf32x3": ErrorClass(rel_err=3.8e-7, max_scaled_err=3.0e-6),
    "bf16x3": ErrorClass(rel_err=2.0e-5, max_scaled_err=1.4e-5),
    "bf16x6": ErrorClass(rel_err=3.8e-7, max_scaled_err=3.0e-6),
    "fp32": ErrorClass(rel_err=3.3e-6, max_scaled_err=7.2e-6),
}

# -- filled from bench/precision_calibration.py's output (paste its two literals here) --------
MEASURED_ON: dict[str, Any] | None = {
    "date": "2026-12-01", "gpu": "NVIDIA H200",
    "tree": "7723069 (branch gpu1, runs/2026-12-01-7723069/call1)", "mn": 2048, "seed": 101}
MEASURED: dict[str, ErrorClass] = {
    "tf32x3": ErrorClass(rel_err=2.35e-06, max_scaled_err=2.91e-06),
    "bf16x3": ErrorClass(rel_err=4.53e-06, max_scaled_err=4.67e-06),
    "bf16x6": ErrorClass(rel_err=1.68e-06, max_scaled_err=1.91e-06),
    "fp32": ErrorClass(rel_err=1.62e-06, max_scaled_err=6.29e-06),
}
# ---------------------------------------------------------------------------------------------


def error_class(scheme: str) -> tuple[ErrorClass, bool]:
    """The error class of ``scheme`` and whether it was measured (False: the first estimate)."""
    if scheme in MEASURED:
        return MEASURED[scheme], True
    return FIRST_ESTIMATE[scheme], False


def fits(scheme: str, tolerance: float, margin: float = MARGIN) -> bool:
    """Whether ``scheme``'s error class times ``margin`` is within ``tolerance``."""
    return error_class(scheme)[0].worst * margin <= tolerance


def schemes_for(tolerance: float, margin: float = MARGIN) -> list[str]:
    """The split schemes a campaign at ``tolerance`` may be offered, most preferred first
    (:data:`PREFERENCE`; empty: no split fits, the SIMT fp32 kernel is the path)."""
    return [s for s in PREFERENCE if fits(s, tolerance, margin)]
