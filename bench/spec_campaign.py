"""A declarative family (a spec directory) on the GPU: hand-picked points, then a campaign, each
best timed flushed and sustained beside the copy rate the evaluation child measured.

    python bench/spec_campaign.py examples/transpose --shape 8192x8192 --budget 400 --wall 75 \
        --params '{"tile_x": 32, ...}' --label 32x32 --out out/

Run on a GPU host. The family is built from the directory and registered in this process only
(no database); the campaign runs embedded on SQLite in a temporary directory with the policy
given (the expert by default). Prints a short table; writes ``spec_campaign.json`` under
``--out``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.embedded import EmbeddedRunner  # noqa: E402
from agent.engine.lifecycle import CampaignSpec, create_campaign  # noqa: E402
from agent.policies import make_policy  # noqa: E402
from agent.report import summary  # noqa: E402
from agent.spaces import FullSpace  # noqa: E402
from core.db import session_factory, upgrade_database  # noqa: E402
from core.evaluation import EvalOptions  # noqa: E402
from core.models import Campaign  # noqa: E402
from kernels import register_family  # noqa: E402
from kernels.userspec import build_family, load_spec_dir  # noqa: E402
from worker.compile import Compiler  # noqa: E402
from worker.evaluate import GpuEvaluator  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("spec", type=Path, help="the family's spec directory")
    ap.add_argument("--shape", default=None, help="the family's dimensions (its default)")
    ap.add_argument("--budget", type=int, default=200, help="campaign evaluations")
    ap.add_argument("--wall", type=float, default=120.0, help="campaign wall-clock seconds")
    ap.add_argument("--policy", default="expert")
    ap.add_argument("--params", action="append", default=[], help="a point's JSON (repeatable)")
    ap.add_argument("--label", action="append", default=[], help="a label per --params")
    ap.add_argument("--min-ms", type=float, default=250.0, help="sustained run length")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()

    built = build_family(load_spec_dir(args.spec))
    family = register_family(built, replace=True)
    shape = family.parse_dims(args.shape) if args.shape else family.default_dims
    tmp = Path(tempfile.mkdtemp(prefix="spec-campaign-"))
    ev = GpuEvaluator(family, Compiler(tmp / "cc", arch="sm_90"),
                      options=EvalOptions(timeout_s=120.0))
    copy = ev.device.get("copy_gbs")
    rows: list[dict[str, Any]] = []

    def timed(label: str, params: dict[str, Any]) -> None:
        p = family.params_from_dict(params)
        c = ev.compile(p).result()
        row: dict[str, Any] = {"label": label, "params": params, "compile": c.status}
        if c.status == "ok":
            m = ev.measure(p, c, shape=shape, iteration=0, seed=7)
            row.update(status=m.status, error=m.error, perf=m.perf)
            if m.status == "ok":
                row["sustained"] = ev.sustained(p, c, shape=shape, min_ms=args.min_ms)
        else:
            row.update(status=c.status, error=c.error)
        rows.append(row)

    for i, text in enumerate(args.params):
        timed(args.label[i] if i < len(args.label) else f"point {i}", json.loads(text))

    url = f"sqlite:///{tmp / 'campaign.db'}"
    upgrade_database(url)
    sessions = session_factory(url)
    with sessions.begin() as s:
        cid = create_campaign(s, CampaignSpec(kernel=family.name, dims=dict(shape),
                                              policy=args.policy, budget_iterations=args.budget,
                                              budget_wall_s=args.wall, parallel=5),
                              backend="gpu", device=ev.device).id
    EmbeddedRunner(sessions, [ev], policy=make_policy(args.policy),
                   space=FullSpace(family, "sm_90")).run(cid)
    with sessions() as s:
        found = s.get(Campaign, cid)
        assert found is not None
        result = summary(s, found)
    best = result.get("best")
    if isinstance(best, dict):
        timed(f"campaign best ({result['evaluations']} evals)", best["params"])
    ev.close()
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "spec_campaign.json").write_text(json.dumps(
            {"device": ev.device, "shape": str(shape), "rows": rows, "campaign": result},
            indent=1, default=str))

    work = family.metric.amount(shape)
    print(f"{built.display_name} {shape} · copy {copy} GB/s · campaign {result['evaluations']} "
          f"evaluations in {result['wall_seconds']} s"
          + (f", its best {best['throughput']:.0f} {family.metric.unit} at iteration "
             f"{best['iteration']}" if isinstance(best, dict) else ": no best"))
    print(f"{'point':30s} {'us':>8s} {'rate':>7s} {'%peak':>6s} {'sus us':>8s} {'%peak':>6s}")
    for r in rows:
        perf, sus = r.get("perf") or {}, r.get("sustained") or {}
        if not perf:
            print(f"{r['label'][:30]:30s} {r['status']}: {(r.get('error') or '')[:40]}")
            continue
        sus_us = sus.get("us_per_launch")
        sus_pct = (100.0 * work / (sus_us * 1e3) / copy) if sus_us and copy else 0.0
        print(f"{r['label'][:30]:30s} {perf['avg_us']:8.1f} {perf['throughput']:7.0f} "
              f"{perf.get('pct_of_peak') or 0:6.1f} {sus_us or 0:8.1f} {sus_pct:6.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
