"""What the compile and GPU workers of the service do, as plain functions (no Celery here).

Workers compute and report; they never decide. They read the candidate and its campaign from the
database, take a candidate for a step (:func:`start_evaluation` also counts the deliveries of an
evaluation), and hand their result back to the agent (``worker/tasks.py``) as a plain dict.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import socket
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, cast

from sqlalchemy import Table, bindparam, delete, select, update
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session, load_only

from core.candidates import compile_columns
from core.evaluation import (
    CompileResult,
    EvalOptions,
    Evaluator,
    Measurement,
    evaluation_key,
)
from core.models import (
    Campaign,
    Candidate,
    WorkerHeartbeat,
    WorkerNode,
    utcnow,
)
from core.replay import ReplayDataset
from core.settings import Settings
from kernels import get_family
from kernels.base import Dims, params_key
from kernels.family import contract_hash
from worker.compile import (
    Compiler,
    compile_candidate,
    compiler_from_settings,
)
from worker.evaluators import gpu_evaluator, replay_evaluator


@lru_cache(maxsize=4)
def replay_dataset(kernel: str) -> ReplayDataset:
    """The family's default replay dataset (the first of its ``replay_datasets()``), loaded
    once per process."""
    datasets = get_family(kernel).replay_datasets()
    if not datasets:
        raise ValueError(f"the {kernel} family ships no replay dataset")
    return ReplayDataset(datasets[0])


def _fields(obj: Any) -> dict[str, Any]:
    # shallow: the values are JSON already (``dataclasses.asdict`` deep-copies every dict)
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}


def compile_result_to_dict(result: CompileResult) -> dict[str, Any]:
    """A JSON-ready compile result (the message the agent records)."""
    return _fields(result)


def compile_result_from_dict(data: dict[str, Any]) -> CompileResult:
    """The inverse of :func:`compile_result_to_dict`."""
    names = {f.name for f in dataclasses.fields(CompileResult)}
    return CompileResult(**{k: v for k, v in data.items() if k in names})


def measurement_to_dict(m: Measurement) -> dict[str, Any]:
    """A JSON-ready measurement."""
    return _fields(m)


def measurement_from_dict(data: dict[str, Any]) -> Measurement:
    """The inverse of :func:`measurement_to_dict`."""
    names = {f.name for f in dataclasses.fields(Measurement)}
    return Measurement(**{k: v for k, v in data.items() if k in names})


def failure_payload(status: str, error: str) -> dict[str, Any]:
    """The report of an evaluation that could not complete (e.g. it killed its worker past
    the delivery cap): the candidate's outcome, recorded as ``status``."""
    return {"failure": True, "status": status, "error": error}


def measurement_from_payload(payload: dict[str, Any]) -> Measurement:
    """The measurement a GPU step reported: a measurement's dict, or a
    :func:`failure_payload`."""
    if payload.get("failure"):
        return Measurement(str(payload["status"]), error=str(payload.get("error")))
    return measurement_from_dict(payload)


