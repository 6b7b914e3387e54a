"""A deterministic stratified sample of a list of labelled kernel points, for the tests that put
points through the real nvcc: ``make test`` compiles the sample, ``make test-full`` (pytest
``--full``) every point.

The sample covers every stratum at least once: each label's group (the transform or hand-picked
set a point came from: the label up to its first ``(`` or space) and each value of each
parameter that any point takes. It is chosen greedily (the point covering most strata not yet
covered, the earliest on a tie), so it is the same on every run and machine.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import fields, is_dataclass
from typing import Any, TypeVar

T = TypeVar("T")


def group_of(label: str) -> str:
    """``"apply_unroll(4)"`` -> ``"apply_unroll"``; ``"bulk plan 4x8"`` -> ``"bulk"``."""
    return label.split("(")[0].split(" ")[0]


def param_values(params: Any) -> set[tuple[str, Hashable]]:
    """``(field, value)`` for each field of a dataclass point."""
    assert is_dataclass(params), params
    return {(f.name, getattr(params, f.name)) for f in fields(params)}


def stratified(points: Sequence[tuple[str, T]],
               strata: Callable[[str, T], Iterable[Hashable]] | None = None,
               at_least: tuple[Callable[[T], bool], int] | None = None,
               keep: Iterable[T] = ()) -> list[tuple[str, T]]:
    """The points, in their order, of a greedy cover of every stratum of ``points``
    (default: the label's group and each parameter value); with ``at_least=(kind, n)``, then
    the first points of that kind not chosen yet until ``n`` chosen points are of it. The
    points of ``keep`` are chosen first (a test that looks one of them up)."""
    def default(label: str, p: T) -> Iterable[Hashable]:
        return [("group", group_of(label)), *param_values(p)]

    of = strata or default
    each = [set(of(label, p)) for label, p in points]
    left: set[Hashable] = set().union(*each) if each else set()
    kept = list(keep)
    chosen = {i for i, (_, p) in enumerate(points) if p in kept}
    for i in chosen:
        left -= each[i]
    while left:
        best = max(range(len(points)), key=lambda i: (len(each[i] & left), -i))
        chosen.add(best)
        left -= each[best]
    if at_least is not None:
        kind, n = at_least
        for i, (_, p) in enumerate(points):
            if sum(kind(points[j][1]) for j in chosen) >= n:
                break
            if kind(p):
                chosen.add(i)
    return [points[i] for i in sorted(chosen)]


def sample_unless_full(points: Sequence[T], full: bool,
                       marks: Callable[[T], Iterable[Hashable]] = lambda _: ()) -> list[T]:
    """``points`` whole under ``--full``; else a stratified sample covering each value of each
    parameter and each of ``marks`` (strata a point's fields do not show, such as what its
    rendered source holds)."""
    if full:
        return list(points)
    return [p for _, p in stratified([(str(i), p) for i, p in enumerate(points)],
                                     strata=lambda _, p: [*param_values(p), *marks(p)])]
