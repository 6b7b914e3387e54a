"""``scale_add``: ``y = 2 x + 1`` over ``n`` fp32 elements — the smallest whole kernel family.

It lives under ``tests/`` only: the engine, the workers, the API and the CLI tune it through the
family contract (``kernels.family``) without a line of theirs naming it.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass, replace
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2

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
)

NAME = "scale_add"
DOMAINS: dict[str, tuple[int, ...]] = {
    "block": (64, 128, 256, 512), "vec": (1, 2, 4), "items": (1, 2, 4)}
MAX_GRID_X = 2**31 - 1


@dataclass(frozen=True)
class ScaleAddParams:
    """Threads per CTA, elements per vector access, vector accesses per thread."""

    block: int = 64
    vec: int = 1
    items: int = 1

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)

    def canonical(self) -> ScaleAddParams:
        """Itself (every field matters)."""
        return self


TRANSFORMS = TransformRegistry()


def _set(candidate: Candidate, action: Action, **changes: int) -> Candidate | Rejection:
    new = replace(candidate.params, **changes)
    if new == candidate.params:
        return Rejection("no_change", f"{action} leaves the kernel unchanged")
    return Candidate(new, action=action, parent=candidate, shape=candidate.shape)


@TRANSFORMS.register("set_block", ArgSpec("threads", DOMAINS["block"], "threads per CTA",
                                          field="block"))
def set_block(candidate: Candidate, threads: int) -> Candidate | Rejection:
    """Threads per CTA."""
    return _set(candidate, Action("set_block", (threads,)), block=threads)


@TRANSFORMS.register("apply_vectorize", ArgSpec("width", DOMAINS["vec"], "floats per access",
                                                field="vec"))
def apply_vectorize(candidate: Candidate, width: int) -> Candidate | Rejection:
    """float2 / float4 loads and stores where the pointers allow."""
    return _set(candidate, Action("apply_vectorize", (width,)), vec=width)


@TRANSFORMS.register("set_items", ArgSpec("items", DOMAINS["items"],
                                          "vector accesses per thread", field="items"))
def set_items(candidate: Candidate, items: int) -> Candidate | Rejection:
    """Vector accesses per thread (fewer, fuller CTAs)."""
    return _set(candidate, Action("set_items", (items,)), items=items)


@lru_cache(maxsize=1)
def _template() -> jinja2.Template:
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True, keep_trailing_newline=True, autoescape=False)
    return env.from_string(resources.files(__package__).joinpath("kernel.cu.j2").read_text())


class ScaleAdd(FamilyBase):
    """The family object."""

    name = NAME
    description = "y = 2 x + 1, fp32 (a test family)"
    dims = (Dim("n", "elements", 1, 1 << 30),)
    default_dims = Dims(n=1 << 24)
    signature = Signature(buffers=(Buffer("x", "n"), Buffer("y", "n", role="out")),
                          scalars=(Scalar("n", "n"),))
    metric = Metric("bytes", "8 * n", "copy_bandwidth", doc="one read and one write of fp32")
    correctness = CorrectnessRule("scaled", doc="error over 2|x| + 1")
    distributions = (Distribution("normal", Fill("normal")),
                     Distribution("uniform", Fill("uniform")))
    edge_shapes = (Dims(n=1), Dims(n=7), Dims(n=1027), Dims(n=100_003))
    vendor = None
    transforms = TRANSFORMS
    baseline = ScaleAddParams()

    def params_from_dict(self, data: dict[str, Any]) -> ScaleAddParams:
        """Parameters from JSON; ``ValueError`` names an unknown or out-of-domain one."""
        unknown = sorted(set(data) - set(DOMAINS))
        if unknown:
            raise ValueError(f"unknown parameter(s) {unknown}")
        for key, value in data.items():
            if value not in DOMAINS[key] or isinstance(value, bool):
                raise ValueError(f"parameter {key}={value!r} is outside {list(DOMAINS[key])}")
        return ScaleAddParams(**{**asdict(self.baseline), **data})

    def domains(self) -> dict[str, tuple[Any, ...]]:
        """Every field's values."""
        return dict(DOMAINS)

    def space(self, arch: str = "sm_90") -> list[ScaleAddParams]:
        """All 36 points."""
        return [ScaleAddParams(b, v, i) for b in DOMAINS["block"] for v in DOMAINS["vec"]
                for i in DOMAINS["items"]]

    def sample(self, rng: Any, n: int, arch: str = "sm_90") -> list[ScaleAddParams]:
        """``n`` distinct points."""
        points = self.space(arch)
        return (rng or random.Random(0)).sample(points, min(n, len(points)))

    def validate(self, params: ScaleAddParams, arch: str = "sm_90") -> Rejection | None:
        """Every point of the domains is valid."""
        for key, value in params.to_dict().items():
            if value not in DOMAINS[key]:
                return Rejection("out_of_domain", f"{key}={value} is outside "
                                 f"{list(DOMAINS[key])}", {key: value})
        return None

    def for_shape(self, params: ScaleAddParams, dims: Dims) -> ScaleAddParams:
        """Any point runs at any shape."""
        return params

    def render(self, params: ScaleAddParams) -> str:
        """The CUDA source."""
        return _template().render(p=params, params_json=json.dumps(params.to_dict(),
                                                                   sort_keys=True))

    def compile_arch(self, params: ScaleAddParams, arch: str) -> str:
        """The GPU's own arch."""
        return arch

    def max_smem_limit(self, arch: str) -> int:
        """No shared memory is used; the usual 48 KiB static limit."""
        return 48 * 1024

    def dynamic_smem_bytes(self, params: ScaleAddParams) -> int:
        """None."""
        return 0

    def threads_per_block(self, params: ScaleAddParams) -> int:
        """``block``."""
        return params.block

    def fixed_dims(self, params: ScaleAddParams) -> Dims | None:
        """Never specialized."""
        return None

    def launch(self, params: ScaleAddParams, dims: Dims, sm_count: int = DEFAULT_SM_COUNT
               ) -> LaunchConfig | Rejection:
        """One CTA per ``block * vec * items`` elements."""
        grid = -(-dims.n // (params.block * params.vec * params.items))
        if grid > MAX_GRID_X:
            return Rejection("grid_limit", f"{grid} CTAs exceed the grid's x limit",
                             {"grid_x": grid})
        return LaunchConfig(NAME, (grid, 1, 1), (params.block, 1, 1), 0)

    def reference_source(self) -> str:
        """The float64 reference."""
        return resources.files(__package__).joinpath("reference.cu").read_text()

    def reference_launch(self, dims: Dims) -> LaunchConfig:
        """A grid-stride loop."""
        return LaunchConfig("reference_scale_add", (min(-(-dims.n // 256), 4096), 1, 1),
                            (256, 1, 1), 0)

    def expert_moves(self, ctx: RuleContext) -> list[tuple[str, str]]:
        """Wider accesses first, then fuller CTAs."""
        if ctx.incumbent is None:
            return []
        p = ctx.incumbent.params
        moves = []
        if p.vec < 4:
            moves.append((f"apply_vectorize({p.vec * 2})",
                          f"{4 * p.vec}-byte accesses: a memory-bound kernel wants 16"))
        if p.block < 256:
            moves.append((f"set_block({p.block * 2})", f"{p.block} threads a CTA"))
        if p.items < 4:
            moves.append((f"set_items({p.items * 2})", "more bytes in flight per thread"))
        return moves

    def held_until_settled(self, action: Action) -> bool:
        """Nothing is held back."""
        return False

    def sanitizer_shapes(self, params: ScaleAddParams) -> list[Dims]:
        """A tail and a misaligned length."""
        return [Dims(n=1), Dims(n=params.block * params.vec * params.items + 3)]

    def replay_datasets(self) -> list[Any]:
        """Measured on an H200 (``tests/data/scale_add-h200.jsonl.gz``), when recorded."""
        path = Path(__file__).resolve().parents[2] / "data" / "scale_add-h200.jsonl.gz"
        return [path] if path.exists() else []


FAMILY = ScaleAdd()
