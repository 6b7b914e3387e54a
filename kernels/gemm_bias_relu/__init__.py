"""Kernel family ``gemm_bias_relu``: ``C = relu(A @ B + bias)`` in fp32, row-major.

Shapes: A is M x K, B is K x N, bias has N elements, C is M x N.
"""

from __future__ import annotations

import json
from dataclasses import replace
from functools import lru_cache
from importlib import resources
from typing import Any

import jinja2

from kernels.base import DEFAULT_SM_COUNT, Action, Dims, LaunchConfig, Rejection
from kernels.family import (
    Buffer,
    CorrectnessRule,
    Distribution,
    FamilyBase,
    Fill,
    Metric,
    PointPeak,
    RuleContext,
    Scalar,
    Signature,
    Vendor,
    make_dims,
    parse_dims,
)
from kernels.gemm_bias_relu.arch import max_smem_limit
from kernels.gemm_bias_relu.launch import (
    REDUCE_THREADS,
    SK_FIXUP_NAME,
    SK_HEADER_FLOATS,
    SPLIT_PASS_NAME,
    SPLIT_PASS_THREADS,
    SPLIT_REGION_ALIGN,
    SPLIT_RESET_NAME,
    SPLIT_RESET_THREADS,
    SPLITK_REDUCE_NAME,
    compile_arch,
    launch_config,
)
from kernels.gemm_bias_relu.params import (
    BASELINE,
    DOMAINS,
    KERNEL_NAME,
    PRECISION_SCHEMES,
    WG_SMALL_BUFFERS,
    GemmParams,
)
from kernels.gemm_bias_relu.shape import DIMS, Shape
from kernels.gemm_bias_relu.space import (
    SEARCH_DOMAINS,
    SEED_DOMAINS,
    enumerate_space,
    sample_space,
)
from kernels.gemm_bias_relu.transforms import TRANSFORMS
from kernels.gemm_bias_relu.validity import validate
from kernels.templates import package_environment

__all__ = [
    "BASELINE", "DOMAINS", "FAMILY", "GemmBiasRelu", "GemmParams", "Shape", "TRANSFORMS",
]

REFERENCE_KERNEL_NAME = "reference_gemm_bias_relu"
#: The cross products (A part, B part) a bf16 split kernel sums, smallest first: part 0 is hi,
#: 1 lo (bf16x3) or mid, 2 lo (bf16x6). bf16x6 drops the three terms of order 2^-24 and below
#: (mid·lo, lo·mid, lo·lo).
BF16_TERMS: dict[int, list[tuple[int, int]]] = {
    3: [(1, 0), (0, 1), (0, 0)],
    6: [(2, 0), (0, 2), (1, 1), (1, 0), (0, 1), (0, 0)],
}


def _environment() -> jinja2.Environment:
    return package_environment(__package__)


@lru_cache(maxsize=4)
def _template(name: str = "gemm_bias_relu.cu.j2") -> jinja2.Template:
    return _environment().get_template(name)


#: The launch contract: ``(A, B, bias, C, M, N, K)`` (a workspace after them for split-K and
#: stream-K launches).
SIGNATURE = Signature(
    buffers=(Buffer("A", "m * k", doc="M x K, row-major"),
             Buffer("B", "k * n", doc="K x N, row-major"),
             Buffer("bias", "n", doc="N"),
             Buffer("C", "m * n", role="out", doc="M x N, row-major")),
    scalars=(Scalar("M", "m"), Scalar("N", "n"), Scalar("K", "k")),
)
#: Checked on every candidate, rotating with the iteration: a single distribution does not
#: separate the arithmetic classes (docs/ARCHITECTURE.md#the-evaluation-protocol).
DISTRIBUTIONS = (
    Distribution("normal", Fill("normal"), doc="every input normal(0, 1)"),
    Distribution("uniform", Fill("uniform"),
                 doc="every input uniform [0, 1): same-sign sums, where a tensor-core bias shows"),
    Distribution("mixed", Fill("mixed"), doc="normal times 2^u, u in -8..8: mixed magnitudes"),
)
#: Small shapes every candidate is checked on besides the campaign's: 1x1x1, primes,
#: N % 4 != 0, K not a multiple of any tile.
EDGE_SHAPES: tuple[Dims, ...] = (
    Shape(1, 1, 1), Shape(17, 33, 65), Shape(131, 257, 61), Shape(1000, 1002, 999),
)


