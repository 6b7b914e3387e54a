"""The softmax family without a GPU: the protocol, shapes, transforms, validity x launch
(Hypothesis), deterministic rendering, every transform's points through the real nvcc (a stratified
sample; all of them under ``--full``), and the rule book's moves for short and long rows."""

from __future__ import annotations

import ast
import inspect
import random
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from repo import ROOT as REPO
from sampling import stratified
from softmax_bulk_points import BULK_PICKS, PREFETCH_PICKS, SPREAD_PICKS, STAGED_PICKS

from kernels import get_family
from kernels.base import Action, Candidate, Dims, LaunchConfig, Rejection
from kernels.family import KernelFamily, describe
from kernels.softmax import DOMAINS, FAMILY, MAX_ELEMENTS, SoftmaxParams, vendor
from kernels.softmax.params import BULK_SMEM_CAP, MAX_UNITS, bulk_smem_bytes, held_fits
from kernels.softmax.rules import (
    ALIGNED_MAX_COLS,
    BULK_MIN_COLS,
    bulk_plan,
    packed_rows,
    plan,
    row_a_cta,
    triton_warps,
)
from worker.compile import Compiler, CompileResult

ROOT = Candidate(FAMILY.baseline)
#: a CTA on each row, float4, one pass: the start most transforms act on
BLOCK_ROW = SoftmaxParams(block_threads=512, row_threads=512, vec=4, passes=1, chunks=4)
SWEEP = ((65536, 128), (32768, 512), (16384, 1024), (8192, 4096), (8192, 8192), (4096, 32768),
         (2048, 65536), (1024, 131072), (256, 262144), (16, 262144))


def dims(rows: int, cols: int) -> Dims:
    return Dims({"rows": rows, "cols": cols})


# ---- the protocol and the declarations --------------------------------------------------------
def test_registry_gives_a_kernel_family() -> None:
    family = get_family("softmax")
    assert family is FAMILY
    assert isinstance(family, KernelFamily)
    shown = describe(family)
    assert shown["metric"]["unit"] == "GB/s"
    assert shown["signature"]["scalars"] == [
        {"name": "rows", "dtype": "int32", "value": "rows"},
        {"name": "cols", "dtype": "int32", "value": "cols"}]
    assert [b["name"] for b in shown["signature"]["buffers"]] == ["x", "y"]
    assert set(shown["distributions"]) == {"normal", "large", "neg_inf", "constant"}


def test_shapes_parse_both_forms_and_are_bounded() -> None:
    assert FAMILY.parse_dims("8192x32768") == dims(8192, 32768)
    assert FAMILY.parse_dims("rows=8192,cols=32768") == dims(8192, 32768)
    assert FAMILY.parse_dims("cols=3, rows=2") == dims(2, 3)
    assert FAMILY.make_dims({"rows": 1, "cols": 1 << 21}) == dims(1, 1 << 21)
    with pytest.raises(ValueError, match="2\\^31"):
        FAMILY.parse_dims("65536x65536")
    with pytest.raises(ValueError, match="cols"):
        FAMILY.make_dims({"rows": 1, "cols": 0})
    with pytest.raises(ValueError, match="missing"):
        FAMILY.make_dims({"rows": 4})


def test_metric_signature_and_edge_shapes() -> None:
    d = dims(8192, 32768)
    assert FAMILY.metric.amount(d) == 8 * 8192 * 32768
    resolved = FAMILY.signature.resolve(d)
    assert [b["count"] for b in resolved["buffers"]] == [8192 * 32768] * 2
    assert [s["value"] for s in resolved["scalars"]] == [8192, 32768]
    cols = {s["cols"] for s in FAMILY.edge_shapes}
    assert {1, 33, 1000003, 4099, 4098} <= cols
    assert any(s["rows"] == 1 for s in FAMILY.edge_shapes)
    assert all(s["rows"] * s["cols"] <= MAX_ELEMENTS for s in FAMILY.edge_shapes)


def test_vendor_module_imports_nothing_but_typing() -> None:
    tree = ast.parse(inspect.getsource(vendor))
    imported = {alias.name.split(".")[0] for node in ast.walk(tree)
                if isinstance(node, ast.Import | ast.ImportFrom)
                for alias in (node.names if isinstance(node, ast.Import) else [node])
                if hasattr(alias, "name")} | {
        (node.module or "").split(".")[0] for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)}
    assert imported <= {"__future__", "collections", "typing"}
    assert FAMILY.vendor is not None
    assert FAMILY.vendor.module == "kernels.softmax.vendor"


def test_params_round_trip_and_canonical() -> None:
    p = SoftmaxParams(passes=2, chunks=8)
    assert p.canonical().chunks == 1
    assert FAMILY.params_from_dict(p.to_dict()) == p.canonical()
    assert FAMILY.params_from_dict({}) == FAMILY.baseline
    with pytest.raises(ValueError, match="unknown softmax parameter"):
        FAMILY.params_from_dict({"tile": 4})
    assert FAMILY.fixed_dims(p) is None
    assert FAMILY.for_shape(p, dims(2, 3)) == p
    [dataset] = FAMILY.replay_datasets()  # the H200 campaigns' points
    assert dataset.name == "replay-h200.jsonl.gz"
    assert FAMILY.dynamic_smem_bytes(p) == 0
    assert FAMILY.threads_per_block(p) == 128


def test_baseline_is_the_naive_point() -> None:
    b = FAMILY.baseline
    assert (b.row_threads, b.vec, b.passes, b.cluster) == (1, 1, 3, 1)
    assert FAMILY.validate(b) is None


# ---- transforms ---------------------------------------------------------------------------------
def applied(start: SoftmaxParams, text: str) -> Candidate | Rejection:
    return FAMILY.apply(Candidate(start), text)


@pytest.mark.parametrize(("start", "text", "name", "value"), [
    (FAMILY.baseline, "apply_vectorize(4)", "vec", 4),
    (FAMILY.baseline, "set_threads_per_row(32)", "row_threads", 32),
    (BLOCK_ROW, "apply_rows_per_cta(2)", "block_threads", 1024),
    (BLOCK_ROW, "apply_cluster(4)", "cluster", 4),
    (FAMILY.baseline, "set_passes(2)", "passes", 2),
    (FAMILY.baseline, "apply_register_row(8)", "chunks", 8),
    (FAMILY.baseline, "apply_unroll(4)", "unroll", 4),
    (FAMILY.baseline, "apply_cache_hints(3, true)", "load_hint", 3),
    (replace(BLOCK_ROW, cluster=4), "apply_bulk_copy(4)", "bulk", 4),
])
def test_every_transform_applies(start: SoftmaxParams, text: str, name: str, value: Any) -> None:
    result = applied(start, text)
    assert isinstance(result, Candidate), result
    assert getattr(result.params, name) == value
    assert result.lineage() == [text.replace(" ", "").replace(",", ", ")]
    assert FAMILY.validate(result.params) is None
    parent = FAMILY.apply(result, "revert_last()")
    assert isinstance(parent, Candidate)
    assert parent.params == start


def test_transform_names_cover_the_brief() -> None:
    names = set(FAMILY.transforms.names())
    assert {"apply_vectorize", "set_threads_per_row", "apply_rows_per_cta", "apply_cluster",
            "set_passes", "apply_register_row", "apply_unroll", "apply_cache_hints",
            "apply_bulk_copy", "revert_last"} <= names
    for spec in FAMILY.transforms:
        for arg in spec.args:
            if arg.field is not None:
                assert set(arg.choices) <= set(DOMAINS[arg.field]), (spec.name, arg.name)


