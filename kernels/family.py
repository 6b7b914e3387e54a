"""The kernel-family contract: what every layer above ``kernels/`` asks a family, never naming one.

A family declares its problem dimensions (:class:`Dim`, values carried as :class:`Dims`), its
signature (:class:`Signature`: buffers with dtype, role and element count as an expression of
the dimensions, then scalars), its work metric (:class:`Metric`: flops → TFLOP/s or bytes →
GB/s, held against the FP32 FMA peak or the copy bandwidth), its input distributions and edge
shapes, its correctness rule, a float64 reference kernel and a vendor baseline; and it offers
the operations of :class:`KernelFamily` (space, transforms, validity, rendering, launch, expert
rule book, sanitizer shapes). Pure: the standard library only.

The launch contract every GPU-side launcher follows (the evaluation child, the sanitizer's and
Nsight Compute's launchers): a candidate kernel takes the signature's buffers in order, then its
scalars, then — when its launch asks for one — a workspace pointer. The reference kernel is
called in one of two styles (:data:`REFERENCE_STYLES`, the family's ``reference_style``):
``contract`` (the default) takes the input buffers in order, then a float64 ``ref`` and a
float64 ``scale`` for each output buffer, then the scalars; ``same_signature`` takes the
candidate's own signature, its output buffers in the family's ``reference_outputs_dtype``
(float64: written straight into ``ref``; float32: widened to float64 by the GPU side), and the
GPU side computes ``scale`` for the rule.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from kernels.base import Action, Candidate, Dims, LaunchConfig, Rejection, TransformRegistry
from kernels.expr import ExpressionError, evaluate, evaluate_int, names

#: Bytes and pycuda argument codes of the element types a signature may use.
DTYPES: dict[str, tuple[int, str]] = {
    "float32": (4, "f"), "float64": (8, "d"), "int32": (4, "i"), "int64": (8, "q"),
    "uint32": (4, "I"), "uint64": (8, "Q"),
}
ROLES = ("in", "out", "inout")
#: Input fills the GPU side can generate (``worker/support.cu``'s ``tf_fill``).
FILL_KINDS = ("normal", "uniform", "mixed", "symmetric", "normal_neg_inf", "constant")
METRIC_KINDS = {"flops": "TFLOP/s", "bytes": "GB/s"}
PEAK_KINDS = ("fp32_ffma", "copy_bandwidth", "tf32_tensor", "bf16_tensor")
#: How each peak is named in tables and plots.
PEAK_LABELS = {"fp32_ffma": "FP32 FMA peak", "copy_bandwidth": "copy bandwidth",
               "tf32_tensor": "TF32 tensor-core peak", "bf16_tensor": "BF16 tensor-core peak"}
#: Correctness rules the evaluation child implements (:class:`CorrectnessRule`).
RULES = ("scaled", "norm", "abs_rel", "exact")
#: How the GPU side calls a family's reference kernel (the module doc).
REFERENCE_STYLES = ("contract", "same_signature")
#: The vendor operators an exported library's loader implements (``docs/LIBRARY.md``), a
#: closed set read by name from its ``dispatch.json``, never evaluated: each takes the family's
#: input buffers as tensors in signature order (shaped by their dimensions) and returns its
#: outputs.
VENDOR_OPS: dict[str, str] = {
    "softmax_last_dim": "torch.softmax(x, -1)",
    "addmm_bias_relu": "torch.relu(torch.addmm(bias, A, B)), TF32 off",
}
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,31}$")


# ---- problem dimensions ----------------------------------------------------------------------
@dataclass(frozen=True)
class Dim:
    """One problem dimension: its name, meaning and bounds."""

    name: str
    doc: str
    lo: int = 1
    hi: int = (1 << 31) - 1

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"name": self.name, "doc": self.doc, "min": self.lo, "max": self.hi}


def make_dims(decl: Sequence[Dim], values: Mapping[str, Any]) -> Dims:
    """``values`` checked against the declared dimensions (all present, none extra, integers
    within bounds), in declaration order; ``ValueError`` names the problem."""
    if not isinstance(values, Mapping):
        raise ValueError(f"shape must be an object with {', '.join(d.name for d in decl)}")
    wanted = [d.name for d in decl]
    extra = [k for k in values if k not in wanted]
    missing = [k for k in wanted if k not in values]
    if extra or missing:
        parts = ([f"unknown dimension(s) {', '.join(map(str, extra))}"] if extra else []) + \
                ([f"missing {', '.join(missing)}"] if missing else [])
        raise ValueError(f"shape: {'; '.join(parts)} (dimensions: {', '.join(wanted)})")
    out: dict[str, int] = {}
    for d in decl:
        value = values[d.name]
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"shape.{d.name} must be an integer, got {value!r}")
        if not d.lo <= value <= d.hi:
            raise ValueError(f"shape.{d.name} must be in [{d.lo}, {d.hi}], got {value}")
        out[d.name] = value
    return Dims(out)


def _declared_name(wanted: Sequence[str], name: str) -> str:
    """``name`` as the family declares it: itself, or the one declared name equal to it but
    for case (``R`` for ``r``, ``rows`` for ``ROWS``)."""
    if name in wanted:
        return name
    same = [w for w in wanted if w.lower() == name.lower()]
    return same[0] if len(same) == 1 else name


def parse_dims(decl: Sequence[Dim], text: str) -> Dims:
    """``"8192x32768"`` (values in order; ``x``, ``×``, ``*`` or ``,`` between) or
    ``"rows=8192,cols=32768"`` (named, any order); ``ValueError`` shows the expected form."""
    wanted = [d.name for d in decl]
    example = "x".join("4096" for _ in decl) if len(decl) > 1 else "4096"
    form = (f"shape must look like {'x'.join(n.upper() for n in wanted)} (e.g. {example}) or "
            f"{','.join(f'{n}=...' for n in wanted)}")
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"{form}, got {text!r}")
    raw = text.strip()
    if "=" in raw:
        values: dict[str, Any] = {}
        for part in re.split(r"[,;\s]+", raw):
            if not part:
                continue
            name, _, value = part.partition("=")
            if not value.strip().isascii() or not value.strip().isdigit():
                raise ValueError(f"{form}, got {text!r}")
            name = _declared_name(wanted, name.strip())
            if name in values:
                raise ValueError(f"shape: dimension {name!r} given twice in {text!r}")
            values[name] = int(value)
        return make_dims(decl, values)
    parts = re.split(r"[xX×*,]", raw)
    if len(parts) != len(decl) or not all(p.strip().isascii() and p.strip().isdigit()
                                          for p in parts):
        raise ValueError(f"{form}, got {text!r}")
    return make_dims(decl, dict(zip(wanted, (int(p) for p in parts), strict=True)))


# ---- signature -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Buffer:
    """A device buffer of the kernel: name, element type, role, element count (expression)."""

    name: str
    count: str
    dtype: str = "float32"
    role: str = "in"
    doc: str = ""

    def elements(self, dims: Mapping[str, int]) -> int:
        """Element count at ``dims``."""
        return evaluate_int(self.count, dims)

    def nbytes(self, dims: Mapping[str, int]) -> int:
        """Size in bytes at ``dims``."""
        return self.elements(dims) * DTYPES[self.dtype][0]


#: The values a scalar of each type can take (a float's must also be finite).
SCALAR_RANGES: dict[str, tuple[float, float]] = {
    "int32": (-(1 << 31), (1 << 31) - 1), "int64": (-(1 << 63), (1 << 63) - 1),
    "uint32": (0, (1 << 32) - 1), "uint64": (0, (1 << 64) - 1),
    "float32": (-3.4028234663852886e38, 3.4028234663852886e38),
    "float64": (-1.7976931348623157e308, 1.7976931348623157e308),
}


@dataclass(frozen=True)
class Scalar:
    """A scalar argument after the buffers: name, type and value (expression of the dims)."""

    name: str
    value: str
    dtype: str = "int32"

    def at(self, dims: Mapping[str, Any]) -> int | float:
        """The value at ``dims``: an integer for an integer type, a float for a float type
        (``ExpressionError`` for a value of the wrong kind, or one the type cannot hold)."""
        if self.dtype.startswith("float"):
            found = evaluate(self.value, dims)
            if isinstance(found, bool) or not isinstance(found, int | float):
                raise ExpressionError(f"expression {self.value!r} is {found!r}, not a number")
            value: int | float = float(found)
        else:
            value = evaluate_int(self.value, dims)
        lo, hi = SCALAR_RANGES[self.dtype]
        if not lo <= value <= hi:  # also refuses a NaN
            raise ExpressionError(f"{self.name}={value} does not fit {self.dtype}")
        return value


@dataclass(frozen=True)
class Signature:
    """The kernel's arguments: buffers in order, then scalars."""

    buffers: tuple[Buffer, ...]
    scalars: tuple[Scalar, ...] = ()

    def __post_init__(self) -> None:
        seen: set[str] = set()
        args: tuple[Buffer | Scalar, ...] = (*self.buffers, *self.scalars)
        for arg in args:
            if not _NAME.match(arg.name) or arg.name in seen:
                raise ValueError(f"signature: argument name {arg.name!r} is invalid or repeated")
            seen.add(arg.name)
            if arg.dtype not in DTYPES:
                raise ValueError(f"signature: {arg.name} has dtype {arg.dtype!r}; "
                                 f"known: {', '.join(DTYPES)}")
        for buf in self.buffers:
            if buf.role not in ROLES:
                raise ValueError(f"signature: {buf.name} has role {buf.role!r}; known: {ROLES}")
        if not self.outputs:
            raise ValueError("signature: at least one buffer must have role 'out' or 'inout'")

    @property
    def inputs(self) -> tuple[Buffer, ...]:
        """Buffers the kernel reads (``in`` and ``inout``)."""
        return tuple(b for b in self.buffers if b.role in ("in", "inout"))

    @property
    def outputs(self) -> tuple[Buffer, ...]:
        """Buffers the kernel writes and the check reads (``out`` and ``inout``)."""
        return tuple(b for b in self.buffers if b.role in ("out", "inout"))

    def names(self) -> set[str]:
        """Every dimension name the expressions read."""
        out: set[str] = set()
        for buf in self.buffers:
            out |= names(buf.count)
        for sc in self.scalars:
            out |= names(sc.value)
        return out

    def resolve(self, dims: Mapping[str, int]) -> dict[str, Any]:
        """The signature at ``dims`` as the GPU side takes it: plain JSON with counts and
        values computed (``{"buffers": [{name, dtype, role, count}], "scalars": [...]}``)."""
        return {
            "buffers": [{"name": b.name, "dtype": b.dtype, "role": b.role,
                         "count": b.elements(dims)} for b in self.buffers],
            "scalars": [{"name": s.name, "dtype": s.dtype, "value": s.at(dims)}
                        for s in self.scalars],
        }

    def nbytes(self, dims: Mapping[str, int]) -> int:
        """Bytes of every buffer at ``dims`` (with the float64 reference and scale the check
        keeps for each output element)."""
        total = sum(b.nbytes(dims) for b in self.buffers)
        return total + sum(16 * b.elements(dims) for b in self.outputs)


