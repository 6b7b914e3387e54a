"""The launch contract of split-K and shape-specialized points, without a GPU: what the GPU
child enqueues for a launch (recorded by stand-ins for pycuda's functions), which correctness
cases a specialized point gets, and the Nsight launcher's arguments."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from kernels.base import Rejection
from kernels.gemm_bias_relu import FAMILY, GemmParams
from kernels.gemm_bias_relu.launch import SPLITK_REDUCE_NAME
from kernels.gemm_bias_relu.shape import Shape
from worker import gpu_child
from worker.compile import CompileResult
from worker.evaluate import DISTRIBUTIONS, EDGE_SHAPES, EvalOptions, GpuEvaluator

SIMT = GemmParams(coalesced=True, smem=True, reg_m=8, reg_n=8, vec=4, pad=4)
SHAPE = Shape(256, 256, 65536)


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


def main_kernel(log: list[tuple[str, Any]], workspace: bool) -> FakeFunction:
    module = FakeModule(log)
    fn = module.get_function("gemm_bias_relu")
    fn._tf_module = module  # type: ignore[attr-defined]
    fn._tf_epilogues = {}  # type: ignore[attr-defined]
    fn.prepare(gpu_child.KERNEL_WS_ARGS if workspace else gpu_child.KERNEL_ARGS)
    return fn


BUFS = {"A": "A", "B": "B", "bias": "bias", "C": "C"}


def test_a_plain_launch_is_one_kernel_with_seven_arguments() -> None:
    log: list[tuple[str, Any]] = []
    launch = FAMILY.launch(SIMT, SHAPE)
    assert not isinstance(launch, Rejection)
    runtime(log, 0).launch(main_kernel(log, False), launch.to_dict(), BUFS, (256, 256, 65536))
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
        rt.launch(fn, d, BUFS, (256, 256, 65536))
    assert [name for name, _ in log] == ["gemm_bias_relu", SPLITK_REDUCE_NAME] * 2
    main, epi = log[0][1], log[1][1]
    assert main["args"] == ("A", "B", "bias", "C", 256, 256, 65536, "WS")
    assert main["grid"] == (2, 2, 16)
    assert main["smem"] == SIMT.smem_bytes
    assert epi["args"] == ("WS", "bias", "C", 256, 256, 16)
    assert epi["format"] == gpu_child.EPILOGUE_ARGS
    assert epi["grid"] == tuple(d["epilogue"]["grid"])
    assert epi["block"] == (256, 1, 1)
    assert list(fn._tf_epilogues) == [SPLITK_REDUCE_NAME]  # type: ignore[attr-defined]


def test_a_split_k_launch_refuses_a_workspace_sized_too_small() -> None:
    log: list[tuple[str, Any]] = []
    launch = FAMILY.launch(replace(SIMT, split_k=4), SHAPE)
    assert not isinstance(launch, Rejection)
    rt = runtime(log, launch.workspace_bytes - 4)
    with pytest.raises(ValueError, match="workspace"):
        rt.launch(main_kernel(log, True), launch.to_dict(), BUFS, (256, 256, 65536))
    assert log == []  # nothing enqueued


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
        (s.m, s.n, s.k) for s in EDGE_SHAPES]
    assert cases[0]["launch"]["grid"][2] == 8
    assert all("epilogue" in c["launch"] for c in cases)  # a split kernel always reduces
    assert [c["launch"]["grid"][2] for c in cases[1:]] == [1, 5, 4, 8]  # fewer splits on short K


def test_a_specialized_point_is_checked_at_its_shape_with_every_distribution() -> None:
    fixed = replace(SIMT, shape_m=SHAPE.m, shape_n=SHAPE.n, shape_k=SHAPE.k)
    ev = evaluator()
    for verify in (False, True):
        cases = ev.checks(fixed, SHAPE, iteration=5, seed=2, verify=verify)
        assert [tuple(c["shape"]) for c in cases] == [(256, 256, 65536)] * 3
        assert sorted(c["dist"] for c in cases) == sorted(DISTRIBUTIONS)
        assert len({c["seed"] for c in cases}) == 3


def test_a_specialized_point_measured_at_another_shape_is_rejected_without_a_launch() -> None:
    fixed = replace(SIMT, shape_m=64, shape_n=64, shape_k=64)
    compiled = CompileResult(status="ok", seconds=0.0, source_hash="x")
    m = evaluator().measure(fixed, compiled, shape=SHAPE, iteration=0, seed=0)  # no child used
    assert m.status == "rejected"
    assert m.error is not None
    assert "shape_mismatch" in m.error
    assert "64x64x64" in m.error


def test_the_nsight_launcher_gets_grid_z_and_the_workspace(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    import subprocess

    from worker import ncu

    seen: dict[str, Any] = {}

    def fake_run(cmd: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        seen["cmd"] = cmd
        return subprocess.CompletedProcess(cmd, 0, stdout="", stderr="no kernel")

    monkeypatch.setattr(ncu, "ncu_path", lambda: "/usr/bin/true")
    monkeypatch.setattr(ncu.subprocess, "run", fake_run)
    launch = FAMILY.launch(replace(SIMT, split_k=4), SHAPE)
    assert not isinstance(launch, Rejection)
    ncu.profile_kernel(b"cubin", "gemm_bias_relu", (256, 256, 65536), launch.to_dict())
    tail = seen["cmd"][-10:]
    assert tail == ["256", "256", "65536", "2", "2", "16", "16", str(SIMT.smem_bytes), "4",
                    str(launch.workspace_bytes)]
