"""ORM models (SQLAlchemy 2), the same on PostgreSQL (service) and SQLite (embedded).

The schema itself is created only by Alembic migrations (``migrations/``); embedded mode runs the
same migrations on its SQLite file.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    false,
    func,
    text,
    true,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from kernels import get_family
from kernels.base import Dims
from kernels.family import DEFAULT_TOLERANCE, Metric


def utcnow() -> dt.datetime:
    """Timezone-aware now."""
    return dt.datetime.now(dt.UTC)


def aware(value: dt.datetime | None) -> dt.datetime | None:
    """A datetime with its zone (SQLite gives naive UTC datetimes back)."""
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=dt.UTC)
    return value


def new_id() -> str:
    """A random id (uuid4 hex)."""
    return uuid.uuid4().hex


class Base(DeclarativeBase):
    """Declarative base of every model."""

    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON}


CAMPAIGN_STATUSES = ("queued", "running", "done", "failed", "cancelled")


class Team(Base):
    """A team shares campaigns and history; API keys belong to it."""

    __tablename__ = "teams"
    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    keys: Mapped[list[ApiKey]] = relationship(back_populates="team")


class ApiKey(Base):
    """An API key, stored as a SHA-256 hash; ``prefix`` identifies it in listings."""

    __tablename__ = "api_keys"
    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    team_id: Mapped[str] = mapped_column(ForeignKey("teams.id", ondelete="CASCADE"), index=True)
    prefix: Mapped[str] = mapped_column(String(16))
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    revoked_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    team: Mapped[Team] = relationship(back_populates="keys")


class ShapeSet(Base):
    """Several shapes of one family tuned as one job under one budget: one member campaign a
    shape (``Campaign.set_id``), run one after another, each starting from what the others
    found (``agent/shapesets.py``)."""

    __tablename__ = "shape_sets"
    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    team_id: Mapped[str | None] = mapped_column(ForeignKey("teams.id"), index=True)
    kernel: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16), default="queued", server_default="queued")
    status_reason: Mapped[str | None] = mapped_column(Text)
    #: evaluations the whole set may take (its members share them)
    budget_iterations: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    started_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    members: Mapped[list[Campaign]] = relationship(back_populates="shape_set",
                                                   order_by="Campaign.set_index")


class Campaign(Base):
    """A tuning campaign: its spec, its state and its budget counters."""

    __tablename__ = "campaigns"
    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    team_id: Mapped[str | None] = mapped_column(ForeignKey("teams.id"), index=True)
    kernel: Mapped[str] = mapped_column(String(64))
    #: the problem's dimensions, named by the family (``{"m": 4096, "n": 4096, "k": 4096}``)
    dims: Mapped[dict[str, int]] = mapped_column(JSON)
    arch: Mapped[str] = mapped_column(String(16), default="sm_90")
    backend: Mapped[str] = mapped_column(String(16), default="gpu")
    gpu_name: Mapped[str | None] = mapped_column(String(128))
    tolerance: Mapped[float] = mapped_column(Float, default=DEFAULT_TOLERANCE)
    policy: Mapped[str] = mapped_column(String(32), default="expert")
    accept_threshold_pct: Mapped[float] = mapped_column(Float, default=0.5)
    profile: Mapped[str] = mapped_column(String(8), default="light")
    parallel: Mapped[int] = mapped_column(Integer, default=1)
    seed: Mapped[int] = mapped_column(Integer, default=0)
    budget_iterations: Mapped[int] = mapped_column(Integer, default=600)
    #: ends once settled after this many evaluations without an accepted improvement
    #: (``agent.engine.lifecycle.settled``; 0: never, as campaigns made before the setting)
    settle_after: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    budget_wall_s: Mapped[float | None] = mapped_column(Float)
    budget_gpu_s: Mapped[float | None] = mapped_column(Float)
    leaderboard: Mapped[list[Any] | None] = mapped_column(JSON)
    start_from: Mapped[str | None] = mapped_column(String(64))
    allowed_actions: Mapped[list[Any] | None] = mapped_column(JSON)
    injected_actions: Mapped[list[Any]] = mapped_column(JSON, default=list)

    status: Mapped[str] = mapped_column(String(16), default="queued", index=True)
    status_reason: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    started_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    evaluations: Mapped[int] = mapped_column(Integer, default=0)
    gpu_seconds: Mapped[float] = mapped_column(Float, default=0.0)
    baseline_id: Mapped[str | None] = mapped_column(String(32))
    incumbent_id: Mapped[str | None] = mapped_column(String(32))
    best_id: Mapped[str | None] = mapped_column(String(32))
    best_us: Mapped[float | None] = mapped_column(Float)
    last_accept_iteration: Mapped[int] = mapped_column(Integer, default=0)
    next_iteration: Mapped[int] = mapped_column(Integer, default=0)
    vendor_us: Mapped[float | None] = mapped_column(Float)
    device: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    #: run the compute-sanitizer gate (``worker/sanitize.py``) on the best kernel once done
    sanitize: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    #: events written so far: the ``seq`` of the latest (:class:`Event`)
    event_seq: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    #: the shape set this campaign is the member of (its place in it, its weight there)
    set_id: Mapped[str | None] = mapped_column(
        ForeignKey("shape_sets.id", ondelete="CASCADE"), index=True)
    set_index: Mapped[int | None] = mapped_column(Integer)
    weight: Mapped[float] = mapped_column(Float, default=1.0, server_default="1.0")
    #: serve an evaluation the team has made before from its history (False: measure afresh)
    reuse: Mapped[bool] = mapped_column(Boolean, default=True, server_default=true())
    #: the tuneforge that ran the campaign (:func:`core.version.commit`)
    commit: Mapped[str | None] = mapped_column(String(64))

    shape_set: Mapped[ShapeSet | None] = relationship(back_populates="members")
    candidates: Mapped[list[Candidate]] = relationship(
        back_populates="campaign", order_by="Candidate.iteration"
    )

    @property
    def problem(self) -> Dims:
        """The dimensions as the family's :class:`~kernels.base.Dims` (its order, its bounds)."""
        return get_family(self.kernel).make_dims(self.dims)

    @property
    def metric(self) -> Metric:
        """The family's work metric (its unit: TFLOP/s or GB/s)."""
        return get_family(self.kernel).metric

    def throughput(self, us: float | None) -> float | None:
        """The rate, in the metric's unit, of a launch taking ``us`` at this shape."""
        return self.metric.rate(self.problem, us) if us else None

    @property
    def shape_text(self) -> str:
        """The compact text of the dimensions (``4096x4096x4096``), as datasets key by."""
        try:
            return str(self.problem)
        except ValueError:  # a family this process does not know: the stored order
            return "x".join(str(v) for v in self.dims.values())


