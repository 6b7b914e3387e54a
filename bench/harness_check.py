"""Our kernel timed by the vendor's harness: does the evaluation child's timing favour either side?

    python bench/harness_check.py --kernel softmax --shape 65536x128 --params '{...}' \\
        [--params ...] [--min-ms 200]

The protocol times a candidate in the evaluation child (pycuda, ``worker/gpu_child.py``) and the
vendor baseline in its own process (torch, ``worker/vendor.py``), each with the same flush, CUDA
events and medians. For kernels of a few microseconds the two harnesses could differ by more
than the kernels do. This runs each ``--params`` point through the vendor's harness instead
(:func:`worker.vendor.measure_torch`: its cubin loaded by cupy and launched on torch's stream,
inputs from torch, L2 flushed by the same one-pass kernel), beside the vendor baseline itself,
and prints both harnesses' figures for the same kernel (flushed median and sustained rate):
the child's as ``bench/family_quality.py`` takes them, the vendor harness's from here.
Families whose signature is buffers then integer scalars only. Needs torch and cupy (the GPU
machine has both).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.evaluation import EvalOptions  # noqa: E402
from kernels import get_family  # noqa: E402
from kernels.base import Dims, Rejection  # noqa: E402
from kernels.family import KernelFamily  # noqa: E402
from worker.compile import Compiler  # noqa: E402
from worker.evaluate import GpuEvaluator  # noqa: E402
from worker.vendor import measure, measure_torch  # noqa: E402


def prepare_ours(cubin: str, family: KernelFamily, params: Any, dims: Dims) -> Any:
    """A ``prepare(torch, dims)`` for :func:`measure_torch` that launches our cubin by cupy on
    torch's current stream, its buffers allocated by torch (inputs normal)."""

    def prepare(torch: Any, _dims: dict[str, int]) -> Any:
        import cupy

        launch = family.launch(params, dims)
        assert not isinstance(launch, Rejection), launch
        sig = family.signature.resolve(dims)
        dev = torch.device("cuda")
        gen = torch.Generator(device=dev).manual_seed(0)
        bufs = [torch.randn(int(b["count"]), device=dev, generator=gen,
                            dtype=getattr(torch, b["dtype"]))  # the signature's names are torch's
                for b in sig["buffers"]]
        scalars = [int(s["value"]) for s in sig["scalars"]]
        module = cupy.RawModule(path=cubin)
        fn = module.get_function(launch.kernel_name)
        if launch.dynamic_smem_bytes > 48 * 1024:
            fn.max_dynamic_shared_size_bytes = launch.dynamic_smem_bytes
        import numpy as np

        args = tuple([b.data_ptr() for b in bufs] + [np.int32(v) for v in scalars])
        stream = cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)

        def once() -> None:
            with stream:
                fn(launch.grid, launch.block, args, shared_mem=launch.dynamic_smem_bytes)

        once.outputs = [b for b, spec in zip(bufs, sig["buffers"], strict=True)  # type: ignore[attr-defined]
                        if spec["role"] == "out"]
        return once

    return prepare


def main() -> int:
    """Time every point in both harnesses and the vendor; print a table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--shape", required=True)
    ap.add_argument("--params", action="append", required=True)
    ap.add_argument("--min-ms", type=float, default=200.0)
    ap.add_argument("--cache", type=Path, default=Path("/tmp/tf-cache"))
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    family = get_family(args.kernel)
    dims = family.parse_dims(args.shape)
    compiler = Compiler(args.cache, arch="sm_90")
    vendor = measure(family.name, str(dims), sustain_ms=args.min_ms)
    vendor_bare = measure(family.name, str(dims), poison=False)
    evaluator = GpuEvaluator(family, compiler, options=EvalOptions(timeout_s=120.0))
    rows: list[dict[str, Any]] = []
    for text in args.params:
        params = family.params_from_dict(json.loads(text))
        compiled = evaluator.compile(params).result()
        if compiled.status != "ok" or compiled.cubin_path is None:
            rows.append({"params": text, "error": f"compile {compiled.status}"})
            continue
        m = evaluator.measure(params, compiled, shape=dims, iteration=0, seed=7, verify=False)
        sus = evaluator.sustained(params, compiled, shape=dims, min_ms=args.min_ms)
        prep = prepare_ours(compiled.cubin_path, family, params, dims)
        theirs = measure_torch(prep, dims.as_dict(), sustain_ms=args.min_ms)
        bare = measure_torch(prep, dims.as_dict(), poison=False)
        rows.append({"params": text, "child_us": (m.perf or {}).get("avg_us"),
                     "child_sustained_us": sus.get("us_per_launch"),
                     "vendor_harness_us": theirs["avg_us"],
                     "vendor_harness_sustained_us": theirs.get("sustained_us"),
                     "vendor_harness_unpoisoned_us": bare["avg_us"]})
    evaluator.close()
    print(f"{family.name} {dims} · vendor {vendor.get('vendor', '')}: {vendor.get('avg_us', 0):.2f}"
          f" us flushed ({vendor_bare.get('avg_us', 0):.2f} without the poison), "
          f"{vendor.get('sustained_us', 0):.2f} us sustained")
    print(f"{'child':>8s} {'sustained':>9s} {'vendor harness':>14s} {'sustained':>9s} "
          f"{'no poison':>9s}  point (us)")
    for r in rows:
        if "error" in r:
            print(f"{r['error']}: {r['params']}")
            continue
        print(f"{r['child_us'] or 0:8.2f} {r['child_sustained_us'] or 0:9.2f} "
              f"{r['vendor_harness_us']:14.2f} {r['vendor_harness_sustained_us'] or 0:9.2f} "
              f"{r['vendor_harness_unpoisoned_us']:9.2f}  {r['params'][:30]}")
    if args.out:
        args.out.write_text(json.dumps({"vendor": vendor, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
