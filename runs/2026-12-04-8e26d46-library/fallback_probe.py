"""Why the GEMM's vendor fallback measured slower than the vendor at small untuned shapes: the
kernels each runs (torch.profiler, CUDA time) and its flushed and back-to-back times, beside
the vendor called directly. Run after bench/loader_bench.py --work /tmp/lb (its bundle)."""
import sys
import warnings
from functools import partial

import torch

sys.path.insert(0, "/tmp/lb/gemm_bias_relu")
sys.path.insert(0, ".")
import tuneforge_loader  # noqa: E402

from bench.loader_bench import flushed_us, per_call_us  # noqa: E402

torch.backends.cuda.matmul.allow_tf32 = False
lib = tuneforge_loader.load("/tmp/lb/gemm_bias_relu")
kernel = lib.kernels[next(iter(lib.kernels))]
flush = torch.empty(64 << 20, device="cuda")


def vendor(a, b, bias):
    return torch.relu(torch.addmm(bias, a, b))


for m, n, k in ((46, 42, 2), (6, 4037, 2), (2, 23, 24), (89, 1131, 42), (1563, 2080, 8)):
    a = torch.randn(m, k, device="cuda")
    b = torch.randn(k, n, device="cuda")
    bias = torch.randn(n, device="cuda")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kernel(a, b, bias)
        runs = kernel.lookup(a, b, bias).runs
        row = [f"{m}x{n}x{k}", runs]
        for name, fn in (("vendor", partial(vendor, a, b, bias)),
                         ("loader", partial(kernel, a, b, bias))):
            f1 = flushed_us(torch, fn, flush, 40)
            b2b = per_call_us(torch, fn, 500)
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                for _ in range(5):
                    fn()
                torch.cuda.synchronize()
            kernels = sorted({(e.name[:48], round(e.device_time / 1, 1))
                              for e in prof.events() if e.device_time > 0})
            row.append(f"{name}: flushed {f1:.1f} us, back-to-back {b2b:.1f} us, "
                       f"kernels {kernels[:4]}")
        print(" | ".join(row))