# ---- metric, inputs, correctness, vendor -----------------------------------------------------
@dataclass(frozen=True)
class Metric:
    """The work one launch does and the peak it is held against."""

    kind: str
    #: expression of the dimensions: floating-point operations, or bytes moved
    work: str
    peak: str
    doc: str = ""

    def __post_init__(self) -> None:
        if self.kind not in METRIC_KINDS:
            raise ValueError(f"metric kind {self.kind!r}; known: {', '.join(METRIC_KINDS)}")
        if self.peak not in PEAK_KINDS:
            raise ValueError(f"metric peak {self.peak!r}; known: {', '.join(PEAK_KINDS)}")

    @property
    def unit(self) -> str:
        """``TFLOP/s`` or ``GB/s``."""
        return METRIC_KINDS[self.kind]

    @property
    def peak_label(self) -> str:
        """``FP32 FMA peak`` or ``copy bandwidth``."""
        return PEAK_LABELS[self.peak]

    def amount(self, dims: Mapping[str, int]) -> int:
        """Flops or bytes of one launch at ``dims``."""
        return evaluate_int(self.work, dims)

    def rate(self, dims: Mapping[str, int], us: float | None) -> float | None:
        """Throughput in :attr:`unit` of a launch taking ``us`` microseconds."""
        if not us:
            return None
        scale = 1e12 if self.kind == "flops" else 1e9
        return self.amount(dims) / (us * 1e-6) / scale

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"kind": self.kind, "work": self.work, "unit": self.unit, "peak": self.peak,
                "peak_label": self.peak_label, "doc": self.doc}


