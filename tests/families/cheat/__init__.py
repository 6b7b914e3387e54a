"""``cheat``: ``y = 2 x + 1`` (``scale_add``'s arithmetic and float64 reference) with a planted
behaviour chosen by the ``mode`` tunable — the kernels a hostile or careless user could send.

Tests only, never under ``kernels/``. ``honest`` computes on every launch. Timer games, each
passing the checks run before the timing:

- ``first_launch``: computes on its first launch only, then returns at once (a ``__device__``
  key recorded by the launch's last block);
- ``partial``: the first launch at a length writes everything, later ones at the same length
  the first half only;
- ``pointer_cache``: skips all work when the input pointer is the one of the last launch;
- ``skip_if_written``: each block skips its work when the first output element it owns holds a
  number, not the NaN poison (no device state: the output tells it the work was done).

Faults a user's kernel can have: ``illegal_address`` (a store 1 TiB past the output: the CUDA
context is lost), ``hang`` (waits for a ``__device__`` flag nobody sets), ``too_many_threads``
(launched with 2048 threads a block) and ``too_much_smem`` (asks for 256 KiB of dynamic shared
memory, more than any GPU gives a block). The family refuses none of them, as a user's spec
that the checks before nvcc did not catch.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import jinja2

from families.scale_add import ScaleAdd
from kernels.base import (
    DEFAULT_SM_COUNT,
    Dims,
    LaunchConfig,
    Rejection,
    TransformRegistry,
)
from kernels.family import RuleContext

NAME = "cheat"
CHEATS = ("first_launch", "partial", "pointer_cache")
FAULTS = ("illegal_address", "hang", "too_many_threads", "too_much_smem")
SKIP_IF_WRITTEN = "skip_if_written"
MODES = ("honest", *CHEATS, SKIP_IF_WRITTEN, *FAULTS)
DOMAINS: dict[str, tuple[Any, ...]] = {"mode": MODES, "block": (128, 256)}
#: blocks a launch at most: a grid-stride loop, so that a skipping launch costs next to nothing
MAX_BLOCKS = 1024
TOO_MANY_THREADS = 2048
TOO_MUCH_SMEM = 256 * 1024


@dataclass(frozen=True)
class CheatParams:
    """The planted behaviour and the threads per CTA."""

    mode: str = "honest"
    block: int = 256

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)

    def canonical(self) -> CheatParams:
        """Itself (every field matters)."""
        return self


@lru_cache(maxsize=1)
def _template() -> jinja2.Template:
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True, keep_trailing_newline=True, autoescape=False)
    return env.from_string(resources.files(__package__).joinpath("kernel.cu.j2").read_text())


class Cheat(ScaleAdd):
    """``scale_add``'s dimensions, signature, distributions, edge shapes and reference; its own
    kernel, points and launches."""

    name = NAME
    description = "y = 2 x + 1 with a planted cheat or fault (a test family)"
    vendor = None
    transforms = TransformRegistry()
    baseline = CheatParams()  # type: ignore[assignment]

    def params_from_dict(self, data: dict[str, Any]) -> CheatParams:  # type: ignore[override]
        """Parameters from JSON; ``ValueError`` names an unknown or out-of-domain one."""
        unknown = sorted(set(data) - set(DOMAINS))
        if unknown:
            raise ValueError(f"unknown parameter(s) {unknown}")
        for key, value in data.items():
            if value not in DOMAINS[key] or isinstance(value, bool):
                raise ValueError(f"parameter {key}={value!r} is outside {list(DOMAINS[key])}")
        return CheatParams(**{**asdict(self.baseline), **data})

    def domains(self) -> dict[str, tuple[Any, ...]]:
        """Every field's values."""
        return dict(DOMAINS)

    def space(self, arch: str = "sm_90") -> list[CheatParams]:  # type: ignore[override]
        """Every mode at every block size."""
        return [CheatParams(m, b) for m in MODES for b in DOMAINS["block"]]

    def sample(self, rng: Any, n: int, arch: str = "sm_90") -> list[CheatParams]:  # type: ignore[override]
        """``n`` distinct points."""
        points = self.space(arch)
        return (rng or random.Random(0)).sample(points, min(n, len(points)))

    def validate(self, params: Any, arch: str = "sm_90") -> Rejection | None:
        """Every point of the domains is valid (the faults are meant to reach the GPU)."""
        for key, value in params.to_dict().items():
            if value not in DOMAINS[key]:
                return Rejection("out_of_domain", f"{key}={value} is outside "
                                 f"{list(DOMAINS[key])}", {key: value})
        return None

    def render(self, params: Any) -> str:
        """The CUDA source of the point's mode."""
        return _template().render(p=params, params_json=json.dumps(params.to_dict(),
                                                                   sort_keys=True))

    def max_smem_limit(self, arch: str) -> int:
        """The Hopper opt-in limit of dynamic shared memory a block (227 KiB)."""
        return 232448

    def dynamic_smem_bytes(self, params: Any) -> int:
        """256 KiB for ``too_much_smem``, else none."""
        return TOO_MUCH_SMEM if params.mode == "too_much_smem" else 0

    def threads_per_block(self, params: Any) -> int:
        """``block``; 2048 for ``too_many_threads``."""
        return TOO_MANY_THREADS if params.mode == "too_many_threads" else int(params.block)

    def launch(self, params: Any, dims: Dims, sm_count: int = DEFAULT_SM_COUNT
               ) -> LaunchConfig | Rejection:
        """A grid-stride loop over at most 1024 CTAs."""
        threads = self.threads_per_block(params)
        grid = max(1, min(-(-dims.n // threads), MAX_BLOCKS))
        return LaunchConfig(NAME, (grid, 1, 1), (threads, 1, 1), self.dynamic_smem_bytes(params))

    def expert_moves(self, ctx: RuleContext) -> list[tuple[str, str]]:
        """None: the points are chosen by the tests."""
        return []

    def sanitizer_shapes(self, params: Any) -> list[Dims]:
        """A tail and a length past one grid."""
        return [Dims(n=1), Dims(n=MAX_BLOCKS * int(params.block) + 3)]

    def replay_datasets(self) -> list[Any]:
        """None recorded."""
        return []


FAMILY = Cheat()