@pytest.mark.parametrize(("start", "text", "reason", "figure"), [
    (FAMILY.baseline, "apply_vectorize(1)", "no_change", "action"),
    (FAMILY.baseline, "apply_cluster(2)", "cluster_needs_block_per_row", "row_threads"),
    (replace(BLOCK_ROW, cluster=2), "apply_rows_per_cta(2)", "cluster_needs_block_per_row",
     "cluster"),
    (BLOCK_ROW, "apply_rows_per_cta(4)", "block_threads_out_of_range", "block_threads"),
    (replace(BLOCK_ROW, block_threads=1024, row_threads=1024), "apply_register_row(16)",
     "registers_over_limit", "register_limit"),
    (FAMILY.baseline, "revert_last()", "no_parent", None),
])
def test_transforms_reject_with_numbers(start: SoftmaxParams, text: str, reason: str,
                                        figure: str | None) -> None:
    result = applied(start, text)
    assert isinstance(result, Rejection), result
    assert result.reason == reason
    assert result.message
    if figure is not None:
        assert figure in result.figures, result.figures


def test_threads_per_row_keeps_rows_per_cta_and_drops_a_cluster_it_cannot_keep() -> None:
    warp = applied(FAMILY.baseline, "set_threads_per_row(32)")
    assert isinstance(warp, Candidate)
    assert warp.params.block_threads == 1024
    assert warp.params.rows_per_cta == 32
    clustered = replace(BLOCK_ROW, cluster=4)
    narrower = applied(clustered, "set_threads_per_row(16)")
    assert isinstance(narrower, Candidate)
    assert narrower.params.cluster == 1
    wider = applied(clustered, "set_threads_per_row(1024)")
    assert isinstance(wider, Candidate)
    assert wider.params.cluster == 4


def test_cluster_needs_sm90() -> None:
    rejection = FAMILY.validate(replace(BLOCK_ROW, cluster=2), "sm_80")
    assert isinstance(rejection, Rejection)
    assert rejection.reason == "cluster_needs_sm90"


# ---- validity x launch --------------------------------------------------------------------------
POINTS = st.builds(SoftmaxParams, **{k: st.sampled_from(v) for k, v in DOMAINS.items()})
SHAPES = st.tuples(st.integers(1, 1 << 20), st.integers(1, 1 << 21)).filter(
    lambda s: s[0] * s[1] <= MAX_ELEMENTS)


@settings(max_examples=400, deadline=None)
@given(POINTS, SHAPES)
def test_random_points_launch_or_are_rejected_with_a_reason(p: SoftmaxParams,
                                                            shape: tuple[int, int]) -> None:
    d = dims(*shape)
    rejection = FAMILY.validate(p)
    launch = FAMILY.launch(p, d)
    if rejection is not None:
        assert rejection.reason
        assert rejection.message
        assert isinstance(launch, Rejection)
        assert launch.reason == rejection.reason
        return
    assert isinstance(launch, LaunchConfig)
    q = p.canonical()
    gx, gy, gz = launch.grid
    assert (gy, gz) == (1, 1)
    assert 1 <= gx <= (1 << 31) - 1
    assert gx % q.cluster == 0
    assert launch.block == (q.block_threads, 1, 1)
    assert q.block_threads <= 1024
    need = bulk_smem_bytes(q, d["cols"]) if q.bulk else 0
    staged = q.staged * q.block_threads * q.vec * 4   # a staged one-pass point's vectors
    assert launch.dynamic_smem_bytes == (need if need <= BULK_SMEM_CAP else 0) + staged
    assert launch.dynamic_smem_bytes <= FAMILY.dynamic_smem_bytes(q) <= FAMILY.max_smem_limit(
        "sm_90")
    assert launch.workspace_bytes == 0
    units = gx // q.cluster
    assert units * q.rows_per_cta >= d["rows"] or units == MAX_UNITS
    assert q.estimated_registers <= q.register_limit
    if q.cluster > 1:
        assert q.row_threads == q.block_threads


