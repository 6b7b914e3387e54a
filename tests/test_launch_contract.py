"""The launch contract on the GPU side, without a GPU: the pycuda formats and argument order the
shared launch contract builds from a family's signature (the GEMM's as before, a two-buffer
family's), what the GPU child enqueues for a launch (recorded by stand-ins for pycuda's
functions), which correctness cases a point gets and what its requests carry, and the Nsight
launcher's spec."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from core.evaluation import CompileResult, EvalOptions
from kernels.base import Dims, LaunchConfig, Rejection
from kernels.family import DTYPES, FILL_KINDS, Buffer, Distribution, Fill, Scalar, Signature
from kernels.gemm_bias_relu import FAMILY, GemmParams
from kernels.gemm_bias_relu.launch import SPLIT_PASS_NAME, SPLIT_RESET_NAME, SPLITK_REDUCE_NAME
from kernels.gemm_bias_relu.shape import Shape
from worker import gpu_child
from worker import launch_contract as lc
from worker.evaluate import GpuEvaluator

SIMT = GemmParams(coalesced=True, smem=True, reg_m=8, reg_n=8, vec=4, pad=4)
SHAPE = Shape(256, 256, 65536)
GEMM_SIG = FAMILY.signature.resolve(SHAPE)
#: a row-wise family of two buffers (x in, y out) and two scalars, as a softmax declares it
ROWS = Signature(buffers=(Buffer("x", "rows * cols"), Buffer("y", "rows * cols", role="out")),
                 scalars=(Scalar("rows", "rows"), Scalar("cols", "cols")))
ROWS_SIG = ROWS.resolve({"rows": 8, "cols": 1000})


class FakeFunction:
    """Records prepare() and every prepared_async_call() into a shared log."""

    def __init__(self, name: str, log: list[tuple[str, Any]]) -> None:
        self.name = name
        self.log = log
        self.format: str | None = None

    def prepare(self, fmt: str) -> None:
        self.format = fmt

    def prepared_async_call(self, grid: tuple[int, ...], block: tuple[int, ...], stream: Any,
                            *args: Any, shared_size: int = 0) -> None:
        assert self.format is not None, f"{self.name} launched before prepare()"
        assert len(args) == len(self.format), (self.name, self.format, args)
        self.log.append((self.name, {"grid": grid, "block": block, "args": args,
                                     "smem": shared_size, "format": self.format}))


class FakeModule:
    def __init__(self, log: list[tuple[str, Any]]) -> None:
        self.log = log

    def get_function(self, name: str) -> FakeFunction:
        return FakeFunction(name, self.log)


def runtime(log: list[tuple[str, Any]], ws_bytes: int) -> gpu_child.Runtime:
    rt = gpu_child.Runtime.__new__(gpu_child.Runtime)
    rt.stream = "stream"
    rt.ws = "WS" if ws_bytes else None
    rt.ws_bytes = ws_bytes
    return rt


def main_kernel(log: list[tuple[str, Any]], workspace: bool,
                signature: dict[str, Any] = GEMM_SIG) -> FakeFunction:
    module = FakeModule(log)
    fn = module.get_function("gemm_bias_relu")
    fn._tf_module = module  # type: ignore[attr-defined]
    fn._tf_aux = {}  # type: ignore[attr-defined]
    fn.prepare(lc.kernel_format(signature, workspace))
    return fn


BUFS = {"A": "A", "B": "B", "bias": "bias", "C": "C"}


# ---- formats and argument order built from the signature ---------------------------------------
def test_the_gemm_formats_are_the_ones_its_kernels_were_always_launched_with() -> None:
    assert lc.kernel_format(GEMM_SIG) == "PPPPiii"
    assert lc.kernel_format(GEMM_SIG, workspace=True) == "PPPPiiiP"
    launch = FAMILY.launch(replace(SIMT, split_k=16), SHAPE)
    assert isinstance(launch, LaunchConfig)
    assert launch.epilogue is not None
    assert lc.aux_format(GEMM_SIG, launch.epilogue.args) == "PPPiii"
    assert lc.reference_format(GEMM_SIG) == "PPPPPiii"
    assert lc.kernel_args(GEMM_SIG, BUFS, "WS") == ("A", "B", "bias", "C", 256, 256, 65536, "WS")
    refs = {**BUFS, "C.ref": "R", "C.scale": "S"}
    assert lc.reference_args(GEMM_SIG, refs) == ("A", "B", "bias", "R", "S", 256, 256, 65536)
    assert lc.aux_args(GEMM_SIG, launch.epilogue.args, BUFS, "WS") == (
        "WS", "bias", "C", 256, 256, 16)


def test_a_two_buffer_family_gets_formats_from_its_own_signature() -> None:
    assert lc.kernel_format(ROWS_SIG) == "PPii"
    assert lc.kernel_format(ROWS_SIG, workspace=True) == "PPiiP"
    assert lc.reference_format(ROWS_SIG) == "PPPii"  # x, then y's ref and scale, then scalars
    bufs = {"x": "X", "y": "Y", "y.ref": "R", "y.scale": "S"}
    assert lc.kernel_args(ROWS_SIG, bufs) == ("X", "Y", 8, 1000)
    assert lc.reference_args(ROWS_SIG, bufs) == ("X", "R", "S", 8, 1000)
    assert lc.aux_format(ROWS_SIG, ("y", "workspace", "cols", 3)) == "PPii"
    assert lc.aux_args(ROWS_SIG, ("y", "workspace", "cols", 3), bufs, "WS") == (
        "Y", "WS", 1000, 3)
    with pytest.raises(ValueError, match="not a buffer"):
        lc.aux_format(ROWS_SIG, ("z",))
    assert lc.shape_key(ROWS_SIG) == (("x", "float32", 8000), ("y", "float32", 8000))
    assert lc.buffer_bytes(ROWS_SIG) == 2 * 4 * 8000 + 16 * 8000


def test_the_contract_tables_match_the_family_contract() -> None:
    assert lc.DTYPES == DTYPES
    assert set(lc.FILL_CODES) == set(FILL_KINDS)
    # the GEMM's distributions keep the codes and the sub-seeds its inputs were filled with
    assert [lc.FILL_CODES[d.default.kind] for d in FAMILY.distributions] == [0, 1, 2]
    assert lc.sub_seed(7, 2) == (7 * 0x9E3779B1 + 2 * 0x632BE5AB) & 0xFFFFFFFFFFFFFFFF
    assert gpu_child.POISON == lc.POISON == 0x7FC0DEAD


def test_fills_are_checked_against_the_inputs_and_the_device_dtypes() -> None:
    normal = Distribution("normal", Fill("normal"))
    lc.check_fills(ROWS_SIG, normal.resolve(ROWS))
    lc.check_fills(ROWS_SIG, Distribution("c", Fill("constant", 3.0)).resolve(ROWS))
    with pytest.raises(ValueError, match="fills for"):
        lc.check_fills(ROWS_SIG, [])
    ints = Signature(buffers=(Buffer("x", "n", dtype="int32"), Buffer("y", "n", role="out")))
    with pytest.raises(ValueError, match="float32"):
        lc.check_fills(ints.resolve({"n": 4}), [{"kind": "normal", "scale": 1.0}])


def test_host_inputs_draw_every_input_in_order_from_one_generator() -> None:
    import numpy as np

    sig = {"buffers": [{"name": "A", "dtype": "float32", "role": "in", "count": 6},
                       {"name": "B", "dtype": "float32", "role": "in", "count": 4},
                       {"name": "C", "dtype": "float32", "role": "out", "count": 2}],
           "scalars": []}
    a = lc.host_inputs(sig, np.random.default_rng(3))
    rng = np.random.default_rng(3)  # what the sanitizer's launcher drew before: A, then B
    assert np.array_equal(a["A"], rng.standard_normal((3, 2), dtype=np.float32).ravel())
    assert np.array_equal(a["B"], rng.standard_normal((2, 2), dtype=np.float32).ravel())
    assert list(a) == ["A", "B"]


def test_the_stats_of_several_outputs_merge_like_one_check_kernel_run_per_output() -> None:
    parts = [{"sum_err2": 1.0, "sum_ref2": 4.0, "max_abs": 0.5, "max_scaled": 0.1,
              "nonfinite": 1, "unwritten": 0},
             {"sum_err2": 2.0, "sum_ref2": 5.0, "max_abs": 0.2, "max_scaled": 0.3,
              "nonfinite": 0, "unwritten": 2}]
    assert lc.merge_stats(parts) == {"sum_err2": 3.0, "sum_ref2": 9.0, "max_abs": 0.5,
                                     "max_scaled": 0.3, "nonfinite": 1, "unwritten": 2}


# ---- what the child enqueues -----------------------------------------------------------------
def test_a_plain_launch_is_one_kernel_with_seven_arguments() -> None:
    log: list[tuple[str, Any]] = []
    launch = FAMILY.launch(SIMT, SHAPE)
    assert not isinstance(launch, Rejection)
    runtime(log, 0).launch(main_kernel(log, False), launch.to_dict(), BUFS, GEMM_SIG)
    assert len(log) == 1
    name, call = log[0]
    assert name == "gemm_bias_relu"
    assert call["args"] == ("A", "B", "bias", "C", 256, 256, 65536)
    assert call["grid"] == (2, 2, 1)
    assert call["format"] == "PPPPiii"


def test_a_split_k_launch_is_the_kernel_then_its_epilogue_on_the_workspace() -> None:
    log: list[tuple[str, Any]] = []
    launch = FAMILY.launch(replace(SIMT, split_k=16), SHAPE)
    assert not isinstance(launch, Rejection)
    d = launch.to_dict()
    rt = runtime(log, d["workspace_bytes"])
    fn = main_kernel(log, True)
    for _ in range(2):  # repeated launches: the epilogue is prepared once and reused
        rt.launch(fn, d, BUFS, GEMM_SIG)
    assert [name for name, _ in log] == ["gemm_bias_relu", SPLITK_REDUCE_NAME] * 2
    main, epi = log[0][1], log[1][1]
    assert main["args"] == ("A", "B", "bias", "C", 256, 256, 65536, "WS")
    assert main["format"] == "PPPPiiiP"
    assert main["grid"] == (2, 2, 16)
    assert main["smem"] == SIMT.smem_bytes
    assert epi["args"] == ("WS", "bias", "C", 256, 256, 16)
    assert epi["format"] == "PPPiii"
    assert epi["grid"] == tuple(d["epilogue"]["grid"])
    assert epi["block"] == (256, 1, 1)
    assert list(fn._tf_aux) == [(SPLITK_REDUCE_NAME, "PPPiii")]  # type: ignore[attr-defined]


def test_a_split_pass_launch_is_its_prologue_then_the_kernel_on_the_workspace() -> None:
    """The bf16 split pass writes the workspace the GEMM copies its stages from: it runs first,
    on the same stream, with the operands, the workspace and the shape."""
    log: list[tuple[str, Any]] = []
    point = GemmParams(tf32x3=True, wgmma=128, block_x=128, block_y=2, stages=2, mma_window=4,
                       producers=1, bf16_split=3, split_pass=True)
    shape = Shape(300, 200, 1000)
    launch = FAMILY.launch(point, shape)
    assert not isinstance(launch, Rejection)
    d = launch.to_dict()
    # (3 row tiles of 128 + 2 column tiles of 128) x 16 K tiles of 64, two bf16 parts of 2 bytes
    assert d["workspace_bytes"] == 2 * 2 * 16 * 64 * (3 * 128 + 2 * 128)
    assert d["prologue"]["grid"] == [(3 + 2) * 16, 1, 1]
    sig = FAMILY.signature.resolve(shape)
    bufs = dict(BUFS)
    rt = runtime(log, d["workspace_bytes"])
    fn = main_kernel(log, True, sig)
    rt.launch(fn, d, bufs, sig)
    assert [name for name, _ in log] == [SPLIT_PASS_NAME, "gemm_bias_relu"]
    pro, main = log[0][1], log[1][1]
    assert pro["args"] == ("A", "B", "WS", 300, 200, 1000)
    assert pro["format"] == "PPPiii"
    assert main["args"] == ("A", "B", "bias", "C", 300, 200, 1000, "WS")
    assert main["grid"] == (2, 3, 1)
    assert main["block"] == (128, 3, 1)


def test_an_on_demand_split_launch_zeroes_its_counters_then_runs_the_kernel() -> None:
    """With ``split_on_demand`` the GEMM makes the pass's blocks itself: its prologue is the
    reset of the two counters a block that follow the blocks in the workspace, on the workspace
    and the shape only."""
    log: list[tuple[str, Any]] = []
    point = GemmParams(tf32x3=True, wgmma=128, block_x=128, block_y=2, stages=2, mma_window=4,
                       producers=1, bf16_split=3, split_pass=True, split_on_demand=True)
    shape = Shape(300, 200, 1000)
    launch = FAMILY.launch(point, shape)
    assert not isinstance(launch, Rejection)
    d = launch.to_dict()
    blocks = (3 + 2) * 16  # (3 row tiles + 2 column tiles) x 16 K tiles
    assert d["workspace_bytes"] == 2 * 2 * 16 * 64 * (3 * 128 + 2 * 128) + 2 * 4 * blocks
    assert d["prologue"]["grid"] == [1, 1, 1]  # 160 counters, one block of 256 threads
    sig = FAMILY.signature.resolve(shape)
    rt = runtime(log, d["workspace_bytes"])
    rt.launch(main_kernel(log, True, sig), d, dict(BUFS), sig)
    assert [name for name, _ in log] == [SPLIT_RESET_NAME, "gemm_bias_relu"]
    pro, main = log[0][1], log[1][1]
    assert pro["args"] == ("WS", 300, 200, 1000)
    assert pro["format"] == "Piii"
    assert main["args"] == ("A", "B", "bias", "C", 300, 200, 1000, "WS")
    assert (main["grid"], main["block"]) == ((2, 3, 1), (128, 3, 1))
    # the reset's grid grows with the counters: a thread each (a grid-stride loop past 1024
    # blocks, more than the largest workspace allowed holds)
    big = FAMILY.launch(point, Shape(8192, 8192, 8192))
    assert not isinstance(big, Rejection)
    assert big.prologue is not None
    assert big.prologue.grid == (2 * (64 + 64) * 128 // 256, 1, 1)


def test_the_launchers_enqueue_a_split_pass_launch_through_their_module() -> None:
    """The sanitizer's launcher enqueues with ``module_aux`` (the ncu launcher its prologue):
    the prologue, then the kernel, each prepared with the format its arguments need."""
    log: list[tuple[str, Any]] = []
    point = GemmParams(tf32x3=True, wgmma=128, block_x=128, block_y=2, stages=2, mma_window=4,
                       producers=1, bf16_split=3, split_pass=True)
    shape = Shape(300, 200, 1000)
    launch = FAMILY.launch(point, shape)
    assert not isinstance(launch, Rejection)
    sig = FAMILY.signature.resolve(shape)
    module = FakeModule(log)
    fn = module.get_function("gemm_bias_relu")
    fn.prepare(lc.kernel_format(sig, True))
    lc.enqueue(fn, lc.module_aux(module), launch.to_dict(), sig, dict(BUFS), "WS", None)
    assert [(name, call["format"]) for name, call in log] == [
        (SPLIT_PASS_NAME, "PPPiii"), ("gemm_bias_relu", "PPPPiiiP")]


def test_a_split_k_launch_refuses_a_workspace_sized_too_small() -> None:
    log: list[tuple[str, Any]] = []
    launch = FAMILY.launch(replace(SIMT, split_k=4), SHAPE)
    assert not isinstance(launch, Rejection)
    rt = runtime(log, launch.workspace_bytes - 4)
    with pytest.raises(ValueError, match="workspace"):
        rt.launch(main_kernel(log, True), launch.to_dict(), BUFS, GEMM_SIG)
    assert log == []  # nothing enqueued


def test_a_two_buffer_family_launches_with_its_own_arguments() -> None:
    log: list[tuple[str, Any]] = []
    launch = LaunchConfig("softmax_rows", (8, 1, 1), (256, 1, 1), 0)
    bufs = {"x": "X", "y": "Y"}
    runtime(log, 0).launch(main_kernel(log, False, ROWS_SIG), launch.to_dict(), bufs, ROWS_SIG)
    assert log[0][1]["args"] == ("X", "Y", 8, 1000)
    assert log[0][1]["format"] == "PPii"


# ---- the correctness cases of a shape-specialized point ---------------------------------------


def evaluator() -> GpuEvaluator:
    ev = GpuEvaluator.__new__(GpuEvaluator)
    ev.family = FAMILY
    ev.options = EvalOptions()
    ev.device = {"sm_count": 132}  # what the started GPU child reports (an H200's SMs)
    return ev


def test_a_generic_point_is_checked_at_its_shape_and_the_edge_shapes() -> None:
    cases = evaluator().checks(replace(SIMT, split_k=8), SHAPE, iteration=3, seed=1,
                               verify=False)
    assert [tuple(c["shape"]) for c in cases] == [(256, 256, 65536)] + [
        s.values_tuple() for s in FAMILY.edge_shapes]
    # the rotation of docs/ARCHITECTURE.md#the-evaluation-protocol, in the family's order:
    # iteration 3 checks normal at the campaign shape, then uniform, mixed, normal, uniform at
    # the edge shapes
    assert [c["dist"] for c in cases] == ["normal", "uniform", "mixed", "normal", "uniform"]
    assert cases[0]["launch"]["grid"][2] == 8
    assert all("epilogue" in c["launch"] for c in cases)  # a split kernel always reduces
    assert [c["launch"]["grid"][2] for c in cases[1:]] == [1, 5, 4, 8]  # fewer splits on short K
    assert cases[0]["signature"] == GEMM_SIG
    assert cases[1]["fills"] == [{"kind": "uniform", "scale": 1.0}] * 3
    assert cases[0]["reference_launch"] == FAMILY.reference_launch(SHAPE).to_dict()
    assert [c["seed"] for c in cases] == [(1 * 1_000_003 + 3 * 101 + i) & 0x7FFFFFFFFFFF
                                          for i in range(5)]


def test_a_specialized_point_is_checked_at_its_shape_with_every_distribution() -> None:
    fixed = replace(SIMT, shape_m=SHAPE.m, shape_n=SHAPE.n, shape_k=SHAPE.k)
    ev = evaluator()
    for verify in (False, True):
        cases = ev.checks(fixed, SHAPE, iteration=5, seed=2, verify=verify)
        assert [tuple(c["shape"]) for c in cases] == [(256, 256, 65536)] * 3
        assert sorted(c["dist"] for c in cases) == sorted(d.name for d in FAMILY.distributions)
        assert len({c["seed"] for c in cases}) == 3


def test_a_specialized_point_measured_at_another_shape_is_rejected_without_a_launch() -> None:
    fixed = replace(SIMT, shape_m=64, shape_n=64, shape_k=64)
    compiled = CompileResult(status="ok", seconds=0.0, source_hash="x")
    m = evaluator().measure(fixed, compiled, shape=SHAPE, iteration=0, seed=0)  # no child used
    assert m.status == "rejected"
    assert m.error is not None
    assert "shape_mismatch" in m.error
    assert "64x64x64" in m.error


#: every key a request to the evaluation child may hold: none is a family's name for anything
REQUEST_KEYS = {
    "op", "tol", "checks", "stop_on_failure", "candidate", "bench", "incumbent", "key", "cubin",
    "kernel", "shape", "dist", "signature", "fills", "launch", "reference_launch", "seed",
    "buffers", "scalars", "name", "dtype", "role", "count", "value", "kind", "scale",
    "kernel_name", "grid", "block", "dynamic_smem_bytes", "workspace_bytes", "prologue",
    "epilogue", "args",
    "runs", "target_run_ms", "max_reps", "warmup", "rule", "atol", "recheck",
}


def _keys(obj: Any) -> set[str]:
    if isinstance(obj, dict):
        return set(obj) | {k for v in obj.values() for k in _keys(v)}
    if isinstance(obj, list | tuple):
        return {k for v in obj for k in _keys(v)}
    return set()


class RecordingChild:
    """Stands in for the GPU child: keeps the request, answers a passing check, a bench and a
    passing recheck after it."""

    gpu = "0"

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    def request(self, request: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        self.requests.append(request)
        cases = [{"shape": c["shape"], "seed": c["seed"], "dist": c["dist"], "rel_err": 0.0,
                  "max_abs_err": 0.0, "max_scaled_err": 0.0, "nonfinite": 0, "unwritten": 0,
                  "passed": True, "reason": None} for c in request["checks"]]
        runs = [[100.0, 101.0, 99.0]] * (2 if request.get("incumbent") else 1)
        recheck = {**cases[0], "seed": request["recheck"]["seed"],
                   "dist": request["recheck"]["dist"]}
        return {"status": "ok", "cases": cases, "function": {"regs_per_thread": 64},
                "bench": {"reps_per_run": 10, "runs_us": runs, "warmup_us": [[100.0]] * len(runs),
                          "samples_us": [[100.0] * 30] * len(runs)},
                "recheck": recheck}


def test_the_requests_carry_resolved_signatures_and_no_family_keys(tmp_path: Path) -> None:
    ev = evaluator()
    ev.child = RecordingChild()  # type: ignore[assignment]
    ev.device = {"sm_count": 132, "compute_capability": "9.0", "clock_khz": 1980000}
    ev._vendor = {str(SHAPE): (50.0, None)}
    cubin = tmp_path / "k.cubin"
    cubin.write_bytes(b"cubin")
    compiled = CompileResult(status="ok", seconds=0.0, source_hash="x", cubin_path=str(cubin),
                             regs_per_thread=64, static_smem_bytes=0)
    m = ev.measure(SIMT, compiled, shape=SHAPE, iteration=1, seed=4,
                   options=EvalOptions(tolerance=5e-5), incumbent=(SIMT, compiled))
    assert m.status == "ok", m.error
    request = ev.child.requests[0]  # type: ignore[attr-defined]
    assert _keys(request) <= REQUEST_KEYS, _keys(request) - REQUEST_KEYS
    assert request["tol"] == 5e-5  # the options passed, not the evaluator's defaults
    assert ev.options.tolerance == 1e-4
    assert request["bench"]["signature"] == GEMM_SIG
    assert request["bench"]["fills"] == [{"kind": "normal", "scale": 1.0}] * 3
    assert request["candidate"]["kernel"] == "gemm_bias_relu"
    assert m.perf is not None
    assert m.perf["unit"] == "TFLOP/s"
    assert m.perf["throughput"] == m.perf["throughput_tflops"] == round(SHAPE.flops / 100e-6
                                                                       / 1e12, 4)
    assert "throughput_gbs" not in m.perf
    assert m.perf["pct_of_vendor"] == 50.0
    assert m.perf["peak"] == pytest.approx(66.9, abs=0.05)  # the SIMT kernel: the FP32 FMA peak
    assert m.incumbent_runs_us == [100.0, 101.0, 99.0]


def test_a_bytes_metric_gives_a_gbs_perf_block_against_the_copy_bandwidth() -> None:
    from core.arch import metric_peak
    from kernels.family import Metric
    from worker.evaluate import perf_block

    metric = Metric("bytes", "8 * rows * cols", "copy_bandwidth")
    dims = Dims(rows=8192, cols=32768)
    peak, source = metric_peak("copy_bandwidth", {"copy_gbs": 4300.0, "name": "NVIDIA H200"})
    block = perf_block([1000.0, 1010.0, 990.0], metric, dims, vendor_us=None, peak=peak,
                       peak_source=source, reps=5)
    assert block["unit"] == "GB/s"
    assert block["throughput"] == block["throughput_gbs"] == round(8 * 8192 * 32768 / 1e-3
                                                                   / 1e9, 4)
    assert "throughput_tflops" not in block
    assert block["peak"] == 4300.0
    assert "measured" in block["peak_source"]
    assert block["pct_of_peak"] == round(100 * block["throughput"] / 4300.0, 2)
    sheet, why = metric_peak("copy_bandwidth", {"name": "NVIDIA H200"})
    assert (sheet, "datasheet" in why) == (4800.0, True)
    from core.feedback import Perf

    Perf.model_validate(block)
    Perf.model_validate(perf_block([5.0], FAMILY.metric, SHAPE, vendor_us=4.0, peak=None))
    with pytest.raises(ValueError, match="throughput"):
        Perf.model_validate({"avg_us": 1.0, "runs_us": [1.0], "spread_pct": 0.0})


def test_the_nsight_launcher_gets_the_signature_and_the_workspace(monkeypatch: pytest.MonkeyPatch
                                                                  ) -> None:
    import subprocess

    from worker import ncu

    seen: dict[str, Any] = {}

    def fake_run(cmd: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        seen["cmd"] = cmd
        seen["spec"] = json.loads(Path(cmd[-1]).read_text())
        return subprocess.CompletedProcess(cmd, 0, stdout="", stderr="no kernel")

    monkeypatch.setattr(ncu, "ncu_path", lambda: "/usr/bin/true")
    monkeypatch.setattr(ncu.subprocess, "run", fake_run)
    launch = FAMILY.launch(replace(SIMT, split_k=4), SHAPE)
    assert not isinstance(launch, Rejection)
    ncu.profile_kernel(b"cubin", "gemm_bias_relu", GEMM_SIG, launch.to_dict())
    assert seen["cmd"][-3:-1] == ["-m", "worker.ncu_launch"]
    spec = seen["spec"]
    assert spec["signature"] == GEMM_SIG
    assert spec["launch"]["grid"] == [2, 2, 4]
    assert spec["launch"]["workspace_bytes"] == launch.workspace_bytes
    assert lc.kernel_format(spec["signature"], True) == "PPPPiiiP"


def test_a_sustained_run_that_fell_short_is_made_again_at_its_own_rate() -> None:
    from worker.launch_contract import MAX_SUSTAINED_LAUNCHES, sustained_again, sustained_count
    # sized at 23.6 us a launch from five, the 8476 launches ran 20 us each: 169.5 ms of 200
    count = sustained_count(200.0, 23.6)
    assert count == 8476
    again = sustained_again(count, 169.5, 200.0)
    assert again is not None
    assert again * 169.5 / count >= 1.05 * 200.0 - 0.1  # at the measured rate, 5 % long
    assert sustained_again(again, 212.0, 200.0) is None
    # long enough, or at the cap: done
    assert sustained_again(count, 200.0, 200.0) is None
    assert sustained_again(MAX_SUSTAINED_LAUNCHES, 10.0, 200.0) is None
    # a run never shrinks, and a tiny estimate is bounded
    assert sustained_again(10, 0.0, 200.0) == MAX_SUSTAINED_LAUNCHES
    assert sustained_count(200.0, 0.0) == MAX_SUSTAINED_LAUNCHES


def test_a_run_until_repeats_a_short_run_at_its_own_rate_and_keeps_the_last() -> None:
    from worker.launch_contract import run_until
    runs: list[int] = []

    def run(count: int) -> float:  # the estimate said 23.6 us; the launches take 20
        runs.append(count)
        return count * 0.020

    count, total_ms = run_until(200.0, 8476, run)
    assert runs[0] == 8476
    assert len(runs) == 2
    assert count == runs[-1]
    assert total_ms == count * 0.020
    assert total_ms >= 1.05 * 200.0 - 0.1
    assert run_until(1.0, 100, run) == (100, 2.0)  # long enough at once: one run


def test_a_graph_of_a_sustained_run_spans_about_twenty_ms() -> None:
    from worker.launch_contract import GRAPH_MAX_CALLS, graph_calls, graph_replays
    assert graph_calls(100.0) == 200  # 20 ms of 100 us launches
    assert graph_calls(13.8) == 1450
    assert graph_calls(1.0) == GRAPH_MAX_CALLS  # short launches: at most 2000 a graph
    assert graph_calls(0.0) == GRAPH_MAX_CALLS
    assert graph_calls(50_000.0) == 1  # a 50 ms launch: one a graph
    assert graph_calls(13.8, most=3) == 3  # the caller's cap (outputs a graph may allocate)
    assert graph_calls(13.8, most=0) == 1
    # replays of 1450 launches at 13.8 us that last 200 ms
    assert graph_replays(200.0, 1450, 13.8) == 10
    assert graph_replays(200.0, 1, 50_000.0) == 4
    assert graph_replays(0.0, 10, 1.0) == 1


class AttrFunction:
    """A stand-in for a pycuda function: records set_attribute(), keeps attributes."""

    def __init__(self) -> None:
        self.attributes: list[tuple[Any, int]] = []

    def set_attribute(self, attr: Any, value: int) -> None:
        self.attributes.append((attr, value))


class FakeCuda:
    class function_attribute:  # noqa: N801 - pycuda's name
        MAX_DYNAMIC_SHARED_SIZE_BYTES = "max_dynamic_smem"

        def __init__(self, value: int) -> None:
            self.value = value


def test_a_persistent_launch_is_cut_to_the_resident_ctas(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    """configure() counts the resident CTAs once for each block and shared-memory size (from
    the cubin), grid() cuts grid x to them; a launch that is not persistent keeps its grid,
    and a persistent one without its cubin is refused with the reason."""
    calls: list[tuple[bytes, str, int]] = []

    def resident(cubin: bytes, name: str, launch: Any) -> int:
        calls.append((cubin, name, int(launch["dynamic_smem_bytes"])))
        return 240 if launch["dynamic_smem_bytes"] > 60000 else 480

    monkeypatch.setattr(lc, "resident_ctas", resident)
    launch = {"kernel_name": "softmax", "grid": [4096, 1, 1], "block": [512, 1, 1],
              "dynamic_smem_bytes": 65552, "workspace_bytes": 0, "cluster_size": 16,
              "persistent": True}
    fn = AttrFunction()
    lc.configure(FakeCuda, fn, launch, b"cubin")
    lc.configure(FakeCuda, fn, launch, b"cubin")
    assert calls == [(b"cubin", "softmax", 65552)]
    assert lc.grid(fn, launch) == (240, 1, 1)
    smaller = {**launch, "dynamic_smem_bytes": 16400, "grid": [160, 1, 1]}
    lc.configure(FakeCuda, fn, smaller, b"cubin")
    assert lc.grid(fn, smaller) == (160, 1, 1)   # fewer CTAs than resident: as launched
    plain = {**launch, "persistent": False}
    assert lc.grid(AttrFunction(), plain) == (4096, 1, 1)
    with pytest.raises(ValueError, match="cubin"):
        lc.configure(FakeCuda, AttrFunction(), launch)
    # a group of CTAs that wait for each other: a whole number of groups, all resident
    grouped = {**launch, "dynamic_smem_bytes": 0, "cluster_size": 1, "group": 16}
    fn = AttrFunction()
    monkeypatch.setattr(lc, "resident_ctas", lambda cubin, name, launch: 264)
    lc.configure(FakeCuda, fn, grouped, b"cubin")
    assert lc.grid(fn, grouped) == (256, 1, 1)
    assert lc.grid(fn, {**grouped, "grid": [64, 1, 1]}) == (64, 1, 1)
    monkeypatch.setattr(lc, "resident_ctas", lambda cubin, name, launch: 12)
    fn = AttrFunction()
    lc.configure(FakeCuda, fn, grouped, b"cubin")
    with pytest.raises(lc.LaunchRefused, match="group of 16 CTAs"):
        lc.grid(fn, grouped)
