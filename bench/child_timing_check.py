"""What in the evaluation child's timing costs a short kernel time? The child's timing, in process.

    python bench/child_timing_check.py --kernel softmax --shape 65536x128 --params '{...}'

The child and the vendor's harness must read the same cubin alike (``bench/harness_check.py``
sets the two side by side). This runs the child's own runtime
(:class:`worker.gpu_child.Runtime`: its poison, flush, events and launch path) in this process
five ways, interleaved: as it is (``cuda.Stream()``, which synchronizes with the legacy
default stream, and ``tf_flush``: a grid-stride loop of scalar read-modify-writes), on a
non-blocking stream (``CU_STREAM_NON_BLOCKING``), with the flush done as torch's
elementwise kernels do it (one float4 a thread, a CTA on each contiguous 4 KB, the same bytes
and arithmetic), without the poison of the outputs before each flush (as a call that
allocates its output is timed), and with every launch enqueued before the first is waited for
(the child waits for each, as the vendor and peers' harness times a call), and prints the
flushed median of each; then the child's sustained rate (``Runtime.sustain``, ``--min-ms``), a
loop of launches and a CUDA graph of them. With ``--primary`` the runtime opens torch's primary
context instead of one of its own, and a sixth way runs on buffers from torch's caching
allocator (the inputs copied from the child's).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kernels import get_family  # noqa: E402
from kernels.base import Rejection  # noqa: E402
from worker import launch_contract as lc  # noqa: E402
from worker.compile import Compiler, compile_candidate  # noqa: E402
from worker.evaluate import SUPPORT_SOURCE  # noqa: E402
from worker.gpu_child import Runtime, cuda  # noqa: E402

BLOCKED_FLUSH = r"""
extern "C" __global__ void flush_blocked(float4* __restrict__ x, long long n4)
{
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4) {
        float4 v = x[i];
        v.x = v.x * 0.5f + 1.0f; v.y = v.y * 0.5f + 1.0f;
        v.z = v.z * 0.5f + 1.0f; v.w = v.w * 0.5f + 1.0f;
        x[i] = v;
    }
}
"""


#: the way that enqueues every launch (and its poison and flush) before it waits for the first;
#: the child waits for each, as the vendor and peers' harness (``worker.vendor.measure_torch``)
#: does
AHEAD = "all enqueued ahead"


class BlockedFlush:
    """Stands in for the child's prepared ``tf_flush``: the same buffer and count, launched
    one float4 a thread over a grid that covers it (the grid the child passes is ignored)."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def prepared_async_call(self, _grid: Any, _block: Any, stream: Any, buf: Any,
                            n: int) -> None:
        n4 = n // 4
        self.fn.prepared_async_call((-(-n4 // 256), 1, 1), (256, 1, 1), stream, buf, n4)


def primary_context() -> Any:
    """Make :class:`Runtime` open torch's primary context (where torch's allocations live)
    instead of a context of its own; torch, initialized."""
    import torch

    torch.cuda.init()
    torch.empty(1, device="cuda")  # the primary context, current on this thread

    def make_context(device: Any) -> Any:
        context = device.retain_primary_context()
        context.push()
        return context

    cuda.Device.make_context = make_context
    return torch


def torch_buffers(torch: Any, signature: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """``b`` with the signature's buffers moved to torch's caching allocator: inputs copied
    from the child's, outputs empty. The tensors are kept with the returned mapping."""
    out: dict[str, Any] = dict(b)
    keep = []
    for buf in signature["buffers"]:
        nbytes = int(buf["count"]) * lc.DTYPES[buf["dtype"]][0]
        t = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
        if buf["role"] != "out":
            cuda.memcpy_dtod(t.data_ptr(), b[buf["name"]], nbytes)
        keep.append(t)
        out[buf["name"]] = t.data_ptr()
    torch.cuda.synchronize()
    out["_tensors"] = keep
    return out


def main() -> int:
    """Time every point each way, interleaved, three rounds; print a table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--shape", required=True)
    ap.add_argument("--params", action="append", required=True)
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--min-ms", type=float, default=200.0, help="sustained run length")
    ap.add_argument("--cache", type=Path, default=Path("/tmp/tf-cache"))
    ap.add_argument("--primary", action="store_true",
                    help="run the child's runtime in torch's (primary) context, and time it "
                         "also on buffers from torch's caching allocator")
    args = ap.parse_args()
    torch = primary_context() if args.primary else None
    family = get_family(args.kernel)
    dims = family.parse_dims(args.shape)
    compiler = Compiler(args.cache, arch="sm_90")
    support = compiler.compile(SUPPORT_SOURCE.read_text())
    reference = compiler.compile(family.reference_source())
    rt = Runtime()
    rt.setup(support.cubin(), reference.cubin(),
             family.reference_launch(family.edge_shapes[0]).kernel_name)
    signature = family.signature.resolve(dims)
    blocked = cuda.module_from_buffer(compiler.compile(BLOCKED_FLUSH).cubin())
    blocked_fn = blocked.get_function("flush_blocked")
    blocked_fn.prepare("Pq")
    child_flush = rt.flush
    unpoisoned = {**signature, "buffers": [{**b, "role": "unpoisoned"} if b["role"] == "out"
                                           else b for b in signature["buffers"]]}
    variants: dict[str, tuple[Any, Any, dict[str, Any], dict[str, Any] | None]] = {
        "the child's": (rt.stream, child_flush, signature, None),
        "non-blocking stream": (cuda.Stream(flags=1), child_flush, signature, None),
        "torch-like flush": (rt.stream, BlockedFlush(blocked_fn), signature, None),
        "no output poison": (rt.stream, child_flush, unpoisoned, None),
        AHEAD: (rt.stream, child_flush, signature, None)}
    for text in args.params:
        params = family.params_from_dict(json.loads(text))
        compiled = compile_candidate(compiler, family, params)
        launch = family.launch(params, dims)
        if compiled.cubin_path is None or isinstance(launch, Rejection):
            print(f"cannot run {text}")
            continue
        ld = launch.to_dict()
        fn = rt.kernel(compiled.source_hash or text, compiled.cubin(),
                       launch.kernel_name, ld, lc.kernel_format(signature))
        b = rt.fill_inputs(signature, [{"kind": "normal", "scale": 1.0}
                                       for _ in lc.inputs(signature)], seed=1)
        rt.sync()
        if torch is not None:
            variants["torch's buffers"] = (rt.stream, child_flush, signature,
                                           torch_buffers(torch, signature, b))
        medians: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(3):
            for name, (stream, flush, sig, bufs) in variants.items():
                rt.stream, rt.flush = stream, flush
                used = b if bufs is None else bufs
                times = rt.time_launches([(fn, ld)], used, sig, args.reps,
                                         wait_each=name != AHEAD)[0]
                medians[name].append(statistics.median(times))
        rt.stream, rt.flush, _, _ = variants["the child's"]
        sustained = rt.sustain(fn, {"signature": signature, "launch": ld, "seed": 1,
                                    "fills": [{"kind": "normal", "scale": 1.0}
                                              for _ in lc.inputs(signature)],
                                    "min_ms": args.min_ms})
        print(f"{family.name} {dims} {text[:60]}")
        for name, runs in medians.items():
            print(f"  {name:24s} " + " ".join(f"{v:8.2f}" for v in runs) + " us")
        ways = [f"{way} {sustained[way]['us_per_launch']:.2f}" for way in ("loop", "graph")
                if way in sustained]
        print(f"  {'sustained':24s} " + ", ".join(ways) + " us"
              + (f" (no graph: {sustained['graph_error']})" if "graph_error" in sustained
                 else ""))
    rt.context.pop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