@dataclass(frozen=True)
class Fill:
    """How one input buffer is filled (:data:`FILL_KINDS`), times ``scale``."""

    kind: str = "normal"
    scale: float = 1.0

    def __post_init__(self) -> None:
        if self.kind not in FILL_KINDS:
            raise ValueError(f"fill kind {self.kind!r}; known: {', '.join(FILL_KINDS)}")


@dataclass(frozen=True)
class Distribution:
    """A named input distribution: a fill per input buffer (``default`` for the others)."""

    name: str
    default: Fill = Fill()
    fills: Mapping[str, Fill] = field(default_factory=dict)
    doc: str = ""

    def fill_of(self, buffer: str) -> Fill:
        """The fill of ``buffer``."""
        return self.fills.get(buffer, self.default)

    def resolve(self, signature: Signature) -> list[dict[str, Any]]:
        """One ``{"kind", "scale"}`` per input buffer, in order (what the GPU side takes)."""
        return [{"kind": self.fill_of(b.name).kind, "scale": self.fill_of(b.name).scale}
                for b in signature.inputs]


@dataclass(frozen=True)
class CorrectnessRule:
    """How an output is judged against the float64 reference, ``tol`` being the campaign's
    tolerance. Under every rule each output element must be written and finite.

    - ``scaled``: the norm-relative error over the output and each element's error over the
      reference's ``scale`` of that element both within ``tol`` (the reference kernel writes
      the scale: ``Σ|a·b| + |bias|`` for a GEMM);
    - ``norm``: the norm-relative error within ``tol``;
    - ``abs_rel``: each element within ``atol + tol·|ref|`` (the GPU side writes
      ``scale = |ref| + atol/tol`` and bounds the error over it by ``tol``);
    - ``exact``: every element equal to the reference.

    ``tolerance`` is the one the family declares for its campaigns (None: the service's
    default).
    """

    kind: str = "scaled"
    doc: str = ""
    atol: float = 0.0
    tolerance: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in RULES:
            raise ValueError(f"correctness rule {self.kind!r}; known: {', '.join(RULES)}")
        if not self.atol >= 0:
            raise ValueError(f"correctness atol must be >= 0, got {self.atol!r}")

    def to_dict(self) -> dict[str, Any]:
        """What the GPU side takes with each check: ``{"kind", "atol"}``."""
        return {"kind": self.kind, "atol": self.atol}