# ---- the process-wide runtime of a worker ---------------------------------------------------
class WorkerRuntime:
    """What one worker process builds once: the compiler or the evaluators of its backend
    (a Celery worker's, from the settings; embedded mode's, one per local evaluator)."""

    def __init__(self, settings: Settings, role: str, *, backend: str | None = None,
                 gpu: str | None = None, evaluators: dict[str, Evaluator] | None = None,
                 compiler: Compiler | None = None) -> None:
        self.settings = settings
        self.role = role
        self.backend = backend or settings.backend
        if self.backend not in ("gpu", "replay"):
            raise ValueError(f"TUNEFORGE_BACKEND must be gpu or replay, not {self.backend!r}")
        self.gpu = gpu or os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0] or "0"
        self._compiler = compiler
        self._evaluators: dict[str, Evaluator] = dict(evaluators or {})
        self._replay_compiles: dict[tuple[str, str], CompileResult] = {}
        self._evaluations = 0  # done since the last heartbeat (written with the next one)
        self._busy_s = 0.0  # seconds spent on them (from taking the task to sending the result)
        self._count_lock = threading.Lock()

    @classmethod
    def local(cls, settings: Settings, evaluator: Evaluator) -> WorkerRuntime:
        """The runtime of one evaluator of an embedded campaign (its family's only)."""
        family = getattr(evaluator, "family", None)
        compiler = getattr(evaluator, "compiler", None)
        return cls(settings, "gpu", backend=evaluator.backend,
                   gpu=str(getattr(evaluator, "gpu", "0")),
                   evaluators={family.name: evaluator} if family is not None else {},
                   compiler=compiler)

    @property
    def compiler(self) -> Compiler:
        """nvcc with the shared on-disk cache (the GPU worker's compile is then a cache hit)."""
        if self._compiler is None:
            self._compiler = compiler_from_settings(self.settings)
        return self._compiler

    def evaluator(self, kernel: str) -> Evaluator:
        """The evaluator of ``kernel`` on this process's GPU (or its replay)."""
        if kernel not in self._evaluators:
            family = get_family(kernel)
            if self.backend == "replay":
                self._evaluators[kernel] = replay_evaluator(family, self.settings,
                                                            replay_dataset(kernel))
            else:
                self._evaluators[kernel] = gpu_evaluator(family, self.settings, gpu=self.gpu,
                                                         compiler=self.compiler)
        return self._evaluators[kernel]

    def count_evaluation(self, busy_s: float = 0.0, evaluations: int = 1) -> None:
        """Evaluations done and the seconds this process spent on them (reported with the
        next heartbeat)."""
        with self._count_lock:
            self._evaluations += evaluations
            self._busy_s += busy_s

    def take_evaluations(self) -> tuple[int, float]:
        """Evaluations done and seconds busy since the last call."""
        with self._count_lock:
            done, self._evaluations = self._evaluations, 0
            busy, self._busy_s = self._busy_s, 0.0
            return done, busy

    def compile(self, kernel: str, params: Any) -> CompileResult:
        """The compile result of a point: nvcc (disk cache) on the GPU backend; the recorded
        figures in a replay, kept in memory (a replay's answer never changes)."""
        ev = self.evaluator(kernel)
        if self.backend != "replay":
            return ev.compile(params).result()
        key = (kernel, params_key(params.to_dict()))
        if key not in self._replay_compiles:
            self._replay_compiles[key] = ev.compile(params).result()
        return self._replay_compiles[key]

    def device(self) -> dict[str, Any] | None:
        """The GPU this process evaluates on (the replay's recorded GPU on the replay backend)."""
        if self.role != "gpu":
            return None
        ev = next(iter(self._evaluators.values()), None)
        info = dict(ev.device) if ev is not None else {}
        info["visible_devices"] = self.gpu
        info["queue"] = f"gpu.{self.settings.arch}"
        return info

    def close(self) -> None:
        """Stop GPU children and compile pools."""
        for ev in self._evaluators.values():
            ev.close()
        if self._compiler is not None:
            self._compiler.close()


# ---- compile --------------------------------------------------------------------------------
@dataclass
class CompileJob:
    """What a compile worker needs to know of a candidate."""

    candidate_id: str
    campaign_id: str
    kernel: str
    params: dict[str, Any]
    backend: str
    arch: str


#: What the GPU workers read of a campaign.
_CAMPAIGN_COLUMNS = load_only(Campaign.id, Campaign.kernel, Campaign.backend, Campaign.dims,
                              Campaign.seed, Campaign.tolerance, Campaign.profile,
                              Campaign.incumbent_id)


# Statements built once (building an ORM statement costs up to a millisecond of CPU, more
# than running it): the values come in as bound parameters.
# Writes go to the table (Core), not through the ORM: no object of the session is involved.
_CANDIDATE_TABLE = cast(Table, Candidate.__table__)
_CANDIDATES = _CANDIDATE_TABLE.c
_TAKEN = (_CANDIDATES.id, _CANDIDATES.campaign_id, _CANDIDATES.params, _CANDIDATES.iteration,
          _CANDIDATES.attempts)
