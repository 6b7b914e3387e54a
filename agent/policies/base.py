"""The policy interface: ``propose(ctx, n) -> list[Proposal]``, and what a policy may read.

Everything a policy knows comes from :class:`PolicyContext`, built from the database by the
engine (so the Celery agent and embedded mode decide alike, and any decision can be replayed). A
policy may keep what it derived from a campaign's history between calls (keyed by
``ctx.campaign_id``) to avoid recomputing it, but only as a cache: a decision must be the one the
context alone gives, in whichever process, after whichever other process decided last.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, Protocol

from kernels.base import Action, Candidate, Dims, Rejection, params_key
from kernels.family import DEFAULT_TOLERANCE


@dataclass(frozen=True)
class Proposal:
    """A point to evaluate next, how it was reached and why."""

    params: Any
    action: str
    reason: str
    proposed_by: str
    parent_id: str | None = None


@dataclass
class HistoryItem:
    """What a policy knows of one evaluated (or in-flight) candidate."""

    id: str
    iteration: int
    params: Any
    key: str
    status: str
    action: str | None = None
    parent_id: str | None = None
    avg_us: float | None = None
    accepted: bool = False
    compile: dict[str, Any] | None = None
    profile: dict[str, Any] | None = None
    correctness: dict[str, Any] | None = None
    improvement_pct: float | None = None


class SearchSpace(Protocol):
    """The points a backend can evaluate (all valid points on a GPU; the measured ones in a
    replay)."""

    domains: dict[str, tuple[Any, ...]]

    def contains(self, params: Any) -> bool:
        """Whether ``params`` can be evaluated here."""
        ...

    def sample(self, rng: random.Random, n: int) -> list[Any]:
        """Up to ``n`` distinct points drawn uniformly (random search)."""
        ...


@dataclass(frozen=True)
class ShapeOutcome:
    """What was found at another shape of a shape set: its best point and time, and the mean
    share of the incumbent's time each transform saved there (in %, clipped to +-50)."""

    shape: str
    #: :func:`agent.shapesets.shape_distance` from the campaign's shape
    distance: float
    best_params: Any
    best_us: float
    payoffs: dict[str, float]


@dataclass
class PolicyContext:
    """Everything a policy may use to decide."""

    family: Any
    space: SearchSpace
    arch: str
    incumbent: HistoryItem | None
    history: list[HistoryItem]
    seed: int
    iteration: int
    threshold_pct: float
    allowed_actions: set[str] | None = None
    stagnation: int = 0
    settings: Any = None
    #: the campaign's problem shape (shape-dependent transforms and rules need it)
    shape: Dims | None = None
    #: the device the campaign measures on (``sm_count`` and limits), when known
    device: dict[str, Any] | None = None
    #: the campaign's correctness tolerance (the campaigns' default when not given)
    tolerance: float = DEFAULT_TOLERANCE
    #: the campaign decided for (what a policy keys its memory of the campaign by), when known
    campaign_id: str | None = None
    #: the outcomes at the other shapes of the campaign's shape set, nearest first
    other_shapes: tuple[ShapeOutcome, ...] = ()
    #: set by a policy to report what happened (an LLM's invalid answer, a fallback, …)
    notes: list[dict[str, Any]] = field(default_factory=list)
    _explored: set[str] | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def explored(self) -> set[str]:
        """Keys of every point already evaluated or in flight (computed once: a context is
        built per decision and its history does not change while a policy reads it)."""
        if self._explored is None:
            self._explored = {h.key for h in self.history}
        return self._explored

    def rng(self, salt: int = 0) -> random.Random:
        """A generator seeded by campaign seed, iteration and ``salt`` (replayable)."""
        return random.Random((self.seed * 1_000_003 + self.iteration * 7919 + salt) & 0xFFFFFFFF)

    def action_allowed(self, name: str) -> bool:
        """Whether a transform name may be used in this campaign."""
        return self.allowed_actions is None or name in self.allowed_actions

    def point(self, params: Any) -> Candidate:
        """``params`` as a transform's starting point, carrying the campaign's shape."""
        return Candidate(params, shape=self.shape)

    def fresh(self, params: Any) -> bool:
        """Valid here, in the space, and not explored yet."""
        if self.family.validate(params, self.arch) is not None:
            return False
        return self.space.contains(params) and key_of(params) not in self.explored

    def sample_unexplored(self, rng: random.Random, n: int, seen: set[str]) -> list[Any]:
        """Up to ``n`` distinct points drawn uniformly from the space, none explored and none
        in ``seen`` (which gains their keys)."""
        out: list[Any] = []
        # draw more than needed: some draws are explored already
        for params in self.space.sample(rng, n + len(self.explored) + 16):
            key = key_of(params)
            if key in seen or not self.fresh(params):
                continue
            seen.add(key)
            out.append(params)
            if len(out) >= n:
                break
        return out

    def in_domains(self, spec: Any, action: Action) -> bool:
        """Whether every argument of ``action`` lies in the space's domain of the field it
        sets (a replay space measured some values of a field only)."""
        return all(_in_domain(self.space.domains, spec, a, v)
                   for a, v in zip(spec.args, action.args, strict=True))

    def neighbours(self, start: HistoryItem | None = None) -> Iterator[tuple[Action, Any]]:
        """One-transform moves from ``start`` (default the incumbent) to fresh points."""
        origin = start or self.incumbent
        if origin is None:
            return
        node = self.point(origin.params)
        seen: set[str] = set()
        for spec in self.family.transforms:
            if spec.name == "revert_last" or not self.action_allowed(spec.name):
                continue
            for action in spec.actions():
                if not self.in_domains(spec, action):
                    continue
                result = self.family.apply(node, action)
                if isinstance(result, Rejection):
                    continue
                key = key_of(result.params)
                if key in seen or not self.fresh(result.params):
                    continue
                seen.add(key)
                yield action, result.params


def _in_domain(domains: dict[str, tuple[Any, ...]], spec: Any, arg: Any, value: Any) -> bool:
    if arg.field is None or arg.field not in domains:
        return True
    return value in domains[arg.field]


def key_of(params: Any) -> str:
    """Canonical key of a point (the same as ``params_key(params.canonical().to_dict())``)."""
    canonical = params.canonical()
    if is_dataclass(canonical):
        # a shallow dict: ``asdict`` deep-copies every field, and policies key thousands of
        # points per decision; fields added late are left out at their defaults, as
        # ``to_dict`` does (``OMITTED_AT_DEFAULT``), so older points keep their keys
        omit = getattr(canonical, "OMITTED_AT_DEFAULT", {})
        shallow = {f.name: getattr(canonical, f.name) for f in fields(canonical)}
        return params_key({k: v for k, v in shallow.items()
                           if k not in omit or v != omit[k]})
    return params_key(canonical.to_dict())


class Policy(Protocol):
    """Chooses the next points to evaluate."""

    name: str

    def propose(self, ctx: PolicyContext, n: int) -> list[Proposal]:
        """Up to ``n`` fresh proposals (fewer, or none, when the space is exhausted)."""
        ...


def take_unique(items: Iterable[Proposal], n: int) -> list[Proposal]:
    """The first ``n`` proposals with distinct points."""
    out: list[Proposal] = []
    seen: set[str] = set()
    for item in items:
        key = key_of(item.params)
        if key in seen:
            continue
        seen.add(key)
        out.append(item)
        if len(out) >= n:
            break
    return out


PolicyFactory = Callable[[], Policy]
