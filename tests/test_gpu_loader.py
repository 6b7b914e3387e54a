"""The exported bundle's Python loader on a GPU: correct at its entries and at random shapes
without one (the fallback), eager and under ``torch.compile(fullgraph=True)``, for softmax,
the GEMM and a user family (``examples/transpose``); its time at an entry against the cubin
launched directly, and torch's beside it in the same run; the peers' harness
(``bench/peers.py --bundle``) checking and timing it beside the peers."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
import threading
import warnings
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("cuda.bindings")

from bundle_support import build, import_loader, transpose_family  # noqa: E402
from repo import ROOT  # noqa: E402

from agent.bundle import BundleEntry, point_id, replay_entries, write_bundle  # noqa: E402
from bench.loader_bench import DirectLaunch, nearest, random_shape  # noqa: E402
from bench.loader_timing import (  # noqa: E402
    TOLERANCE,
    flushed_us,
    inputs,
    per_call_us,
    scaled_error,
    vendor,
)
from core.replay import ReplayDataset  # noqa: E402
from kernels import get_family  # noqa: E402
from kernels.base import Candidate, Dims  # noqa: E402
from worker.compile import Compiler  # noqa: E402

pytestmark = pytest.mark.gpu
SOFTMAX_TUNED = ("65536x128", "16384x1024", "16x262144", "256x262144")
EXTRA = {"softmax": [{"rows": 64, "cols": 1024}, {"rows": 300, "cols": 777}],
         "gemm_bias_relu": [{"m": 64, "n": 64, "k": 64}, {"m": 517, "n": 1029, "k": 263}]}
TRANSPOSE = [(64, 96), (1000, 3), (2048, 4096)]


def nearest_entries(family: Any, tuned: list[BundleEntry], shapes: list[dict[str, int]]
                    ) -> list[BundleEntry]:
    out = []
    for shape in shapes:
        dims = family.make_dims(shape)
        out.append(BundleEntry(dims, nearest(tuned, dims).params, source="nearest"))
    return out


@pytest.fixture(scope="module")
def bundles(gpu: None, compiler: Compiler, tmp_path_factory: pytest.TempPathFactory
            ) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("gpu-loader")
    out = {}
    for name, shapes in (("softmax", SOFTMAX_TUNED), ("gemm_bias_relu", None)):
        family = get_family(name)
        tuned = [e for e in replay_entries(family) if shapes is None or str(e.shape) in shapes]
        out[name] = build(compiler, root / name, family, shapes,
                          nearest_entries(family, tuned, EXTRA[name]))
    transpose = transpose_family()
    staged = transpose.apply(Candidate(transpose.baseline), "apply_shared_memory_transpose()")
    assert isinstance(staged, Candidate)
    points = [transpose.baseline, staged.params]
    entries = [BundleEntry(Dims(m=m, n=n), points[i % 2], source="tuned")
               for i, (m, n) in enumerate(TRANSPOSE)]
    out["transpose"] = write_bundle(root / "transpose", transpose, entries, compiler=compiler,
                                    arch="sm_90", sm_count=132, gpu_name="NVIDIA H200",
                                    provenance={})
    return out


@pytest.fixture(scope="module")
def loader(bundles: dict[str, Path]) -> ModuleType:
    return import_loader(bundles["softmax"])


@pytest.fixture(scope="module")
def libs(bundles: dict[str, Path], loader: ModuleType) -> dict[str, Any]:
    return {name: loader.load(path).kernels[name] for name, path in bundles.items()}


def shapes_of(bundle_kernel: Any) -> list[dict[str, int]]:
    return [e["shape"] for e in bundle_kernel.entries.values()]


def untuned(family: str, count: int, seed: int, taken: list[dict[str, int]]
            ) -> list[dict[str, int]]:
    rng = random.Random(seed)
    out: list[dict[str, int]] = []
    while len(out) < count:
        shape = random_shape(rng, family)
        if family == "softmax" and shape["rows"] * shape["cols"] > 1 << 24:
            continue  # keep the test's float64 references small
        if family == "gemm_bias_relu" and shape["m"] * shape["n"] * shape["k"] > 1 << 33:
            continue
        if shape not in taken and shape not in out:
            out.append(shape)
    return out


@pytest.mark.parametrize("family", ["softmax", "gemm_bias_relu"])
def test_builtin_family_is_correct_at_entries_and_random_shapes(
        libs: dict[str, Any], loader: ModuleType, family: str) -> None:
    kernel = libs[family]
    cases = [(s, True) for s in shapes_of(kernel)]
    cases += [(s, False) for s in untuned(family, 6, 35, shapes_of(kernel))]
    for number, (shape, has_entry) in enumerate(cases):
        dims = get_family(family).make_dims(shape)
        args = inputs(torch, family, dims, number)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = kernel(*args)
            again = kernel(*args)
        reports = [w for w in caught if issubclass(w.category, loader.FallbackWarning)]
        assert len(reports) == (0 if has_entry else 1), (shape, [str(w.message) for w in caught])
        torch.cuda.synchronize()
        check = scaled_error(torch, family, out, args)
        assert check["rel_err"] <= TOLERANCE, (shape, check)
        assert check["max_scaled_err"] <= TOLERANCE, (shape, check)
        assert torch.equal(out, again), shape
        assert out.shape == tuple(args[0].shape[:1]) + (
            (dims["cols"],) if family == "softmax" else (dims["n"],))


def test_loader_runs_on_torchs_current_stream(libs: dict[str, Any]) -> None:
    kernel = libs["softmax"]
    dims = get_family("softmax").make_dims(shapes_of(kernel)[0])
    (x,) = inputs(torch, "softmax", dims, 7)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        y = kernel(x)
        total = y.sum(-1)  # queued behind the kernel on the same stream
    side.synchronize()
    assert torch.allclose(total, torch.ones_like(total), atol=1e-4)


@pytest.mark.parametrize("tuned_on", ["this GPU", "another GPU"])
def test_a_bundle_tuned_on_another_gpu_of_its_arch_warns_once(
        bundles: dict[str, Path], loader: ModuleType, tmp_path: Path, tuned_on: str) -> None:
    """The softmax bundle with its ``gpu.name`` set to this device's name, then to another:
    both run and are right; only the second warns, at its first call alone, eager and under
    ``torch.compile``."""
    here = torch.cuda.get_device_name(0)
    name = here if tuned_on == "this GPU" else f"{here} (not this one)"
    folder = tmp_path / "bundle"
    shutil.copytree(bundles["softmax"], folder)
    info = json.loads((folder / "dispatch.json").read_text())
    info["gpu"]["name"] = name
    (folder / "dispatch.json").write_text(json.dumps(info))
    kernel = loader.load(folder).softmax
    dims = get_family("softmax").make_dims(shapes_of(kernel)[0])
    (x,) = inputs(torch, "softmax", dims, 13)
    torch._dynamo.reset()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outs = [kernel(x), kernel(x), torch.compile(lambda t: kernel(t), fullgraph=True)(x)]
    reports = [str(w.message) for w in caught if issubclass(w.category, loader.DeviceWarning)]
    if tuned_on == "this GPU":
        assert reports == []
    else:
        assert reports == [f"tuneforge_loader: softmax was tuned on {name} and runs on cuda:0, "
                           f"{here} (both sm_90): its points are correct here, but a library "
                           "tuned on this GPU may be faster"]
    expected = torch.softmax(x.double(), -1)
    for y in outs:
        assert (y.double() - expected).abs().max().item() <= 1e-6


def near_tie_bundle(compiler: Compiler, loader: ModuleType, out: Path, slow_first: bool,
                    gpu_name: str) -> Any:
    """A softmax bundle for ``gpu_name`` with an entry at 8192x8192 whose point and one
    near-tie are the replay's best there and a point about 1.5x slower (the slow one the
    entry's own with ``slow_first``), and an entry at 4096x8192 running the entry's point
    alone; the loaded kernel, and the two points' ids (fast, slow)."""
    family = get_family("softmax")
    shape = family.parse_dims("8192x8192")
    ranked = ReplayDataset(family.replay_datasets()[0], family).ranked(shape)
    fast, slow = (family.params_from_dict(r["params"])
                  for r in (ranked[0], ranked[len(ranked) // 2]))
    first, tie = (slow, fast) if slow_first else (fast, slow)
    entries = [BundleEntry(shape, first, source="tuned", alternates=[(tie, None, {})]),
               BundleEntry(family.parse_dims("4096x8192"), first, source="tuned")]
    folder = write_bundle(out, family, entries, compiler=compiler, arch="sm_90",
                          sm_count=torch.cuda.get_device_properties(0).multi_processor_count,
                          gpu_name=gpu_name, provenance={})
    return loader.load(folder).softmax, (point_id(family, fast), point_id(family, slow))


@pytest.mark.parametrize("case", ["slow point first", "fast point first", "tuned here",
                                  "compiled"])
def test_on_another_gpu_an_entrys_near_ties_are_timed_and_the_fastest_runs(
        compiler: Compiler, loader: ModuleType, tmp_path: Path, case: str) -> None:
    """On a GPU whose name is not the bundle's, the first call at an entry with a near-tie
    times both points and the faster runs from then on (whichever of them is the entry's
    own), eager and under ``torch.compile``; what ``lookup`` and ``ties`` say agrees. On the
    GPU the bundle names, nothing is timed and the entry's point runs."""
    here = torch.cuda.get_device_name(0)
    kernel, (fast, slow) = near_tie_bundle(
        compiler, loader, tmp_path / "bundle", case != "fast point first",
        here if case == "tuned here" else f"{here} (not this one)")
    (x,) = inputs(torch, "softmax", {"rows": 8192, "cols": 8192}, 21)
    torch._dynamo.reset()
    call = torch.compile(lambda t: kernel(t), fullgraph=True) if case == "compiled" else kernel
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", loader.DeviceWarning)
        y, again = call(x), call(x)
    torch.cuda.synchronize()
    expected = torch.softmax(x.double(), -1)
    assert (y.double() - expected).abs().max().item() <= 1e-6
    assert torch.equal(y, again)
    ties = kernel.ties(0)
    if case == "tuned here":
        assert ties == {}
        assert kernel.lookup(x).runs.startswith(f"point {slow} (tuned)")
        return
    (record,) = ties.values()
    assert set(record["us"]) == {fast, slow}
    assert record["us"][fast] < record["us"][slow] * (1 - loader.TIE_MARGIN), record
    assert record["point"] == fast
    found = kernel.lookup(x)
    assert found.timed == record
    assert found.runs == f"point {fast} (tuned; the fastest of 2 near-ties timed on cuda:0)"
    assert list(ties) == [(8192, 8192)]  # a call at a shape whose entry lists none times nothing
    kernel(x[:4096])
    assert list(kernel.ties(0)) == [(8192, 8192)]


def test_a_first_call_under_cuda_graph_capture_times_nothing(
        compiler: Compiler, loader: ModuleType, tmp_path: Path) -> None:
    """On another GPU, a first call at an entry with a near-tie made while a CUDA graph
    captures runs the entry's point (nothing can be timed there) and is right when replayed;
    the next call outside capture times the near-ties."""
    here = torch.cuda.get_device_name(0)
    kernel, (fast, slow) = near_tie_bundle(compiler, loader, tmp_path / "bundle", True,
                                           f"{here} (not this one)")
    (x,) = inputs(torch, "softmax", {"rows": 8192, "cols": 8192}, 22)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", loader.DeviceWarning)
        kernel(x[:4096])  # the entry's point's module loaded outside capture
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            captured = kernel(x)
        assert kernel.ties(0) == {}
        graph.replay()
        torch.cuda.synchronize()
        expected = torch.softmax(x.double(), -1)
        assert (captured.double() - expected).abs().max().item() <= 1e-6
        eager = kernel(x)
    torch.cuda.synchronize()
    assert (eager.double() - expected).abs().max().item() <= 1e-6
    assert kernel.ties(0)[(8192, 8192)]["point"] == fast


@pytest.mark.parametrize("context", ["torch's", "none"])
def test_a_call_from_another_thread_runs_in_the_devices_context(
        libs: dict[str, Any], context: str) -> None:
    """A call on a thread that has not run the shape (its plan made on the main thread) and,
    in the second case, has no CUDA context current: the launch is made in the device's
    primary context and the answer is right."""
    from cuda.bindings import driver as cu

    kernel = libs["softmax"]
    dims = get_family("softmax").make_dims(EXTRA["softmax"][0])
    (x,) = inputs(torch, "softmax", dims, 11)
    kernel(x)  # the plan, made here
    expected = torch.softmax(x.double(), -1)
    got: dict[str, Any] = {}

    def work() -> None:
        try:
            if context == "none":
                assert cu.cuCtxSetCurrent(cu.CUcontext(0))[0] == cu.CUresult.CUDA_SUCCESS
            got["y"] = kernel(x)
            torch.cuda.synchronize()
        except BaseException as exc:  # reported on the test's thread
            got["error"] = exc

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert "error" not in got, got.get("error")
    assert (got["y"].double() - expected).abs().max().item() <= 1e-6


def test_user_family_is_exact_at_entries_and_through_its_reference(
        libs: dict[str, Any], loader: ModuleType) -> None:
    kernel = libs["transpose"]
    cases = [(m, n, True) for m, n in TRANSPOSE] + [(7, 9, False), (1, 5000, False),
                                                    (3001, 17, False)]
    for m, n, has_entry in cases:
        x = torch.randn(m, n, device="cuda")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = kernel(x)
        reports = [w for w in caught if issubclass(w.category, loader.FallbackWarning)]
        assert len(reports) == (0 if has_entry else 1)
        assert out.shape == (m, n)  # the count m * n's factors: the n x m transpose's bytes
        assert torch.equal(out.view(n, m), x.t()), (m, n)


@pytest.mark.parametrize("family", ["softmax", "gemm_bias_relu", "transpose"])
def test_compiled_fullgraph_matches_eager(libs: dict[str, Any], family: str) -> None:
    kernel = libs[family]
    torch._dynamo.reset()

    def program(*args: Any) -> Any:
        return kernel(*args) * 2.0 + 1.0

    compiled = torch.compile(program, fullgraph=True)
    entry = shapes_of(kernel)[0 if family != "gemm_bias_relu" else 1]
    shapes = [entry, untuned(family, 1, 11, shapes_of(kernel))[0]] if family != "transpose" \
        else [{"m": 64, "n": 96}, {"m": 33, "n": 70}]
    for number, shape in enumerate(shapes):
        if family == "transpose":
            args = [torch.randn(shape["m"], shape["n"], device="cuda")]
        else:
            args = inputs(torch, family, get_family(family).make_dims(shape), 100 + number)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = compiled(*args)
            want = program(*args)
        assert torch.equal(got, want), (family, shape)


@pytest.mark.parametrize("family", ["softmax", "gemm_bias_relu"])
def test_time_at_entries_is_the_cubins_and_dispatch_is_cheap(
        libs: dict[str, Any], bundles: dict[str, Path], loader: ModuleType, family: str) -> None:
    """At each entry the loader's flushed time (the GPU's work, the call's host time hidden
    behind a GPU sleep after the flush) is within 5 % (+ 2 µs) of the same cubin launched
    directly; back-to-back at the small entry it adds at most 20 µs a call (the target of 5
    µs is the benchmark's to report)."""
    kernel = libs[family]
    flush = torch.empty(64 << 20, device="cuda")
    for shape in shapes_of(kernel):
        dims = get_family(family).make_dims(shape)
        args = inputs(torch, family, dims, 1)
        entry = kernel.entries[dims.values_tuple()]
        direct = DirectLaunch(torch, bundles[family], entry, args, loader)
        direct_us = flushed_us(torch, direct, flush, 15)
        loader_us = flushed_us(torch, partial(kernel, *args), flush, 15)
        vendor_us = flushed_us(torch, partial(vendor(torch, family), *args), flush, 15)
        sys.stdout.write(f"{family} {dims}: loader {loader_us:.1f} us, direct "
                         f"{direct_us:.1f} us, torch {vendor_us:.1f} us "
                         f"({vendor_us / loader_us:.2f}x torch)\n")
        assert loader_us <= 1.05 * direct_us + 2.0, (str(dims), loader_us, direct_us)
    small = get_family(family).make_dims(EXTRA[family][0])
    args = inputs(torch, family, small, 2)
    direct = DirectLaunch(torch, bundles[family], kernel.entries[small.values_tuple()], args,
                          loader)
    added = per_call_us(torch, lambda: kernel(*args), 500) - per_call_us(torch, direct, 500)
    sys.stdout.write(f"{family} {small}: dispatch adds {added:.2f} us a call\n")
    assert added <= 20.0


def test_the_peers_harness_times_the_library_where_it_has_an_entry(
        bundles: dict[str, Path], tmp_path: Path) -> None:
    """``bench/peers.py --bundle``: at a tuned entry and a nearest one the library is a peer
    of its own, called through the bundle's loader, checked on every distribution and timed
    flushed and sustained; at a shape without an entry it is not timed (that would be the
    fallback, torch's own kernel)."""
    out = tmp_path / "peers.json"
    done = subprocess.run(
        [sys.executable, "bench/peers.py", "--job", "softmax=65536x128,300x777,100x100",
         "--bundle", str(bundles["softmax"]), "--min-ms", "20", "--json-out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    shapes = json.loads(out.read_text())["families"]["softmax"]["shapes"]
    for shape in ("65536x128", "300x777"):
        peers = shapes[shape]["peers"]
        assert list(peers)[:2] == ["torch.softmax", "tuneforge library"], shape
        mine = peers["tuneforge library"]
        assert "error" not in mine, (shape, mine.get("error"))
        assert mine["correctness"]["passed"], (shape, mine["correctness"])
        assert [c["dist"] for c in mine["correctness"]["cases"]] == ["normal", "large"]
        assert mine["avg_us"] > 0
        assert mine["sustained_us"] > 0
        assert mine["graph_us"] > 0
        assert mine["bundle"] == str(bundles["softmax"].resolve())
        assert mine["runs"].startswith("point "), mine["runs"]  # the loader's lookup
    assert "tuneforge library" not in shapes["100x100"]["peers"]