# Taking a candidate claims it for this worker's node (``claimed_by``): a node whose heartbeats
# stop has its claims given back by the reconciler (``agent/tasks.py``).
_TAKE_FOR_COMPILE = (
    update(_CANDIDATE_TABLE).where(_CANDIDATES.id == bindparam("candidate_id"),
                                      _CANDIDATES.status.in_(("pending", "compiling")))
    .values(status="compiling", claimed_by=bindparam("node")).returning(*_TAKEN))
_CAMPAIGN_TABLE = cast(Table, Campaign.__table__)
_INCUMBENT_ROW = _CANDIDATE_TABLE.alias("incumbent")
#: the params of the campaign's incumbent (unless it is the candidate itself), read by the
#: statement that takes the candidate: one round trip for a GPU worker's step
def _incumbent_column(column: Any) -> Any:
    return (select(column)
            .join(_CAMPAIGN_TABLE, _CAMPAIGN_TABLE.c.incumbent_id == _INCUMBENT_ROW.c.id)
            .where(_CAMPAIGN_TABLE.c.id == _CANDIDATES.campaign_id,
                   _INCUMBENT_ROW.c.id != _CANDIDATES.id)
            .correlate(_CANDIDATE_TABLE).scalar_subquery())


_INCUMBENT_PARAMS = _incumbent_column(_INCUMBENT_ROW.c.params)
_INCUMBENT_KEY = _incumbent_column(_INCUMBENT_ROW.c.params_key)
_TAKE_FOR_EVALUATION_ONLY = (
    update(_CANDIDATE_TABLE).where(_CANDIDATES.id == bindparam("candidate_id"),
                                      _CANDIDATES.status.in_(("compiled", "measuring")))
    .values(status="measuring", attempts=_CANDIDATES.attempts + 1,
            claimed_by=bindparam("node")))
_TAKE_FOR_EVALUATION = _TAKE_FOR_EVALUATION_ONLY.returning(
    *_TAKEN, _INCUMBENT_PARAMS.label("incumbent_params"),
    _INCUMBENT_KEY.label("incumbent_key"))
#: SQLite renders the UPDATE's own columns unqualified, which the correlated subquery cannot
#: tell from the incumbent's: there the incumbent is read by a second statement
_TAKE_FOR_EVALUATION_SQLITE = _TAKE_FOR_EVALUATION_ONLY.returning(*_TAKEN)
_INCUMBENT_OF = (
    select(_INCUMBENT_ROW.c.params, _INCUMBENT_ROW.c.params_key)
    .join(_CAMPAIGN_TABLE, _CAMPAIGN_TABLE.c.incumbent_id == _INCUMBENT_ROW.c.id)
    .where(_CAMPAIGN_TABLE.c.id == bindparam("campaign_id"),
           _INCUMBENT_ROW.c.id != bindparam("candidate_id")))
_RECORD_COMPILED = (
    update(_CANDIDATE_TABLE).where(_CANDIDATES.id == bindparam("candidate_id"),
                                      _CANDIDATES.status.in_(("pending", "compiling")))
    .values(status="compiled", compile=bindparam("compile"),
            compile_log=bindparam("compile_log"), evaluation_key=bindparam("evaluation_key"),
            claimed_by=None))
#: the gate takes a correct kernel that has no record yet and that no other live delivery holds
#: (a delivery of the same node again: its pool process died and Celery sent it back)
_TAKE_FOR_SANITIZE = (
    update(_CANDIDATE_TABLE).where(
        _CANDIDATES.id == bindparam("candidate_id"), _CANDIDATES.status == "ok",
        _CANDIDATES.sanitizer.is_(None),
        _CANDIDATES.claimed_by.is_(None) | (_CANDIDATES.claimed_by == bindparam("node")))
    .values(claimed_by=bindparam("node"))
    .returning(_CANDIDATES.id, _CANDIDATES.campaign_id, _CANDIDATES.params,
               _CANDIDATES.source))