@dataclass(frozen=True)
class Vendor:
    """The vendor baseline, run in the vendor subprocess (``worker/vendor.py``).

    ``module`` is the dotted name of a module defining ``prepare(torch, dims) -> fn``: it
    allocates inputs with torch (passed in, so the module imports nothing) for ``dims`` (a
    dict) and returns a function that runs the vendor's operator once.
    """

    #: short, as tables and plots name it (``cuBLAS fp32``)
    name: str
    module: str
    #: what exactly runs (``torch.addmm + relu_, TF32 off``)
    doc: str = ""
    #: the operator an exported library's loader runs in its place where a shape has no
    #: dispatch entry: a name of :data:`VENDOR_OPS` (None: the loader falls back to the
    #: family's reference kernel)
    op: str | None = None

    def __post_init__(self) -> None:
        if self.op is not None and self.op not in VENDOR_OPS:
            raise ValueError(f"vendor op {self.op!r}; known: {', '.join(VENDOR_OPS)}")


def reference_setup(family: Any) -> dict[str, str]:
    """How the GPU side calls ``family``'s reference kernel: ``{"style", "outputs_dtype"}``
    from its ``reference_style`` and ``reference_outputs_dtype`` (``contract`` and float64
    where it declares none)."""
    style = str(getattr(family, "reference_style", "contract"))
    dtype = str(getattr(family, "reference_outputs_dtype", "float64"))
    if style not in REFERENCE_STYLES:
        raise ValueError(f"reference style {style!r}; known: {', '.join(REFERENCE_STYLES)}")
    if dtype not in ("float64", "float32"):
        raise ValueError(f"reference outputs dtype {dtype!r}; known: float64, float32")
    return {"style": style, "outputs_dtype": dtype}


