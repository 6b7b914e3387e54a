"""Search spaces: every valid point on a GPU; the measured points in a replay."""

from __future__ import annotations

from typing import Any

from agent.policies.base import key_of
from core.replay import ReplayDataset


class FullSpace:
    """All valid points of a family (a GPU evaluates any of them)."""

    def __init__(self, family: Any, arch: str) -> None:
        self.family = family
        self.arch = arch
        self.domains: dict[str, tuple[Any, ...]] = family.domains()

    def contains(self, params: Any) -> bool:
        """Valid on this arch."""
        return self.family.validate(params, self.arch) is None

    def sample(self, rng: Any, n: int) -> list[Any]:
        """``n`` distinct valid points drawn uniformly (the space is too large to list)."""
        return list(self.family.sample(rng, n, self.arch))


class ReplaySpace:
    """The points a replay dataset measured at the campaign's shape."""

    def __init__(self, family: Any, dataset: ReplayDataset, shape: str) -> None:
        self.family = family
        self._points = {}
        for (_key, s), row in dataset.points.items():
            if s == shape:
                params = family.params_from_dict(row["params"])
                self._points[key_of(params)] = params
        if not self._points:
            raise ValueError(f"the replay dataset has no measurement at shape {shape}; "
                             f"it has {', '.join(dataset.shapes())}")
        domains = dataset.meta.get("domains") or {}
        self.domains: dict[str, tuple[Any, ...]] = {k: tuple(v) for k, v in domains.items()}
        for name in family.domains():  # fields added after the measurement: default only
            self.domains.setdefault(name, (getattr(family.baseline, name),))

    def contains(self, params: Any) -> bool:
        """Measured in the dataset."""
        return key_of(params) in self._points

    def points(self) -> list[Any]:
        """Every measured point."""
        return list(self._points.values())

    def sample(self, rng: Any, n: int) -> list[Any]:
        """``n`` distinct measured points drawn uniformly."""
        points = self.points()
        return rng.sample(points, min(n, len(points)))
