"""bench/measure_neighbourhoods.py without a GPU: which tensor-core points it would measure
(the expert rule book's, best-first, then their neighbours), which softmax points, and that its
rows, merged into the shipped dataset, replay as measured while every other point stays
``not_measured``."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from agent.policies.base import key_of
from agent.spaces import FullSpace, ReplaySpace
from bench.measure_neighbourhoods import (
    derive,
    merge,
    neighbours,
    read_dataset,
    row_of,
    rule_moves,
    wanted_points,
    write_dataset,
)
from core.evaluation import CompileResult, Measurement
from core.replay import ReplayDataset
from kernels import get_family
from kernels.gemm_bias_relu import FAMILY
from kernels.gemm_bias_relu.shape import Shape
from worker.evaluate import ReplayEvaluator

SHAPE = Shape(4096, 4096, 4096)


def whole_space() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The shipped dataset's sub-space measured whole (the SIMT kernels; the campaigns'
    tensor-core rows merged since are left out): meta line and rows."""
    whole = ReplayDataset(FAMILY.replay_datasets()[0]).complete_space()
    return whole.meta, list(whole.points.values())


def test_the_rule_books_tensor_core_path_comes_first() -> None:
    shipped = {key_of(FAMILY.params_from_dict(r["params"])) for r in whole_space()[1]}
    first = list(itertools.islice(derive(SHAPE), 40))
    points = [p for p, _why in first]
    assert all(p.tf32x3 and FAMILY.validate(p, "sm_90") is None for p in points)
    assert len({key_of(p) for p in points}) == len(points)
    assert not any(key_of(p) in shipped for p in points)
    # cost 0: the rule book's first move each time, from the mma.sync entry to the
    # warp-specialized wgmma kernel
    path = [p for p, why in first if why == "rule book, cost 0"]
    assert not path[0].wgmma
    space = FullSpace(FAMILY, "sm_90")
    for before, after in itertools.pairwise(path):
        assert rule_moves(before, SHAPE, 1e-4, space)[0] == after
    assert path[-1].producers == 2
    # one deviation further: the precision splits, on the warp-specialized pipeline, the split
    # pass first
    assert any(p.bf16_split == 3 and p.producers for p in points)
    assert any(p.bf16_split == 6 for p in points)  # the rule book at 1e-5
    assert any(p.bf16_split == 3 and p.split_pass for p in points)
    # further on, the per-tile producers staged by cp.async
    later = [p for p, _why in itertools.islice(derive(SHAPE), 80)]
    assert any(p.bf16_split == 3 and p.async_copy for p in later)


def test_neighbours_follow_the_rule_points_and_no_split_means_nothing() -> None:
    found = list(derive(SHAPE))
    whys = [why for _p, why in found]
    ruled = [p for p, why in found if why.startswith("rule book")]
    last_rule = max(i for i, why in enumerate(whys) if why.startswith("rule book"))
    first_near = whys.index(next(w for w in whys if w.startswith("neighbour")))
    assert last_rule < first_near
    for params, why in found[first_near:first_near + 20]:
        origin = ruled[int(why.rsplit("#", 1)[1])]
        assert key_of(params) in {key_of(p) for p in neighbours(origin, SHAPE)}
    # a tolerance no split meets: the rule book never leaves the SIMT kernel
    assert list(derive(SHAPE, tolerances=(1e-7,))) == []