# ---- the rule-book context and the family protocol -------------------------------------------
class EvaluatedPoint(Protocol):
    """What a rule book may read of one candidate of the history (evaluated or in flight)."""

    @property
    def iteration(self) -> int:
        """Its place in the campaign (0: the baseline)."""
        ...

    @property
    def params(self) -> Any:
        """Its point of the family's space."""
        ...

    @property
    def status(self) -> str:
        """``ok``, a failure (``rejected``, ``error``, ``wrong``, …) or a state in flight."""
        ...

    @property
    def compile(self) -> Mapping[str, Any] | None:
        """The feedback record's compile block (``regs_per_thread``, ``spill_bytes``, and a
        ``rejection`` with its figures when the point was refused before compiling)."""
        ...

    @property
    def profile(self) -> Mapping[str, Any] | None:
        """The feedback record's profile block (occupancy and its ``limiter``, bank
        conflicts, …; a figure not had is absent or None)."""
        ...


class RuleContext(Protocol):
    """What a family's expert rule book may read of a decision (the agent's policy context)."""

    @property
    def family(self) -> KernelFamily:
        """The family decided for (its transforms as the campaign has them, its launch)."""
        ...

    @property
    def arch(self) -> str:
        """The GPU's arch (``sm_90``)."""
        ...

    @property
    def shape(self) -> Dims | None:
        """The campaign's problem dimensions, when known."""
        ...

    @property
    def device(self) -> Mapping[str, Any] | None:
        """The device measured on (``sm_count``, ``max_threads_per_sm``, …), when known."""
        ...

    @property
    def tolerance(self) -> float:
        """The campaign's correctness tolerance (the bound of the family's correctness rule)."""
        ...

    @property
    def incumbent(self) -> EvaluatedPoint | None:
        """The point the moves start from."""
        ...

    @property
    def history(self) -> Sequence[EvaluatedPoint]:
        """Every candidate of the campaign so far."""
        ...

    @property
    def stagnation(self) -> int:
        """Evaluations since the last acceptance."""
        ...

    @property
    def settled(self) -> bool:
        """Whether the search judges the structure settled (a stagnation window without an
        acceptance): the time for moves :meth:`KernelFamily.held_until_settled` holds back."""
        ...

    def action_allowed(self, name: str) -> bool:
        """Whether a transform may be used in this campaign."""
        ...

    def theoretical_occupancy(self, threads: int, regs_per_thread: int,
                              shared_mem_bytes: int) -> float:
        """Theoretical occupancy (% of an SM's warps) of CTAs of ``threads`` threads using
        these registers a thread and bytes of shared memory, on :attr:`device`."""
        ...


@runtime_checkable
class KernelFamily(Protocol):
    """A kernel family: every layer above ``kernels/`` is generic over this."""

    name: str
    description: str
    dims: tuple[Dim, ...]
    #: the shape a campaign tunes when none is given
    default_dims: Dims
    signature: Signature
    metric: Metric
    correctness: CorrectnessRule
    distributions: tuple[Distribution, ...]
    edge_shapes: tuple[Dims, ...]
    vendor: Vendor | None
    transforms: TransformRegistry
    baseline: Any

    # -- shapes ---------------------------------------------------------------------------------
    def parse_dims(self, text: str) -> Dims:
        """CLI text of a shape (``4096x4096x4096``, ``rows=8192,cols=32768``)."""
        ...

    def make_dims(self, values: Mapping[str, Any]) -> Dims:
        """Dimensions from JSON, checked against their bounds."""
        ...

    # -- space ----------------------------------------------------------------------------------
    def params_from_dict(self, data: dict[str, Any]) -> Any:
        """Parameters from JSON (missing fields take the baseline's values)."""
        ...

    def domains(self) -> dict[str, tuple[Any, ...]]:
        """Every parameter field and its values (the numeric search's knobs)."""
        ...

    def space(self, arch: str = "sm_90") -> list[Any]:
        """A listable part of the space (the seed's)."""
        ...

    def sample(self, rng: Any, n: int, arch: str = "sm_90") -> list[Any]:
        """``n`` distinct valid points drawn uniformly from the whole space."""
        ...

    def validate(self, params: Any, arch: str = "sm_90") -> Rejection | None:
        """Static validity before compiling (numbers in the rejection)."""
        ...

    def apply(self, candidate: Candidate, action: Action | str) -> Candidate | Rejection:
        """Apply one action."""
        ...

    def apply_chain(self, actions: list[Action], start: Candidate | None = None
                    ) -> Candidate | Rejection:
        """Apply actions in order from ``start`` (default the baseline)."""
        ...

    def for_shape(self, params: Any, dims: Dims) -> Any:
        """``params`` as a starting point at ``dims`` (a specialization for another shape
        dropped)."""
        ...

    # -- building and launching -----------------------------------------------------------------
    def render(self, params: Any) -> str:
        """Deterministic CUDA source of ``params``."""
        ...

    def source_hash(self, params: Any) -> str:
        """SHA-256 of the rendered source."""
        ...

    def compile_arch(self, params: Any, arch: str) -> str:
        """The arch to build ``params`` for on a GPU of ``arch``."""
        ...

    def max_smem_limit(self, arch: str) -> int:
        """Per-block dynamic shared-memory limit of ``arch`` in bytes."""
        ...

    def dynamic_smem_bytes(self, params: Any) -> int:
        """Dynamic shared memory a launch of ``params`` asks for."""
        ...

    def threads_per_block(self, params: Any) -> int:
        """Threads of one CTA of ``params``."""
        ...

    def fixed_dims(self, params: Any) -> Dims | None:
        """The only shape ``params`` runs at, when it was compiled for one."""
        ...

    def launch(self, params: Any, dims: Dims, sm_count: int = ...) -> LaunchConfig | Rejection:
        """Grid, block, dynamic shared memory (and workspace, epilogue) at ``dims``."""
        ...

    # -- correctness ----------------------------------------------------------------------------
    def reference_source(self) -> str:
        """CUDA source of the float64 reference kernel (launch contract in the module doc)."""
        ...

    def reference_launch(self, dims: Dims) -> LaunchConfig:
        """Launch of the reference kernel at ``dims``."""
        ...

    # -- the rest of the loop -------------------------------------------------------------------
    def expert_moves(self, ctx: RuleContext) -> list[tuple[str, str]]:
        """The rule book: ``(action text, reason)`` moves from the incumbent, best first."""
        ...

    def held_until_settled(self, action: Action) -> bool:
        """Whether the expert's search holds ``action`` back until :attr:`RuleContext.settled`
        (a move that narrows what a point is checked for, such as compiling the shape in):
        only the rule book proposes it before then. False for most actions."""
        ...

    def sanitizer_shapes(self, params: Any) -> list[Dims]:
        """Small shapes the sanitizer runs ``params`` at (its tails and tiles exercised)."""
        ...

    def replay_datasets(self) -> list[Any]:
        """Replay datasets shipped with the family (measured on a GPU), first the default."""
        ...


