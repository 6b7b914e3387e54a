"""Calibrate the correctness rule against cuBLAS on a GPU with torch.

    python bench/calibrate_checker.py --size 4096

For normal, uniform [0,1) and mixed-magnitude inputs: cuBLAS fp32, cuBLAS TF32 and a 3xTF32
composition of three TF32 GEMMs, each judged by tuneforge's rule (``worker.gpu_child.judge``)
against a float64 reference with Σ|a·b| + |bias| as the per-element scale. Prints a table, then
one JSON line.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from worker.gpu_child import judge  # noqa: E402


def main() -> int:
    """Judge the three arithmetic classes on the three distributions."""
    import torch

    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--tol", type=float, default=1e-4)
    args = ap.parse_args()
    n = args.size
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(1234)

    def draw(shape: tuple[int, ...], dist: str) -> torch.Tensor:
        if dist == "uniform":
            return torch.rand(shape, device=dev, generator=gen)
        x = torch.randn(shape, device=dev, generator=gen)
        if dist == "mixed":
            x = x * torch.exp2(torch.randint(-8, 9, shape, device=dev, generator=gen).float())
        return x

    def tf32_split(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        big = (x.view(torch.int32) & -8192).view(torch.float32)  # keep 10 mantissa bits
        return big, x - big

    rows = []
    for dist in ("normal", "uniform", "mixed"):
        a, b, bias = draw((n, n), dist), draw((n, n), dist), draw((n,), dist)
        a64, b64, bias64 = a.double(), b.double(), bias.double()
        ref = torch.relu(a64 @ b64 + bias64)
        scale = a64.abs() @ b64.abs() + bias64.abs()
        outs = {}
        torch.backends.cuda.matmul.allow_tf32 = False
        outs["fp32"] = torch.relu(a @ b + bias)
        torch.backends.cuda.matmul.allow_tf32 = True
        outs["tf32"] = torch.relu(a @ b + bias)
        ab, as_ = tf32_split(a)
        bb, bs = tf32_split(b)
        outs["3xtf32"] = torch.relu(ab @ bb + (ab @ bs + as_ @ bb) + bias)
        torch.backends.cuda.matmul.allow_tf32 = False
        for arith, out in outs.items():
            err = (out.double() - ref).abs()
            finite = torch.isfinite(out)
            verdict = judge(float((err ** 2).sum()), float((ref ** 2).sum()),
                            float(err.max()), float((err / scale.clamp_min(1e-30)).max()),
                            int((~finite).sum()), 0, args.tol)
            rows.append({"arith": arith, "dist": dist, **verdict})
    print(f"{'arith':8s} {'dist':8s} {'norm-rel':>10s} {'max/Σ|ab|':>10s} {'max abs':>10s} pass")
    for r in rows:
        print(f"{r['arith']:8s} {r['dist']:8s} {r['rel_err']:10.2e} {r['max_scaled_err']:10.2e} "
              f"{r['max_abs_err']:10.2e} {r['passed']}")
    print(json.dumps({"size": n, "tol": args.tol, "device": torch.cuda.get_device_name(),
                      "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
