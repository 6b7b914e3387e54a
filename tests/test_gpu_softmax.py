"""GPU tests of the softmax family through the project's evaluator (``pytest -m gpu``):
correctness of every transform's points and the rule book's plans on the awkward shapes and
every distribution, the bulk-copy points on theirs, and the plans timed beside
``torch.softmax``.

Written against the public evaluator API (``GpuEvaluator(family, compiler)``, ``measure``,
``vendor_us``), generic over the family's signature; figures go to ``$TUNEFORGE_GPU_OUT``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest
from gpu_support import check_sustained_two_ways, save
from softmax_bulk_points import BULK_PICKS, PREFETCH_PICKS, SPREAD_PICKS, STAGED_PICKS

from kernels.base import Candidate, Dims, Rejection
from kernels.softmax import FAMILY, SoftmaxParams
from kernels.softmax.rules import bulk_plan, plan
from worker.compile import Compiler
from worker.evaluate import EvalOptions, GpuEvaluator
from worker.gpu_runner import ChildUnavailable

pytestmark = pytest.mark.gpu

SWEEP = ((65536, 128), (32768, 512), (16384, 1024), (8192, 4096), (8192, 8192), (4096, 32768),
         (2048, 65536), (1024, 131072), (256, 262144), (16, 262144))
BLOCK_ROW = SoftmaxParams(block_threads=512, row_threads=512, vec=4, passes=1, chunks=4)


def dims(rows: int, cols: int) -> Any:
    # Any: the evaluator's signatures still name the GEMM's Shape until they take Dims
    return Dims({"rows": rows, "cols": cols})


EDGE_SHAPES: Any = FAMILY.edge_shapes


@pytest.fixture(scope="module")
def evaluator(compiler: Compiler) -> Iterator[GpuEvaluator]:
    # module fixtures are set up before the autouse skip of gpu-marked tests: skip here first,
    # so that no evaluator is built where there is no GPU
    from conftest import gpu_unavailable_reason

    reason = gpu_unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    try:
        ev = GpuEvaluator(FAMILY, compiler, options=EvalOptions(
            timeout_s=60.0, edge_shapes=EDGE_SHAPES))
    except ChildUnavailable as exc:
        pytest.skip(f"no GPU evaluation here: {exc}")
    yield ev
    ev.close()


def points() -> list[tuple[str, SoftmaxParams]]:
    """The baseline, every transform's actions from three starts, the sweep's plans, and the
    staged and spread picks."""
    starts = [FAMILY.baseline,
              SoftmaxParams(block_threads=256, row_threads=32, vec=4, passes=2, unroll=4),
              BLOCK_ROW, replace(BLOCK_ROW, cluster=4)]
    out: list[tuple[str, SoftmaxParams]] = [("baseline", FAMILY.baseline)]
    for spec in FAMILY.transforms:
        for start in starts:
            for action in spec.actions():
                result = FAMILY.apply(Candidate(start), action)
                if isinstance(result, Candidate):
                    out.append((str(action), result.params))
    out += [(f"plan {r}x{c}", plan(r, c)) for r, c in SWEEP]
    out += [(f"staged {name}", q) for name, q in STAGED_PICKS.items()]
    out += [(f"spread {name}", q) for name, q in SPREAD_PICKS.items()]
    unique: dict[SoftmaxParams, str] = {}
    for label, p in out:
        unique.setdefault(p.canonical(), label)
    return [(label, p) for p, label in unique.items()]


def test_points_correct_on_awkward_shapes_and_every_distribution(
        evaluator: GpuEvaluator) -> None:
    """Each point at its own sanitizer shapes (capacity +- a vector, misaligned rows, rows past
    one CTA's pack) and the family's edge shapes (1x1 .. 3x1000003), every distribution."""
    checked = GpuEvaluator.__new__(GpuEvaluator)
    checked.__dict__.update(evaluator.__dict__)
    checked.options = EvalOptions(timeout_s=60.0, edge_shapes=EDGE_SHAPES, bench=False)
    pts = points()
    futures = [evaluator.compile(p) for _, p in pts]
    rows: list[dict[str, Any]] = []
    for i, ((label, p), fut) in enumerate(zip(pts, futures, strict=True)):
        compiled = fut.result()
        assert compiled.status == "ok", (label, compiled.error)
        shapes: list[Any] = FAMILY.sanitizer_shapes(p)[-2:]
        for shape in shapes:
            m = checked.measure(p, compiled, shape=shape, iteration=i, seed=17, verify=True)
            cases = (m.correctness or {}).get("cases", [])
            rows.append({"label": label, "params": p.to_dict(), "shape": str(shape),
                         "status": m.status, "error": m.error,
                         "failed": [c for c in cases if not c.get("passed")]})
    save("softmax_correctness", {"points": len(pts), "rows": rows})
    dists = {d.name for d in FAMILY.distributions}
    assert dists == {"normal", "large", "neg_inf", "constant"}
    failures = [r for r in rows if r["status"] != "ok" or r["failed"]]
    assert not failures, failures[:3]


def bulk_points() -> list[tuple[str, SoftmaxParams]]:
    """The hand-picked bulk-copy points (prefetching ones among them) and the rule book's bulk
    plans of the sweep."""
    out = list(BULK_PICKS.items()) + list(PREFETCH_PICKS.items())
    out += [(f"bulk plan {r}x{c}", q) for r, c in SWEEP if (q := bulk_plan(r, c)) is not None]
    unique: dict[SoftmaxParams, str] = {}
    for label, p in out:
        unique.setdefault(p.canonical(), label)
    return [(label, p) for p, label in unique.items()]


def test_bulk_points_correct_on_awkward_shapes_and_every_distribution(
        evaluator: GpuEvaluator) -> None:
    """The bulk-copy points (the copies, the mbarrier phases and the cluster's slices on the
    GPU itself) at every one of their sanitizer shapes (rows sharing a vector, rows past a
    CTA's pack, a row past what a CTA stages: the fallback), 16 rows of 262144, short rows
    past one grid's units, and the family's edge shapes, every distribution; a prefetching
    point also where its persistent grid has each CTA hold several tiles in turn."""
    checked = GpuEvaluator.__new__(GpuEvaluator)
    checked.__dict__.update(evaluator.__dict__)
    checked.options = EvalOptions(timeout_s=60.0, edge_shapes=EDGE_SHAPES, bench=False)
    pts = bulk_points()
    futures = [evaluator.compile(p) for _, p in pts]
    rows: list[dict[str, Any]] = []
    for i, ((label, p), fut) in enumerate(zip(pts, futures, strict=True)):
        compiled = fut.result()
        assert compiled.status == "ok", (label, compiled.error)
        assert not compiled.spill_bytes, (label, compiled.spill_bytes)
        shapes: list[Any] = FAMILY.sanitizer_shapes(p)
        shapes += [dims(16, 262144) if p.cluster > 1 else dims(70001, 131),
                   dims(p.rows_per_cta * 5 + 1, 1023)]
        if p.prefetch:  # a persistent grid, each CTA on several tiles it holds
            shapes.append(dims(100, 65536) if p.cluster > 1 else dims(300001, 128))
        for j, shape in enumerate(shapes):
            # the edge shapes once a point (its first shape), every distribution at each shape
            opts = None if j == 0 else replace(checked.options, edge_shapes=())
            m = checked.measure(p, compiled, shape=shape, iteration=i, seed=23, verify=True,
                                options=opts)
            cases = (m.correctness or {}).get("cases", [])
            rows.append({"label": label, "params": p.to_dict(), "shape": str(shape),
                         "status": m.status, "error": m.error,
                         "failed": [c for c in cases if not c.get("passed")]})
    save("softmax_bulk_correctness", {"points": len(pts), "rows": rows})
    assert len(pts) >= len(BULK_PICKS)
    failures = [r for r in rows if r["status"] != "ok" or r["failed"]]
    assert not failures, failures[:3]


def test_plans_beside_torch(evaluator: GpuEvaluator) -> None:
    """The rule book's plan at each sweep shape: correct, and its speed beside torch.softmax
    and the copy bandwidth recorded; the plan itself (a campaign's start, not its end) keeps up
    with torch on the geometric mean and is nowhere below 0.75x."""
    table: list[dict[str, Any]] = []
    for rows, cols in SWEEP:
        shape = dims(rows, cols)
        p = plan(rows, cols)
        compiled = evaluator.compile(p).result()
        assert compiled.status == "ok", compiled.error
        m = evaluator.measure(p, compiled, shape=shape, iteration=0, seed=5)
        assert m.status == "ok", (shape, m.error)
        us = float(m.perf["avg_us"])  # type: ignore[index]
        torch_us = evaluator.vendor_us(shape)
        table.append({"shape": str(shape), "params": p.to_dict(), "us": us,
                      "torch_us": torch_us,
                      "gbs": FAMILY.metric.rate(shape, us),
                      "pct_of_peak": (m.perf or {}).get("pct_of_peak"),
                      "x_torch": torch_us / us if torch_us else None})
    save("softmax_plans_vs_torch", {"rows": table})
    ratios: list[float] = [float(r["x_torch"]) for r in table if r["x_torch"]]
    assert ratios, "torch.softmax could not be timed"
    geomean = math.exp(sum(map(math.log, ratios)) / len(ratios))
    assert geomean >= 1.0, table
    assert min(ratios) >= 0.75, table  # 0.78x at 65536x128 (2026-12-01): short rows


@pytest.mark.parametrize(("label", "rows", "cols"), [
    ("plan", 16, 262144), ("plan", 256, 262144), ("g16x512", 16, 262144)])
def test_a_sustained_rate_is_the_faster_of_a_loop_and_a_graph_of_the_launches(
        evaluator: GpuEvaluator, label: str, rows: int, cols: int) -> None:
    """The child's sustained rate, two ways: a loop of launches and a CUDA graph of them
    replayed (a plain launch, a cluster of 16 at 256x262144, a persistent spread group),
    each at least ``min_ms`` long; the figure given is the faster, the graph ran the very
    launches (not twice as fast as the loop), and the recheck after both passes."""
    shape = dims(rows, cols)
    p = plan(rows, cols) if label == "plan" else SPREAD_PICKS[label]
    compiled = evaluator.compile(p).result()
    assert compiled.status == "ok", compiled.error
    got = evaluator.sustained(p, compiled, shape=shape, seed=4, min_ms=50.0)
    save(f"softmax_sustained_ways_{label}_{rows}x{cols}", got)
    # what a graph saves is the gap between launches: 1-2 us of 14-24 at plain launches, 3.4
    # of 14.1 for the spread group, whose CTAs wait for each other (H100, f8dfd27)
    check_sustained_two_ways(got, 50.0)


def test_the_driver_counts_the_resident_ctas_of_a_persistent_launch(
        compiler: Compiler) -> None:
    """``worker.launch_contract.resident_ctas`` on the GPU: a prefetching point at 256x262144
    (clusters of 16, two CTAs an SM by registers and shared memory) gets a whole number of
    clusters, at most two CTAs an SM, and at least the clusters that fit one a GPC; a CTA
    without clusters gets CTAs an SM times the SMs, and a spread group's grid is cut to a
    whole number of groups of them."""
    import pycuda.autoinit  # noqa: F401 - a context in this process
    import pycuda.driver as cuda

    from worker import launch_contract as lc
    from worker.compile import compile_candidate

    sms = cuda.Context.get_device().get_attribute(cuda.device_attribute.MULTIPROCESSOR_COUNT)
    ahead = PREFETCH_PICKS["c16x512h8"]
    for p, rows, cols in ((ahead, 256, 262144), (PREFETCH_PICKS["rt8x256h4"], 65536, 128)):
        launch = FAMILY.launch(p, dims(rows, cols))
        assert not isinstance(launch, Rejection)
        assert launch.persistent
        compiled = compile_candidate(compiler, FAMILY, p)
        assert compiled.status == "ok", compiled.error
        n = lc.resident_ctas(compiled.cubin(), launch.kernel_name, launch.to_dict())
        save(f"resident_ctas_c{p.cluster}", {"params": p.to_dict(), "sms": sms, "ctas": n})
        assert n % p.cluster == 0
        assert n <= launch.grid[0]
        if p.cluster > 1:
            assert 8 * p.cluster <= n <= 2 * sms, n
        else:
            assert n % sms == 0, n
            assert n >= sms, n
    # a spread group of 16 (no cluster): CTAs an SM times the SMs, and the launch's grid a
    # whole number of groups of them, every CTA resident at once
    group = SPREAD_PICKS["g16x512"]
    launch = FAMILY.launch(group, dims(256, 262144))
    assert not isinstance(launch, Rejection)
    assert (launch.persistent, launch.group, launch.cluster_size) == (True, 16, 1)
    compiled = compile_candidate(compiler, FAMILY, group)
    assert compiled.status == "ok", compiled.error
    n = lc.resident_ctas(compiled.cubin(), launch.kernel_name, launch.to_dict())
    x = lc.grid(SimpleNamespace(_tf_resident={(launch.block, 0): n}), launch.to_dict())[0]
    save("resident_ctas_spread16", {"params": group.to_dict(), "sms": sms, "ctas": n, "grid": x})
    assert n % sms == 0, n
    assert n >= 2 * sms, n
    assert x % 16 == 0, x
    assert n - 16 < x <= n, (x, n)


class _GroupTooLarge:
    """The softmax family with every spread launch's group past the CTAs resident at once."""

    def __init__(self, family: Any) -> None:
        self._family = family

    def __getattr__(self, name: str) -> Any:
        return getattr(self._family, name)

    def launch(self, params: Any, shape: Any, sm_count: int = 132) -> Any:
        cfg = self._family.launch(params, shape, sm_count=sm_count)
        return replace(cfg, group=4096) if getattr(cfg, "group", 1) > 1 else cfg


def test_a_group_larger_than_the_resident_ctas_is_a_launch_error(
        evaluator: GpuEvaluator, compiler: Compiler) -> None:
    """A spread group that cannot be resident at once would wait for itself forever: the
    launcher refuses it, the candidate is a ``launch_error`` (not a crash), and the same child
    goes on to measure the next candidate."""
    group = SPREAD_PICKS["g16x512"]
    compiled = evaluator.compile(group).result()
    assert compiled.status == "ok", compiled.error
    before = evaluator.child.proc
    real = evaluator.family
    evaluator.family = _GroupTooLarge(real)
    try:
        refused = evaluator.measure(group, compiled, shape=dims(64, 262144), iteration=0,
                                    seed=3, verify=True)
    finally:
        evaluator.family = real
    assert refused.status == "launch_error", (refused.status, refused.error)
    assert "group of 4096 CTAs" in (refused.error or "")
    after = evaluator.measure(group, compiled, shape=dims(64, 262144), iteration=1, seed=3,
                              verify=True)
    assert after.status == "ok", after.error
    assert before is not None
    assert evaluator.child.proc is before   # the child was not restarted
