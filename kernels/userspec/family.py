"""A kernel family built from a validated spec (:class:`SpecFamily`): the whole
``KernelFamily`` contract from declarations alone.

Its action space is one ``set_<tunable>(value)`` per tunable, the spec's named
macro-transforms, and ``revert_last()``; its rule book proposes each tunable's neighbouring
values of the incumbent. Restrictions that read only tunables refuse a point before compiling
(:meth:`SpecFamily.validate`); those that read dimensions refuse a launch at a shape
(:meth:`SpecFamily.launch`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import math
import random
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from typing import Any

from kernels.arch import STATIC_SMEM_LIMIT, max_smem
from kernels.base import (
    DEFAULT_SM_COUNT,
    Action,
    ArgSpec,
    Candidate,
    Dims,
    LaunchConfig,
    Rejection,
    TransformRegistry,
)
from kernels.expr import ExpressionError, evaluate, evaluate_int, names
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
)
from kernels.userspec import source as src
from kernels.userspec.validate import (
    MAX_BLOCK,
    MAX_GRID,
    MAX_THREADS,
    canonical_json,
    validate_spec,
)

#: Spaces at most this large are listed whole (:meth:`SpecFamily.space`).
LISTED_POINTS = 50_000


class SpecParams:
    """The base of a user family's parameter dataclass (one frozen dataclass a family,
    :func:`params_class`, with a field per tunable in declaration order, defaulting to the
    baseline): ``p.tile_x``, ``p["tile_x"]``, hashable, JSON through :meth:`to_dict`."""

    def __getattr__(self, name: str) -> Any:
        # reached only for a name that is no field: a tunable the family does not have
        raise AttributeError(f"no tunable {name!r}")

    def __getitem__(self, key: str) -> Any:
        if key not in {f.name for f in dataclasses.fields(self)}:  # type: ignore[arg-type]
            raise KeyError(key)
        return getattr(self, key)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (every tunable, in declaration order)."""
        return dataclasses.asdict(self)  # type: ignore[call-overload]

    def canonical(self) -> SpecParams:
        """Itself (every tunable renders into the source)."""
        return self

    def replace(self, **changes: Any) -> SpecParams:
        """A copy with ``changes``."""
        return dataclasses.replace(self, **changes)  # type: ignore[type-var]


def params_class(name: str, baseline: Mapping[str, Any]) -> type[SpecParams]:
    """The frozen dataclass of a family's points: a field per tunable (``bool`` or ``int``),
    defaulting to ``baseline``'s value (what the numeric policies and exports read through
    ``dataclasses``)."""
    title = "".join(part.title() for part in name.split("_")) + "Params"
    fields = [(k, bool if isinstance(v, bool) else int, dataclasses.field(default=v))
              for k, v in baseline.items()]
    cls = dataclasses.make_dataclass(title, fields, bases=(SpecParams,), frozen=True)
    cls.__doc__ = f"A point of the user family {name}: {', '.join(baseline)}."
    cls.__module__ = __name__
    return cls


def reference_text(spec: Mapping[str, Any]) -> str:
    """What :meth:`SpecFamily.reference_source` compiles, for a normalized spec."""
    ref = spec["reference"]
    files = spec["files"]
    own = {n: files[n] for n in spec["includes"]}
    if ref["source"] == spec["kernel"]["source"]:
        return src.render_point(spec, spec["baseline"])
    return src.final_check(src.inline(files[ref["source"]], ref["source"], own))


