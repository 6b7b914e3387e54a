"""Replay datasets: measurements of a family's space recorded on a GPU, one JSON object per line
(gzip allowed), keyed by the point's canonical parameters and the shape's text (``str(dims)``:
``4096x4096x4096``). Read by the replay backend (``worker/evaluate.py``), the agent's spaces
and the benchmarks."""

from __future__ import annotations

import copy
import gzip
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kernels.base import Dims, params_key


def domains_of(family: Any, rows: Iterable[dict[str, Any]],
               start: dict[str, list[Any]] | None = None) -> dict[str, list[Any]]:
    """Every value each of ``family``'s fields takes in ``rows`` (their ``params``: the fields
    a point's JSON leaves out at their defaults included), added to ``start``, each list sorted
    (numbers as numbers): a replay meta line's domains, the moves a replay space offers."""
    out = {k: list(v) for k, v in (start or {}).items()}
    for row in rows:
        point = family.params_from_dict(row["params"])
        for name in family.domains():
            value = getattr(point, name)
            if value not in out.setdefault(name, []):
                out[name].append(value)
    return {k: sorted(v, key=lambda x: (str(type(x)), x)) for k, v in out.items()}


class ReplayDataset:
    """Measurements of a space on one GPU, one JSON object per line (gzip allowed)."""

    def __init__(self, path: Path, family: Any = None) -> None:
        self.path = Path(path)
        self._normalize = family
        opener = gzip.open if self.path.suffix == ".gz" else open
        self.meta: dict[str, Any] = {}
        self.points: dict[tuple[str, str], dict[str, Any]] = {}
        self._shapes: list[str] | None = None
        with opener(self.path, "rt") as fh:
            for line in fh:
                if not line.strip():
                    continue
                row = json.loads(line)
                if row.get("kind") == "meta":
                    self.meta = row
                    continue
                self.points[(self._key(row["params"]), row["shape"])] = row

    def _key(self, params: dict[str, Any]) -> str:
        # rows measured before a field was added lack it: the family fills its default
        if self._normalize is not None:
            params = self._normalize.params_from_dict(params).to_dict()
        return params_key(params)

    def use_family(self, family: Any) -> None:
        """Key the rows by the family's canonical parameters (all fields present)."""
        if self._normalize is family:
            return
        self._normalize = family
        self.points = {(self._key(r["params"]), s): r for (_, s), r in self.points.items()}
        self._shapes = None

    def get(self, params: dict[str, Any], shape: Dims) -> dict[str, Any] | None:
        """The measurement of a point, or None when it was not measured."""
        return self.points.get((self._key(params), str(shape)))

    def complete_space(self) -> ReplayDataset:
        """The rows of the sub-space measured whole (the meta line's ``space_domains``: every
        point of their product measured), without the rows merged in later from campaigns; the
        tuner-efficiency benchmarks and Kernel Tuner's cache compare strategies on it. The
        dataset itself when it has no ``space_domains`` (it is all one measured space)."""
        space = self.meta.get("space_domains")
        if not space:
            return self
        out = copy.copy(self)
        out.meta = {**self.meta, "domains": space}
        out.points = {key: row for key, row in self.points.items()
                      if all(name in space and value in space[name]
                             for name, value in row["params"].items())}
        out._shapes = None
        return out

    def provenance(self) -> tuple[str, str]:
        """When and from which commits the rows were measured: the meta line's date and commit,
        then those of every later merge into it (``meta["merged"]``), each listed once."""
        dates: list[str] = []
        commits: list[str] = []
        for entry in [self.meta, *self.meta.get("merged", [])]:
            for into, value in ((dates, entry.get("date")), (commits, entry.get("commit"))):
                if value and str(value) not in into:
                    into.append(str(value))
        return " and ".join(dates) or "an unknown date", ", ".join(commits) or "unknown"

    def shapes(self) -> list[str]:
        """Shapes present in the dataset (listed once: a replay compile asks for every
        candidate)."""
        if self._shapes is None:
            self._shapes = sorted({s for _, s in self.points})
        return self._shapes

    def ranked(self, shape: Dims) -> list[dict[str, Any]]:
        """The correct points measured at ``shape``, fastest first (equal times in the
        dataset's order)."""
        return sorted((r for (_, s), r in self.points.items()
                       if s == str(shape) and r["status"] == "ok" and r.get("perf")),
                      key=lambda r: r["perf"]["avg_us"])

    def best(self, shape: Dims) -> dict[str, Any] | None:
        """The fastest correct point at ``shape``."""
        return next(iter(self.ranked(shape)), None)
