"""The team's library: per team, family and GPU model, the best known point at every shape the
team measured, with its provenance and its near-ties (other points within :data:`TIE` of it,
which an export carries for the loader to time on another GPU), and the rule that picks what
runs at any shape.

Nothing is stored twice: the library is a reading of the team's history (every correct
candidate of its campaigns, on the replay or on a GPU), so a campaign's result is in it as soon
as it is recorded. What the export (``agent/bundle.py``) and ``GET /library/{family}`` show.

**The dispatch rule** (:func:`pick`), for a shape ``S``:

1. ``S`` was measured (a campaign, a shape set's member or a probe ran there): the fastest
   correct point at ``S`` — unless the vendor's time there is shorter, when the vendor runs
   (``kind: vendor``: a kernel never replaces the vendor where it was measured slower).
2. Else the bests of the :data:`NEAREST` nearest measured shapes (``agent.shapesets.
   shape_distance``: the sum of ``|ln(a / b)|`` over the dims), each made a starting point
   for ``S`` (``family.for_shape``) and kept when it is valid at ``S`` (the family's rules and
   its launch there): the nearest such one, ``measured_at_shape: false``. A probe (a campaign
   at ``S`` with ``start_from: library``) measures these at ``S`` once, and rule 1 answers
   from then on.
3. Else the vendor.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from agent.shapesets import shape_distance
from core.models import Campaign, Candidate
from kernels import get_family
from kernels.base import Rejection

#: Measured shapes whose bests a shape nobody measured may take (the nearest first).
NEAREST = 3
#: A shape's near-ties: other points measured there within this fraction of its best's time,
#: the fastest first, at most :data:`ALTERNATES` of them. On the GPU that timed them they are
#: within its noise of the best; another GPU of the same arch may order them otherwise (the
#: exported loader times them there, ``docs/LIBRARY.md``).
TIE = 0.03
ALTERNATES = 3


@dataclass(frozen=True)
class LibraryEntry:
    """The best known point at one shape, and where it comes from."""

    shape: str
    dims: dict[str, int]
    params: dict[str, Any]
    avg_us: float
    #: the vendor's time at that shape, measured in the same campaign (None: not measured)
    vendor_us: float | None
    campaign_id: str
    candidate_id: str
    iteration: int
    #: when the point's measurement was recorded (ISO 8601)
    measured_at: str | None
    #: the tuneforge that ran the campaign (a commit)
    commit: str | None
    #: ``gpu`` or ``replay`` (recorded measurements of that GPU replayed)
    backend: str
    gpu: str | None
    #: the shape's near-ties (:data:`TIE`), fastest first: each one's ``params``, ``avg_us``,
    #: ``campaign_id`` and ``candidate_id``
    alternates: tuple[dict[str, Any], ...] = ()

    @property
    def x_vendor(self) -> float | None:
        """The point's speed over the vendor's (vendor time / point time)."""
        return round(self.vendor_us / self.avg_us, 3) if self.vendor_us else None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, with ``x_vendor``."""
        return {**asdict(self), "x_vendor": self.x_vendor}


@dataclass(frozen=True)
class Pick:
    """What runs at one shape, and why (:func:`pick`)."""

    shape: str
    #: ``point`` (one of the library's points) or ``vendor``
    kind: str
    params: dict[str, Any] | None
    #: whether this point (or the vendor) was measured at this very shape
    measured_at_shape: bool
    #: the measured shape the point comes from
    from_shape: str | None
    avg_us: float | None
    vendor_us: float | None
    rule: int
    reason: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)


def gpus(session: Session, *, team_id: str | None, kernel: str) -> list[str]:
    """The GPU models the team measured the family on, most measured first."""
    rows = session.execute(
        select(Campaign.gpu_name, Campaign.evaluations)
        .where(_team(team_id), Campaign.kernel == kernel, Campaign.gpu_name.is_not(None))).all()
    counts: dict[str, int] = {}
    for name, n in rows:
        if name is not None:
            counts[name] = counts.get(name, 0) + int(n or 0)
    return sorted(counts, key=lambda g: -counts[g])


def device(session: Session, *, team_id: str | None, kernel: str,
           gpu: str | None) -> dict[str, Any]:
    """The device record of the team's latest campaign of ``kernel`` on ``gpu`` (its SM count
    sizes a bundle's persistent grids)."""
    found = session.scalars(
        select(Campaign.device).where(_team(team_id), Campaign.kernel == kernel,
                                      Campaign.gpu_name == gpu, Campaign.device.is_not(None))
        .order_by(Campaign.created_at.desc()).limit(1)).first()
    return dict(found or {})


