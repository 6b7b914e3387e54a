"""Calibration of the precision-split schemes on a GPU: each scheme's error class.

    python bench/precision_calibration.py --out out/

For each scheme of ``kernels/gemm_bias_relu/precision.py`` (tf32x3, bf16x3, bf16x6 on the wgmma
kernel, and the SIMT fp32 kernel) one representative kernel is run through the evaluation
pipeline's checker (float64 reference, NaN-poisoned output) on normal, uniform [0, 1) and
mixed-magnitude inputs at M = N = ``--mn`` and K = 4096 and 8192, with the correctness rule
switched off (tolerance 1: every error is recorded, nothing fails). The figures are the two of
the pass rule (docs/ARCHITECTURE.md#the-evaluation-protocol): norm-relative error and the
worst element error over Σ|a·b| + |bias|.

Prints a table and, last, the ``MEASURED`` literal to paste into ``precision.py`` (it replaces
the one there, with the date, GPU and commit this script prints above it); writes
``precision_calibration.json`` under ``--out``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.evaluation import EvalOptions  # noqa: E402
from kernels.gemm_bias_relu import FAMILY  # noqa: E402
from kernels.gemm_bias_relu.precision import CALIBRATION_KS, REPRESENTATIVES  # noqa: E402
from kernels.gemm_bias_relu.shape import Shape  # noqa: E402
from worker.compile import Compiler  # noqa: E402
from worker.evaluate import GpuEvaluator  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def commit() -> str:
    """The commit measured (short hash, ``-dirty`` when the tree has changes)."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, cwd=ROOT, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head


def main() -> int:
    """Measure every scheme, print the table and the literal, write the JSON."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mn", type=int, default=2048, help="M = N of the calibration shapes")
    ap.add_argument("--seed", type=int, default=101)
    ap.add_argument("--cache", type=Path, default=Path("/tmp/tf-cache"))
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()

    compiler = Compiler(args.cache, arch="sm_90", workers=os.cpu_count() or 4)
    opts = EvalOptions(tolerance=1.0, edge_shapes=(), bench=False, timeout_s=180.0)
    ev = GpuEvaluator(FAMILY, compiler, options=opts)
    device = ev.device
    points = {scheme: FAMILY.params_from_dict(d) for scheme, d in REPRESENTATIVES.items()}
    futures = {scheme: ev.compile(p) for scheme, p in points.items()}
    table: dict[str, dict[str, dict[str, list[float]]]] = {}
    rows: list[dict[str, Any]] = []
    for scheme, params in points.items():
        comp = futures[scheme].result()
        if comp.status != "ok":
            rows.append({"scheme": scheme, "compile": comp.status, "error": comp.error})
            continue
        for k in CALIBRATION_KS:
            shape = Shape(args.mn, args.mn, k)
            m = ev.measure(params, comp, shape=shape, iteration=0, seed=args.seed, verify=True)
            cases = list((m.correctness or {}).get("cases") or [])
            rows.append({"scheme": scheme, "shape": str(shape), "status": m.status,
                         "error": m.error, "cases": cases})
            for c in cases:
                per = table.setdefault(scheme, {}).setdefault(str(c["dist"]), {})
                per[str(k)] = [float(c["rel_err"]), float(c["max_scaled_err"])]
    ev.close()
    stamp = {"date": datetime.date.today().isoformat(), "gpu": device.get("name"),
             "commit": commit(), "mn": args.mn, "seed": args.seed}
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "precision_calibration.json").write_text(json.dumps(
            {"stamp": stamp, "device": device, "table": table, "rows": rows}, indent=1,
            default=str))
    print(f"\nerror classes, {stamp}: norm-relative / worst element over Σ|a·b|")
    print(f"{'scheme':8s} {'dist':8s} " + " ".join(f"{'K=' + str(k):>19s}" for k in CALIBRATION_KS))
    for scheme, dists in table.items():
        for dist, per_k in dists.items():
            text = []
            for k in CALIBRATION_KS:
                c = per_k.get(str(k))
                text.append(f"{c[0]:9.2e} {c[1]:9.2e}" if c else f"{'-':>19s}")
            print(f"{scheme:8s} {dist:8s} " + " ".join(text))
    for r in rows:
        if r.get("status") not in (None, "ok") or r.get("compile") not in (None, "ok"):
            print("NOT MEASURED", r.get("scheme"), r.get("shape"), r.get("status"),
                  r.get("compile"), (r.get("error") or "")[:200])
    # the literal for precision.py: per scheme the worst over distributions and K
    measured = {}
    for scheme, dists in table.items():
        cells = [c for per_k in dists.values() for c in per_k.values()]
        measured[scheme] = {"rel_err": max(c[0] for c in cells),
                            "max_scaled_err": max(c[1] for c in cells)}
    print("\n# paste into kernels/gemm_bias_relu/precision.py, replacing MEASURED and "
          "MEASURED_ON:")
    print(f"MEASURED_ON = {json.dumps(stamp)}")
    print("MEASURED: dict[str, ErrorClass] = {")
    for scheme, e in measured.items():
        print(f"    {scheme!r}: ErrorClass(rel_err={e['rel_err']:.2e}, "
              f"max_scaled_err={e['max_scaled_err']:.2e}),")
    print("}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
