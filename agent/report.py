"""Summaries, the best kernel as a ``.cu`` file, and convergence plots of a campaign."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from core.models import Campaign, Candidate
from kernels import get_family
from kernels.base import Rejection, Shape


def _tflops(campaign: Campaign, us: float | None) -> float | None:
    return 2 * campaign.m * campaign.n * campaign.k / (us * 1e-6) / 1e12 if us else None


def summary(session: Session, campaign: Campaign) -> dict[str, Any]:
    """The campaign's outcome: best, baseline, speedup, % of cuBLAS, rank estimate."""
    from agent.engine import rank_estimate

    def point(cid: str | None) -> dict[str, Any] | None:
        cand = session.get(Candidate, cid) if cid else None
        if cand is None or cand.avg_us is None:
            return None
        return {"candidate_id": cand.id, "iteration": cand.iteration, "params": cand.params,
                "avg_us": round(cand.avg_us, 3),
                "throughput_tflops": round(_tflops(campaign, cand.avg_us) or 0.0, 3),
                "action": cand.action}

    best, baseline = point(campaign.best_id), point(campaign.baseline_id)
    flops = 2 * campaign.m * campaign.n * campaign.k
    started, finished = campaign.started_at, campaign.finished_at
    return {
        "campaign_id": campaign.id, "status": campaign.status, "reason": campaign.status_reason,
        "kernel": campaign.kernel, "shape": campaign.shape_text, "policy": campaign.policy,
        "backend": campaign.backend, "gpu": campaign.gpu_name,
        "evaluations": campaign.evaluations,
        "gpu_seconds": round(campaign.gpu_seconds, 2),
        "wall_seconds": round((finished - started).total_seconds(), 2)
        if started and finished else None,
        "best": best, "baseline": baseline,
        "speedup_vs_baseline": round(baseline["avg_us"] / best["avg_us"], 3)
        if best and baseline else None,
        "vendor_us": campaign.vendor_us,
        "pct_of_vendor": round(100 * campaign.vendor_us / best["avg_us"], 2)
        if best and campaign.vendor_us else None,
        "rank_est": rank_estimate(campaign.leaderboard, campaign.best_us, flops),
    }


def best_kernel(session: Session, campaign: Campaign) -> dict[str, Any] | None:
    """The best kernel: its source, launch configuration and provenance (None before one)."""
    cand = session.get(Candidate, campaign.best_id) if campaign.best_id else None
    if cand is None:
        return None
    family = get_family(campaign.kernel)
    params = family.params_from_dict(cand.params)
    launch = family.launch(params, Shape(campaign.m, campaign.n, campaign.k))
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


STATUS_COLOURS = {"ok": "#2b8a3e", "rejected": "#868e96", "compile_error": "#e67700",
                  "compile_timeout": "#d9480f", "wrong": "#c92a2a", "crashed": "#862e9c",
                  "timeout": "#5f3dc4", "launch_error": "#a61e4d", "not_measured": "#ced4da"}


def convergence_plot(session: Session, campaign: Campaign, path: Path,
                     peak_tflops: float | None = None) -> Path:
    """Best-so-far TFLOP/s against iteration, every candidate as a point, the cuBLAS line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = session.scalars(select(Candidate).where(Candidate.campaign_id == campaign.id)
                           .order_by(Candidate.iteration)).all()
    fig, ax = plt.subplots(figsize=(9, 5), dpi=110)
    best = 0.0
    xs, ys = [], []
    for c in rows:
        t = _tflops(campaign, c.avg_us) if c.status == "ok" else None
        if c.accepted and t:
            best = max(best, t)
        xs.append(c.iteration)
        ys.append(best)
        ax.scatter([c.iteration], [t if t else 0.0], s=10,
                   color=STATUS_COLOURS.get(c.status, "#000"), alpha=0.7, zorder=2)
    ax.step(xs, ys, where="post", color="#1971c2", lw=2, label="best so far", zorder=3)
    vendor = _tflops(campaign, campaign.vendor_us)
    if vendor:
        ax.axhline(vendor, color="#e03131", ls="--", lw=1.2, label=f"cuBLAS fp32 {vendor:.1f}")
    if peak_tflops:
        ax.axhline(peak_tflops, color="#495057", ls=":", lw=1.2,
                   label=f"FP32 peak {peak_tflops:.1f}")
    for status, colour in STATUS_COLOURS.items():
        if any(c.status == status for c in rows):
            ax.scatter([], [], color=colour, s=10, label=status)
    ax.set_xlabel("iteration")
    ax.set_ylabel("TFLOP/s")
    ax.set_title(f"{campaign.kernel} {campaign.shape_text} · {campaign.policy} · "
                 f"{campaign.backend} ({campaign.gpu_name or 'unknown GPU'})")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
