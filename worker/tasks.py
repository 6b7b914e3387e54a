"""Celery tasks of the compile and GPU workers: thin adapters over :mod:`worker.jobs`.

Ids in; each opens its own session, commits the candidate's progress, computes, then reports to
the agent queue by task name (a successful compile, which decides nothing, is recorded by the
compile worker, which sends the evaluation itself). The evaluator (GPU child or replay) is built
once per worker process, in ``worker_process_init``, never per task.
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
import time
from typing import Any

from celery import bootsteps
from celery.exceptions import SoftTimeLimitExceeded
from celery.signals import worker_process_init, worker_process_shutdown

from core import families
from core.db import autocommit_scope, get_engine, session_scope
from core.evaluation import CompileResult, Measurement
from core.queues import (
    INFRA_ERRORS,
    MAX_EVALUATION_ATTEMPTS,
    TaskName,
    app,
    enqueue,
    enqueue_once,
    gpu_queue,
    keep_report,
    kept_reports,
)
from core.settings import get_settings
from kernels import family_names
from worker import jobs

log = logging.getLogger(__name__)

_runtime: jobs.WorkerRuntime | None = None
_runtime_error: str | None = None
_runtime_lock = threading.Lock()
_name: str | None = None
_stop = threading.Event()
#: Drawn when the Celery worker's main process imports this module (``include``, before it
#: forks its pool): the main process and every pool process it forks, also one that replaces
#: a process that died, name the same node; a worker started anew draws another.
_NODE_TOKEN = secrets.token_hex(4)


def _url() -> str:
    return get_settings().effective_database_url


def runtime() -> jobs.WorkerRuntime:
    """This process's runtime (built at process start; lazily under a pool without it)."""
    global _runtime, _name
    with _runtime_lock:
        if _runtime is None:
            settings = get_settings()
            role = settings.worker_role or "worker"
            _runtime = jobs.WorkerRuntime(settings, role)
            _name = jobs.worker_name(role)
        return _runtime


def node() -> str:
    """The Celery worker (main process) this pool process belongs to and claims candidates
    for (see :class:`NodeHeartbeat`)."""
    return jobs.node_name(get_settings().worker_role or "worker", os.getppid(), _NODE_TOKEN)


class NodeHeartbeat(bootsteps.StartStopStep):
    """The Celery worker's main process beats for its node (``worker_nodes``) every heartbeat
    period, from its event loop: while it lives, Celery itself redelivers what a dying pool
    process held (``task_reject_on_worker_lost``); once it is silent, nobody will before the
    visibility timeout, and the agent gives its candidates back (``agent/tasks.py``)."""

    requires = {"celery.worker.components:Timer"}

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        settings = get_settings()
        self.role = settings.worker_role or "worker"
        self.node = jobs.node_name(self.role, os.getpid(), _NODE_TOKEN)
        self.period = settings.heartbeat_s
        self.tref: Any = None

    def start(self, parent: Any) -> None:
        self.beat()  # before any pool process can claim a candidate for this node
        self.tref = parent.timer.call_repeatedly(self.period, self.beat)

    def stop(self, parent: Any) -> None:
        if self.tref is not None:
            self.tref.cancel()

    def beat(self) -> None:
        """One heartbeat of the node (a failure is logged and retried at the next period)."""
        try:
            with autocommit_scope(_url()) as s:
                jobs.node_heartbeat(s, node=self.node, role=self.role)
        except Exception:
            log.warning("node heartbeat failed", exc_info=True)


app.steps["worker"].add(NodeHeartbeat)


@worker_process_init.connect
def _init_process(**_: Any) -> None:
    """Fresh database connections after the fork, the teams' own families found in the
    database (campaigns name them by content key), the evaluator, the heartbeat thread."""
    global _runtime_error
    get_engine(_url()).dispose(close=False)
    families.install(_url())
    rt = runtime()
    if rt.role == "gpu":
        try:
            # the first family's child starts with the worker (a broken GPU shows at once);
            # another family's starts with its first candidate
            rt.evaluator(family_names()[0])
        except Exception as exc:  # every evaluation then records why (visible, not silent)
            _runtime_error = f"the GPU worker has no evaluator: {exc}"[:500]
            log.exception("cannot build the evaluator")
    _stop.clear()
    threading.Thread(target=_heartbeat_loop, daemon=True, name="heartbeat").start()


@worker_process_shutdown.connect
def _shutdown_process(**_: Any) -> None:
    _stop.set()
    if _runtime is not None:
        _runtime.close()


def _heartbeat_loop() -> None:
    settings = get_settings()
    rt = runtime()
    assert _name is not None
    while True:
        try:
            done, busy = rt.take_evaluations()
            try:
                with session_scope(_url()) as s:
                    jobs.heartbeat(s, name=_name, role=rt.role, backend=rt.backend,
                                   gpu=rt.device(), evaluations=done, busy_s=busy)
            except Exception:
                rt.count_evaluation(busy, evaluations=done)  # counted at the next beat
                raise
        except Exception:  # the database is away: try again at the next beat
            log.warning("heartbeat failed", exc_info=True)
        if _stop.wait(settings.heartbeat_s):
            return


#: How long a GPU task tries to send its report while the broker is away.
REPORT_RETRY_S = 60.0


