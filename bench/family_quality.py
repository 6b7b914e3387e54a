"""Kernel quality of any family on a GPU: flushed median and sustained rate beside the vendor.

    python bench/family_quality.py --kernel softmax --db runs.db --out out/
    python bench/family_quality.py --kernel gemm_bias_relu --params '{...}' --label ws \\
        --shapes 4096x4096x4096,8192x8192x8192 --out out/
    python bench/family_quality.py --kernel softmax --points sweep.json --out out/

The points are the best kernel of every GPU campaign of ``--kernel`` in ``--db`` (at its
campaign's shape), each ``--params`` at each of ``--shapes``, and each entry of ``--points``
(a JSON list of ``{"label", "shape", "params"}``: a sweep whose shapes each have their own
kernel, timed in one run). For every one, in one run on
one GPU: correctness on every input distribution of the family (verify mode) and the protocol's
flushed median (L2 flushed before each timed launch, 3 runs of adaptive repetitions); then the
sustained rate, back-to-back launches over at least ``--min-ms``; the vendor baseline timed both
ways in its own process on the same GPU; and the device-to-device copy bandwidth the child
measured at start-up (the peak of a bytes metric). Prints a table last, writes
``quality.json`` under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlalchemy import select  # noqa: E402

from core.db import session_factory  # noqa: E402
from core.evaluation import EvalOptions  # noqa: E402
from core.models import Campaign, Candidate  # noqa: E402
from kernels import get_family  # noqa: E402
from kernels.base import Dims  # noqa: E402
from kernels.family import KernelFamily  # noqa: E402
from worker.compile import Compiler  # noqa: E402
from worker.evaluate import GpuEvaluator  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def campaign_points(family: KernelFamily, urls: list[str]) -> list[tuple[str, Any, Dims]]:
    """``(label, params, dims)`` of the best kernel of every GPU campaign of the family."""
    out = []
    for url in urls:
        with session_factory(url)() as s:
            for c in s.scalars(select(Campaign).where(Campaign.kernel == family.name,
                                                      Campaign.backend == "gpu",
                                                      Campaign.best_id.is_not(None))).all():
                best = s.get(Candidate, c.best_id)
                assert best is not None
                out.append((f"campaign {c.id[:8]} it {best.iteration}",
                            family.params_from_dict(best.params), c.problem))
    return out


def vendor(family: KernelFamily, dims: Dims, min_ms: float) -> dict[str, Any]:
    """The vendor's flushed median and sustained rate, in a process of its own."""
    if family.vendor is None:
        return {"error": "no vendor baseline"}
    done = subprocess.run([sys.executable, "-m", "worker.vendor", "--family", family.name,
                           str(dims), "--sustain-ms", str(min_ms)], capture_output=True,
                          text=True, timeout=600, cwd=str(ROOT))
    lines = done.stdout.strip().splitlines()
    return json.loads(lines[-1]) if lines else {"error": done.stderr[-300:]}


def sustained_lengths(rows: list[dict[str, Any]], min_ms: float) -> str:
    """How long the sustained runs lasted, ours and the vendor's (each is sized for ``min_ms``
    from a few launches, so a run can fall short of it)."""
    ours = [(r.get("sustained") or {}).get("total_ms") for r in rows]
    theirs = [r["vendor"].get("sustained_ms") for r in rows]
    spans = []
    for who, values in (("ours", ours), ("vendor", theirs)):
        got = [float(v) for v in values if v]
        if got:
            spans.append(f"{who} {min(got):.0f}-{max(got):.0f} ms")
    return (f"sustained runs sized for {min_ms:g} ms: " + ", ".join(spans) if spans else
            f"sustained runs sized for {min_ms:g} ms")