@dataclass(frozen=True)
class PointPeak:
    """The ceiling one point's rate is held against: a peak of the device (:data:`PEAK_KINDS`)
    divided by the ``products`` of that peak's precision one result's product costs. A
    precision-split GEMM computes each fp32 product as 3 TF32 (tf32x3), 3 or 6 BF16 (bf16x3,
    bf16x6) tensor-core products: its ceiling is that tensor-core peak over 3 or 6, not the FP32
    FMA peak it is not bound by."""

    kind: str
    products: int = 1
    #: the scheme's name (``bf16x3``), where ``products`` > 1
    scheme: str = ""

    def __post_init__(self) -> None:
        if self.kind not in PEAK_KINDS:
            raise ValueError(f"peak {self.kind!r}; known: {', '.join(PEAK_KINDS)}")
        if self.products < 1:
            raise ValueError(f"a peak's products must be >= 1, got {self.products}")

    @property
    def label(self) -> str:
        """``FP32 FMA peak``, or ``bf16x3 ceiling`` for a split scheme."""
        return PEAK_LABELS[self.kind] if self.products == 1 else f"{self.scheme} ceiling"


def point_peak(family: Any, params: Any) -> PointPeak:
    """The ceiling ``family`` holds the point ``params`` against: its ``peak_of(params)`` where
    it has one (a family whose points differ in what bounds them), else its metric's peak."""
    peak_of = getattr(family, "peak_of", None)
    return peak_of(params) if peak_of is not None else PointPeak(family.metric.peak)