def test_rows_merge_into_the_dataset_and_replay_as_measured(tmp_path: Path) -> None:
    points = [p for p, _why in itertools.islice(derive(SHAPE), 40)]
    bf16 = next(p for p in points if p.bf16_split == 3 and p.producers == 2)
    tf32 = next(p for p in points if p.producers and not p.bf16_split)
    other = next(p for p in points if p.wgmma and p not in (bf16, tf32))
    compiled = CompileResult("ok", 2.5, regs_per_thread=168, static_smem_bytes=0,
                             dynamic_smem_bytes=FAMILY.dynamic_smem_bytes(bf16),
                             spill_store_bytes=0, spill_load_bytes=0)
    fake = Measurement("ok", correctness={"passed": True, "rel_err": 1.1e-5,
                                          "max_scaled_err": 1.4e-5, "tolerance": 1e-4},
                       perf={"avg_us": 700.0, "runs_us": [700.0, 701.0, 699.5],
                             "reps_per_run": 30, "vendor_us": 2725.9},
                       profile={"regs_per_thread": 168}, gpu_seconds=1.25)
    broken = CompileResult("error", 0.5, error="ptxas fatal: out of registers")
    base_meta, base_rows = whole_space()
    rows = [row_of(bf16, SHAPE, compiled, fake), row_of(tf32, SHAPE, broken, None),
            {**base_rows[1], "status": "wrong"}]  # a point the dataset has: its row stays
    assert rows[0]["compile"]["regs_per_thread"] == 168
    assert rows[1]["status"] == "compile_error"
    meta = {"kind": "meta", "date": "2026-12-02", "commit": "abc1234", "gpu": "NVIDIA H200",
            "method": "test", "note": "fake measurements: tests the writer only"}
    path = tmp_path / "merged.jsonl.gz"
    write_dataset(path, *merge(base_meta, base_rows, meta, rows))
    merged_meta, merged_rows = read_dataset(path)
    assert len(merged_rows) == len(base_rows) + 2
    assert merged_meta["merged"][-1]["rows"] == 2
    assert 3 in merged_meta["domains"]["bf16_split"]
    assert merged_meta["domains"]["tf32x3"] == [False, True]

    dataset = ReplayDataset(path, FAMILY)
    space = ReplaySpace(FAMILY, dataset, str(SHAPE))
    assert space.contains(bf16)
    assert space.contains(tf32)
    assert not space.contains(other)
    assert space.domains["bf16_split"] == (0, 3)
    ev = ReplayEvaluator(FAMILY, dataset)
    got = ev.measure(bf16, ev.compile(bf16).result(), shape=SHAPE, iteration=1, seed=0)
    assert got.status == "ok"
    assert got.perf is not None
    assert got.perf["avg_us"] == 700.0
    assert ev.compile(tf32).result().failure_status == "compile_error"
    assert ev.compile(other).result().status == "not_measured"
    kept = FAMILY.params_from_dict(base_rows[1]["params"])
    assert ev.measure(kept, ev.compile(kept).result(), shape=SHAPE, iteration=1,
                      seed=0).status == base_rows[1]["status"]


def test_softmax_walk_measures_tritons_arrangement_first_and_nothing_measured() -> None:
    """At 16384x1024 the rule book's first points the softmax dataset lacks are one row a CTA
    of 4, 2 and 8 warps (Triton's count, then half and twice) with Triton's code; none the
    dataset has at the shape, each valid, none twice."""
    softmax = get_family("softmax")
    shape = softmax.parse_dims("16384x1024")
    _meta, rows = read_dataset(softmax.replay_datasets()[0])
    found = wanted_points(softmax, [shape, softmax.parse_dims("4096x32768")], rows, None, 12)
    assert len(found) == 24
    here = [p for p, d, _why in found if d == shape]
    known = {key_of(softmax.params_from_dict(r["params"])) for r in rows
             if r["shape"] == "16384x1024"}
    assert not {key_of(p) for p in here} & known
    assert len({key_of(p) for p in here}) == len(here)
    assert all(softmax.validate(p, "sm_90") is None for p in here)
    # Triton's arrangements with its code (max first, whole vector stores), the plan with that
    # code among them
    first = [(p.block_threads, p.row_threads, p.chunks) for p in here[:4]]
    assert [f for f in first if f[0] == f[1]] == [(128, 128, 2), (64, 64, 4), (256, 256, 1)]
    assert all(p.max_first and p.ptx_stores for p in here[:4])
    longer = [p for p, d, _why in found if str(d) == "4096x32768"]
    assert (longer[1].block_threads, longer[1].cluster, longer[1].chunks) == (512, 1, 16)
    # the softmax walk's rows are written as the GEMM's are
    broken = CompileResult("error", 0.5, error="ptxas fatal")
    row = row_of(here[0], shape, broken, None, softmax)
    assert (row["shape"], row["status"]) == ("16384x1024", "compile_error")
