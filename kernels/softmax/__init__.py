"""Kernel family ``softmax``: row-wise softmax of an fp32 ``rows x cols`` row-major matrix,
``y[i, :] = exp(x[i, :] - max) / sum(exp(x[i, :] - max))``. Memory-bound: one read and one
write of every element (``8 * rows * cols`` bytes) is the least it can move.

Correctness (rule ``scaled``): the reference writes, in float64, each probability ``ref`` and
``scale = ref + 1 / n`` where ``n`` is the number of the row's entries above -inf (the uniform
level of the row). An element passes when ``|y - ref| / scale`` is within the tolerance:
relative error for probabilities above the uniform level (those that carry the row), absolute
error at the 1/n level for the tail below it, where fp32's ``exp`` underflows and a relative
bound would judge denormal noise. The norm-relative error bounds the row as a whole; NaN, Inf
and unwritten elements never pass, and a -inf input must give exactly 0 (an error of 1/n·tol
would still be caught).
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import jinja2

from kernels.base import DEFAULT_SM_COUNT, Action, Dims, LaunchConfig, Rejection
from kernels.family import (
    Buffer,
    CorrectnessRule,
    Dim,
    Distribution,
    FamilyBase,
    Fill,
    Metric,
    RuleContext,
    Scalar,
    Signature,
    Vendor,
    make_dims,
    parse_dims,
)
from kernels.softmax.params import (
    BASELINE,
    BULK_SMEM_CAP,
    DOMAINS,
    KERNEL_NAME,
    MAX_ELEMENTS,
    SEED_DOMAINS,
    SoftmaxParams,
    enumerate_space,
    launch_config,
    max_smem_limit,
    sample_space,
    validate,
)
from kernels.softmax.transforms import TRANSFORMS
from kernels.templates import package_environment

__all__ = ["BASELINE", "DIMS", "DOMAINS", "FAMILY", "Softmax", "SoftmaxParams", "TRANSFORMS"]

REFERENCE_KERNEL_NAME = "reference_softmax"
#: rows and columns; ``rows * cols`` at most :data:`MAX_ELEMENTS`
DIMS: tuple[Dim, ...] = (
    Dim("rows", "rows of x and y (independent softmaxes)", 1, 1 << 28),
    Dim("cols", "columns: the length of one softmax", 1, 1 << 24),
)
SIGNATURE = Signature(
    buffers=(Buffer("x", "rows * cols", doc="rows x cols, row-major"),
             Buffer("y", "rows * cols", role="out", doc="rows x cols, row-major")),
    scalars=(Scalar("rows", "rows"), Scalar("cols", "cols")),
)
DISTRIBUTIONS = (
    Distribution("normal", Fill("normal"), doc="normal(0, 1)"),
    Distribution("large", Fill("symmetric", 1e4),
                 doc="uniform in (-1e4, 1e4): x - max far beyond exp's range, one entry a row "
                     "carries it"),
    Distribution("neg_inf", Fill("normal_neg_inf"),
                 doc="normal with -inf at about 1/8 of the entries (never a whole row): masked "
                     "attention; those must come out exactly 0"),
    Distribution("constant", Fill("constant", 3.0),
                 doc="every entry 3.0: the uniform row 1/cols, where a sum's rounding shows"),
)


def _dims(rows: int, cols: int) -> Dims:
    return Dims({"rows": rows, "cols": cols})


#: 1x1, odd small, a row of a million and three (past every register-held capacity: the
#: streaming fallback), one row of 4099 and rows of 4098 (cols % 4 != 0: misaligned row starts)
EDGE_SHAPES: tuple[Dims, ...] = (
    _dims(1, 1), _dims(7, 33), _dims(3, 1000003), _dims(1, 4099), _dims(5, 4098),
)


def _environment() -> jinja2.Environment:
    return package_environment(__package__)


def _checked(dims: Dims) -> Dims:
    if dims["rows"] * dims["cols"] > MAX_ELEMENTS:
        raise ValueError(f"shape: rows x cols = {dims['rows'] * dims['cols']} elements, over "
                         f"{MAX_ELEMENTS} (2^31)")
    return dims


class Softmax(FamilyBase):
    """The family object: space, action space, rendering, launch, reference, rule book."""

    name = KERNEL_NAME
    description = "y[i,:] = softmax(x[i,:]) row-wise, fp32, row-major; x, y: rows x cols"
    params_type = SoftmaxParams
    transforms = TRANSFORMS
    baseline = BASELINE
    dims = DIMS
    default_dims = Dims(rows=8192, cols=8192)
    signature = SIGNATURE
    metric = Metric("bytes", "8 * rows * cols", "copy_bandwidth",
                    doc="one fp32 read and one fp32 write of every element")
    correctness = CorrectnessRule(
        "scaled", doc="norm-relative error and each element's |y - ref| / (ref + 1/n), n the "
                      "row's entries above -inf, both within the tolerance; NaN, Inf and "
                      "unwritten elements fail")
    distributions = DISTRIBUTIONS
    edge_shapes = EDGE_SHAPES
    vendor = Vendor("torch.softmax", "kernels.softmax.vendor", doc="torch.softmax(x, -1), fp32",
                    op="softmax_last_dim")

    # -- shapes -----------------------------------------------------------------------------
    def parse_dims(self, text: str) -> Dims:
        """``8192x32768`` or ``rows=8192,cols=32768``."""
        return _checked(parse_dims(DIMS, text))

    def make_dims(self, values: Any) -> Dims:
        """``{"rows": …, "cols": …}`` checked against the bounds."""
        return _checked(make_dims(DIMS, values))

    # -- space ------------------------------------------------------------------------------
    def params_from_dict(self, data: dict[str, Any]) -> SoftmaxParams:
        """Parameters from JSON (missing fields take the baseline's values)."""
        return SoftmaxParams.from_dict(data).canonical()

    def domains(self) -> dict[str, tuple[Any, ...]]:
        """Every parameter field and its values."""
        return dict(DOMAINS)

    def space(self, arch: str = "sm_90") -> list[SoftmaxParams]:
        """Every valid canonical point of the seed part of the space (no clusters, no cache
        hints, unroll 1 or 4); the whole space is sampled with :meth:`sample`."""
        return list(enumerate_space(arch, SEED_DOMAINS))

    def sample(self, rng: Any, n: int, arch: str = "sm_90") -> list[SoftmaxParams]:
        """``n`` distinct valid points drawn uniformly from the whole space."""
        return sample_space(rng, n, arch)

    def validate(self, params: SoftmaxParams, arch: str = "sm_90") -> Rejection | None:
        """Static validity before compiling (numbers in the rejection)."""
        return validate(params, arch)

    def for_shape(self, params: SoftmaxParams, dims: Dims) -> SoftmaxParams:
        """``params`` unchanged: no point is compiled for one shape."""
        return params

    def fixed_dims(self, params: SoftmaxParams) -> Dims | None:
        """None: every point takes rows and cols at run time."""
        return None

    # -- building and launching -------------------------------------------------------------
    def render(self, params: SoftmaxParams) -> str:
        """Deterministic CUDA source of ``params`` (same params, same bytes)."""
        p = params.canonical()
        return _environment().get_template("softmax.cu.j2").render(
            p=p, kernel_name=KERNEL_NAME, extra_slots=p.extra_slots,
            hw_cluster=p.cluster > 1 and not p.spread,
            params_json=json.dumps(p.to_dict(), sort_keys=True))

    def compile_arch(self, params: SoftmaxParams, arch: str) -> str:
        """``arch`` itself: clusters and bulk copies (``cp.async.bulk``, mbarriers) need sm_90
        (checked by :meth:`validate`), nothing needs the ``a`` features."""
        return arch

    def max_smem_limit(self, arch: str) -> int:
        """Per-block dynamic shared-memory limit of ``arch`` in bytes."""
        return max_smem_limit(arch)

    def dynamic_smem_bytes(self, params: SoftmaxParams) -> int:
        """The most dynamic shared memory a launch of ``params`` asks for: a bulk-copy point's
        :data:`~kernels.softmax.params.BULK_SMEM_CAP` (each launch asks for what its shape
        stages, :meth:`launch`), none otherwise (the reductions use a few static words)."""
        return params.canonical().smem_bytes

    def threads_per_block(self, params: SoftmaxParams) -> int:
        """Threads of one CTA."""
        return int(params.block_threads)

    def launch(self, params: SoftmaxParams, dims: Dims, sm_count: int = DEFAULT_SM_COUNT
               ) -> LaunchConfig | Rejection:
        """Grid (row units x cluster size), block, and the dynamic shared memory a bulk-copy
        point stages at ``dims`` (none for the others, or past what a CTA may have)."""
        return launch_config(params, dims, sm_count)

    # -- correctness ------------------------------------------------------------------------
    def reference_source(self) -> str:
        """CUDA source of the float64 reference kernel (``ref`` and ``ref + 1/n``)."""
        return resources.files(__package__).joinpath("reference.cu").read_text()

    def reference_launch(self, dims: Dims) -> LaunchConfig:
        """One 256-thread CTA a row (grid-stride past 2^20 rows)."""
        return LaunchConfig(REFERENCE_KERNEL_NAME, (min(dims["rows"], 1 << 20), 1, 1),
                            (256, 1, 1), 0)

    # -- the rest of the loop ---------------------------------------------------------------
    def expert_moves(self, ctx: RuleContext) -> list[tuple[str, str]]:
        """The softmax rule book (``rules.py``)."""
        from kernels.softmax.rules import expert_moves

        return expert_moves(ctx)

    def held_until_settled(self, action: Action) -> bool:
        """No move waits for the structure to settle: every point runs at every shape."""
        return False

    def sanitizer_shapes(self, params: SoftmaxParams) -> list[Dims]:
        """1x1; a few rows of 4098 (misaligned row starts, a tail); rows past one CTA's pack
        with a row one vector past the register-held capacity (the fallback) and one just
        within it; for a bulk-copy point, staged rows of cols % 4 != 0 and a row past what a CTA
        may stage (its fallback)."""
        p = params.canonical()
        shapes = [_dims(1, 1), _dims(3, 4098), _dims(2 * p.rows_per_cta + 1, 67)]
        if p.bulk:
            # tiles staged in shared memory with cols % 4 == 3 (rows sharing a vector, every
            # misalignment) past one CTA's pack, and a row just past what a CTA may stage (the
            # two-pass fallback)
            fits = BULK_SMEM_CAP // 4 * p.cluster // p.rows_per_cta
            staged = min(4096 * p.cluster, fits // 2) // 4 * 4 + 7
            shapes += [_dims(p.rows_per_cta + 3, staged), _dims(2, fits + 4)]
        elif p.passes == 1:
            # rows of 8 or more: a -inf fill never covers a whole row (kernels.family.FILL_KINDS)
            shapes += [_dims(3, max(8, p.capacity - 3)), _dims(2, p.capacity + p.vec + 1)]
        else:
            shapes.append(_dims(3, 3 * p.group_threads * p.vec * p.unroll + 5))
        return list(dict.fromkeys(shapes))

    def replay_datasets(self) -> list[Any]:
        """Replay datasets shipped with the family (``replay-h200.jsonl.gz`` once measured)."""
        path = resources.files(__package__).joinpath("replay-h200.jsonl.gz")
        return [path] if path.is_file() else []


FAMILY = Softmax()
