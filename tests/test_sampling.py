"""The stratified sample the nvcc sweeps compile by default (``tests/sampling.py``) covers every
transform or hand-picked set and every parameter value of the whole sweep, the same on every
run."""

from __future__ import annotations

from bf16_points import bf16_variants
from frag_prefetch_points import WIDE, variants
from sampling import group_of, param_values, stratified
from test_softmax_family import transform_points


def test_the_softmax_sample_covers_every_transform_and_value_of_the_sweep() -> None:
    points = transform_points()
    sample = stratified(points, at_least=(lambda p: bool(p.bulk), 10))
    assert len(sample) < len(points) // 4
    assert {group_of(label) for label, _ in sample} == {group_of(label) for label, _ in points}
    assert set().union(*(param_values(p) for _, p in sample)) == \
        set().union(*(param_values(p) for _, p in points))
    assert sum(bool(p.bulk) for _, p in sample) >= 10
    assert [label for label, _ in sample] == \
        [label for label, _ in stratified(points, at_least=(lambda p: bool(p.bulk), 10))]
    assert [i for i, point in enumerate(points) if point in sample] == \
        sorted(points.index(point) for point in sample)  # in the sweep's order


def test_kept_points_are_in_the_sample_and_every_value_is_covered() -> None:
    for points, keep in ((variants(), [WIDE]), (bf16_variants(), [])):
        labelled = [(str(i), p) for i, p in enumerate(points)]
        sample = [p for _, p in stratified(labelled, keep=keep,
                                           strata=lambda _, p: param_values(p))]
        assert all(p in sample for p in keep)
        assert set().union(*(param_values(p) for p in sample)) == \
            set().union(*(param_values(p) for p in points))