_COMPILE_CONTEXT = select(Campaign.kernel, Campaign.backend, Campaign.arch).where(
    Campaign.id == bindparam("campaign_id"))
_EVALUATION_CONTEXT = (
    select(Campaign.kernel, Campaign.backend, Campaign.dims,
           Campaign.seed, Campaign.tolerance, Campaign.profile)
    .where(Campaign.id == bindparam("campaign_id")))


def start_compile(session: Session, candidate_id: str, node: str | None = None
                  ) -> CompileJob | None:
    """Mark the candidate compiling, claimed by ``node`` (one statement, which may commit on
    its own: what else it needs are columns of the campaign that never change); None when it
    is no longer waiting for a compile."""
    cand = session.execute(_TAKE_FOR_COMPILE,
                           {"candidate_id": candidate_id, "node": node}).first()
    if cand is None:
        return None
    kernel, backend, arch = _campaign_constants(session, _COMPILE_CONTEXT, cand.campaign_id)
    return CompileJob(cand.id, cand.campaign_id, kernel, dict(cand.params), backend, arch)


#: (statement, campaign id) -> the row it read: columns set when the campaign is created and
#: never changed (kernel, backend, arch, shape, seed, tolerance, profile), so a worker reads
#: them once per campaign; the oldest entries go beyond 2048.
_CAMPAIGN_CONSTANTS: OrderedDict[tuple[int, str], Any] = OrderedDict()


def _campaign_constants(session: Session, statement: Any, campaign_id: str) -> Any:
    key = (id(statement), campaign_id)
    found = _CAMPAIGN_CONSTANTS.get(key)
    if found is None:
        found = _CAMPAIGN_CONSTANTS[key] = session.execute(
            statement, {"campaign_id": campaign_id}).one()
        while len(_CAMPAIGN_CONSTANTS) > 2048:
            _CAMPAIGN_CONSTANTS.popitem(last=False)
    return found


def record_compiled(session: Session, job: CompileJob, result: CompileResult,
                    evaluation_key: str | None = None) -> bool:
    """Record a successful compile and the key of the candidate's evaluation: the candidate is
    ``compiled``, ready for the GPUs. Nothing is decided by a success (a failure is the
    candidate's outcome: the agent records it), so the compile worker writes it itself and
    sends the evaluation, one hop fewer per candidate. False when the candidate no longer
    waits for its compile (another delivery recorded it)."""
    assert result.status == "ok"
    done = session.execute(_RECORD_COMPILED, {
        "candidate_id": job.candidate_id, "evaluation_key": evaluation_key,
        **compile_columns(job.kernel, job.arch, result)})
    return bool(getattr(done, "rowcount", 0))


#: What the key of a candidate's evaluation and its lookup read of its campaign.
_SERVE_CONTEXT = (
    select(Campaign.team_id, Campaign.kernel, Campaign.dims, Campaign.backend, Campaign.device,
           Campaign.tolerance, Campaign.profile, Campaign.reuse,
           select(_INCUMBENT_ROW.c.params_key)
           .where(_INCUMBENT_ROW.c.id == Campaign.incumbent_id)
           .scalar_subquery().label("incumbent_key"))
    .where(Campaign.id == bindparam("campaign_id")))
#: Statuses a measurement is served from: a result the kernel gives again (a crash, a timeout
#: or a launch error may have been the machine's: those are measured again).
SERVED_STATUSES = ("ok", "wrong")
_HISTORY_OF_KEY = (
    select(Candidate.id, Candidate.status, Candidate.correctness, Candidate.perf,
           Candidate.profile, Candidate.error, Candidate.incumbent_runs)
    .join(Campaign, Campaign.id == Candidate.campaign_id)
    .where(Candidate.evaluation_key == bindparam("key"),
           Candidate.status.in_(SERVED_STATUSES), Candidate.served_from.is_(None))
    .order_by(Candidate.finished_at, Candidate.id).limit(1))