class SpecFamily(FamilyBase):
    """A family built from a normalized spec; ``name`` is its registry key
    (``display_name@hash``)."""

    def __init__(self, spec: dict[str, Any], digest: str) -> None:
        self.spec = spec
        self.version_hash = digest
        self.display_name: str = spec["name"]
        self.name = f"{spec['name']}@{digest[:12]}"
        self.description = spec["description"] or f"user family {spec['name']}"
        self.dims = tuple(Dim(d["name"], d["doc"], d["min"], d["max"]) for d in spec["dims"])
        self.default_dims = Dims(spec["default_dims"])
        sig = spec["signature"]
        self.signature = Signature(
            buffers=tuple(Buffer(b["name"], b["count"], b["dtype"], b["role"], b["doc"])
                          for b in sig["buffers"]),
            scalars=tuple(Scalar(s["name"], s["value"], s["dtype"]) for s in sig["scalars"]))
        m = spec["metric"]
        self.metric = Metric(m["kind"], m["work"], m["peak"], m["doc"])
        c = spec["correctness"]
        self.correctness = CorrectnessRule(c["rule"], doc=_rule_doc(c), atol=c["atol"],
                                           tolerance=c["tolerance"])
        self.reference_style = "same_signature"
        self.reference_outputs_dtype = spec["reference"]["outputs_dtype"]
        self.distributions = tuple(
            Distribution(d["name"], Fill(d["default"]["kind"], d["default"]["scale"]),
                         {k: Fill(f["kind"], f["scale"]) for k, f in d["fills"].items()},
                         d["doc"])
            for d in spec["distributions"])
        self.edge_shapes = tuple(Dims(e) for e in spec["edge_shapes"])
        self.vendor: Vendor | None = None  # a user's family has no vendor baseline (yet)
        self._domains = {t["name"]: tuple(t["values"]) for t in spec["tunables"]}
        self.params_type = params_class(spec["name"], spec["baseline"])
        self.baseline = self.params_type(**spec["baseline"])
        dim_names = set(spec["default_dims"])
        self._static = [r for r in spec["restrictions"] if not names(r) & dim_names]
        self._shaped = [r for r in spec["restrictions"] if names(r) & dim_names]
        self.transforms = self._registry()
        self._valid: list[SpecParams] | None = None

    # -- the action space ----------------------------------------------------------------------
    def _registry(self) -> TransformRegistry:
        registry = TransformRegistry()
        for tunable, values in self._domains.items():
            registry.register(f"set_{tunable}", ArgSpec(tunable, values, f"the value of "
                                                        f"{tunable}", field=tunable),
                              origin="generated")(_setter(f"set_{tunable}", tunable))
        for t in self.spec["transforms"]:
            args = tuple(ArgSpec(a["name"], tuple(a["choices"]), f"{a['name']} of {t['name']}")
                         for a in t["args"])
            registry.register(t["name"], *args, origin="declared")(
                _macro(t, self._domains))
        registry.register("revert_last")(_revert_last)
        return registry

    # -- the space -----------------------------------------------------------------------------
    def params_from_dict(self, data: dict[str, Any]) -> SpecParams:
        """Parameters from JSON (missing tunables take the baseline's value); ``ValueError``
        names an unknown or out-of-domain one."""
        unknown = sorted(set(data) - set(self._domains))
        if unknown:
            raise ValueError(f"unknown parameter(s) {unknown}; tunables: "
                             f"{', '.join(self._domains)}")
        for key, value in data.items():
            domain = self._domains[key]
            if value not in domain or isinstance(value, bool) != isinstance(domain[0], bool):
                raise ValueError(f"parameter {key}={value!r} is outside {list(domain)}")
        return self.params_type(**{k: data.get(k, self.baseline[k]) for k in self._domains})

    def domains(self) -> dict[str, tuple[Any, ...]]:
        """Every tunable's values."""
        return dict(self._domains)

    def _points(self) -> Iterator[SpecParams]:
        for combo in itertools.product(*self._domains.values()):
            yield self.params_type(**dict(zip(self._domains, combo, strict=True)))

    def _size(self) -> int:
        return math.prod(len(v) for v in self._domains.values())

    def _all_valid(self, arch: str) -> list[SpecParams]:
        if self._valid is None:
            self._valid = [p for p in self._points() if self.validate(p, arch) is None]
        return self._valid

    def space(self, arch: str = "sm_90") -> list[SpecParams]:
        """Every valid point, the baseline first, when the space holds at most
        :data:`LISTED_POINTS`; else the baseline and 1000 valid points drawn with seed 0."""
        if self._size() <= LISTED_POINTS:
            valid = self._all_valid(arch)
            return [self.baseline, *(p for p in valid if p != self.baseline)]
        drawn = self.sample(random.Random(0), 1000, arch)
        return [self.baseline, *(p for p in drawn if p != self.baseline)]

    def sample(self, rng: Any, n: int, arch: str = "sm_90") -> list[SpecParams]:
        """``n`` distinct valid points drawn uniformly (fewer when the space has fewer)."""
        rng = rng or random.Random(0)
        if self._size() <= LISTED_POINTS:
            valid = self._all_valid(arch)
            return list(rng.sample(valid, min(n, len(valid))))
        out: dict[SpecParams, None] = {}
        for _ in range(200 * max(n, 1)):
            if len(out) >= n:
                break
            p = self.params_type(**{k: rng.choice(v) for k, v in self._domains.items()})
            if p not in out and self.validate(p, arch) is None:
                out[p] = None
        return list(out)

    def validate(self, params: SpecParams, arch: str = "sm_90") -> Rejection | None:
        """Refuse before compiling: a value outside its domain, a restriction over the
        tunables, a block over the GPU's limits, dynamic shared memory over ``arch``'s limit,
        a source the render check refuses."""
        values = params.to_dict()
        for key, domain in self._domains.items():
            if values.get(key) not in domain:
                return Rejection("out_of_domain", f"{key}={values.get(key)!r} is outside "
                                 f"{list(domain)}", {key: values.get(key)})
        for r in self._static:
            if not _truth(r, values):
                return Rejection("restriction", f"the point violates the restriction {r!r}",
                                 {"restriction": r})
        block = self._block(values)
        if isinstance(block, Rejection):
            return block
        threads = math.prod(block)
        if threads > MAX_THREADS or any(b > lim for b, lim in zip(block, MAX_BLOCK, strict=True)):
            return Rejection("threads_over_limit", f"block {block} ({threads} threads) is over "
                             f"the GPU's limits ({MAX_THREADS} threads, {MAX_BLOCK})",
                             {"threads_per_block": threads, "max_threads_per_block": MAX_THREADS})
        smem = self.dynamic_smem_bytes(params)
        limit = self.max_smem_limit(arch)
        if smem > limit:
            return Rejection("smem_over_limit", f"{smem} B of dynamic shared memory exceed the "
                             f"{limit} B limit of {arch}",
                             {"smem_bytes": smem, "max_smem_limit": limit})
        try:
            self.render(params)
        except src.SourceError as exc:
            return Rejection("source_refused", str(exc), {})
        return None

    def for_shape(self, params: SpecParams, dims: Dims) -> SpecParams:
        """Any point runs at any shape (or its launch says why not)."""
        return params

    # -- building and launching ---------------------------------------------------------------
    def render(self, params: SpecParams) -> str:
        """The checked CUDA source of ``params`` (deterministic: same point, same bytes)."""
        return _render_cached(self, params)

    def compile_arch(self, params: SpecParams, arch: str) -> str:
        """The GPU's own arch."""
        return arch

    def max_smem_limit(self, arch: str) -> int:
        """Per-block dynamic shared-memory limit of ``arch`` (48 KiB for an unknown arch)."""
        return max_smem(arch) or STATIC_SMEM_LIMIT

    def dynamic_smem_bytes(self, params: SpecParams) -> int:
        """The spec's dynamic shared-memory expression at ``params``."""
        try:
            return max(0, evaluate_int(self.spec["launch"]["dynamic_smem"], params.to_dict()))
        except ExpressionError:
            return 0

    def _block(self, values: Mapping[str, Any]) -> tuple[int, int, int] | Rejection:
        try:
            x, y, z = (evaluate_int(e, values) for e in self.spec["launch"]["block"])
        except ExpressionError as exc:
            return Rejection("launch_expression", str(exc), {})
        if min(x, y, z) < 1:
            return Rejection("bad_block", f"block ({x}, {y}, {z}) has a dimension below 1",
                             {"block": [x, y, z]})
        return (x, y, z)

    def threads_per_block(self, params: SpecParams) -> int:
        """Threads of one CTA (the product of the block's dimensions)."""
        block = self._block(params.to_dict())
        return 0 if isinstance(block, Rejection) else math.prod(block)

    def fixed_dims(self, params: SpecParams) -> Dims | None:
        """Never compiled for one shape."""
        return None

    def launch(self, params: SpecParams, dims: Dims, sm_count: int = DEFAULT_SM_COUNT
               ) -> LaunchConfig | Rejection:
        """The spec's grid and block at ``dims``; a Rejection for a restriction over the
        dimensions, a grid outside the GPU's limits or a scalar that does not fit its type."""
        values = params.to_dict()
        env = {**dims.as_dict(), **values}
        for r in self._shaped:
            if not _truth(r, env):
                return Rejection("restriction", f"the point violates the restriction {r!r} at "
                                 f"{dims}", {"restriction": r})
        block = self._block(values)
        if isinstance(block, Rejection):
            return block
        try:
            grid = tuple(evaluate_int(e, env) for e in self.spec["launch"]["grid"])
        except ExpressionError as exc:
            return Rejection("launch_expression", str(exc), {})
        for value, limit in zip(grid, MAX_GRID, strict=True):
            if not 1 <= value <= limit:
                return Rejection("grid_limit", f"grid {grid} at {dims} is outside the GPU's "
                                 f"limits {MAX_GRID}", {"grid": list(grid)})
        for scalar in self.signature.scalars:
            try:
                scalar.at(dims)
            except ExpressionError as exc:
                return Rejection("scalar_range", f"{exc} at {dims}", {"scalar": scalar.name})
        x, y, z = grid
        return LaunchConfig(self.spec["kernel"]["name"], (x, y, z), block,
                            self.dynamic_smem_bytes(params))

    # -- correctness ---------------------------------------------------------------------------
    def reference_source(self) -> str:
        """The reference kernel's source as nvcc compiles it: when the reference shares the
        kernel's file, that file as the baseline point renders it (``#define`` lines of the
        baseline's tunables, or the Jinja template rendered); else the reference's own file
        as written. The family's includes are inlined."""
        return reference_text(self.spec)

    def reference_launch(self, dims: Dims) -> LaunchConfig:
        """The reference's grid and block at ``dims`` (the same-signature style: it takes
        the candidate's arguments, outputs in ``reference_outputs_dtype``)."""
        ref = self.spec["reference"]
        env = dims.as_dict()
        gx, gy, gz = (max(1, evaluate_int(e, env)) for e in ref["grid"])
        bx, by, bz = (evaluate_int(e, {}) for e in ref["block"])
        return LaunchConfig(ref["kernel"], (gx, gy, gz), (bx, by, bz),
                            evaluate_int(ref["dynamic_smem"], env))

    # -- the rest of the loop -----------------------------------------------------------------
    def expert_moves(self, ctx: RuleContext) -> list[tuple[str, str]]:
        """The generic rule book: each tunable's next value up, then its next value down, of
        the incumbent, in the order the spec declares them, valid points only (the generic
        expert skips explored points and measures the rest)."""
        if ctx.incumbent is None:
            return []
        current = ctx.incumbent.params
        moves: list[tuple[str, str]] = []
        for step in (1, -1):
            for tunable, domain in self._domains.items():
                if not ctx.action_allowed(f"set_{tunable}"):
                    continue
                index = domain.index(current[tunable]) if current[tunable] in domain else 0
                nxt = index + step
                if not 0 <= nxt < len(domain):
                    continue
                point = current.replace(**{tunable: domain[nxt]})
                if self.validate(point, ctx.arch) is not None:
                    continue
                value = domain[nxt]
                shown = str(value).lower() if isinstance(value, bool) else str(value)
                moves.append((f"set_{tunable}({shown})",
                              f"the {'next' if step > 0 else 'previous'} value of {tunable} "
                              f"({current[tunable]} -> {value})"))
        return moves

    def held_until_settled(self, action: Action) -> bool:
        """Nothing is held back."""
        return False

    def sanitizer_shapes(self, params: SpecParams) -> list[Dims]:
        """The spec's edge shapes (its tails)."""
        return list(self.edge_shapes)

    def replay_datasets(self) -> list[Any]:
        """None: a user family is measured on the service's GPUs."""
        return []


