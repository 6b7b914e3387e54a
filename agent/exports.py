"""A campaign as data for people and other tools: its points (one compact row per candidate, what
the dashboard plots), convergence plots, the Markdown report, and the exports (T4 results and
Kernel Tuner's cache, see :mod:`core.formats`).

Everything past :func:`candidate_point` works on plain dicts, so the same code serves an embedded
campaign read from the database and one read over the REST API.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session, defer, object_session

from core import formats
from core.arch import ceiling
from core.models import Campaign, Candidate, aware
from core.statuses import CANDIDATE_FINAL, FinalStatus, failure_line
from kernels import get_family
from kernels.family import KernelFamily, point_peak

#: The colour of every final status, in the vocabulary's order (the plots' legend order): the PNG
#: plots and the dashboard, which reads them from ``GET /campaigns/{id}/points``.
STATUS_COLOURS: dict[FinalStatus, str] = {
    "ok": "#2b8a3e", "rejected": "#868e96", "compile_error": "#e67700",
    "compile_timeout": "#d9480f", "wrong": "#c92a2a", "crashed": "#862e9c", "timeout": "#5f3dc4",
    "launch_error": "#a61e4d", "not_measured": "#adb5bd"}


def rate(campaign: Mapping[str, Any], us: float | None) -> float | None:
    """Throughput, in the family's unit, of one launch at the campaign's shape taking ``us``
    (``campaign`` as the API reads it: ``kernel`` and ``shape``)."""
    if not us:
        return None
    family = get_family(campaign["kernel"])
    return family.metric.rate(family.make_dims(campaign["shape"]), us)


def campaign_ceiling(campaign: Campaign) -> tuple[float | None, str]:
    """The ceiling of the campaign's best kernel (its baseline's before one passed) on its
    device, in the family's unit, and its label (``FP32 FMA peak``, ``bf16x3 ceiling``): the
    peak of that kernel's precision scheme (``kernels.family.point_peak``), which the evaluator
    also puts in the kernel's perf block. None where the device has no such figure."""
    family = get_family(campaign.kernel)
    params: Any = None
    session = object_session(campaign)
    chosen = campaign.best_id or campaign.baseline_id
    if session is not None and chosen is not None:
        params = session.scalar(select(Candidate.params).where(Candidate.id == chosen))
    peak = point_peak(family, family.params_from_dict(params) if params else family.baseline)
    return ceiling(peak, campaign.device or {})[0], peak.label


def campaign_peak(campaign: Campaign) -> float | None:
    """The ceiling of the campaign's best kernel (:func:`campaign_ceiling`), in its unit."""
    return campaign_ceiling(campaign)[0]


def vendor_speed(pct_of_vendor: float | None, vendor: str | None) -> str:
    """A kernel's speed against the vendor's, as every report writes it: ``4.07× cuBLAS fp32``
    (``pct_of_vendor`` is the vendor's time over the kernel's, in %: above 100 is faster)."""
    if pct_of_vendor is None:
        return f"– (no {vendor or 'vendor'} time)" if vendor else "– (no vendor baseline)"
    return f"{pct_of_vendor / 100:.2f}× {vendor or 'the vendor'}"


def _family(campaign: Mapping[str, Any]) -> KernelFamily:
    return get_family(campaign["kernel"])


def candidate_point(campaign: Campaign, cand: Candidate) -> dict[str, Any]:
    """One candidate as a compact row: what it tried and why, what came of it, when."""
    started, finished = aware(campaign.started_at), aware(cand.finished_at)
    created = aware(cand.created_at)
    decision = cand.decision or {}
    perf = cand.perf or {}
    ok = cand.status == "ok" and cand.avg_us is not None
    return {
        "id": cand.id, "iteration": cand.iteration, "status": cand.status,
        "action": cand.action, "proposed_by": cand.proposed_by, "reason": cand.reason,
        "parent_id": cand.parent_id, "accepted": cand.accepted,
        "avg_us": cand.avg_us if ok else None,
        "throughput": round(campaign.throughput(cand.avg_us) or 0, 4) if ok else None,
        "runs_us": perf.get("runs_us") if ok else None,
        "decision": {"accepted": decision.get("accepted"),
                     "improvement_pct": decision.get("improvement_pct"),
                     "reason": decision.get("reason"),
                     "incumbent_id": decision.get("incumbent_id"),
                     "incumbent_iteration": decision.get("incumbent_iteration")}
        if decision else None,
        "compile_s": (cand.compile or {}).get("seconds"),
        "gpu_seconds": cand.gpu_seconds,
        "created_at": created.isoformat() if created else None,
        "finished_at": finished.isoformat() if finished else None,
        "elapsed_s": round((finished - started).total_seconds(), 3)
        if started and finished else None,
        "params": cand.params,
        "error": (cand.error or "")[:300] or None,
        "failure": failure_line(cand.status, cand.error or str(
            decision.get("reason") or "").removeprefix(f"{cand.status}: "))
        if cand.status in CANDIDATE_FINAL and cand.status != "ok" else None,
    }