_TEAM_HISTORY = _HISTORY_OF_KEY.where(Campaign.team_id == bindparam("team_id"))
_LOCAL_HISTORY = _HISTORY_OF_KEY.where(Campaign.team_id.is_(None))


def evaluation_of(session: Session, job: CompileJob, compiled: CompileResult
                  ) -> tuple[str, Measurement | None]:
    """The key of a compiled candidate's evaluation (:func:`core.evaluation.evaluation_key`),
    and the measurement its team's history serves for it: the first measurement of the same
    key in any campaign of the team (none of another team's), with no GPU time and a link to
    it; None when there is none, or when the campaign measures afresh (``reuse`` false). Its
    interleaved incumbent runs come along when the incumbent is the same point."""
    # Core statements on the transaction's connection: no ORM step (nothing to flush before)
    connection = session.connection()
    ctx = connection.execute(_SERVE_CONTEXT, {"campaign_id": job.campaign_id}).one()
    family = get_family(job.kernel)
    key = evaluation_key(contract=contract_hash(family), compiled=compiled,
                         shape=str(family.make_dims(ctx.dims)), backend=ctx.backend,
                         device=ctx.device, tolerance=ctx.tolerance, profile=ctx.profile)
    if not ctx.reuse:
        return key, None
    row = (connection.execute(_TEAM_HISTORY, {"key": key, "team_id": ctx.team_id})
           if ctx.team_id is not None else connection.execute(_LOCAL_HISTORY, {"key": key})
           ).first()
    if row is None:
        return key, None
    against = row.incumbent_runs or {}
    runs = against.get("runs_us") if ctx.incumbent_key is not None \
        and against.get("key") == ctx.incumbent_key else None
    return key, Measurement(
        row.status, correctness=row.correctness, perf=row.perf, profile=row.profile,
        error=row.error, incumbent_runs_us=runs, incumbent_key=ctx.incumbent_key if runs else None,
        gpu_seconds=0.0, served_from=row.id)


def queue_if_compiled(session: Session, candidate_id: str) -> str | None:
    """The GPU queue of a candidate that is compiled and waits for its evaluation, else None
    (a compile message delivered again after its record: the evaluation may not have been
    sent)."""
    row = session.execute(select(Candidate.status, Campaign.arch).join(
        Campaign, Campaign.id == Candidate.campaign_id).where(
        Candidate.id == candidate_id)).first()
    # the name of core.queues.gpu_queue, without importing the Celery app into embedded mode
    return f"gpu.{row.arch}" if row is not None and row.status == "compiled" else None


def run_compile(runtime: WorkerRuntime, job: CompileJob) -> CompileResult:
    """Compile (the recorded figures in a replay); never raises for a bad kernel."""
    family = get_family(job.kernel)
    params = family.params_from_dict(job.params)
    if job.backend == "replay":
        return runtime.compile(job.kernel, params)
    return compile_candidate(runtime.compiler, family, params)


# ---- evaluate -------------------------------------------------------------------------------
@dataclass
class EvaluateJob:
    """What a GPU worker needs to know of a candidate and its campaign's incumbent."""

    candidate_id: str
    kernel: str
    backend: str
    params: dict[str, Any]
    incumbent_params: dict[str, Any] | None
    shape: Dims
    iteration: int
    seed: int
    tolerance: float
    profile: str
    attempts: int
    #: the incumbent's ``params_key`` (what its interleaved runs are recorded against)
    incumbent_key: str | None = None