def report(name: TaskName, candidate_id: str, payload: dict[str, Any]) -> None:
    """Send a measurement's report, trying again every second while the broker is away (up
    to :data:`REPORT_RETRY_S`). Left to Celery's retry, a report that met Redis restarting
    re-ran the whole evaluation (one more delivery, counted against the crashed cap; with the
    lost-message resend of its wiped message, a candidate reached the cap), or was dropped
    when the retry could not be published either."""
    deadline = time.monotonic() + REPORT_RETRY_S
    while True:
        try:
            enqueue(name, candidate_id, payload)
            return
        except INFRA_ERRORS:
            if time.monotonic() > deadline:
                raise
            log.warning("report of %s: the broker is away, trying again", candidate_id)
            time.sleep(1.0)


@app.task(name=TaskName.COMPILE, autoretry_for=INFRA_ERRORS, retry_backoff=True,
          max_retries=8)
def compile_candidate(candidate_id: str) -> None:
    """Compile one candidate: a success is recorded here and sent to the GPUs (or, when the
    team's history holds its evaluation, served from there to the agent), a failure is
    reported to the agent (which records the outcome and decides)."""
    started = time.monotonic()
    # each step of a worker is one UPDATE that commits as it runs (and reads that need no
    # transaction): no BEGIN and COMMIT round trips
    with autocommit_scope(_url()) as s:
        job = jobs.start_compile(s, candidate_id, node())
        queue = jobs.queue_if_compiled(s, candidate_id) if job is None else None
    if job is None:  # already compiled (a redelivered message): the evaluation may be unsent
        if queue is not None:
            enqueue_once(TaskName.EVALUATE, candidate_id, candidate_id, queue=queue)
        return
    try:
        result = jobs.run_compile(runtime(), job)
    except SoftTimeLimitExceeded:
        result = CompileResult("timeout", 0.0, error="the compile task hit its soft time limit")
    except Exception as exc:  # a bug here must not strand the candidate: record it
        log.exception("compile of %s failed", candidate_id)
        result = CompileResult("error", 0.0, error=f"compile worker error: {exc!r}"[:400])
    if result.status == "ok":
        with autocommit_scope(_url()) as s:
            key, served = jobs.evaluation_of(s, job, result)
            recorded = jobs.record_compiled(s, job, result, key)
        if recorded and served is not None:  # the team measured it before: no GPU
            payload = jobs.measurement_to_dict(served)
            keep_report(candidate_id, payload)  # a GPU given it serves this, not a measure
            report(TaskName.MEASURED, candidate_id, payload)
        elif recorded:  # else another delivery recorded it and sent the evaluation
            enqueue_once(TaskName.EVALUATE, candidate_id, candidate_id,
                         queue=gpu_queue(job.arch))
    else:
        enqueue(TaskName.COMPILED, candidate_id, jobs.compile_result_to_dict(result))
    # a compile worker's heartbeat counts its compiles and their seconds (it showed 0 and 0)
    runtime().count_evaluation(time.monotonic() - started)


@app.task(name=TaskName.EVALUATE, autoretry_for=INFRA_ERRORS, retry_backoff=True,
          max_retries=8)
def evaluate_candidate(candidate_id: str) -> None:
    """Measure one compiled candidate (incumbent interleaved) and report to the agent. A
    candidate measured already whose report the agent has not recorded (it was lost with an
    agent) is reported again, not measured again."""
    started = time.monotonic()
    kept = kept_reports([candidate_id]).get(candidate_id)
    if kept is not None:
        log.warning("candidate %s was measured already: its kept report sent again",
                    candidate_id)
        report(TaskName.MEASURED, candidate_id, kept)
        return
    with autocommit_scope(_url()) as s:
        job = jobs.start_evaluation(s, candidate_id, node())
    if job is None:
        return  # already recorded (a redelivered message)
    payload: dict[str, Any]
    if job.attempts > MAX_EVALUATION_ATTEMPTS:
        payload = jobs.failure_payload("crashed", (
            f"its evaluation ended the GPU worker process {job.attempts - 1} times (killed, "
            "or past the task's hard time limit); not requeued again"))
    elif _runtime_error is not None:
        payload = jobs.failure_payload("crashed", _runtime_error)
    else:
        try:
            m = jobs.run_evaluation(runtime(), job)
        except SoftTimeLimitExceeded:
            m = Measurement("timeout", error="the evaluation hit the task's soft time limit")
        except Exception as exc:  # a failure of the candidate is a recorded status
            log.exception("evaluation of %s failed", candidate_id)
            m = Measurement("crashed", error=f"GPU worker error: {exc!r}"[:500])
        payload = jobs.measurement_to_dict(m)
    try:
        keep_report(candidate_id, payload)  # until the agent has recorded it
    except INFRA_ERRORS:
        log.warning("report of %s: cannot keep it (the broker is away)", candidate_id)
    report(TaskName.MEASURED, candidate_id, payload)
    runtime().count_evaluation(time.monotonic() - started)  # written with the next heartbeat


@app.task(name=TaskName.SANITIZE, autoretry_for=INFRA_ERRORS, retry_backoff=True,
          max_retries=8)
def sanitize_candidate(candidate_id: str) -> None:
    """The compute-sanitizer gate on a done campaign's best kernel; the record to the agent."""
    from worker.sanitize import error_record

    with session_scope(_url()) as s:
        job = jobs.start_sanitize(s, candidate_id, node())
    if job is None:
        return  # already checked (a redelivered message), or not a correct kernel
    try:
        record = jobs.run_sanitize(runtime(), job)
    except SoftTimeLimitExceeded:
        record = error_record("the sanitize task hit its soft time limit")
    except Exception as exc:  # recorded with the candidate, never lost in a log
        log.exception("sanitizer gate of %s failed", candidate_id)
        record = error_record(f"GPU worker error: {exc!r}"[:500])
    enqueue(TaskName.SANITIZED, candidate_id, record)