class Candidate(Base):
    """One point evaluated in a campaign, with its whole feedback record."""

    __tablename__ = "candidates"
    __table_args__ = (
        UniqueConstraint("campaign_id", "iteration", name="uq_candidate_iteration"),
        UniqueConstraint("campaign_id", "params_key", name="uq_candidate_point"),
        Index("ix_candidates_campaign_status", "campaign_id", "status"),
        # the few candidates a worker holds right now (the reconciler looks them up often)
        Index("ix_candidates_claimed_by", "claimed_by",
              postgresql_where=text("claimed_by IS NOT NULL"),
              sqlite_where=text("claimed_by IS NOT NULL")),
    )
    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    campaign_id: Mapped[str] = mapped_column(ForeignKey("campaigns.id", ondelete="CASCADE"))
    iteration: Mapped[int] = mapped_column(Integer)
    parent_id: Mapped[str | None] = mapped_column(String(32))
    action: Mapped[str | None] = mapped_column(Text)
    proposed_by: Mapped[str | None] = mapped_column(String(32))
    reason: Mapped[str | None] = mapped_column(Text)
    params: Mapped[dict[str, Any]] = mapped_column(JSON)
    params_key: Mapped[str] = mapped_column(String(32))
    source_hash: Mapped[str | None] = mapped_column(String(64))
    source: Mapped[str | None] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(20), default="pending")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    compile: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    compile_log: Mapped[str | None] = mapped_column(Text)
    correctness: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    perf: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    profile: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    decision: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    feedback: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    avg_us: Mapped[float | None] = mapped_column(Float)
    accepted: Mapped[bool] = mapped_column(Boolean, default=False)
    gpu_seconds: Mapped[float] = mapped_column(Float, default=0.0)
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    finished_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    #: the compute-sanitizer gate's record of this kernel (``worker/sanitize.py``: status,
    #: each tool's counts and first messages, shapes, versions), once it was checked
    sanitizer: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    #: the Celery worker (:class:`WorkerNode`) that holds this candidate's current step
    #: (its compile, its evaluation, the sanitizer gate); cleared when the step's result is
    #: recorded. A claim whose node stopped heartbeating is given back (``agent/tasks.py``).
    claimed_by: Mapped[str | None] = mapped_column(String(200))
    #: what identifies this evaluation (:func:`core.evaluation.evaluation_key`), once compiled
    evaluation_key: Mapped[str | None] = mapped_column(String(64), index=True)
    #: the candidate whose measurement this one was served from (0 GPU-seconds), if any
    served_from: Mapped[str | None] = mapped_column(String(32))
    #: the incumbent the measurement was interleaved with: ``{"key": its params_key,
    #: "runs_us": [...]}`` (a decision served from history reads them when it has the same one)
    incumbent_runs: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    campaign: Mapped[Campaign] = relationship(back_populates="candidates")