class FamilyBase:
    """What every family does the same way, from its declarations: apply actions through its
    ``transforms``, start chains at its ``baseline``, hash its ``render``, and parse and check
    shapes against its ``dims``. A family subclasses it and overrides what it does its own way."""

    dims: tuple[Dim, ...]
    transforms: TransformRegistry
    baseline: Any
    #: how the GPU side calls the reference kernel (:func:`reference_setup`)
    reference_style: str = "contract"
    reference_outputs_dtype: str = "float64"

    def render(self, params: Any) -> str:
        """The CUDA source of ``params`` (every family renders its own)."""
        raise NotImplementedError

    def parse_dims(self, text: str) -> Dims:
        """The shape's text in the family's notation (:func:`parse_dims`)."""
        return parse_dims(self.dims, text)

    def make_dims(self, values: Mapping[str, Any]) -> Dims:
        """Dimensions from JSON, checked against the bounds (:func:`make_dims`)."""
        return make_dims(self.dims, values)

    def source_hash(self, params: Any) -> str:
        """SHA-256 of the rendered source."""
        return source_digest(self.render(params))

    def apply(self, candidate: Candidate, action: Action | str) -> Candidate | Rejection:
        """Apply one action (object or text like ``"apply_vectorize(4)"``)."""
        if isinstance(action, str):
            action = Action.parse(action)
        return self.transforms.apply(candidate, action)

    def apply_chain(self, actions: list[Action], start: Candidate | None = None
                    ) -> Candidate | Rejection:
        """Apply actions in order from ``start`` (default the baseline); stop at a rejection."""
        node = start or Candidate(self.baseline)
        for action in actions:
            result = self.apply(node, action)
            if isinstance(result, Rejection):
                return result
            node = result
        return node


#: The correctness tolerance of a campaign whose family declares none and whose submitter
#: gave none.
DEFAULT_TOLERANCE = 1e-4


def campaign_tolerance(family: KernelFamily, requested: float | None) -> float:
    """The tolerance a campaign runs at: the one asked for, else the one the family declares
    (``correctness.tolerance``: a user's spec says it), else :data:`DEFAULT_TOLERANCE`."""
    if requested is not None:
        return float(requested)
    declared = family.correctness.tolerance
    return float(declared) if declared is not None else DEFAULT_TOLERANCE


def describe(family: KernelFamily) -> dict[str, Any]:
    """What ``tuneforge kernels --json`` and ``GET /families`` show of a family."""
    return {
        "name": family.name,
        "description": family.description,
        "dims": [d.to_dict() for d in family.dims],
        "default_shape": str(family.default_dims),
        "signature": {
            "buffers": [{"name": b.name, "dtype": b.dtype, "role": b.role, "count": b.count}
                        for b in family.signature.buffers],
            "scalars": [{"name": s.name, "dtype": s.dtype, "value": s.value}
                        for s in family.signature.scalars],
        },
        "metric": family.metric.to_dict(),
        "correctness": family.correctness.kind,
        "distributions": [d.name for d in family.distributions],
        "edge_shapes": [str(s) for s in family.edge_shapes],
        "vendor": (f"{family.vendor.name} ({family.vendor.doc})" if family.vendor
                   and family.vendor.doc else family.vendor.name if family.vendor else None),
        "transforms": family.transforms.names(),
    }


def source_digest(source: str) -> str:
    """A rendered source's hash, as :meth:`KernelFamily.source_hash` gives it."""
    return hashlib.sha256(source.encode()).hexdigest()


#: family object -> (the object, its contract hash): what :func:`contract_hash` computed, the
#: object held so that its ``id`` is not reused; the oldest go beyond 64 objects
_CONTRACTS: dict[int, tuple[Any, str]] = {}
_CONTRACTS_LOCK = threading.Lock()


def contract_hash(family: KernelFamily) -> str:
    """A hash of everything in ``family`` that changes what a measurement of one compiled
    kernel means: its name, signature, metric, correctness rule, input distributions, edge
    shapes and reference kernel (its description and transforms do not). Computed once per
    family object (a family does not change once built: another version is another object),
    not at each evaluation, which read the reference's file each time."""
    found = _CONTRACTS.get(id(family))
    if found is not None and found[0] is family:
        return found[1]
    digest = _contract_hash(family)
    with _CONTRACTS_LOCK:
        _CONTRACTS[id(family)] = (family, digest)
        while len(_CONTRACTS) > 64:
            del _CONTRACTS[next(iter(_CONTRACTS))]
    return digest


def _contract_hash(family: KernelFamily) -> str:
    blob = json.dumps({
        "name": family.name,
        "signature": describe(family)["signature"],
        "metric": family.metric.to_dict(),
        "correctness": family.correctness.to_dict(),
        "distributions": [[d.name, d.resolve(family.signature)] for d in family.distributions],
        "edge_shapes": [str(e) for e in family.edge_shapes],
        "reference": hashlib.sha256(family.reference_source().encode()).hexdigest(),
        "reference_setup": reference_setup(family),
    }, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()