def start_evaluation(session: Session, candidate_id: str, node: str | None = None
                     ) -> EvaluateJob | None:
    """Mark the candidate measuring, claimed by ``node``, counting one more delivery attempt
    (one statement, which may commit on its own); None when it is finished."""
    values = {"candidate_id": candidate_id, "node": node}
    if session.get_bind().dialect.name == "sqlite":
        cand = session.execute(_TAKE_FOR_EVALUATION_SQLITE, values).first()
        found = session.execute(_INCUMBENT_OF, {
            "campaign_id": cand.campaign_id, "candidate_id": cand.id}).first() if cand else None
        incumbent, incumbent_key = found if found is not None else (None, None)
    else:
        cand = session.execute(_TAKE_FOR_EVALUATION, values).first()
        incumbent, incumbent_key = (cand.incumbent_params, cand.incumbent_key) \
            if cand is not None else (None, None)
    if cand is None:
        return None
    campaign = _campaign_constants(session, _EVALUATION_CONTEXT, cand.campaign_id)
    return EvaluateJob(
        candidate_id=cand.id, kernel=campaign.kernel, backend=campaign.backend,
        params=dict(cand.params),
        incumbent_params=dict(incumbent) if incumbent is not None else None,
        shape=get_family(campaign.kernel).make_dims(campaign.dims), iteration=cand.iteration,
        seed=campaign.seed, tolerance=campaign.tolerance, profile=campaign.profile,
        attempts=cand.attempts, incumbent_key=incumbent_key,
    )


def run_evaluation(runtime: WorkerRuntime, job: EvaluateJob) -> Measurement:
    """Compile (a cache hit after the compile worker) and measure, with the incumbent
    interleaved; a failure of the candidate is a recorded status, never an exception."""
    if job.backend != runtime.backend:
        return Measurement("not_measured", error=(
            f"a GPU worker of the {runtime.backend} backend took this {job.backend} campaign's "
            f"candidate: the API and every worker need the same TUNEFORGE_BACKEND (export "
            f"TUNEFORGE_BACKEND={runtime.backend} before `tuneforge serve` too, or start the "
            f"GPU workers with TUNEFORGE_BACKEND={job.backend})"))
    family = get_family(job.kernel)
    ev = runtime.evaluator(job.kernel)
    options = dataclasses.replace(getattr(ev, "options", None) or EvalOptions(),
                                  tolerance=job.tolerance, profile=job.profile)
    params = family.params_from_dict(job.params)
    compiled = runtime.compile(job.kernel, params)
    if compiled.status != "ok":
        return Measurement("crashed", error=f"the GPU worker could not compile the candidate "
                                            f"again: {compiled.status}: {compiled.error}")
    incumbent = None
    if job.incumbent_params is not None:
        inc_params = family.params_from_dict(job.incumbent_params)
        inc_compiled = runtime.compile(job.kernel, inc_params)
        if inc_compiled.status == "ok":
            incumbent = (inc_params, inc_compiled)
    m = ev.measure(params, compiled, shape=job.shape, iteration=job.iteration, seed=job.seed,
                   options=options, incumbent=incumbent)
    if incumbent is not None and m.incumbent_runs_us:
        m.incumbent_key = job.incumbent_key
    speed = runtime.settings.replay_speed
    if runtime.backend == "replay" and speed > 0 and m.gpu_seconds > 0:
        time.sleep(m.gpu_seconds / speed)  # behave like a GPU under load tests
    return m


# ---- the compute-sanitizer gate -------------------------------------------------------------
@dataclass
class SanitizeJob:
    """What a GPU worker needs to check a candidate with compute-sanitizer."""

    candidate_id: str
    kernel: str
    backend: str
    params: dict[str, Any]
    source: str
    shape: Dims
    tolerance: float


def start_sanitize(session: Session, candidate_id: str, node: str | None = None
                   ) -> SanitizeJob | None:
    """The gate's job for a correct candidate not checked yet, claimed by ``node``; None
    otherwise (a redelivered message, a gate another live worker runs, or a candidate that
    never passed)."""
    cand = session.execute(_TAKE_FOR_SANITIZE,
                           {"candidate_id": candidate_id, "node": node}).first()
    if cand is None or not cand.source:
        return None
    campaign = session.get(Campaign, cand.campaign_id, options=[_CAMPAIGN_COLUMNS])
    assert campaign is not None
    return SanitizeJob(cand.id, campaign.kernel, campaign.backend, dict(cand.params),
                       cand.source, campaign.problem, campaign.tolerance)


