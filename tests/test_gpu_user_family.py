"""A user family on a real GPU: the example transpose (``examples/transpose``, built from its
spec directory, nothing of it in Python) through the real evaluation child — its naive and
tiled points correct at every edge shape and distribution and timed against the copy rate, a
short expert campaign on it, and planted wrong user kernels refused with a clear reason.

Run on the GPU machine (figures under ``$TUNEFORGE_GPU_OUT``)::

    pytest -q -m gpu tests/test_gpu_user_family.py
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core.evaluation import EvalOptions
from kernels import register_family, unregister_family
from kernels.base import Dims
from kernels.userspec import SpecFamily, build_family, load_spec_dir
from worker.compile import Compiler
from worker.evaluate import GpuEvaluator
from worker.gpu_runner import ChildUnavailable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_support import save  # noqa: E402
from repo import ROOT

pytestmark = pytest.mark.gpu

EXAMPLE = ROOT / "examples" / "transpose"
FAMILY: SpecFamily = build_family(load_spec_dir(EXAMPLE))
SHAPE = Dims(m=8192, n=8192)
#: tiled points of the kind the example is designed for (32x32 and 64x64 tiles, padded
#: shared memory, several accesses a thread)
GOOD = [
    {"tile_x": 32, "tile_y": 32, "rows": 8, "use_smem": True, "pad": 1, "tiles": 1},
    {"tile_x": 32, "tile_y": 64, "rows": 8, "use_smem": True, "pad": 1, "tiles": 2},
    {"tile_x": 64, "tile_y": 64, "rows": 8, "vec": 2, "use_smem": True, "pad": 1, "tiles": 1},
    {"tile_x": 64, "tile_y": 64, "rows": 4, "vec": 4, "use_smem": True, "pad": 1, "tiles": 1},
]
#: the naive launch's mapping: column j = blockIdx.x * 32 + threadIdx.x, row i = blockIdx.y * 8
#: + threadIdx.y (the baseline's grid and block)
_HEAD = r'''
extern "C" __global__ void transpose(const float* __restrict__ in, float* __restrict__ out,
                                     int m, int n)
{
    const int j = blockIdx.x * 32 + threadIdx.x;
    const long long i = blockIdx.y * 8 + threadIdx.y;
    if (i >= m || j >= n) return;
'''
WRONG = {
    # only the output rows of the first half of the columns
    "partial": _HEAD + "    if (j < (n + 1) / 2) out[(long long)j * m + i] = in[i * n + j];\n}\n",
    # the neighbour's element: j + 1 instead of j (clamped at the last column)
    "off_by_one": _HEAD + "    out[(long long)j * m + i] = in[i * n + min(j + 1, n - 1)];\n}\n",
    # a NaN where the first element goes, everything else right
    "nan": _HEAD + "    const float v = in[i * n + j];\n"
                   "    out[(long long)j * m + i] = (i == 0 && j == 0) ? __int_as_float(0x7fc00000)"
                   " : v;\n}\n",
}
EXPECTED_REASON = {"partial": "never written", "off_by_one": "differs from the reference",
                   "nan": "NaN or Inf"}


@pytest.fixture(scope="module")
def ev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GpuEvaluator]:
    register_family(FAMILY, replace=True)
    compiler = Compiler(tmp_path_factory.mktemp("cc"), arch="sm_90")
    try:
        evaluator = GpuEvaluator(FAMILY, compiler, options=EvalOptions(timeout_s=120))
    except ChildUnavailable as exc:
        unregister_family(FAMILY.name)
        pytest.skip(f"no GPU evaluation here: {exc}")
    yield evaluator
    evaluator.close()
    unregister_family(FAMILY.name)


def measure(ev: GpuEvaluator, params: Any, *, verify: bool = True) -> Any:
    compiled = ev.compile(params).result()
    assert compiled.status == "ok", compiled.error
    return ev.measure(params, compiled, shape=SHAPE, iteration=0, seed=7, verify=verify)


def test_naive_and_tiled_points_are_correct_and_timed_against_the_copy_rate(
        ev: GpuEvaluator) -> None:
    figures: dict[str, Any] = {"device": ev.device, "shape": str(SHAPE)}
    naive = measure(ev, FAMILY.baseline)
    assert naive.status == "ok", naive.error
    assert naive.correctness is not None
    assert naive.correctness["passed"]
    shapes = {tuple(c["shape"]) for c in naive.correctness["cases"]}
    assert {tuple(e.values_tuple()) for e in FAMILY.edge_shapes} <= shapes
    assert {c["dist"] for c in naive.correctness["cases"]} == {"normal", "mixed", "uniform"}
    assert naive.perf is not None
    figures["naive"] = {"params": FAMILY.baseline.to_dict(), "perf": naive.perf}
    best = None
    for point in GOOD:
        params = FAMILY.params_from_dict(point)
        assert FAMILY.validate(params) is None
        m = measure(ev, params)
        assert m.status == "ok", (point, m.error)
        assert m.correctness is not None
        assert m.correctness["passed"], point
        assert m.perf is not None
        figures.setdefault("tiled", []).append({"params": params.to_dict(), "perf": m.perf})
        if best is None or m.perf["avg_us"] < best["avg_us"]:
            best = m.perf
    save("user_family_transpose_points", figures)
    assert best is not None
    # judged against the naive kernel of the same run, not an absolute figure (the best point
    # has run at 79-82 % of the copy rate; the rate is a benchmark's to record): a tiled
    # transpose is several times the naive one's speed
    assert best["avg_us"] * 4 < naive.perf["avg_us"], (best, naive.perf)
    assert best["pct_of_peak"] >= 60.0, best


def test_an_expert_campaign_on_the_user_family_finds_a_tiled_kernel(
        ev: GpuEvaluator, tmp_path: Path) -> None:
    """An expert campaign of 400 on the transpose runs to its end with no error and leaves a
    correct best at least 4x its naive baseline (a tiled kernel: the naive one is 12.8 % of
    the copy rate, the tiled points 38-85 %). Its share of the copy rate is saved; the speed
    target itself (85 % of the copy) is ``bench/spec_campaign.py``'s, recorded in docs/."""
    from replay_support import new_database

    from agent.embedded import EmbeddedRunner
    from agent.engine.lifecycle import CampaignSpec, create_campaign
    from agent.policies import make_policy
    from agent.report import summary
    from agent.spaces import FullSpace
    from core.models import Campaign

    _url, sessions = new_database(tmp_path)
    with sessions.begin() as s:
        campaign = create_campaign(
            s, CampaignSpec(kernel=FAMILY.name, dims=SHAPE.as_dict(), policy="expert",
                            budget_iterations=400, budget_wall_s=150, parallel=5),
            backend="gpu", device=ev.device)
        cid = campaign.id
    runner = EmbeddedRunner(sessions, [ev], policy=make_policy("expert"),
                            space=FullSpace(FAMILY, "sm_90"))
    runner.run(cid)
    assert not runner.errors, runner.errors
    with sessions() as s:
        finished = s.get(Campaign, cid)
        assert finished is not None
        result = summary(s, finished)
    best_us = result["best"]["avg_us"] if isinstance(result.get("best"), dict) else None
    assert best_us, result
    rate = FAMILY.metric.rate(SHAPE, best_us)
    copy = ev.device.get("copy_gbs")
    assert rate is not None
    assert copy, ev.device
    save("user_family_transpose_campaign", {**result, "pct_of_copy": 100.0 * rate / copy})
    assert finished.status == "done", result
    assert result["speedup_vs_baseline"] >= 4.0, result


@pytest.mark.parametrize("kind", list(WRONG))
def test_wrong_user_kernels_fail_with_a_clear_reason(ev: GpuEvaluator, kind: str) -> None:
    compiled = ev.compiler.compile(WRONG[kind], entry=FAMILY.name)
    assert compiled.status == "ok", compiled.error
    m = ev.measure(FAMILY.baseline, compiled, shape=SHAPE, iteration=0, seed=3, verify=True)
    assert m.status == "wrong", (kind, m.status, m.error)
    assert m.correctness is not None
    assert not m.correctness["passed"]
    assert EXPECTED_REASON[kind] in (m.error or ""), (kind, m.error)
    save(f"user_family_wrong_{kind}", {"status": m.status, "error": m.error})