def _team(team_id: str | None) -> Any:
    return Campaign.team_id == team_id if team_id is not None else Campaign.team_id.is_(None)


def entries(session: Session, *, team_id: str | None, kernel: str,
            gpu: str | None = None) -> list[LibraryEntry]:
    """The best known point at every shape the team measured ``kernel`` at on ``gpu`` (the
    GPU it measured most when None), by shape.

    Read in three queries: the campaigns, then their correct candidates' times by their
    stored ``params_key`` (no JSON column: decoding each candidate's records was most of the
    cost), then the params of the points kept."""
    gpu = gpu or next(iter(gpus(session, team_id=team_id, kernel=kernel)), None)
    if gpu is None:
        return []
    family = get_family(kernel)
    campaigns = {row.id: row for row in session.execute(
        select(Campaign.id, Campaign.dims, Campaign.vendor_us, Campaign.commit,
               Campaign.backend)
        .where(_team(team_id), Campaign.kernel == kernel, Campaign.gpu_name == gpu))}
    if not campaigns:
        return []
    shape_of = {cid: family.make_dims(row.dims) for cid, row in campaigns.items()}
    rows = session.execute(
        select(Candidate.id, Candidate.campaign_id, Candidate.params_key, Candidate.avg_us,
               Candidate.iteration, Candidate.finished_at)
        .join(Campaign, Campaign.id == Candidate.campaign_id)
        .where(_team(team_id), Campaign.kernel == kernel, Campaign.gpu_name == gpu,
               Candidate.status == "ok", Candidate.avg_us.is_not(None))
        .order_by(Campaign.created_at, Campaign.id, Candidate.iteration)).all()
    #: per shape, each point's fastest measurement (the first measured of equal times)
    fastest: dict[str, dict[str, Any]] = {}
    vendor: dict[str, float] = {}
    for row in rows:
        camp = campaigns[row.campaign_id]
        shape = str(shape_of[row.campaign_id])
        if camp.vendor_us:
            vendor.setdefault(shape, float(camp.vendor_us))
        points = fastest.setdefault(shape, {})
        found = points.get(row.params_key)  # the canonical key, stored with the candidate
        if found is None or float(row.avg_us) < float(found.avg_us):
            points[row.params_key] = row
    kept: list[tuple[str, Any, list[Any]]] = []
    for shape, points in fastest.items():
        ranked = sorted(points.values(), key=lambda r: float(r.avg_us))
        best = ranked[0]
        ties = [r for r in ranked[1:] if float(r.avg_us) <= float(best.avg_us) * (1.0 + TIE)]
        kept.append((shape, best, ties[:ALTERNATES]))
    wanted = [r.id for _, best, ties in kept for r in (best, *ties)]
    params: dict[str, dict[str, Any]] = {
        cid: p for cid, p in session.execute(
            select(Candidate.id, Candidate.params).where(Candidate.id.in_(wanted)))}
    out = []
    for shape, best, ties in kept:
        camp = campaigns[best.campaign_id]
        out.append(LibraryEntry(
            shape=shape, dims=dict(shape_of[best.campaign_id].as_dict()),
            params=dict(params[best.id]), avg_us=float(best.avg_us), vendor_us=vendor.get(shape),
            campaign_id=camp.id, candidate_id=best.id, iteration=best.iteration,
            measured_at=best.finished_at.isoformat() if best.finished_at else None,
            commit=camp.commit, backend=camp.backend, gpu=gpu,
            alternates=tuple({"params": dict(params[r.id]), "avg_us": float(r.avg_us),
                              "campaign_id": r.campaign_id, "candidate_id": r.id}
                             for r in ties)))
    return sorted(out, key=lambda e: [e.dims[d.name] for d in family.dims])


def valid_at(family: Any, params: Any, dims: Any, arch: str) -> str | None:
    """Why ``params`` cannot run at ``dims`` (None: it can): the family's rules, its launch."""
    refused = family.validate(params, arch)
    if refused is not None:
        return refused.message
    launch = family.launch(params, dims)
    return launch.message if isinstance(launch, Rejection) else None


