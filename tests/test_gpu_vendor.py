"""The vendor harness's CUDA-graph rate on the GPU (``worker/vendor.py``, which times the vendor
baselines and the peers in ``bench/``): the graph it times is replayed once more on poisoned
outputs and held to a call the usual way, so that a graph that computes otherwise (a step lost
under capture) gives no sustained rate. Run in a process of its own (``run_script``): the test
process never initialises CUDA."""

from __future__ import annotations

from typing import Any

import pytest
from gpu_support import run_script, save

pytestmark = pytest.mark.gpu

#: each harness measured in one process: the vendor baselines as the worker runs them, a call
#: that returns its output (no ``outputs``: a peer's way), and a GEMM whose relu is left out
#: of whatever is captured in a graph
SCRIPT = r'''
import json
import torch
from kernels.gemm_bias_relu import vendor as gemm
from kernels.softmax import vendor as softmax
from worker.vendor import measure_torch

def returns(torch, dims):
    gen = torch.Generator(device="cuda").manual_seed(1)
    x = torch.randn(dims["rows"], dims["cols"], device="cuda", generator=gen)
    return lambda: torch.softmax(x, -1)

def loses_relu(torch, dims):
    a, b, bias = gemm.inputs(torch, dims)
    out = torch.empty(dims["m"], dims["n"], device=a.device)
    def once():
        torch.addmm(bias, a, b, out=out)
        if not torch.cuda.is_current_stream_capturing():
            out.relu_()
        return out
    once.outputs = [out]
    return once

SOFTMAX, GEMM = {"rows": 4096, "cols": 1024}, {"m": 1024, "n": 1024, "k": 1024}
cases = {"softmax": (softmax.prepare, SOFTMAX), "gemm": (gemm.prepare, GEMM),
         "returns": (returns, SOFTMAX), "loses_relu": (loses_relu, GEMM)}
out = {name: measure_torch(prep, dims, runs=1, target_ms=5.0, sustain_ms=50.0)
       for name, (prep, dims) in cases.items()}
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def measured(gpu: None) -> dict[str, Any]:
    out: dict[str, Any] = run_script(SCRIPT)
    save("vendor_graph_check", out)
    return out


@pytest.mark.parametrize("name", ["softmax", "gemm", "returns"])
def test_a_vendor_graph_that_computes_what_a_call_does_gives_its_rate(
        measured: dict[str, Any], name: str) -> None:
    """``torch.softmax`` and cuBLAS's ``addmm`` + ``relu_`` (writing ``outputs``), and a call
    that returns a new tensor: the graph replayed on poisoned outputs matches a call."""
    from worker.vendor import GRAPH_CHECK_TOLERANCE

    got = measured[name]
    assert "graph_error" not in got, got
    assert got["graph_check"]["passed"], got
    assert got["graph_check"]["rel_err"] <= GRAPH_CHECK_TOLERANCE, got
    assert got["graph_us"] > 0, got
    assert got["loop_us"] > 0, got
    assert got["sustained_us"] == min(got["graph_us"], got["loop_us"]), got


def test_a_graph_that_lost_a_step_gives_no_rate(measured: dict[str, Any]) -> None:
    """The GEMM whose relu is left out under capture: its graph is timed, then fails the check
    (half of C negative where a call gives 0), so the loop's rate is the sustained one and the
    record says why."""
    got = measured["loses_relu"]
    assert "not a call's" in got.get("graph_error", ""), got
    assert "graph_us" not in got, got
    assert got["sustained_way"] == "loop", got
    assert got["sustained_us"] == got["loop_us"], got