class GemmBiasRelu(FamilyBase):
    """The family object: space, action space, rendering, launch shape, reference."""

    name = KERNEL_NAME
    description = "y = relu(A @ B + bias), fp32, row-major; A: MxK, B: KxN, bias: N"
    params_type = GemmParams
    transforms = TRANSFORMS
    baseline = BASELINE
    dims = DIMS
    default_dims = Shape(4096, 4096, 4096)
    signature = SIGNATURE
    metric = Metric("flops", "2 * m * n * k", "fp32_ffma", doc="2·M·N·K floating-point operations")
    correctness = CorrectnessRule(
        "scaled", doc="norm-relative error and each element's error over Σ|a·b| + |bias|, both "
                      "within the tolerance; NaN, Inf and unwritten elements fail")
    distributions = DISTRIBUTIONS
    edge_shapes = EDGE_SHAPES
    vendor = Vendor("cuBLAS fp32", "kernels.gemm_bias_relu.vendor",
                    doc="torch.addmm + relu_, TF32 off", op="addmm_bias_relu")

    def peak_of(self, params: GemmParams) -> PointPeak:
        """The SIMT kernel against the FP32 FMA peak; a tensor-core kernel against the
        tensor-core peak of its scheme's precision over the products it takes for one fp32
        product (tf32x3: 3 TF32, bf16x3: 3 BF16, bf16x6: 6 BF16)."""
        if not params.tf32x3:
            return PointPeak("fp32_ffma")
        scheme = next(name for name, value in PRECISION_SCHEMES.items()
                      if value == params.bf16_split)
        if params.bf16_split:
            return PointPeak("bf16_tensor", params.bf16_split, scheme)
        return PointPeak("tf32_tensor", 3, scheme)

    def parse_dims(self, text: str) -> Shape:
        """``4096x4096x4096`` or ``m=4096,n=4096,k=4096``."""
        return Shape.of(parse_dims(DIMS, text))

    def make_dims(self, values: Any) -> Shape:
        """``{"m": …, "n": …, "k": …}`` checked against the bounds."""
        return Shape.of(make_dims(DIMS, values))

    def domains(self) -> dict[str, tuple[Any, ...]]:
        """Every parameter field and the values a search draws from."""
        return dict(SEARCH_DOMAINS)

    def dynamic_smem_bytes(self, params: GemmParams) -> int:
        """Dynamic shared memory of a launch of ``params``."""
        return int(params.smem_bytes)

    def threads_per_block(self, params: GemmParams) -> int:
        """Threads of one CTA."""
        return int(params.threads)

    def fixed_dims(self, params: GemmParams) -> Shape | None:
        """The shape a ``specialize_shape`` point was compiled for."""
        return params.canonical().fixed_shape

    def expert_moves(self, ctx: RuleContext) -> list[tuple[str, str]]:
        """The GEMM rule book (``rules.py``)."""
        from kernels.gemm_bias_relu.rules import expert_moves

        return expert_moves(ctx)

    def held_until_settled(self, action: Action) -> bool:
        """``specialize_shape(true)``: a specialized kernel is checked at one shape only."""
        from kernels.gemm_bias_relu.rules import held_until_settled

        return held_until_settled(action)

    def sanitizer_shapes(self, params: GemmParams) -> list[Dims]:
        """1x1x1, a prime shape, and one with two tiles and a tail along every axis."""
        from kernels.gemm_bias_relu.checks import sanitizer_shapes

        return sanitizer_shapes(self, params)

    def replay_datasets(self) -> list[Any]:
        """The replay datasets shipped with the family (measured on an H200)."""
        return [self.replay_dataset_path()]

    def params_from_dict(self, data: dict[str, Any]) -> GemmParams:
        """Parameters from JSON (missing fields take the baseline's values)."""
        return GemmParams.from_dict(data).canonical()

    def validate(self, params: GemmParams, arch: str = "sm_90") -> Rejection | None:
        """Static validity before compiling (numbers in the rejection)."""
        return validate(params, arch)

    def max_smem_limit(self, arch: str) -> int:
        """Per-block dynamic shared-memory limit of ``arch`` in bytes."""
        return max_smem_limit(arch)

    def render(self, params: GemmParams) -> str:
        """Deterministic CUDA source of ``params`` (same params, same bytes)."""
        canonical = params.canonical()
        if canonical.tf32x3 and canonical.wgmma and canonical.bf16_split:
            return self._render_bf16(canonical)
        if canonical.tf32x3:
            template = "tf32x3_wgmma.cu.j2" if canonical.wgmma else "tf32x3.cu.j2"
        else:
            template = "gemm_bias_relu.cu.j2"
        return _template(template).render(
            p=canonical,
            kernel_name=KERNEL_NAME,
            reduce_name=SPLITK_REDUCE_NAME,
            sk_fixup_name=SK_FIXUP_NAME,
            sk_header_floats=SK_HEADER_FLOATS,
            reduce_threads=REDUCE_THREADS,
            params_json=json.dumps(canonical.to_dict(), sort_keys=True),
            ws_regs=canonical.ws_registers,
            small_buffers=WG_SMALL_BUFFERS,
            min_blocks=canonical.min_blocks_per_sm,
        )

    def _render_bf16(self, p: GemmParams) -> str:
        scheme = next(k for k, v in PRECISION_SCHEMES.items() if v == p.bf16_split)
        return _template("bf16_wgmma.cu.j2").render(
            p=p,
            scheme=scheme,
            kernel_name=KERNEL_NAME,
            reduce_name=SPLITK_REDUCE_NAME,
            reduce_threads=REDUCE_THREADS,
            params_json=json.dumps(p.to_dict(), sort_keys=True),
            ws_regs=p.ws_registers,
            BN=p.tc_block_n,
            parts=p.bf16_parts,
            terms=BF16_TERMS[p.bf16_split],
            nbuf=p.wg_buffers,
            batches=p.bf16_batches,
            split_pass_name=SPLIT_PASS_NAME,
            split_pass_threads=SPLIT_PASS_THREADS,
            split_reset_name=SPLIT_RESET_NAME,
            split_reset_threads=SPLIT_RESET_THREADS,
            sk_fixup_name=SK_FIXUP_NAME,
            sk_header_floats=SK_HEADER_FLOATS,
            split_region_align=SPLIT_REGION_ALIGN,
        )

    def compile_arch(self, params: GemmParams, arch: str) -> str:
        """The arch to build ``params`` for on a GPU of ``arch`` (wgmma needs sm_90a)."""
        return compile_arch(params.canonical(), arch)

    def launch(self, params: GemmParams, shape: Dims, sm_count: int = DEFAULT_SM_COUNT
               ) -> LaunchConfig | Rejection:
        """Grid, block, dynamic shared memory (and a split-K or stream-K launch's workspace and
        epilogue) for ``shape`` on a GPU of ``sm_count`` SMs (stream-K sizes its grid by them);
        a shape-specialized point is refused at any other shape."""
        return launch_config(params.canonical(), Shape.of(shape), sm_count)

    def for_shape(self, params: GemmParams, shape: Dims) -> GemmParams:
        """``params`` as a starting point at ``shape``: a specialization for another shape is
        dropped (the structure is kept; the kernel takes M, N, K at run time again)."""
        fixed = params.fixed_shape
        if fixed is None or fixed == shape:
            return params
        return replace(params, shape_m=0, shape_n=0, shape_k=0)

    def reference_source(self) -> str:
        """CUDA source of the float64 reference kernel (``ref`` and ``Σ|a·b|`` outputs)."""
        return resources.files(__package__).joinpath("reference.cu").read_text()

    def reference_launch(self, shape: Dims) -> LaunchConfig:
        """Launch of the reference kernel: 64x64 tiles, 16x16 threads."""
        return LaunchConfig(
            REFERENCE_KERNEL_NAME, (-(-shape.n // 64), -(-shape.m // 64), 1), (16, 16, 1), 0
        )

    def replay_dataset_path(self) -> Any:
        """The replay dataset shipped with the family (measured on an H200)."""
        return resources.files(__package__).joinpath("replay-h200-4096.jsonl.gz")

    def space(self, arch: str = "sm_90") -> list[GemmParams]:
        """Every valid canonical point of the seed's space (expert fields at their defaults);
        the whole space is sampled with :meth:`sample`."""
        return list(enumerate_space(arch, SEED_DOMAINS))

    def sample(self, rng: Any, n: int, arch: str = "sm_90") -> list[GemmParams]:
        """``n`` distinct valid points drawn uniformly from the whole space."""
        return sample_space(rng, n, arch)


FAMILY = GemmBiasRelu()