#: Bytes of rendered sources kept per process (least recently used dropped first).
RENDER_CACHE_BYTES = 64 * 1024 * 1024
_rendered: OrderedDict[tuple[str, SpecParams], str] = OrderedDict()
_rendered_bytes = [0]
_rendered_lock = threading.Lock()


def _render_cached(family: SpecFamily, params: SpecParams) -> str:
    key = (family.name, params)
    with _rendered_lock:
        text = _rendered.get(key)
        if text is not None:
            _rendered.move_to_end(key)
            return text
    text = src.render_point(family.spec, params.to_dict())
    with _rendered_lock:
        if key not in _rendered:
            _rendered[key] = text
            _rendered_bytes[0] += len(text)
        while _rendered_bytes[0] > RENDER_CACHE_BYTES and _rendered:
            _, dropped = _rendered.popitem(last=False)
            _rendered_bytes[0] -= len(dropped)
    return text


def rendered_cache_bytes() -> int:
    """Characters of rendered sources the process keeps now (at most
    :data:`RENDER_CACHE_BYTES`)."""
    with _rendered_lock:
        return _rendered_bytes[0]


def _truth(text: str, env: Mapping[str, Any]) -> bool:
    try:
        return bool(evaluate(text, env))
    except ExpressionError:
        return False


