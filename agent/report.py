"""Summaries, the best kernel as a ``.cu`` file, and convergence plots of a campaign."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sqlalchemy import bindparam, func, select
from sqlalchemy.orm import Session

from core.models import Campaign, Candidate
from kernels import get_family
from kernels.base import Rejection

_SERVED = (select(func.count()).select_from(Candidate)
           .where(Candidate.campaign_id == bindparam("campaign_id"),
                  Candidate.served_from.is_not(None)))


def served_count(session: Session, campaign_id: str) -> int:
    """Evaluations of the campaign served from the team's history (no GPU time)."""
    return int(session.scalar(_SERVED, {"campaign_id": campaign_id}) or 0)


def summary(session: Session, campaign: Campaign) -> dict[str, Any]:
    """The campaign's outcome: best, baseline, speedup, the best's speed against the vendor's
    (``pct_of_vendor``: the vendor's time over the best's, in %), rank estimate; throughputs in
    the family's unit (``unit``)."""
    from agent.engine.recording import rank_estimate

    def point(cid: str | None) -> dict[str, Any] | None:
        cand = session.get(Candidate, cid) if cid else None
        if cand is None or cand.avg_us is None:
            return None
        out = {"candidate_id": cand.id, "iteration": cand.iteration, "params": cand.params,
               "avg_us": round(cand.avg_us, 3),
               "throughput": round(campaign.throughput(cand.avg_us) or 0.0, 3),
               "action": cand.action}
        if campaign.metric.kind == "flops":  # the seed's field
            out["throughput_tflops"] = out["throughput"]
        return out

    best, baseline = point(campaign.best_id), point(campaign.baseline_id)
    family = get_family(campaign.kernel)
    started, finished = campaign.started_at, campaign.finished_at
    return {
        "campaign_id": campaign.id, "status": campaign.status, "reason": campaign.status_reason,
        "kernel": campaign.kernel, "shape": campaign.shape_text, "unit": campaign.metric.unit,
        "policy": campaign.policy,
        "backend": campaign.backend, "gpu": campaign.gpu_name,
        "evaluations": campaign.evaluations,
        "gpu_seconds": round(campaign.gpu_seconds, 2),
        "served_from_history": served_count(session, campaign.id),
        "wall_seconds": round((finished - started).total_seconds(), 2)
        if started and finished else None,
        "best": best, "baseline": baseline,
        "speedup_vs_baseline": round(baseline["avg_us"] / best["avg_us"], 3)
        if best and baseline else None,
        "vendor": family.vendor.name if family.vendor else None,
        "vendor_us": campaign.vendor_us,
        "pct_of_vendor": round(100 * campaign.vendor_us / best["avg_us"], 2)
        if best and campaign.vendor_us else None,
        "rank_est": rank_estimate(campaign.leaderboard, campaign.best_us,
                                  campaign.throughput(campaign.best_us)),
    }


def best_kernel(session: Session, campaign: Campaign) -> dict[str, Any] | None:
    """The best kernel: its source, launch configuration and provenance (None before one)."""
    cand = session.get(Candidate, campaign.best_id) if campaign.best_id else None
    if cand is None:
        return None
    family = get_family(campaign.kernel)
    params = family.params_from_dict(cand.params)
    launch = family.launch(params, campaign.problem)
    launch_dict = launch.to_dict() if not isinstance(launch, Rejection) else None
    provenance = {
        "campaign_id": campaign.id, "candidate_id": cand.id, "iteration": cand.iteration,
        "params": cand.params, "avg_us": cand.avg_us, "backend": campaign.backend,
        "gpu": campaign.gpu_name, "arch": campaign.arch, "shape": campaign.shape_text,
        "source_sha256": cand.source_hash,
        "launch": launch_dict,
        "correctness": {k: (cand.correctness or {}).get(k)
                        for k in ("passed", "rel_err", "max_scaled_err", "tolerance")},
    }
    return {"source": cand.source or family.render(params), "launch": launch_dict,
            "provenance": provenance}


def best_kernel_source(best: dict[str, Any]) -> str:
    """The ``.cu`` text of :func:`best_kernel`'s answer: provenance as a first-line comment."""
    header = "// " + json.dumps(best["provenance"], sort_keys=True).replace("\n", " ") + "\n"
    return header + best["source"]


def best_kernel_files(session: Session, campaign: Campaign, out_dir: Path) -> list[Path]:
    """Write the best kernel (``.cu`` with its launch configuration and provenance)."""
    best = best_kernel(session, campaign)
    if best is None:
        return []
    out_dir.mkdir(parents=True, exist_ok=True)
    cu = out_dir / f"{campaign.kernel}_best.cu"
    cu.write_text(best_kernel_source(best))
    meta = out_dir / f"{campaign.kernel}_best.json"
    meta.write_text(json.dumps(best["provenance"], indent=1, sort_keys=True) + "\n")
    return [cu, meta]


def convergence_plot(session: Session, campaign: Campaign, path: Path,
                     peak: float | None = None) -> Path:
    """Best-so-far throughput against iteration, every candidate as a point, the vendor's line
    and the best kernel's ceiling (``peak``, by default :func:`agent.exports.campaign_ceiling`)
    (drawn by :func:`agent.exports.convergence_png`, which ``tuneforge report`` uses too)."""
    from agent.exports import campaign_ceiling, campaign_points, convergence_png

    points, _total = campaign_points(session, campaign)
    about = {"id": campaign.id, "kernel": campaign.kernel, "policy": campaign.policy,
             "backend": campaign.backend, "gpu": campaign.gpu_name,
             "vendor_us": campaign.vendor_us,
             "shape": campaign.dims}
    ceiling, label = campaign_ceiling(campaign)
    return convergence_png(about, points, path, by="iteration",
                           peak=ceiling if peak is None else peak, peak_label=label)