def main() -> int:
    """Measure every point, print the table, write the JSON."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--db", action="append", default=[], help="campaign database (repeatable)")
    ap.add_argument("--params", action="append", default=[], help="a point's JSON (repeatable)")
    ap.add_argument("--label", action="append", default=[], help="a label per --params")
    ap.add_argument("--shapes", default="", help="comma-separated shapes for --params")
    ap.add_argument("--points", type=Path, default=None,
                    help='JSON list of {"label", "shape", "params"}')
    ap.add_argument("--min-ms", type=float, default=300.0, help="sustained run length")
    ap.add_argument("--cache", type=Path, default=Path("/tmp/tf-cache"))
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()

    family = get_family(args.kernel)
    urls = [d if "://" in d else f"sqlite:///{Path(d).resolve()}" for d in args.db]
    points = campaign_points(family, urls)
    shapes = [family.parse_dims(s) for s in args.shapes.split(",") if s.strip()]
    for i, text in enumerate(args.params):
        label = args.label[i] if i < len(args.label) else f"point {i}"
        points += [(label, family.params_from_dict(json.loads(text)), s) for s in shapes]
    if args.points is not None:
        entries = json.loads(args.points.read_text())
        points += [(str(e["label"]), family.params_from_dict(e["params"]),
                    family.parse_dims(str(e["shape"]))) for e in entries]
    compiler = Compiler(args.cache, arch="sm_90", workers=os.cpu_count() or 4)
    evaluator = GpuEvaluator(family, compiler, options=EvalOptions(timeout_s=120.0))
    device = evaluator.device
    rows: list[dict[str, Any]] = []
    vendors: dict[str, dict[str, Any]] = {}
    unit = family.metric.unit
    for label, params, dims in points:
        compiled = evaluator.compile(params).result()
        row: dict[str, Any] = {"label": label, "shape": str(dims), "params": params.to_dict(),
                               "compile": compiled.status}
        if compiled.status == "ok":
            m = evaluator.measure(params, compiled, shape=dims, iteration=0, seed=7,
                                  verify=True)
            row.update(status=m.status, perf=m.perf, correctness=m.correctness, error=m.error)
            if m.status == "ok":
                row["sustained"] = evaluator.sustained(params, compiled, shape=dims,
                                                       min_ms=args.min_ms)
        key = str(dims)
        if key not in vendors:
            vendors[key] = vendor(family, dims, args.min_ms)
        row["vendor"] = vendors[key]
        rows.append(row)
    evaluator.close()

    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "quality.json").write_text(json.dumps(
        {"kernel": family.name, "device": device, "unit": unit, "rows": rows}, indent=1))
    copy = device.get("copy_gbs")
    print(f"\n{family.name} on {device.get('name')} · copy {copy} GB/s · datasheet "
          f"{device.get('datasheet_gbs')} GB/s · {sustained_lengths(rows, args.min_ms)}")
    head = (f"{'shape':>15s} {'label':24s} {'us':>9s} {unit:>9s} {'%peak':>6s} {'x vend':>7s} "
            f"{'sus us':>9s} {'x vend':>7s} {'worst err':>9s}")
    print(head)
    ratios, sus_ratios = [], []
    for r in rows:
        perf, sus, ven = r.get("perf") or {}, r.get("sustained") or {}, r["vendor"]
        if not perf:
            print(f"{r['shape']:>15s} {r['label'][:24]:24s} {r.get('status', r['compile'])}: "
                  f"{(r.get('error') or '')[:60]}")
            continue
        x_flushed = ven["avg_us"] / perf["avg_us"] if ven.get("avg_us") else None
        x_sus = (ven["sustained_us"] / sus["us_per_launch"]
                 if ven.get("sustained_us") and sus.get("us_per_launch") else None)
        if x_flushed:
            ratios.append(x_flushed)
        if x_sus:
            sus_ratios.append(x_sus)
        corr = r.get("correctness") or {}
        worst = max(corr.get("rel_err") or 0.0, corr.get("max_scaled_err") or 0.0)
        print(f"{r['shape']:>15s} {r['label'][:24]:24s} {perf['avg_us']:9.1f} "
              f"{perf['throughput']:9.1f} {perf.get('pct_of_peak') or 0:6.1f} "
              f"{x_flushed or 0:7.3f} {sus.get('us_per_launch') or 0:9.1f} {x_sus or 0:7.3f} "
              f"{worst:9.2e}")
    if ratios:
        print(f"geometric mean x vendor: flushed {math.prod(ratios) ** (1 / len(ratios)):.3f}"
              + (f", sustained {math.prod(sus_ratios) ** (1 / len(sus_ratios)):.3f}"
                 if sus_ratios else "") + f" over {len(ratios)} points")
    return 0


if __name__ == "__main__":
    sys.exit(main())