def run_sanitize(runtime: WorkerRuntime, job: SanitizeJob) -> dict[str, Any]:
    """The gate's record (:func:`worker.sanitize.gate`) on this worker's GPU."""
    from worker.sanitize import error_record, gate, sanitizer_path

    if runtime.backend != "gpu" or job.backend != "gpu":
        return error_record(f"a {runtime.backend} worker cannot run compute-sanitizer on a "
                            f"{job.backend} campaign's kernel")
    family = get_family(job.kernel)
    settings = runtime.settings
    return gate(runtime.compiler, family, family.params_from_dict(job.params), job.source,
                campaign_shape=job.shape, tolerance=job.tolerance, gpu=runtime.gpu,
                exe=sanitizer_path(settings.compute_sanitizer),
                timeout_s=settings.sanitize_timeout_s)


# ---- heartbeats -----------------------------------------------------------------------------
def worker_name(role: str) -> str:
    """``role@host:pid`` (one row per worker process)."""
    return f"{role}@{socket.gethostname()}:{os.getpid()}"


def node_name(role: str, main_pid: int, token: str) -> str:
    """``role@host:pid-token`` of a Celery worker's main process: what its pool processes
    claim candidates for. The token, drawn once by the main process, tells a worker started
    again apart from the one it replaces (a restarted container has the same host name and
    the same process ids)."""
    return f"{role}@{socket.gethostname()}:{main_pid}-{token}"


#: A worker silent for this many heartbeat periods is gone (``GET /workers`` stops listing it,
#: the agent stops counting its GPU, and the reconciler gives back the candidates it held).
SILENT_BEATS = 3


def silent_after_s(settings: Settings) -> float:
    """Seconds without a heartbeat after which a worker counts as gone."""
    return SILENT_BEATS * settings.heartbeat_s


def node_heartbeat(session: Session, *, node: str, role: str) -> None:
    """Refresh the row of a Celery worker's main process: one statement (it runs in the main
    process's event loop, which hands out the messages meanwhile). Nodes silent for long are
    forgotten by the agent (:func:`forget_nodes`)."""
    dialect = session.get_bind().dialect.name
    insert = postgresql_insert if dialect == "postgresql" else sqlite_insert
    now = utcnow()
    statement = insert(WorkerNode).values(node=node, role=role, host=socket.gethostname(),
                                          started_at=now, last_seen=now)
    session.execute(statement.on_conflict_do_update(
        index_elements=[WorkerNode.node], set_={"last_seen": now}))


def forget_nodes(session: Session, *, silent_s: float = 3600.0) -> None:
    """Forget the nodes silent for ``silent_s`` (a claim of a node without a row counts as
    abandoned all the same)."""
    cutoff = utcnow() - dt.timedelta(seconds=silent_s)
    session.execute(delete(WorkerNode).where(WorkerNode.last_seen < cutoff))


def heartbeat(session: Session, *, name: str, role: str, backend: str,
              gpu: dict[str, Any] | None, evaluations: int = 0, busy_s: float = 0.0,
              forget_after_s: float = 600.0) -> None:
    """Refresh this process's row, adding ``evaluations`` done since the last beat and the
    seconds spent on them (and forget processes silent for ``forget_after_s``)."""
    row = session.get(WorkerHeartbeat, name)
    if row is None:
        row = WorkerHeartbeat(name=name, role=role, host=socket.gethostname(), evaluations=0,
                              busy_seconds=0.0)
        session.add(row)
    row.evaluations = (row.evaluations or 0) + evaluations
    row.busy_seconds = (row.busy_seconds or 0.0) + busy_s
    row.backend = backend
    row.gpu = gpu
    row.last_seen = utcnow()
    cutoff = utcnow() - dt.timedelta(seconds=forget_after_s)
    session.execute(delete(WorkerHeartbeat).where(WorkerHeartbeat.last_seen < cutoff))
