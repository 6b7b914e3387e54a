"""The vendor baseline without a GPU: what the subprocess answers for a family without one, how
its time is cached, and the reason a missing one carries."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kernels.gemm_bias_relu import FAMILY
from kernels.gemm_bias_relu.shape import Shape
from worker import evaluate, vendor

DEVICE = {"name": "NVIDIA H200", "driver_version": 13000}


class NoVendor:
    """A family that declares no vendor baseline."""

    name = "no_vendor_family"
    vendor = None


def test_a_family_without_a_vendor_gets_none_with_the_reason(tmp_path: Path) -> None:
    value, why = evaluate.measure_vendor(NoVendor(), Shape(64, 64, 64), DEVICE,
                                         tmp_path / "vendor.json")
    assert value is None
    assert why is not None
    assert "no vendor baseline" in why
    assert not (tmp_path / "vendor.json").exists()


def test_the_vendor_time_is_cached_per_family_gpu_driver_and_shape(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess

    calls: list[list[str]] = []

    def fake_run(cmd: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, stdout=json.dumps({"avg_us": 123.0}) + "\n",
                                           stderr="")

    monkeypatch.setattr(evaluate.subprocess, "run", fake_run)
    cache = tmp_path / "vendor.json"
    shape = Shape(128, 64, 32)
    assert evaluate.measure_vendor(FAMILY, shape, DEVICE, cache) == (123.0, None)
    assert calls[0][-4:] == ["worker.vendor", "--family", "gemm_bias_relu", "128x64x32"]
    key = evaluate.vendor_cache_key(FAMILY, shape, DEVICE)
    assert key == "gemm_bias_relu|NVIDIA H200|13000|128x64x32|v2"
    assert json.loads(cache.read_text()) == {key: 123.0}
    assert evaluate.measure_vendor(FAMILY, shape, DEVICE, cache) == (123.0, None)
    assert len(calls) == 1  # the second answer came from the cache


def test_a_vendor_that_fails_says_why_and_is_not_cached(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess

    monkeypatch.setattr(evaluate.subprocess, "run", lambda cmd, **_: subprocess.CompletedProcess(
        cmd, 0, stdout=json.dumps({"error": "ModuleNotFoundError: torch"}) + "\n", stderr=""))
    value, why = evaluate.measure_vendor(FAMILY, Shape(8, 8, 8), DEVICE, tmp_path / "v.json")
    assert value is None
    assert why is not None
    assert "torch" in why
    assert not (tmp_path / "v.json").exists()


def test_the_vendor_program_parses_the_family_and_times_its_prepare(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    seen: dict[str, Any] = {}

    def fake_measure_torch(prepare: Any, dims: dict[str, int], sustain_ms: float = 0.0,
                           flush_mode: str = "child", poison: bool = True,
                           graph: bool = True) -> dict[str, Any]:
        seen["prepare"], seen["dims"], seen["sustain_ms"] = prepare, dims, sustain_ms
        seen["flush"], seen["poison"], seen["graph"] = flush_mode, poison, graph
        return {"avg_us": 9.0}

    monkeypatch.setattr(vendor, "measure_torch", fake_measure_torch)
    assert vendor.main(["--family", "gemm_bias_relu", "m=32,n=16,k=8"]) == 0
    out = json.loads(capsys.readouterr().out.strip())
    assert out["avg_us"] == 9.0
    assert out["shape"] == "32x16x8"
    assert seen["dims"] == {"m": 32, "n": 16, "k": 8}
    assert seen["prepare"].__module__ == FAMILY.vendor.module
    assert seen["sustain_ms"] == 0.0
    assert vendor.main(["--family", "gemm_bias_relu", "8x8x8", "--sustain-ms", "300"]) == 0
    capsys.readouterr()
    assert seen["sustain_ms"] == 300.0
    assert seen["flush"] == "child"  # the evaluation child's flush unless told otherwise
    assert vendor.main(["--family", "gemm_bias_relu", "8x8x8", "--flush", "legacy"]) == 0
    capsys.readouterr()
    assert seen["flush"] == "legacy"
    assert seen["poison"] is True
    assert vendor.main(["--family", "gemm_bias_relu", "8x8x8", "--no-poison"]) == 0
    capsys.readouterr()
    assert seen["poison"] is False
    assert seen["graph"] is True  # sustained in CUDA graphs too, as the child times ours
    assert vendor.main(["--family", "gemm_bias_relu", "8x8x8", "--no-graph"]) == 0
    capsys.readouterr()
    assert seen["graph"] is False
    assert vendor.main(["--family", "no_such_family", "1x1x1"]) == 0
    assert "unknown kernel family" in json.loads(capsys.readouterr().out)["error"]


class ReplaysInto:
    """A captured graph's stand-in on the CPU: ``replay`` writes ``value`` into ``target``
    (None: writes nothing, as a graph that lost its work)."""

    def __init__(self, target: Any, value: Any) -> None:
        self.target, self.value = target, value

    def replay(self) -> None:
        if self.value is not None:
            self.target.copy_(self.value)


@pytest.mark.parametrize(("graph_writes", "passed"), [
    ("the call's", True), ("within 1e-3", True), ("nothing", False), ("a relu lost", False)])
def test_a_graph_is_held_to_a_call_on_its_poisoned_outputs(
        graph_writes: str, passed: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """``check_graph`` poisons what the calls write, replays the graph, and compares it with a
    call the usual way: unwritten (NaN) or otherwise computed outputs fail."""
    import torch

    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)  # CPU tensors: nothing to wait
    x = torch.linspace(-1.0, 1.0, 64, dtype=torch.float32)
    out = torch.empty_like(x)

    def once() -> Any:
        return torch.clamp(x, min=0.0, out=out)

    once.outputs = [out]  # type: ignore[attr-defined]
    want = torch.relu(x)
    value = {"the call's": want, "within 1e-3": want * (1 + 5e-4), "nothing": None,
             "a relu lost": x}[graph_writes]
    got = vendor.check_graph(torch, ReplaysInto(out, value), once, [out])
    assert got["passed"] is passed, got
    if graph_writes == "nothing":
        assert got["rel_err"] != got["rel_err"], got  # NaN: the poison is still there