def pick(session: Session, *, team_id: str | None, kernel: str, shape: Any,
         gpu: str | None = None, arch: str = "sm_90",
         known: Sequence[LibraryEntry] | None = None) -> Pick:
    """What runs at ``shape`` by the library's dispatch rule (the module's docstring).
    ``known``: the library's :func:`entries`, read once by a caller that picks at many
    shapes (read here when None)."""
    family = get_family(kernel)
    dims = family.make_dims(shape) if isinstance(shape, dict) else family.parse_dims(str(shape))
    here = dims.as_dict()
    if known is None:
        known = entries(session, team_id=team_id, kernel=kernel, gpu=gpu)
    text = str(dims)
    exact = next((e for e in known if e.shape == text), None)
    if exact is not None:
        if exact.vendor_us is not None and exact.vendor_us < exact.avg_us:
            return Pick(text, "vendor", None, True, text, exact.avg_us, exact.vendor_us, 1,
                        f"measured here: the vendor ({exact.vendor_us:.1f} µs) is faster than "
                        f"the best point ({exact.avg_us:.1f} µs)")
        return Pick(text, "point", exact.params, True, text, exact.avg_us, exact.vendor_us, 1,
                    f"measured here: the best point of campaign {exact.campaign_id[:8]} "
                    f"(#{exact.iteration})")
    near = sorted(known, key=lambda e: shape_distance(here, e.dims))[:NEAREST]
    for entry in near:
        params = family.for_shape(family.params_from_dict(entry.params), dims)
        if valid_at(family, params, dims, arch) is None:
            far = shape_distance(here, entry.dims)
            return Pick(text, "point", params.canonical().to_dict(), False, entry.shape, None,
                        None, 2, f"not measured here: the best at {entry.shape} (distance "
                                 f"{far:.2f}), valid at {text}")
    why = "the library has no point of this family" if not known else \
        f"none of the {len(near)} nearest measured shapes' bests is valid at {text}"
    return Pick(text, "vendor", None, False, None, None, None, 3, f"{why}: the vendor")


def picks(session: Session, *, team_id: str | None, kernel: str, shapes: Sequence[Any],
          gpu: str | None = None, arch: str = "sm_90") -> list[Pick]:
    """:func:`pick` at each of ``shapes``, in order, from one read of the library (a program's
    shapes: ``POST /library/{family}/picks``, ``library pick`` and ``export --shapes``)."""
    if not shapes:
        return []
    known = entries(session, team_id=team_id, kernel=kernel, gpu=gpu)
    return [pick(session, team_id=team_id, kernel=kernel, shape=shape, gpu=gpu, arch=arch,
                 known=known) for shape in shapes]


def fallback_points(session: Session, *, team_id: str | None, kernel: str, shape: Any,
                    gpu: str | None = None, arch: str = "sm_90",
                    known: Sequence[LibraryEntry] | None = None) -> list[tuple[Any, str]]:
    """The points rule 2 could take at ``shape`` (the nearest measured shapes' bests valid
    there), with why: what a probe measures there. ``known`` as for :func:`pick`."""
    family = get_family(kernel)
    dims = family.make_dims(shape) if isinstance(shape, dict) else family.parse_dims(str(shape))
    here = dims.as_dict()
    if known is None:
        known = entries(session, team_id=team_id, kernel=kernel, gpu=gpu)
    out: list[tuple[Any, str]] = []
    keys: set[str] = set()
    for entry in sorted(known, key=lambda e: shape_distance(here, e.dims))[:NEAREST]:
        if entry.dims == here:
            continue
        params = family.for_shape(family.params_from_dict(entry.params), dims)
        key = repr(sorted(params.canonical().to_dict().items()))
        if key in keys or valid_at(family, params, dims, arch) is not None:
            continue
        keys.add(key)
        far = shape_distance(here, entry.dims)
        out.append((params, f"library fallback: the best at {entry.shape} (distance "
                            f"{far:.2f}), campaign {entry.campaign_id[:8]} #{entry.iteration}"))
    return out


def distance_to_library(session: Session, *, team_id: str | None, kernel: str, shape: Any,
                        gpu: str | None = None) -> float:
    """How far ``shape`` is from the nearest measured shape (0: measured; inf: none)."""
    family = get_family(kernel)
    dims = family.make_dims(shape) if isinstance(shape, dict) else family.parse_dims(str(shape))
    known = entries(session, team_id=team_id, kernel=kernel, gpu=gpu)
    return min((shape_distance(dims.as_dict(), e.dims) for e in known), default=math.inf)
