"""The GEMM's kernels whose CTAs meet through global memory (the on-demand split: slices
claimed and counted done across CTAs, stages copied once a block's slices are; stream-K: part
tiles summed by the fix-up) or whose consumers give a stage back with MMAs still in flight
(accumulating in the MMAs: one tile back), launched again and again with the workspace and C
poisoned before every launch. Each sums in a fixed order, so every launch must give the same
bits: a launch that differs (or leaves a NaN) read a block before its slices were stored, a
part before it was written, or a stage its producer had refilled. The contract test
(tests/test_gpu_wgmma.py) holds each kernel to float64 a few times; this one holds it to its
own first answer two hundred times a shape."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("cuda.bindings")

from bf16_points import (  # noqa: E402
    BF3_ACCUMULATE,
    BF3_ON_DEMAND,
    BF3_ON_DEMAND_SK,
    BF3_STREAM_K,
    BF3_WIDE,
)
from gpu_support import save  # noqa: E402

from agent.bundle import BundleEntry, write_bundle  # noqa: E402
from bench.loader_bench import DirectLaunch  # noqa: E402
from bench.loader_timing import inputs, scaled_error  # noqa: E402
from kernels import get_family  # noqa: E402
from kernels.gemm_bias_relu import GemmParams  # noqa: E402
from worker.compile import Compiler  # noqa: E402

pytestmark = pytest.mark.gpu
POINTS: dict[str, GemmParams] = {
    "on demand": BF3_ON_DEMAND,
    "on demand, two producer warpgroups": replace(BF3_ON_DEMAND, producers=2).canonical(),
    "on demand, stream-K": BF3_ON_DEMAND_SK,
    "pass, stream-K": BF3_STREAM_K,
    "accumulating in the MMAs": BF3_ACCUMULATE,
    "accumulating in the MMAs, 128 x 256, stream-K": replace(BF3_WIDE, stream_k=1).canonical(),
}
#: the headline shape whose first wave shares every block, the one whose stream-K row is 27 %
#: of a wave, and one with tails everywhere
SHAPES = ({"m": 4096, "n": 4096, "k": 4096}, {"m": 3000, "n": 5000, "k": 2000},
          {"m": 1000, "n": 1002, "k": 999})
REPEATS = 200
#: the bf16x3 bound of the contract (worst element error over Σ|a·b| + |bias|)
BOUND = 3e-5


@pytest.fixture(scope="module")
def bundles(gpu: None, compiler: Compiler, tmp_path_factory: pytest.TempPathFactory
            ) -> dict[str, Path]:
    """A bundle a point, with an entry at every shape (the launches as the H200 gets them)."""
    family = get_family("gemm_bias_relu")
    root = tmp_path_factory.mktemp("split-race")
    return {name: write_bundle(root / str(i), family,
                               [BundleEntry(family.make_dims(s), p, source="tuned",
                                            provenance={"campaign": "race"}) for s in SHAPES],
                               compiler=compiler, arch="sm_90", sm_count=132,
                               gpu_name="NVIDIA H200", provenance={})
            for i, (name, p) in enumerate(POINTS.items())}


def entry_at(bundle: Path, shape: dict[str, int]) -> dict[str, Any]:
    entries = json.loads((bundle / "dispatch.json").read_text())["entries"]
    return next(e for e in entries if e["shape"] == shape)


@pytest.mark.parametrize("name", list(POINTS))
def test_every_launch_gives_the_same_bits(bundles: dict[str, Path], name: str) -> None:
    rows: list[dict[str, Any]] = []
    for shape in SHAPES:
        args = inputs(torch, "gemm_bias_relu", shape, 7)
        launch = DirectLaunch(torch, bundles[name], entry_at(bundles[name], shape), args, None)
        assert launch.workspace is not None
        out = launch.outputs[0]
        first = None
        differ = 0
        for _ in range(REPEATS):
            launch.workspace.fill_(255)  # every float a NaN, every counter 2^32 - 1
            out.fill_(float("nan"))
            launch()
            if first is None:
                first = out.clone()
            elif not torch.equal(out, first):  # a NaN never equals: unwritten shows too
                differ += 1
        torch.cuda.synchronize()
        assert first is not None
        err = scaled_error(torch, "gemm_bias_relu", first.view(shape["m"], shape["n"]), args)
        rows.append({"shape": shape, "launches": REPEATS, "differ": differ, **err})
    save(f"split_race_{name.replace(', ', '_').replace(' ', '_')}", {"rows": rows})
    assert all(r["differ"] == 0 for r in rows), rows
    assert all(r["max_scaled_err"] <= BOUND for r in rows), rows