class Event(Base):
    """Everything that happened in a campaign, in order (the SSE stream and the audit log)."""

    __tablename__ = "events"
    __table_args__ = (UniqueConstraint("campaign_id", "seq", name="uq_event_seq"),)
    #: 64-bit on PostgreSQL (SQLite's INTEGER PRIMARY KEY is 64-bit, and only that spelling
    #: autoincrements there)
    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"),
                                    primary_key=True, autoincrement=True)
    campaign_id: Mapped[str] = mapped_column(
        ForeignKey("campaigns.id", ondelete="CASCADE"), index=True
    )
    #: 1, 2, 3, … within the campaign, without gaps: written under the campaign's row lock, so
    #: a reader that holds event ``n`` knows whether it missed one (the live event stream)
    seq: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(32))
    payload: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class WorkerHeartbeat(Base):
    """Live workers and their GPUs, refreshed by each worker process."""

    __tablename__ = "worker_heartbeats"
    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    role: Mapped[str] = mapped_column(String(16))
    host: Mapped[str] = mapped_column(String(200))
    gpu: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    backend: Mapped[str | None] = mapped_column(String(16))
    last_seen: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    #: evaluations done (a GPU worker), or steps taken (an agent: results recorded, decisions)
    evaluations: Mapped[int] = mapped_column(Integer, default=0)
    #: seconds spent on them (task taken to its result sent): busy / wall time is the process's
    #: utilization, and 1 - that a GPU worker's idle fraction
    busy_seconds: Mapped[float] = mapped_column(Float, default=0.0)


class WorkerNode(Base):
    """A Celery worker: its main process, which heartbeats from its event loop. What its pool
    processes take they claim for it (:attr:`Candidate.claimed_by`); while it lives, Celery
    redelivers what a dying pool process held, and once it is silent nobody will before
    Redis's visibility timeout."""

    __tablename__ = "worker_nodes"
    #: ``role@host:pid-token`` (the token tells a worker started again from the one it replaces)
    node: Mapped[str] = mapped_column(String(200), primary_key=True)
    role: Mapped[str] = mapped_column(String(16))
    host: Mapped[str] = mapped_column(String(200))
    started_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    last_seen: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Family(Base):
    """A version of a team's own kernel family: its declarative spec (``kernels.userspec``),
    stored whole, under its content key ``name@hash12`` (what ``campaigns.kernel`` names, so
    that every process finds the exact version a campaign runs by its content).

    ``team_id`` is None for the families of an embedded database (``tuneforge family add
    --db``), whose campaigns have no team either. Versions count 1, 2, … per team and name;
    the same content registered again is the version it was.
    """

    __tablename__ = "families"
    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    team_id: Mapped[str | None] = mapped_column(ForeignKey("teams.id", ondelete="CASCADE"),
                                                index=True)
    #: the spec's name, as users call the family (``--kernel NAME`` is its latest version)
    name: Mapped[str] = mapped_column(String(64))
    version: Mapped[int] = mapped_column(Integer)
    spec_hash: Mapped[str] = mapped_column(String(64))
    #: ``name@`` and the hash's first 12 hex digits: the registry key of this version
    key: Mapped[str] = mapped_column(String(64), index=True)
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    #: the API key's prefix that registered it, or the local user of an embedded database
    created_by: Mapped[str | None] = mapped_column(String(100))
    #: when its owner retired it: still readable (its campaigns' records), refused to new ones
    retired_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    #: the stored spec's size (its JSON text, bytes): what the team's quota on bytes adds up
    size_bytes: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")


#: One version number per team and name, and one version per team and content key; embedded
#: families (no team) count as one team: a plain unique constraint would let NULL team ids
#: repeat a version, or store one content twice.
Index("uq_family_version", func.coalesce(Family.team_id, ""), Family.name, Family.version,
      unique=True)
Index("uq_family_key", func.coalesce(Family.team_id, ""), Family.key, unique=True)