def campaign_points(session: Session, campaign: Campaign, *, limit: int | None = None,
                    offset: int = 0) -> tuple[list[dict[str, Any]], int]:
    """A page of the campaign's points by iteration, and how many there are in all."""
    total = session.scalar(select(func.count()).select_from(Candidate)
                           .where(Candidate.campaign_id == campaign.id)) or 0
    query = (select(Candidate).where(Candidate.campaign_id == campaign.id)
             .options(defer(Candidate.source), defer(Candidate.compile_log),
                      defer(Candidate.feedback), defer(Candidate.correctness))
             .order_by(Candidate.iteration).offset(offset))
    if limit is not None:
        query = query.limit(limit)
    return [candidate_point(campaign, c) for c in session.scalars(query).all()], int(total)


# ---- convergence ----------------------------------------------------------------------------
def evaluated(points: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Points with a final outcome (candidates in flight are left out)."""
    return [p for p in points if p["status"] in CANDIDATE_FINAL]


def best_so_far(points: Sequence[Mapping[str, Any]], *, by: str = "iteration"
                ) -> list[tuple[float, float | None]]:
    """``(x, best throughput so far)`` after each evaluated point, ordered by ``iteration`` or by
    ``elapsed_s`` (seconds since the campaign started). The best is the best *accepted*
    candidate, as the campaign's own ``best`` is."""
    done = [p for p in evaluated(points) if by == "iteration" or p.get("elapsed_s") is not None]
    done.sort(key=lambda p: (p[by], p["iteration"]))
    best: float | None = None
    out: list[tuple[float, float | None]] = []
    for p in done:
        if p["accepted"] and p.get("throughput"):
            best = max(best or 0.0, float(p["throughput"]))
        out.append((float(p[by]), best))
    return out


def convergence_png(campaign: Mapping[str, Any], points: Sequence[Mapping[str, Any]],
                    path: Path, *, by: str = "iteration", peak: float | None = None,
                    peak_label: str | None = None) -> Path:
    """Best-so-far throughput against ``iteration`` or ``elapsed_s``; every candidate a point
    coloured by status (failed ones at 0); the vendor's line and the peak's (``peak_label``:
    what the peak is, by default the family's metric's).

    ``campaign`` is a campaign as the API reads it (``kernel``, ``shape``, ``vendor_us``, …)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    family = _family(campaign)
    shape_text = str(family.make_dims(campaign["shape"]))
    done = [p for p in evaluated(points) if by == "iteration" or p.get("elapsed_s") is not None]
    fig, ax = plt.subplots(figsize=(10.5, 5), dpi=110)
    for status, colour in STATUS_COLOURS.items():
        mine = [p for p in done if p["status"] == status]
        if mine:
            ax.scatter([p[by] for p in mine], [p.get("throughput") or 0.0 for p in mine], s=12,
                       color=colour, alpha=0.75, zorder=2, label=f"{status} ({len(mine)})")
    steps = best_so_far(points, by=by)
    if steps:
        ax.step([x for x, _ in steps], [y or 0.0 for _, y in steps], where="post",
                color="#1971c2", lw=2, label="best so far", zorder=3)
    vendor = rate(campaign, campaign.get("vendor_us"))
    if vendor:
        name = family.vendor.name if family.vendor else "vendor"
        ax.axhline(vendor, color="#e03131", ls="--", lw=1.2, label=f"{name} {vendor:.1f}")
    if peak:
        ax.axhline(peak, color="#495057", ls=":", lw=1.2,
                   label=f"{peak_label or family.metric.peak_label} {peak:.1f}")
    ax.set_xlabel("iteration" if by == "iteration" else "seconds since the campaign started")
    ax.set_ylabel(family.metric.unit)
    ax.set_title(f"{campaign['kernel']} {shape_text} · {campaign['policy']} · "
                 f"{campaign['backend']} ({campaign.get('gpu') or 'unknown GPU'})")
    ax.grid(alpha=0.3)
    if not done:  # an empty frame says why, and there is no legend to draw (matplotlib warned)
        ax.text(0.5, 0.5, "no evaluated candidate", transform=ax.transAxes, ha="center",
                va="center", color="#868e96")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


# ---- the report -----------------------------------------------------------------------------
_ACTION_NAME = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)")


def transform_name(action: str | None) -> str:
    """``apply_tiling`` of ``apply_tiling(32)``; ``baseline`` for the first candidate."""
    found = _ACTION_NAME.match(action or "")
    return found.group(1) if found else "baseline"


def accepted_steps(points: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The decision chain's accepted steps, by iteration."""
    return sorted((p for p in points if p["accepted"]), key=lambda p: p["iteration"])


def step_speedup(improvement_pct: float | None) -> float | None:
    """The speed-up over the incumbent that a decision's improvement (the share of the
    incumbent's time saved, in %) stands for: 81.2 -> 5.32."""
    if improvement_pct is None or improvement_pct >= 100:
        return None
    return 1.0 / (1.0 - improvement_pct / 100.0)


def transforms_that_paid(points: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per transform: tries, acceptances and the product of the accepted speed-ups, best first."""
    table: dict[str, dict[str, Any]] = {}
    for p in evaluated(points):
        if p["iteration"] == 0 and not p.get("action"):
            continue
        row = table.setdefault(transform_name(p.get("action")),
                               {"transform": transform_name(p.get("action")), "tried": 0,
                                "accepted": 0, "speedup": 1.0})
        row["tried"] += 1
        speedup = step_speedup((p.get("decision") or {}).get("improvement_pct"))
        if p["accepted"]:
            row["accepted"] += 1
            if speedup is not None:
                row["speedup"] *= speedup
    rows = sorted(table.values(), key=lambda r: (-r["speedup"], -r["accepted"], r["transform"]))
    for r in rows:
        r["speedup"] = round(r["speedup"], 3)
    return rows


def _fmt(value: Any, spec: str = ".2f", unit: str = "") -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    return f"{value:{spec}}{unit}"


def markdown_report(campaign: Mapping[str, Any], points: Sequence[Mapping[str, Any]], *,
                    plots: Sequence[str] = (), peak: float | None = None,
                    peak_label: str | None = None) -> str:
    """The campaign as Markdown: outcome, the accepted steps with their reasons, the transforms
    that paid, failures by status, and the plots (paths relative to the report); ``peak`` is
    the best kernel's ceiling, named by ``peak_label``."""
    family = _family(campaign)
    unit = family.metric.unit
    shape_text = str(family.make_dims(campaign["shape"]))
    best, base = campaign.get("best") or {}, campaign.get("baseline") or {}
    vendor = rate(campaign, campaign.get("vendor_us"))
    vendor_name = family.vendor.name if family.vendor else "vendor"
    done = evaluated(points)
    lines = [
        f"# Campaign {campaign['id'][:8]} · {campaign['kernel']} {shape_text}",
        "",
        f"**{campaign['status']}** ({campaign.get('status_reason') or '–'}) · policy "
        f"`{campaign['policy']}` · backend `{campaign['backend']}` on "
        f"{campaign.get('gpu') or 'unknown GPU'} · {campaign['evaluations']} evaluations · "
        f"{_fmt(campaign.get('gpu_seconds'), '.1f', ' s')} of GPU time · "
        f"{campaign.get('served_from_history') or 0} evaluations served from history",
        "",
        f"| | time | {unit} | iteration |",
        "|---|---|---|---|",
        f"| best | {_fmt(best.get('avg_us'), '.1f', ' µs')} | "
        f"{_fmt(best.get('throughput'))} | {best.get('iteration', '–')} |",
        f"| baseline (the seed's) | {_fmt(base.get('avg_us'), '.1f', ' µs')} | "
        f"{_fmt(base.get('throughput'))} | {base.get('iteration', '–')} |",
        f"| {vendor_name} | {_fmt(campaign.get('vendor_us'), '.1f', ' µs')} | "
        f"{_fmt(vendor)} | |",
        f"| {peak_label or family.metric.peak_label} | | {_fmt(peak)} | |",
        "",
        f"- speedup over the baseline: **{_fmt(campaign.get('speedup_vs_baseline'), '.2f', 'x')}"
        "**",
        f"- against the vendor: **{vendor_speed(campaign.get('pct_of_vendor'), vendor_name)}**",
    ]
    if peak and best.get("throughput"):
        lines.append(f"- the best kernel runs at {100 * best['throughput'] / peak:.0f}% of its "
                     f"{peak_label or family.metric.peak_label}")
    if campaign.get("rank_est"):
        lines.append(f"- estimated leaderboard rank: {campaign['rank_est']}")
    if best.get("params"):
        params = ", ".join(f"{key}={value}" for key, value in best["params"].items())
        lines.append(f"- best parameters: `{params}`")
    # the parent tells two acceptances of one transform apart (applied to different kernels)
    iteration_of = {p["id"]: p["iteration"] for p in points}
    lines += ["", "## Accepted steps", "",
              f"| iteration | parent | action | {unit} | speed-up vs incumbent (#) | "
              "why it was tried | why it was kept |",
              "|---|---|---|---|---|---|---|"]
    for p in accepted_steps(points):
        decision = p.get("decision") or {}
        parent = iteration_of.get(p.get("parent_id"))
        # the decision's improvement is the time it saves (+81% for a 5.3x faster kernel, as
        # the reasons say): the column shows the speed-up it stands for
        # against the incumbent it was decided on, which with several candidates in flight
        # may be a later one than its parent
        against = decision.get("incumbent_iteration")
        speedup = _fmt(step_speedup(decision.get('improvement_pct')), '.2f', 'x')
        lines.append(
            f"| {p['iteration']} | {'–' if parent is None else parent} | "
            f"`{p.get('action') or 'baseline'}` | {_fmt(p.get('throughput'))} | "
            f"{speedup if against is None or speedup == '–' else f'{speedup} (#{against})'} | "
            f"{_md_cell(p.get('reason'))} | {_md_cell(decision.get('reason'))} |")
    lines += ["", "## Transforms that paid", "",
              "| transform | tried | accepted | speed-up of its accepted steps |",
              "|---|---|---|---|"]
    for r in transforms_that_paid(points):
        lines.append(f"| `{r['transform']}` | {r['tried']} | {r['accepted']} | "
                     f"{r['speedup']:.3f}x |")
    counts: dict[str, int] = {}
    for p in done:
        counts[p["status"]] = counts.get(p["status"], 0) + 1
    lines += ["", "## Outcomes", "", "| status | candidates |", "|---|---|"]
    lines += [f"| {status} | {count} |" for status, count in sorted(counts.items())]
    if plots:
        lines += ["", "## Convergence", ""]
        lines += [f"![{Path(p).stem}]({p})" for p in plots]
    return "\n".join(lines) + "\n"


def _md_cell(text: Any) -> str:
    return str(text or "–").replace("|", "\\|").replace("\n", " ")


# ---- exports --------------------------------------------------------------------------------
def _rows(points: Iterable[Mapping[str, Any]], unit: str) -> list[dict[str, Any]]:
    rows = []
    for p in evaluated(points):
        runs = p.get("runs_us")
        rows.append({
            "params": p["params"], "status": p["status"],
            "perf": {"avg_us": p["avg_us"], "runs_us": runs or [p["avg_us"]],
                     "throughput": p["throughput"], "unit": unit} if p.get("avg_us") else None,
            "compile": {"seconds": p.get("compile_s") or 0.0},
            "gpu_seconds": p.get("gpu_seconds") or 0.0, "timestamp": p.get("finished_at"),
            "iteration": p["iteration"], "candidate_id": p["id"], "action": p.get("action"),
        })
    return rows


def t4_document(campaign: Mapping[str, Any], points: Sequence[Mapping[str, Any]]
                ) -> dict[str, Any]:
    """Every evaluated candidate in the T4 results format, by iteration; each result also
    carries tuneforge's ``iteration`` and ``candidate_id`` as unit-less measurements."""
    unit = _family(campaign).metric.unit
    return formats.t4_results(sorted(_rows(points, unit), key=lambda r: r["iteration"]),
                              extra_measurements=("iteration", "candidate_id"))


def kt_cache_document(campaign: Mapping[str, Any], points: Sequence[Mapping[str, Any]]
                      ) -> dict[str, Any]:
    """Every evaluated candidate as a Kernel Tuner cache (its ``device_name`` is the GPU the
    campaign ran on, or replayed)."""
    family = _family(campaign)
    dims = family.make_dims(campaign["shape"])
    return formats.kt_cache(_rows(points, family.metric.unit), domains=family.domains(),
                            device_name=campaign.get("gpu") or "unknown GPU",
                            kernel_name=campaign["kernel"],
                            problem_size=list(dims.values_tuple()),
                            defaults=_every_field(family.baseline))


def _every_field(params: Any) -> dict[str, Any]:
    """Every field of a point: a dataclass's all (``to_dict`` leaves late fields out at their
    defaults, and rows stored before a field existed lack them); a user family's point
    names every tunable in ``to_dict``."""
    if dataclasses.is_dataclass(params) and not isinstance(params, type):
        return dataclasses.asdict(params)
    return dict(params.to_dict())