def _rule_doc(c: Mapping[str, Any]) -> str:
    if c["rule"] == "norm":
        return "norm-relative error within the tolerance"
    if c["rule"] == "abs_rel":
        return f"each element within {c['atol']:g} + tolerance x |ref|"
    return "every element equal to the reference"


def _setter(action: str, tunable: str) -> Any:
    def set_value(candidate: Candidate, value: Any) -> Candidate | Rejection:
        new = candidate.params.replace(**{tunable: value})
        if new == candidate.params:
            return Rejection("no_change", f"{action}({value}) leaves the kernel unchanged")
        return Candidate(new, action=Action(action, (value,)), parent=candidate,
                         shape=candidate.shape)

    set_value.__doc__ = f"Set the tunable {tunable}."
    return set_value


def _macro(t: Mapping[str, Any], domains: Mapping[str, tuple[Any, ...]]) -> Any:
    arg_names = [a["name"] for a in t["args"]]

    def apply_macro(candidate: Candidate, *args: Any) -> Candidate | Rejection:
        env = {**candidate.params.to_dict(), **dict(zip(arg_names, args, strict=True))}
        changes: dict[str, Any] = {}
        for tunable, text in t["set"].items():
            try:
                value = evaluate(text, env)
            except ExpressionError as exc:
                return Rejection("transform_expression", str(exc), {})
            if isinstance(domains[tunable][0], bool):
                value = bool(value)
            elif isinstance(value, float) and value.is_integer():
                value = int(value)
            if value not in domains[tunable]:
                return Rejection("out_of_domain", f"{t['name']} sets {tunable}={value!r}, "
                                 f"outside {list(domains[tunable])}", {tunable: value})
            changes[tunable] = value
        new = candidate.params.replace(**changes)
        action = Action(t["name"], tuple(args))
        if new == candidate.params:
            return Rejection("no_change", f"{action} leaves the kernel unchanged")
        return Candidate(new, action=action, parent=candidate, shape=candidate.shape)

    apply_macro.__doc__ = t["doc"] or ("Set " + ", ".join(f"{k} = {v}"
                                                          for k, v in t["set"].items()) + ".")
    return apply_macro


def _revert_last(candidate: Candidate) -> Candidate | Rejection:
    """Return to the parent candidate."""
    if candidate.parent is None:
        return Rejection("no_parent", "revert_last() on the root candidate", {})
    return candidate.parent


def build_family(spec: Mapping[str, Any]) -> SpecFamily:
    """The family of ``spec`` (validated here: :class:`SpecError` if refused); its ``name``
    is :func:`kernels.userspec.family_key` of the spec, ``display_name`` the spec's name and
    ``version_hash`` its :func:`kernels.userspec.spec_hash`."""
    return family_from_normal(validate_spec(dict(spec)))


def family_from_normal(normal: dict[str, Any]) -> SpecFamily:
    """The family of a spec :func:`kernels.userspec.validate_spec` returned (not validated
    again: registration validates once and builds from its result)."""
    digest = hashlib.sha256(canonical_json(normal).encode()).hexdigest()
    return SpecFamily(normal, digest)