def test_bulk_copy_validity_and_its_shared_memory() -> None:
    p = replace(BLOCK_ROW, cluster=4, bulk=4)
    assert FAMILY.validate(p) is None
    q = p.canonical()
    assert (q.passes, q.chunks) == (2, 1)  # its fallback is the two-pass loop
    for arch in ("sm_80", "sm_86"):
        rejection = FAMILY.validate(replace(p, cluster=1), arch)
        assert isinstance(rejection, Rejection)
        assert rejection.reason == "bulk_copy_needs_sm90"
        assert rejection.figures["arch"] == arch
    assert FAMILY.dynamic_smem_bytes(p) == BULK_SMEM_CAP
    assert FAMILY.dynamic_smem_bytes(BLOCK_ROW) == 0
    # a slice of a row over the cluster: (cols + 6) // 4 vectors whatever the alignment of x
    launch = FAMILY.launch(p, dims(2048, 65536))
    assert isinstance(launch, LaunchConfig)
    assert launch.dynamic_smem_bytes == 16 * -(-(65536 + 6) // 4 // 4) == 65552
    # rows packed: the CTA's rows in one tile; past the cap, no shared memory (the fallback)
    packed = SoftmaxParams(block_threads=256, row_threads=8, vec=4, bulk=1)
    launch = FAMILY.launch(packed, dims(65536, 128))
    assert isinstance(launch, LaunchConfig)
    assert launch.dynamic_smem_bytes == 16 * ((32 * 128 + 6) // 4)
    launch = FAMILY.launch(packed, dims(64, 4096))
    assert isinstance(launch, LaunchConfig)
    assert launch.dynamic_smem_bytes == 0
    # the 1000003-column edge shape takes the fallback even over 8 CTAs
    launch = FAMILY.launch(replace(p, cluster=8), dims(3, 1000003))
    assert isinstance(launch, LaunchConfig)
    assert launch.dynamic_smem_bytes == 0


#: sha256 over (JSON, rendered source) of every point of space(), taken on main at 7e7958e
#: before the bulk-copy path existed: the seed space renders the same bytes and keys
SPACE_RENDER_DIGEST = "ec84f0eccf838213571b66ef879007038449963163c7d7c044c5b3bd21eca33e"


def test_points_without_bulk_copies_render_and_key_as_before() -> None:
    import hashlib
    import json

    digest = hashlib.sha256()
    for p in FAMILY.space():
        assert "bulk" not in p.to_dict()
        digest.update(json.dumps(p.to_dict(), sort_keys=True).encode())
        digest.update(FAMILY.render(p).encode())
    assert digest.hexdigest() == SPACE_RENDER_DIGEST
    assert "cp.async.bulk" not in FAMILY.render(BLOCK_ROW)
    assert "cp.async.bulk" in FAMILY.render(replace(BLOCK_ROW, bulk=2))
    assert FAMILY.params_from_dict({**BLOCK_ROW.to_dict(), "bulk": 0}) == BLOCK_ROW
    # every point of the replay dataset keeps its key: those without a bulk copy without the
    # field, the measured bulk-copy points with it
    import gzip

    [dataset] = FAMILY.replay_datasets()
    with gzip.open(str(dataset), "rt") as fh:
        records = [json.loads(line) for line in fh if line.strip()]
    params = [r["params"] for r in records if isinstance(r.get("params"), dict)]
    assert params
    for d in params:
        assert FAMILY.params_from_dict(d).to_dict() == SoftmaxParams.from_dict(d).canonical(
        ).to_dict()
        assert ("bulk" in FAMILY.params_from_dict(d).to_dict()) == bool(d.get("bulk"))
    assert any(d.get("bulk") for d in params)


def test_sample_and_space_are_valid_and_distinct() -> None:
    points = FAMILY.sample(random.Random(3), 200)
    assert len(points) == len(set(points)) == 200
    assert all(FAMILY.validate(p) is None for p in points)
    space = FAMILY.space()
    assert len(space) == len(set(space)) > 100
    assert FAMILY.baseline in space
    assert all(FAMILY.validate(p) is None and p.cluster == 1 for p in space)


def test_rendering_is_deterministic() -> None:
    points = [FAMILY.baseline, BLOCK_ROW, replace(BLOCK_ROW, cluster=8, load_hint=2,
                                                  store_hint=True)]
    for p in points:
        assert FAMILY.render(p) == FAMILY.render(replace(p))
        assert FAMILY.source_hash(p) == FAMILY.source_hash(replace(p))
        assert 'extern "C" __global__' in FAMILY.render(p)
    assert len({FAMILY.source_hash(p) for p in points}) == len(points)
    # a field the kernel does not read renders the same source
    assert FAMILY.render(SoftmaxParams(passes=2, chunks=4)) == FAMILY.render(
        SoftmaxParams(passes=2))


def test_sanitizer_shapes_exercise_tails_and_capacity() -> None:
    shapes = FAMILY.sanitizer_shapes(replace(BLOCK_ROW, cluster=2))
    cols = {s["cols"] for s in shapes}
    cap = replace(BLOCK_ROW, cluster=2).capacity
    assert cap - 3 in cols
    assert any(c > cap for c in cols)
    assert 4098 in cols
    assert all(s["rows"] * s["cols"] < 1 << 22 for s in shapes)
    assert FAMILY.sanitizer_shapes(FAMILY.baseline)


# ---- every transform's points through the real nvcc -------------------------------------
@dataclass(frozen=True)
class Built:
    label: str
    params: SoftmaxParams
    result: CompileResult


def submit(compiler: Compiler, p: SoftmaxParams) -> Future[CompileResult]:
    return compiler.submit(FAMILY.render(p), entry=FAMILY.name, dynamic_smem_bytes=0,
                           arch=FAMILY.compile_arch(p, "sm_90"))


def transform_points() -> list[tuple[str, SoftmaxParams]]:
    """Every concrete action of every transform from three starts (the baseline, a warp per
    row, a CTA per row), the planned points of the sweep, and random points."""
    starts = [FAMILY.baseline,
              SoftmaxParams(block_threads=256, row_threads=32, vec=4, passes=2, unroll=4),
              BLOCK_ROW]
    out: list[tuple[str, SoftmaxParams]] = []
    for spec in FAMILY.transforms:
        for start in starts:
            for action in spec.actions():
                result = FAMILY.apply(Candidate(start), action)
                if isinstance(result, Candidate):
                    out.append((str(action), result.params))
    # the push of a cluster's partials, and a row over CTAs meeting through global memory,
    # need several CTAs a row to start from
    cluster_start = SoftmaxParams(block_threads=512, row_threads=512, cluster=4, vec=4,
                                  passes=1, chunks=4)
    for name in ("apply_cluster_push", "apply_spread"):
        for action in FAMILY.transforms.get(name).actions():
            moved = FAMILY.apply(Candidate(cluster_start), action)
            if isinstance(moved, Candidate):
                out.append((str(action), moved.params))
    spread_start = replace(cluster_start, cluster=8, spread=True)
    for action in FAMILY.transforms.get("apply_row_pipeline").actions():
        moved = FAMILY.apply(Candidate(spread_start), action)
        if isinstance(moved, Candidate):
            out.append((str(action), moved.params))
    # four CTAs an SM from a CTA of 256 threads holding 16 floats
    small = SoftmaxParams(block_threads=256, row_threads=256, cluster=4, vec=4, passes=1,
                          chunks=4)
    for action in FAMILY.transforms.get("set_min_ctas").actions():
        fitted = FAMILY.apply(Candidate(small), action)
        if isinstance(fitted, Candidate):
            out.append((str(action), fitted.params))
    # prefetching needs a bulk-copy point to start from
    bulk_start = replace(cluster_start, bulk=4).canonical()
    for action in FAMILY.transforms.get("apply_prefetch").actions():
        ahead = FAMILY.apply(Candidate(bulk_start), action)
        if isinstance(ahead, Candidate):
            out.append((str(action), ahead.params))
    out += [(f"plan {r}x{c}", plan(r, c)) for r, c in SWEEP]
    out += [(f"bulk plan {r}x{c}", q) for r, c in SWEEP if (q := bulk_plan(r, c)) is not None]
    out += [(f"bulk {name}", p) for name, p in BULK_PICKS.items()]
    out += [(f"prefetch {name}", p) for name, p in PREFETCH_PICKS.items()]
    out += [(f"staged {name}", p) for name, p in STAGED_PICKS.items()]
    out += [(f"spread {name}", p) for name, p in SPREAD_PICKS.items()]
    out += [("random", p) for p in FAMILY.sample(random.Random(11), 8)]
    unique: dict[SoftmaxParams, str] = {}
    for label, p in out:
        unique.setdefault(p.canonical(), label)
    return [(label, p) for p, label in unique.items()]


@pytest.fixture(scope="module")
def built(compiler: Compiler, full: bool) -> list[Built]:
    """Every transform point through nvcc under ``--full`` (``make test-full``), else a
    stratified sample: every transform and hand-picked set, every parameter value, and at least
    ten bulk-copy points (35 of 189 points)."""
    points = transform_points()
    if not full:
        points = stratified(points, at_least=(lambda p: bool(p.bulk), 10))
    futures = [submit(compiler, p) for _, p in points]
    return [Built(label, p, f.result()) for (label, p), f in zip(points, futures, strict=True)]


def test_every_transform_compiles(built: list[Built]) -> None:
    labels = {b.label.split("(")[0] for b in built}
    assert set(FAMILY.transforms.names()) - {"revert_last"} <= labels
    bad = [(b.label, b.result.error) for b in built if b.result.status != "ok"]
    assert not bad


def test_register_held_points_do_not_spill(built: list[Built]) -> None:
    """The one-pass points keep the row in registers: a spill puts it back in memory; the
    bulk-copy points spill nothing either."""
    spilled = [(b.label, b.params, b.result.spill_bytes) for b in built
               if (b.params.passes == 1 or b.params.bulk) and (b.result.spill_bytes or 0) > 0]
    assert not spilled
    assert len([b for b in built if b.params.bulk]) >= 10
    for b in built:
        assert b.result.regs_per_thread is not None
        assert b.result.regs_per_thread <= b.params.register_limit


def test_reference_compiles(compiler: Compiler) -> None:
    result = compiler.compile(FAMILY.reference_source())
    assert result.status == "ok", result.error
    launch = FAMILY.reference_launch(dims(3, 1000003))
    assert launch.kernel_name == "reference_softmax"
    assert launch.grid == (3, 1, 1)


# ---- the rule book ----------------------------------------------------------------------
@dataclass
class Incumbent:
    params: SoftmaxParams
    feedback: dict[str, Any]
    iteration: int = 0
    status: str = "ok"

    @property
    def compile(self) -> dict[str, Any] | None:
        return self.feedback.get("compile")

    @property
    def profile(self) -> dict[str, Any] | None:
        return self.feedback.get("profile")


@dataclass
class RuleCtx:
    shape: Dims | None
    incumbent: Incumbent | None
    arch: str = "sm_90"
    device: dict[str, Any] | None = None
    history: list[Any] = field(default_factory=list)
    banned: tuple[str, ...] = ()
    family: Any = FAMILY
    stagnation: int = 0
    settled: bool = False
    tolerance: float = 1e-4

    def action_allowed(self, name: str) -> bool:
        return name not in self.banned

    def theoretical_occupancy(self, threads: int, regs_per_thread: int,
                              shared_mem_bytes: int) -> float:
        return 100.0


def moves(p: SoftmaxParams, rows: int, cols: int, feedback: dict[str, Any] | None = None,
          banned: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    ctx = RuleCtx(dims(rows, cols), Incumbent(p, feedback or {}), device={"sm_count": 132},
                  history=[], banned=banned)
    return FAMILY.expert_moves(ctx)


def destination(start: SoftmaxParams, text: str) -> SoftmaxParams:
    result = FAMILY.apply_chain(Action.parse_many(text), Candidate(start))
    assert isinstance(result, Candidate), (text, result)
    return result.params


def test_short_rows_head_for_a_warp_a_row_packed_in_one_pass() -> None:
    found = moves(FAMILY.baseline, 65536, 128)
    first = destination(FAMILY.baseline, found[0][0])
    assert (first.row_threads, first.rows_per_cta, first.vec, first.passes) == (32, 8, 4, 1)
    assert first.capacity >= 128
    assert "128" in found[0][1]
    texts = [t for t, _ in found]
    assert "apply_vectorize(4)" in texts
    assert texts.index("apply_vectorize(4)") < texts.index("apply_cache_hints(3, true)")


def test_long_rows_with_few_of_them_head_for_a_cluster() -> None:
    found = moves(FAMILY.baseline, 16, 262144)
    first = destination(FAMILY.baseline, found[0][0])
    assert first.cluster == 16  # 16 rows x 16 CTAs fill the 132 SMs
    assert first.passes == 1
    assert first.capacity >= 262144
    assert "apply_cluster(16)" in found[0][0]


def test_few_rows_on_clusters_of_16_are_offered_a_spread_group() -> None:
    """16 rows on clusters of 16 are 256 CTAs, one wave as plain CTAs but not as clusters:
    the rule book offers the row's CTAs as a spread group; 256 rows (many waves either way),
    and clusters of 4, are not."""
    best = SoftmaxParams(block_threads=512, row_threads=512, cluster=16, vec=4, passes=1,
                         chunks=8, push=True, load_hint=1, store_hint=True)
    found = [(t, r) for t, r in moves(best, 16, 262144) if "apply_spread" in t]
    assert found
    spread = destination(best, found[0][0])
    assert (spread.spread, spread.push, spread.cluster, spread.chunks) == (True, False, 16, 8)
    assert "256 CTAs" in found[0][1]
    assert not [t for t, _ in moves(best, 256, 262144) if "apply_spread" in t]
    small = SoftmaxParams(block_threads=512, row_threads=512, cluster=4, vec=4, passes=1,
                          chunks=8)
    assert not [t for t, _ in moves(small, 16, 65536) if "apply_spread" in t]


def test_a_pipelined_spread_group_is_reached_but_not_offered() -> None:
    """The pipelined group of 32 at 256x262144 (two rows of 4 float4 a thread, two CTAs an SM)
    is one chain of transforms from the cluster of 16, launched persistent in groups of 32; the
    rule book does not offer it (it lost to the cluster of 16 on the H200: docs/GPU.md)."""
    best = SoftmaxParams(block_threads=512, row_threads=512, cluster=16, vec=4, passes=1,
                         chunks=8, push=True, load_hint=1, store_hint=True)
    text = ("apply_cluster_push(false) ; apply_spread(true) ; set_min_ctas(2) ; "
            "apply_row_pipeline(true)")
    ahead = destination(best, text)
    assert (ahead.spread, ahead.pipeline, ahead.push, ahead.cluster, ahead.chunks,
            ahead.min_ctas) == (True, True, False, 32, 4, 2)
    assert ahead.capacity >= 262144
    assert ahead.estimated_registers <= ahead.register_limit
    launch = FAMILY.launch(ahead, Dims({"rows": 256, "cols": 262144}))
    assert isinstance(launch, LaunchConfig)
    assert (launch.persistent, launch.group, launch.cluster_size) == (True, 32, 1)
    for rows in (16, 256):
        assert not [t for t, _ in moves(best, rows, 262144) if "apply_row_pipeline" in t]


def test_a_pipelined_row_needs_a_one_pass_spread_point() -> None:
    held = SoftmaxParams(block_threads=512, row_threads=512, cluster=16, vec=4, passes=1,
                         chunks=8)
    rejected = FAMILY.apply(Candidate(held), Action("apply_row_pipeline", (True,)))
    assert isinstance(rejected, Rejection)
    assert rejected.reason == "pipeline_needs_spread_row"
    invalid = replace(held, pipeline=True)
    assert FAMILY.validate(invalid) is not None
    assert invalid.canonical().pipeline is False
    spread = replace(held, spread=True, min_ctas=2)
    doubled = FAMILY.apply(Candidate(spread), Action("apply_row_pipeline", (True,)))
    assert isinstance(doubled, Candidate)
    # two rows of 8 float4 a thread are over the 64 registers of two 512-thread CTAs an SM:
    # the group doubles
    assert (doubled.params.cluster, doubled.params.chunks) == (32, 4)
    assert "pipeline" not in held.to_dict()
    assert doubled.params.to_dict()["pipeline"] is True


def test_rows_past_every_capacity_take_two_passes() -> None:
    found = moves(FAMILY.baseline, 3, 1000003)
    first = destination(FAMILY.baseline, found[0][0])
    assert first.passes == 2
    assert first.cluster == 16


def test_every_sweep_plan_is_valid_and_holds_its_row() -> None:
    for rows, cols in SWEEP:
        p = plan(rows, cols)
        assert FAMILY.validate(p) is None, (rows, cols, p)
        assert p.passes == 1, (rows, cols, p)
        assert p.capacity >= cols, (rows, cols, p)
        assert p.vec == 4, (rows, cols, p)
        assert -(-rows // p.rows_per_cta) * p.cluster >= 128, (rows, cols, p)


def test_spills_propose_fewer_floats_a_thread() -> None:
    p = SoftmaxParams(block_threads=512, row_threads=512, vec=4, passes=1, chunks=16)
    found = moves(p, 4096, 32768, feedback={"compile": {"spill_bytes": 256,
                                                        "regs_per_thread": 128}})
    texts = [t for t, r in found if "spills" in r]
    assert texts
    assert all(destination(p, t).chunks == 8 for t in texts)


def test_moves_are_valid_fresh_and_allowed() -> None:
    for start in (FAMILY.baseline, BLOCK_ROW, plan(8192, 8192)):
        for rows, cols in ((65536, 128), (8192, 8192), (16, 262144), (7, 33)):
            for text, reason in moves(start, rows, cols):
                assert reason
                assert destination(start, text) != start.canonical()
    banned = moves(FAMILY.baseline, 16, 262144, banned=("apply_cluster",))
    assert banned
    assert all("apply_cluster" not in t for t, _ in banned)
    assert FAMILY.expert_moves(RuleCtx(None, None)) == []


@settings(max_examples=300, deadline=None)
@given(POINTS, st.integers(1, 1 << 19), st.integers(0, 3))
def test_row_partition_covers_every_element_once(p: SoftmaxParams, cols: int,
                                                 misalign: int) -> None:
    """The template's split of a row (scalar head up to the first aligned element, vectors,
    scalar tail) and its thread assignment, with the extra registers the family sizes: every
    element read and written by exactly one thread, the held path only where the row fits. An
    ``aligned_rows`` point has no head or tail (no extra registers): its vector path runs only
    where cols is a multiple of the width and the row starts aligned, the scalar one else."""
    q = p.canonical()
    if FAMILY.validate(q) is not None:
        return
    source = FAMILY.render(q)
    extra = 0 if q.aligned_rows else q.extra_slots
    assert f"#define EXTRA {extra}" in source
    held = "(CHUNKS + STAGED)" if q.staged else "CHUNKS"
    assert f"cols <= {held} * G * V" in source or q.passes != 1
    for v in {q.vec, 1}:  # the point's width and the fallback for x, y aligned differently
        if q.aligned_rows and v > 1 and (cols % v or misalign % v):
            continue   # not whole aligned vectors: the kernel takes the scalar path
        head = 0 if v == 1 else min(cols, (-misalign) % v)
        nv = (cols - head) // v
        tail = head + nv * v
        nextra = cols - nv * v
        g_threads = q.group_threads
        seen = [0] * cols
        for i in range(nv):
            for k in range(v):
                seen[head + i * v + k] += 1
        for i in range(nextra):
            seen[i if i < head else tail + i - head] += 1
        assert seen == [1] * cols
        assert head < v
        assert cols - tail < v
        slots = q.chunks + q.staged   # registers, then the staged vectors in shared memory
        if q.passes == 1 and cols <= slots * g_threads * v:
            assert nv <= slots * g_threads  # every vector has a register or a staged slot
            assert nextra <= extra * g_threads  # every scalar has a register


def test_a_cta_alone_on_its_sm_is_offered_two_passes_from_l2() -> None:
    p = plan(64, 524288)
    assert p.passes == 1
    assert p.block_threads * p.estimated_registers > 32768
    found = moves(p, 64, 524288, feedback={"compile": {"regs_per_thread": 92}})
    two = [(t, r) for t, r in found
           if destination(p, t).passes == 2 and not destination(p, t).bulk]
    assert two
    assert "L2" in two[0][1]
    assert "92 registers" in two[0][1]
    # a plan with two CTAs an SM is not offered it
    q = plan(1024, 131072)
    assert not [t for t, _ in moves(q, 1024, 131072)
                if destination(q, t).passes == 2 and not destination(q, t).bulk]


def test_a_cluster_of_16_is_a_non_portable_launch() -> None:
    # 256x262144: 16 CTAs of 512 threads at 32 floats hold the row at two CTAs an SM
    p = plan(256, 262144)
    assert (p.cluster, p.block_threads, p.chunks * p.vec, p.passes) == (16, 512, 32, 1)
    launch = FAMILY.launch(p, dims(256, 262144))
    assert isinstance(launch, LaunchConfig)
    assert launch.cluster_size == 16
    assert launch.to_dict()["cluster_size"] == 16
    assert launch.grid == (256 * 16, 1, 1)
    source = FAMILY.render(p)
    assert "__cluster_dims__(CL, 1, 1)" in source
    assert "#define CL 16" in source
    # a portable cluster's launch says nothing of it (its JSON as before)
    q = replace(p, cluster=8, chunks=16)
    launch8 = FAMILY.launch(q, dims(256, 262144))
    assert isinstance(launch8, LaunchConfig)
    assert launch8.cluster_size == 1
    assert "cluster_size" not in launch8.to_dict()
    # random samples draw the clusters they drew before 16 joined the domain
    from kernels.softmax.params import sample_space
    assert all(s.cluster <= 8 for s in sample_space(random.Random(3), 300))


def test_a_cta_alone_at_the_largest_cluster_is_offered_twice_the_threads() -> None:
    # 64x524288: the plan's 512-thread CTAs of a cluster of 16 hold 64 floats a thread (92
    # registers, one CTA an SM) and the cluster cannot grow: 1024 threads at 32 floats
    p = plan(64, 524288)
    assert (p.cluster, p.block_threads, p.chunks * p.vec) == (16, 512, 64)
    found = moves(p, 64, 524288, feedback={"compile": {"regs_per_thread": 92}})
    wide = [(t, r) for t, r in found if destination(p, t).block_threads == 1024]
    assert wide, found
    q = destination(p, wide[0][0])
    assert (q.row_threads, q.cluster, q.chunks, q.passes) == (1024, 16, 8, 1)
    assert q.capacity == p.capacity == 524288
    assert "twice the warps" in wide[0][1]
    assert "92 registers" in wide[0][1]
    # a CTA that shares its SM is not offered it
    r = plan(1024, 131072)
    assert (r.cluster, r.block_threads, r.chunks * r.vec) == (8, 512, 32)
    assert not [t for t, _ in moves(r, 1024, 131072, feedback={"compile": {"regs_per_thread": 62}})
                if destination(r, t).block_threads == 1024]


def row_a_cta_point(threads: int, chunks: int, code: bool = True, aligned: bool = False
                    ) -> SoftmaxParams:
    """One row a CTA of ``threads``, ``chunks`` float4 a thread; ``code``: with Triton's order
    of the reductions and whole vector stores, as the rule book offers it; ``aligned``: without
    a row's head and tail or a grid-stride loop, as it offers it at short rows of whole
    float4."""
    return SoftmaxParams(block_threads=threads, row_threads=threads, vec=4, passes=1,
                         chunks=chunks, max_first=code, ptx_stores=code, aligned_rows=aligned,
                         one_pass_grid=aligned)


def test_the_plan_is_followed_by_one_row_a_cta_in_tritons_warps() -> None:
    """Right after the plan: one row a CTA of Triton's warp count, then half and twice it, the
    row in registers as float4 with Triton's code (max first, whole vector stores: the
    arrangements of 2026-12-04's peers record; at rows of whole float4 up to 4096 columns
    without the row's head and tail or the grid-stride loop); from a point already one row a
    CTA, its own half and double."""
    assert [triton_warps(c) for c in (128, 1024, 2048, 4096, 32768)] == [4, 4, 8, 16, 16]
    p = plan(16384, 1024)
    found = moves(p, 16384, 1024)
    assert [destination(p, t) for t, _ in found[:3]] == [
        row_a_cta_point(128, 2, aligned=True), row_a_cta_point(64, 4, aligned=True),
        row_a_cta_point(256, 1, aligned=True)]
    assert all("Triton" in r and "one row a CTA" in r for _, r in found[:3])
    # cols % 4 != 0: Triton's code without the aligned rows
    odd = plan(16384, 1022)
    assert next(destination(odd, t) for t, r in moves(odd, 16384, 1022)
                if "Triton's warp count" in r) == row_a_cta_point(128, 2)
    # from two warps a row, one warp holding 32 floats a thread
    w2 = row_a_cta_point(64, 4, code=False)
    walk = [destination(w2, t) for t, r in moves(w2, 16384, 1024) if "one row a CTA" in r]
    assert row_a_cta_point(32, 8, aligned=True) in walk
    assert w2 not in walk
    # 4096x32768: sixteen warps at 64 floats a thread, then 32 at 32; eight would hold 128
    p = plan(4096, 32768)
    found = moves(p, 4096, 32768)
    assert destination(p, found[0][0]) == row_a_cta_point(512, 16)
    assert destination(p, found[1][0]) == row_a_cta_point(1024, 8)
    assert row_a_cta(32768, 8) is None
    # rows that leave a thread without a float4, or that no CTA holds at 64 floats: none
    for rows, cols in ((65536, 128), (2048, 65536), (16, 262144)):
        assert not [t for t, r in moves(plan(rows, cols), rows, cols) if "one row a CTA" in r]
    assert row_a_cta(128, 4) is None
    # the incumbent's hints stay
    hinted = replace(plan(16384, 1024), load_hint=1, store_hint=True)
    first = next(destination(hinted, t) for t, r in moves(hinted, 16384, 1024)
                 if "Triton's warp count" in r)
    # (a store hint and PTX stores do not go together: the hint's stores stay)
    assert first == replace(row_a_cta_point(128, 2, aligned=True), load_hint=1,
                            store_hint=True, ptx_stores=False)


def test_short_rows_are_offered_packed_small_ctas_with_the_code_moves(
        compiler: Compiler) -> None:
    """Rows of 16..512 columns (a multiple of 16): 64-thread CTAs of several rows, cols / 16
    threads a row holding 16 floats each, with the four code moves (the fastest of the 56
    held-row arrangements timed at 65536x128 and 32768x512 on the H200); offered from the
    baseline, the plan and the bulk point alike, and compiled without spills."""
    want = {128: (8, 8), 512: (32, 2), 16: (1, 64)}
    for cols, (row_threads, rows_a_cta) in want.items():
        for start in (FAMILY.baseline, plan(65536, cols)):
            found = [destination(start, t) for t, r in moves(start, 65536, cols)
                     if "small CTAs" in r]
            assert len(found) == 1, (cols, start)
            q = found[0]
            assert (q.block_threads, q.row_threads, q.chunks, q.vec, q.passes) == (
                64, row_threads, 4, 4, 1)
            assert q.rows_per_cta == rows_a_cta
            assert q.max_first
            assert q.ptx_stores
            assert q.aligned_rows
            assert q.one_pass_grid
    staged = bulk_plan(65536, 128)
    assert staged is not None
    assert any("small CTAs" in r for _t, r in moves(staged, 65536, 128))
    # no packed rows where a row needs a whole CTA, or the columns are no multiple of 16
    for cols in (1024, 4096, 100, 8, 520):
        assert packed_rows(cols) is None
        assert not [r for _t, r in moves(plan(4096, cols), 4096, cols) if "small CTAs" in r]
    for cols in (128, 512):
        q = next(destination(FAMILY.baseline, t) for t, r in moves(FAMILY.baseline, 65536, cols)
                 if "small CTAs" in r)
        result = submit(compiler, q).result()
        assert result.status == "ok", result.error
        assert not result.spill_bytes


def test_rows_a_cta_compile_within_their_registers(compiler: Compiler) -> None:
    """Every one-row-a-CTA point the rule book may offer at the sweep's rows (with Triton's
    code: max first, whole vector stores), through nvcc,
    within the CTA's register limit; Triton's warp count at each row length and the two that
    beat the campaigns on the H200 (2 warps at 1024 columns, 16 at 32768) spill nothing (a
    few CTAs of 64 and 128 threads holding 32 or 64 floats spill 16-24 bytes: the campaign's
    spill rule answers them)."""
    def coded(q: SoftmaxParams, cols: int) -> SoftmaxParams:  # as the rule book offers it
        aligned = cols % 4 == 0 and cols <= ALIGNED_MAX_COLS
        return replace(q, max_first=True, ptx_stores=True, aligned_rows=aligned,
                       one_pass_grid=aligned)

    points = sorted({coded(q, cols) for _rows, cols in SWEEP for w in (1, 2, 4, 8, 16, 32)
                     if (q := row_a_cta(cols, w)) is not None},
                    key=lambda q: (q.block_threads, q.chunks, q.aligned_rows))
    assert len(points) >= 12
    assert any(q.aligned_rows for q in points)
    clean = {coded(q, cols) for _rows, cols in SWEEP
             if (q := row_a_cta(cols, triton_warps(cols)))}
    clean |= {row_a_cta_point(64, 4, aligned=True), row_a_cta_point(512, 16)}
    assert clean <= set(points)
    for p, f in [(p, submit(compiler, p)) for p in points]:
        result = f.result()
        assert result.status == "ok", (p, result.error)
        assert result.regs_per_thread is not None
        assert result.regs_per_thread <= p.register_limit, (p, result.regs_per_thread)
        if p in clean:
            assert not result.spill_bytes, (p, result.spill_bytes)


@pytest.mark.parametrize(("rows", "cols"), [r for r in SWEEP if r[1] >= BULK_MIN_COLS])
def test_long_rows_are_offered_the_bulk_copy_point_after_the_plan(rows: int, cols: int) -> None:
    for start in (FAMILY.baseline, plan(rows, cols)):
        found = moves(start, rows, cols)
        bulk = [(i, t, r) for i, (t, r) in enumerate(found) if destination(start, t).bulk]
        assert bulk, found[:3]
        i, text, reason = bulk[0]
        # before it only the plan and Triton's arrangement (one row a CTA, 4096x32768 alone)
        before = [destination(start, t) for t, _ in found[:i]]
        assert all(b == plan(rows, cols) or (b.cluster == 1 and b.rows_per_cta == 1)
                   for b in before), found[:i]
        assert i <= (1 if cols > 32768 else 3)
        q = destination(start, text)
        assert q == bulk_plan(rows, cols)
        assert "apply_bulk_copy(4)" in text
        assert "bulk async copies" in reason
        assert bulk_smem_bytes(q, cols) <= BULK_SMEM_CAP
        assert -(-rows // q.rows_per_cta) * q.cluster >= 128
    # from a bulk point, the plan is reached by turning the copies off first
    staged = bulk_plan(rows, cols)
    assert staged is not None
    back = moves(staged, rows, cols)
    assert back[0][0].startswith("apply_bulk_copy(0)")
    assert destination(staged, back[0][0]) == plan(rows, cols)


def test_short_rows_are_offered_packed_bulk_copies() -> None:
    found = moves(plan(65536, 128), 65536, 128)
    staged = [t for t, _ in found if destination(plan(65536, 128), t).bulk]
    assert staged
    q = destination(plan(65536, 128), staged[0])
    assert (q.row_threads, q.rows_per_cta, q.bulk) == (8, 32, 1)
    assert bulk_plan(8192, 8192) is None
    assert bulk_plan(3, 1000003) is None  # past what 8 CTAs stage


def test_the_gpu_script_times_the_picked_bulk_points() -> None:
    """runs/2026-12-01-7723069/softmax.sh names its points as JSON: each bulk one is a
    point of tests/softmax_bulk_points.py, each is valid, and every pick is timed."""
    import json
    import re

    script = (REPO / "runs" / "2026-12-01-7723069"
              / "softmax.sh").read_text()
    named = dict(re.findall(r"^(\w+)='(\{.*\})'$", script, flags=re.M))
    points = {name: FAMILY.params_from_dict(json.loads(text)) for name, text in named.items()}
    assert all(FAMILY.validate(p) is None for p in points.values())
    picks = {name: p.canonical() for name, p in BULK_PICKS.items()}
    bulk = {name: p for name, p in points.items() if p.bulk}
    assert set(bulk.values()) == set(picks.values())
    for name in named:
        assert f'"${name}"' in script, name
    assert "test_points_correct_on_awkward_shapes_and_every_distribution" in script
    assert "test_bulk_points_correct_on_awkward_shapes_and_every_distribution" in script


def test_bulk_sanitizer_shapes_stage_a_tile_and_take_the_fallback() -> None:
    """A bulk point's sanitizer shapes end with rows past one CTA's pack whose tiles are staged
    (cols % 4 == 3) and a row just past what a CTA may stage (the two-pass fallback)."""
    points = [p for p in FAMILY.sample(random.Random(5), 300) if p.bulk]
    points += [p.canonical() for p in BULK_PICKS.values()]
    assert len(points) > 50
    for p in points:
        staged, past = FAMILY.sanitizer_shapes(p)[-2:]
        assert staged["rows"] > p.rows_per_cta
        assert staged["cols"] % 4 == 3
        assert bulk_smem_bytes(p, staged["cols"]) <= BULK_SMEM_CAP, p
        assert bulk_smem_bytes(p, past["cols"]) > BULK_SMEM_CAP, p
        for shape in (staged, past):
            launch = FAMILY.launch(p, shape)
            assert isinstance(launch, LaunchConfig)
            assert (launch.dynamic_smem_bytes > 0) == (shape is staged)


def test_prefetch_validity_canonical_key_and_persistent_launch() -> None:
    """apply_prefetch: a bulk-copy point only (else rejected, and dropped by canonical()), its
    ``chunks`` kept (a bulk point's is 1 otherwise), left out of the key when off, and a
    persistent launch only where a thread holds its share of a tile."""
    staged = replace(BLOCK_ROW, cluster=4, bulk=4).canonical()
    ahead = applied(staged, "apply_prefetch(8)")
    assert isinstance(ahead, Candidate)
    q = ahead.params
    assert (q.prefetch, q.chunks, q.passes) == (True, 8, 2)
    assert q.canonical() == q.canonical().canonical() == q
    assert "prefetch" not in staged.to_dict()
    assert q.to_dict()["prefetch"] is True
    off = FAMILY.apply(ahead, "apply_prefetch(0)")
    assert isinstance(off, Candidate)
    assert off.params == staged
    rejected = applied(BLOCK_ROW, "apply_prefetch(8)")
    assert isinstance(rejected, Rejection)
    assert rejected.reason == "prefetch_needs_bulk"
    raw = replace(BLOCK_ROW, prefetch=True)
    rejection = FAMILY.validate(raw)
    assert isinstance(rejection, Rejection)
    assert rejection.reason == "prefetch_needs_bulk"
    assert raw.canonical() == BLOCK_ROW.canonical()
    # 4 CTAs x 512 threads x 8 float4 hold 65536 aligned columns, not 65540
    assert held_fits(q, 65536)
    assert not held_fits(q, 65540)
    assert not held_fits(q, 65535)
    launch = FAMILY.launch(q, dims(2048, 65536))
    assert isinstance(launch, LaunchConfig)
    assert launch.persistent
    assert launch.to_dict()["persistent"] is True
    assert launch.grid == (2048 * 4, 1, 1)   # the launcher cuts it to the resident CTAs
    for cols in (65540, 300000):  # past the registers, past the stage: not persistent
        launch = FAMILY.launch(q, dims(2048, cols))
        assert isinstance(launch, LaunchConfig)
        assert not launch.persistent
        assert "persistent" not in launch.to_dict()
    # a prefetching point estimates its registers from the tile it holds
    assert q.held_floats == 32
    wide = replace(q, chunks=32)
    rejection = FAMILY.validate(wide)
    assert isinstance(rejection, Rejection)
    assert rejection.reason == "registers_over_limit"


def test_space_enumerates_prefetch_points_once() -> None:
    from kernels.softmax.params import enumerate_space

    domains = {**DOMAINS, "block_threads": (512,), "row_threads": (512,), "cluster": (4,),
               "vec": (4,), "unroll": (2,), "load_hint": (0,), "store_hint": (False,),
               "bulk": (0, 4), "push": (False,), "passes": (2,), "min_ctas": (0,),
               "ptx_stores": (False,)}
    points = list(enumerate_space("sm_90", domains))
    assert len(points) == len(set(points))
    held = sorted(p.chunks for p in points if p.prefetch)
    assert held == [1, 2, 4, 8, 16]   # 32 float4 a thread is over 512 threads' registers
    assert sum(1 for p in points if p.bulk and not p.prefetch) == 1


def test_sampling_draws_no_prefetch_and_keeps_its_points() -> None:
    """``prefetch`` joined after the replay dataset: a seed's sample is what it was (the field
    is not drawn), and the picked points are valid."""
    points = FAMILY.sample(random.Random(3), 200)
    assert not any(p.prefetch for p in points)
    assert all(FAMILY.validate(p) is None for p in PREFETCH_PICKS.values())


def test_the_rule_book_does_not_offer_what_lost_on_the_gpu() -> None:
    """apply_prefetch, apply_staged_row and set_min_ctas ran slower than (or as fast as) the
    register-held bests on the H200 (docs/GPU.md): the rule book leaves them to
    the agent's own moves."""
    for rows, cols in ((256, 262144), (1024, 131072), (2048, 65536), (65536, 128)):
        for start in (plan(rows, cols), bulk_plan(rows, cols), FAMILY.baseline):
            assert start is not None
            found = moves(start, rows, cols)
            assert found
            assert not [t for t, _ in found if destination(start, t).prefetch]
            for name in ("apply_prefetch", "apply_staged_row", "set_min_ctas"):
                assert not [t for t, _ in found if name in t]


def test_staged_row_validity_canonical_key_and_its_shared_memory() -> None:
    """apply_staged_row: one pass (set by the move), its vectors in shared memory counted in
    the capacity and the launch's dynamic shared memory; dropped by canonical() off the
    one-pass kernel and on a bulk-copy point, left out of the key when 0, rejected below sm_80
    and past the shared memory a CTA may have."""
    start = replace(BLOCK_ROW, cluster=4)
    moved = applied(start, "apply_staged_row(4)")
    assert isinstance(moved, Candidate)
    q = moved.params
    assert (q.passes, q.chunks, q.staged) == (1, 4, 4)
    assert q.capacity == 2 * start.capacity == (4 + 4) * 512 * 4 * 4
    assert q.staged_bytes == 4 * 512 * 16 == FAMILY.dynamic_smem_bytes(q)
    assert "staged" not in start.to_dict()
    assert q.to_dict()["staged"] == 4
    launch = FAMILY.launch(q, dims(64, q.capacity))
    assert isinstance(launch, LaunchConfig)
    assert launch.dynamic_smem_bytes == q.staged_bytes
    assert not launch.persistent
    back = FAMILY.apply(moved, "apply_staged_row(0)")
    assert isinstance(back, Candidate)
    assert back.params == start
    assert replace(q, passes=2).canonical().staged == 0
    assert replace(q, bulk=2).canonical().staged == 0
    for arch, reason in (("sm_75", "staged_row_needs_sm80"), ("sm_86", "staged_row_over_smem")):
        rejection = FAMILY.validate(replace(q, cluster=1, staged=16), arch)
        assert isinstance(rejection, Rejection)
        assert rejection.reason == reason
    rejection = FAMILY.validate(replace(q, staged=32))   # 256 KB
    assert isinstance(rejection, Rejection)
    assert rejection.reason == "staged_row_over_smem"
    assert rejection.figures["smem_bytes"] == 32 * 512 * 16


def test_min_ctas_caps_the_registers_and_renders_the_launch_bounds() -> None:
    """set_min_ctas(n): __launch_bounds__(BLOCK, n) in the source (nothing without it), the
    register limit the family checks is 64K / (threads x n), and more threads an SM than
    2048 are rejected with the numbers."""
    p = SoftmaxParams(block_threads=256, row_threads=256, cluster=16, vec=4, passes=1,
                      chunks=8, staged=8, push=True)
    assert "__launch_bounds__(BLOCK)" in FAMILY.render(p)
    moved = applied(p, "set_min_ctas(4)")
    assert isinstance(moved, Candidate)
    q = moved.params
    assert q.register_limit == 64 < p.register_limit == 255
    assert "__launch_bounds__(BLOCK, 4)" in FAMILY.render(q)
    assert "min_ctas" not in p.to_dict()
    assert q.to_dict()["min_ctas"] == 4
    over = applied(replace(p, block_threads=1024, row_threads=1024, chunks=2, staged=2),
                   "set_min_ctas(3)")
    assert isinstance(over, Rejection)
    assert over.reason == "min_ctas_over_threads"
    assert over.figures["max_threads"] == 2048
    tight = applied(replace(p, block_threads=512, row_threads=512, chunks=8, staged=0),
                    "set_min_ctas(3)")   # 32 floats a thread in 42 registers
    assert isinstance(tight, Rejection)
    assert tight.reason == "registers_over_limit"


# ---- aligned rows and a CTA a row unit ---------------------------------------------------
#: Triton's arrangement at 16384x1024 with Triton's code (max first, whole vector stores)
TRITON_1024 = row_a_cta_point(128, 2)


def test_aligned_rows_and_one_pass_grid_validity_canonical_and_keys() -> None:
    """Both moves off by default and out of every older point's JSON and key; on, each is in
    both. ``aligned_rows`` needs vector accesses without bulk copies or ``pipeline``,
    ``one_pass_grid`` a launch that is not persistent (no bulk copies, no spread group):
    elsewhere the move is rejected with the fields' values and canonical() drops the field."""
    from agent.policies.base import key_of

    for name, reason in (("aligned_rows", "aligned_rows_needs_vectors"),
                         ("one_pass_grid", "one_pass_grid_needs_plain_launch")):
        move = f"apply_{name}"
        assert name not in TRITON_1024.to_dict()
        on = applied(TRITON_1024, f"{move}(true)")
        assert isinstance(on, Candidate), on
        assert getattr(on.params, name) is True
        assert on.params.to_dict()[name] is True
        assert on.params.canonical() == on.params
        assert key_of(on.params) != key_of(TRITON_1024)
        assert FAMILY.validate(on.params) is None
        back = FAMILY.apply(on, f"{move}(false)")
        assert isinstance(back, Candidate)
        assert back.params == TRITON_1024
        assert key_of(back.params) == key_of(TRITON_1024)
        same = applied(TRITON_1024, f"{move}(false)")
        assert isinstance(same, Rejection)
        assert same.reason == "no_change"
        bulky = replace(BLOCK_ROW, cluster=4, bulk=4).canonical()
        for start in (bulky, *((FAMILY.baseline,) if name == "aligned_rows" else ()),
                      *((replace(BLOCK_ROW, cluster=4, spread=True),)
                        if name == "one_pass_grid" else ())):
            rejected = applied(start, f"{move}(true)")
            assert isinstance(rejected, Rejection), (name, start)
            assert rejected.reason == reason
            assert rejected.figures
            raw = replace(start, **{name: True})
            rejection = FAMILY.validate(raw)
            assert isinstance(rejection, Rejection)
            assert rejection.reason == reason
            assert raw.canonical() == start.canonical()
    # a pipelined spread group keeps its own row split
    piped = SoftmaxParams(block_threads=64, row_threads=64, cluster=4, vec=4, passes=1,
                          chunks=2, spread=True, pipeline=True)
    assert FAMILY.validate(replace(piped, aligned_rows=True)).reason == (  # type: ignore[union-attr]
        "aligned_rows_needs_vectors")
    # the sampler and the seed space draw neither (every seed keeps its points)
    assert not any(p.aligned_rows or p.one_pass_grid
                   for p in FAMILY.sample(random.Random(5), 200))
    assert not any(p.aligned_rows or p.one_pass_grid for p in FAMILY.space())


def test_old_points_render_as_before_the_two_moves() -> None:
    """The replay dataset's points, 300 samples and every seventh seed point render byte for
    byte as at 68c0dcf (before ``aligned_rows`` and ``one_pass_grid``), under the same keys."""
    import gzip
    import hashlib
    import json

    from agent.policies.base import key_of

    [dataset] = FAMILY.replay_datasets()
    with gzip.open(str(dataset), "rt") as fh:
        records = [json.loads(line) for line in fh if line.strip()]
    points = {FAMILY.params_from_dict(r["params"]): None for r in records
              if isinstance(r.get("params"), dict)}
    points.update(dict.fromkeys(FAMILY.sample(random.Random(3), 300)))
    points.update(dict.fromkeys(FAMILY.space()[::7]))
    digest = hashlib.sha256()
    for p in sorted(points, key=lambda q: json.dumps(q.to_dict(), sort_keys=True)):
        digest.update(json.dumps(p.to_dict(), sort_keys=True).encode())
        digest.update(key_of(p).encode())
        digest.update(FAMILY.render(p).encode())
    assert digest.hexdigest() == OLD_POINTS_DIGEST


#: sha256 of :func:`test_old_points_render_as_before_the_two_moves`'s points (JSON, key,
#: source), taken at 68c0dcf
OLD_POINTS_DIGEST = "a3d49c35bcbc822290baf76111b23e7ce74e9472b19dfc9c341bc881599b89c7"


def test_one_pass_grid_launch_covers_every_row() -> None:
    """A ``one_pass_grid`` launch has a CTA (a cluster) for every row unit, past the
    :data:`MAX_UNITS` cap of the grid-stride launch; refused past 2^31 elements (its 32-bit
    offsets) or 2^31 - 1 CTAs."""
    packed = replace(plan(32768, 512), max_first=True, one_pass_grid=True)
    assert packed.rows_per_cta == 8
    for rows in (1, 9, 32768, 8 * MAX_UNITS + 5):
        cols = min(512, MAX_ELEMENTS // rows)
        launch = FAMILY.launch(packed, dims(rows, cols))
        assert isinstance(launch, LaunchConfig)
        assert launch.grid == (-(-rows // 8), 1, 1)
        looped = FAMILY.launch(replace(packed, one_pass_grid=False), dims(rows, cols))
        assert isinstance(looped, LaunchConfig)
        assert looped.grid == (min(-(-rows // 8), MAX_UNITS), 1, 1)
    clustered = SoftmaxParams(block_threads=64, row_threads=64, cluster=2, vec=4, passes=1,
                              chunks=2, one_pass_grid=True)
    launch = FAMILY.launch(clustered, dims(7, 1000))
    assert isinstance(launch, LaunchConfig)
    assert launch.grid == (14, 1, 1)
    over = FAMILY.launch(packed, dims(1 << 28, 9))
    assert isinstance(over, Rejection)
    assert over.reason == "one_pass_grid_over_limit"
    assert over.figures["elements"] == 9 << 28


def test_the_two_moves_follow_tritons_code_where_rows_are_whole_float4() -> None:
    """From a point with Triton's code (max first, whole vector stores) at rows of whole float4,
    the rule book offers both moves in one; not at cols % 4 != 0, not again once both are on,
    and not from a point without that code (the replay datasets hold none with it, so their
    campaigns never see the move)."""
    for start, rows, cols in ((TRITON_1024, 16384, 1024),
                              (replace(plan(32768, 512), max_first=True, ptx_stores=True),
                               32768, 512)):
        found = [(destination(start, t), r) for t, r in moves(start, rows, cols)
                 if "head and tail" in r]
        assert [q for q, _ in found] == [replace(start, aligned_rows=True,
                                                 one_pass_grid=True)]
        assert str(cols) in found[0][1]
    assert not [r for _, r in moves(TRITON_1024, 16384, 1022) if "head and tail" in r]
    done = replace(TRITON_1024, aligned_rows=True, one_pass_grid=True)
    assert not [r for _, r in moves(done, 16384, 1024) if "head and tail" in r]
    plain = plan(16384, 1024)
    assert not [r for _, r in moves(plain, 16384, 1024) if "32-bit row offsets" in r]
    # the plan move keeps both on (a move back to the plan does not drop them)
    walked = [destination(done, t) for t, r in moves(done, 16384, 1024) if r.startswith("plan")]
    assert all(q.aligned_rows and q.one_pass_grid for q in walked)


def test_the_two_moves_take_the_head_tail_and_split_stores_out_of_the_sass(
        compiler: Compiler) -> None:
    """Triton's arrangement at 16384x1024 with Triton's code, through nvcc for sm_90, without
    and with the two moves: no spills, no more registers, and (with a ``cuobjdump``) a fifth
    fewer instructions in the whole kernel, the vector path's scalar head/tail loads and
    stores gone (those left are the scalar path's), and every vector store whole."""
    import re
    import subprocess

    from sass_support import cuobjdump

    moved = replace(TRITON_1024, aligned_rows=True, one_pass_grid=True)
    before, after = (submit(compiler, p).result() for p in (TRITON_1024, moved))
    for r in (before, after):
        assert r.status == "ok", r.error
        assert not r.spill_bytes
    assert after.regs_per_thread is not None
    assert before.regs_per_thread is not None
    assert after.regs_per_thread <= before.regs_per_thread
    tool = cuobjdump()
    if tool is None:
        return
    counts = []
    for r in (before, after):
        assert r.cubin_path is not None
        sass = subprocess.run([tool, "-sass", r.cubin_path], capture_output=True, text=True,
                              check=True).stdout
        ops = [m.group(1) for m in re.finditer(r"/\*[0-9a-f]{4}\*/\s+([^;]*);", sass)]
        ops = [o for o in ops if not o.startswith("NOP")]
        counts.append({"all": len(ops),
                       "STG.E": sum(bool(re.search(r"STG\.E(?!\.128|\.64)", o)) for o in ops),
                       "LDG.E": sum(bool(re.search(r"LDG\.E(?!\.128|\.64)", o)) for o in ops),
                       "STG.E.128": sum("STG.E.128" in o for o in ops)})
    old, new = counts
    assert new["all"] <= 0.8 * old["all"], counts
    assert new["STG.E"] < old["STG.E"], counts
    assert new["LDG.E"] < old["LDG.E"], counts
    assert new["STG.E.128"] >= 2, counts
