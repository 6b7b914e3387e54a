"""Write a replay dataset from the candidates GPU campaigns measured (any family).

    python bench/replay_from_campaigns.py --kernel softmax --db runs.db --out replay.jsonl.gz

Every candidate with a final outcome of every GPU campaign of ``--kernel`` in the databases
becomes one row keyed by its parameters and the campaign's shape (the first measurement of a
point at a shape wins): its compile figures, status, correctness, perf, profile and GPU
seconds, exactly as the evaluator recorded them. The meta line carries the device, the vendor's
time per shape, the values each parameter took (the replay space's domains), the date and the
commit. A replayed campaign then walks the measured neighbourhoods; a point no campaign measured
answers ``not_measured``. Prints a table last.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlalchemy import select  # noqa: E402

from bench import git_commit  # noqa: E402
from core.db import session_factory  # noqa: E402
from core.models import Campaign, Candidate  # noqa: E402
from core.replay import domains_of  # noqa: E402
from core.statuses import CANDIDATE_FINAL  # noqa: E402
from kernels import get_family  # noqa: E402


def collect(urls: list[str], kernel: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The meta line and the rows of every GPU campaign of ``kernel`` in ``urls``."""
    family = get_family(kernel)
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    vendor: dict[str, float] = {}
    device: dict[str, Any] = {}
    campaigns = 0
    for url in urls:
        sessions = session_factory(url)
        with sessions() as s:
            for campaign in s.scalars(select(Campaign).where(
                    Campaign.kernel == kernel, Campaign.backend == "gpu")).all():
                campaigns += 1
                device = device or dict(campaign.device or {})
                shape = campaign.shape_text
                if campaign.vendor_us:
                    vendor.setdefault(shape, campaign.vendor_us)
                for cand in s.scalars(select(Candidate).where(
                        Candidate.campaign_id == campaign.id,
                        Candidate.status.in_(CANDIDATE_FINAL))
                        .order_by(Candidate.iteration)).all():
                    params = family.params_from_dict(cand.params).to_dict()
                    key = (json.dumps(params, sort_keys=True), shape)
                    rows.setdefault(key, {
                        "params": params, "shape": shape, "compile": cand.compile,
                        "status": cand.status, "correctness": cand.correctness,
                        "perf": cand.perf, "profile": cand.profile, "error": cand.error,
                        "gpu_seconds": round(cand.gpu_seconds or 0.0, 4),
                        "campaign_id": campaign.id, "iteration": cand.iteration})
    domains = domains_of(family, rows.values())
    meta = {
        "kind": "meta", "family": kernel, "gpu": device.get("name"), "device": device,
        "driver": device.get("driver_version"), "date": dt.date.today().isoformat(),
        "commit": git_commit(), "vendor_us": vendor, "vendor": family.vendor.name
        if family.vendor else None, "domains": domains,
        "shapes": sorted({r["shape"] for r in rows.values()}), "campaigns": campaigns,
        "measured": len(rows),
        "method": "the candidates GPU campaigns measured (bench/replay_from_campaigns.py): "
                  "correctness on fresh seeded inputs and the family's edge shapes, then 3 runs "
                  "of adaptive repetitions, L2 flushed, CUDA events, median of run medians",
    }
    return meta, list(rows.values())


def main() -> int:
    """Collect, write, print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--db", action="append", required=True,
                    help="a database URL or SQLite path (repeatable)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--family-module", help="import this module and register its FAMILY first "
                    "(a family outside the registry, e.g. families.scale_add from tests/)")
    ap.add_argument("--path", action="append", default=[], help="add to sys.path first")
    args = ap.parse_args()
    sys.path[:0] = args.path
    if args.family_module:
        import importlib

        import kernels

        kernels.register_family(importlib.import_module(args.family_module).FAMILY,
                                replace=True)
    urls = [d if "://" in d else f"sqlite:///{Path(d).resolve()}" for d in args.db]
    meta, rows = collect(urls, args.kernel)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(args.out, "wt") as fh:
        fh.write(json.dumps(meta) + "\n")
        for row in rows:
            fh.write(json.dumps(row) + "\n")
    print(f"replay dataset: {args.out}")
    print(f"{'campaigns':12s} {meta['campaigns']}")
    print(f"{'points':12s} {len(rows)}")
    for shape in meta["shapes"]:
        ok = [r for r in rows if r["shape"] == shape and r["status"] == "ok" and r["perf"]]
        best = min(ok, key=lambda r: r["perf"]["avg_us"]) if ok else None
        figure = (f"best {best['perf']['avg_us']:.1f} us · {best['perf'].get('throughput')} "
                  f"{best['perf'].get('unit')}") if best else "no correct point"
        print(f"{shape:18s} {len(ok):4d} ok · {figure} · vendor {meta['vendor_us'].get(shape)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
