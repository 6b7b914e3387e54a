"""The Celery app of the service: queues, routing, reliability settings. No tasks here.

Tasks live beside the plain functions they adapt (``worker/tasks.py``: compile, evaluate;
``agent/tasks.py``: decide and the result records) and are addressed by name, so that a layer
never imports a higher one to enqueue: the API and the workers only call :func:`enqueue`.

Flow of one candidate (every arrow is a commit, then an enqueue)::

    agent.decide ─► worker.compile (queue compile) ──compiled──► worker.evaluate (gpu.<arch>)
         ▲                   │ failed                                   │
         │                   ▼                                          │
         ├──────────── agent.compiled                                   │
         └────────────────────────── agent.measured ◄───────────────────┘

Workers compute and report; every write to a campaign's state goes through the engine in the
agent queue, under the campaign's row lock. The one write a worker makes besides its progress
is a successful compile (nothing is decided by it): the compile worker records it and sends the
evaluation itself, one hop fewer per candidate.
"""

from __future__ import annotations

import base64
import enum
import json
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from celery import Celery

from core.arch import GPU_QUEUE_PREFIX, gpu_queue
from core.settings import Settings, get_settings


class CeleryQueue(enum.StrEnum):
    """Queues and who consumes them."""

    #: the agent worker (``tuneforge worker --role agent``): decisions and result records;
    #: light CPU, any concurrency (decisions of one campaign serialize on its row lock).
    AGENT = "agent"
    #: CPU workers (``--role compile``): nvcc, concurrency = cores.
    COMPILE = "compile"
    #: ``gpu.<arch>`` (e.g. ``gpu.sm_90``) is consumed by the GPU workers (``--role gpu``):
    #: one worker process per GPU, prefetch 1; FIFO, which is what makes sharing fair (see
    #: ``agent/driver.py``). This member is the prefix; :func:`gpu_queue` names one.
    GPU = GPU_QUEUE_PREFIX




class TaskName(enum.StrEnum):
    """Every task by name (enqueue by name, never by importing a higher layer)."""

    DECIDE = "agent.decide"
    COMPILED = "agent.compiled"
    MEASURED = "agent.measured"
    COMPILE = "worker.compile"
    EVALUATE = "worker.evaluate"
    #: the compute-sanitizer gate on a done campaign's best kernel (a GPU worker), and its
    #: record (the agent)
    SANITIZE = "worker.sanitize"
    SANITIZED = "agent.sanitized"


#: Where each task goes; ``worker.evaluate`` and ``worker.sanitize`` are routed per call to the
#: campaign's arch queue.
ROUTES: dict[str, str] = {
    TaskName.DECIDE: CeleryQueue.AGENT,
    TaskName.COMPILED: CeleryQueue.AGENT,
    TaskName.MEASURED: CeleryQueue.AGENT,
    TaskName.SANITIZED: CeleryQueue.AGENT,
    TaskName.COMPILE: CeleryQueue.COMPILE,
}

def _infra_errors() -> tuple[type[BaseException], ...]:
    from kombu.exceptions import OperationalError as BrokerError
    from redis.exceptions import ConnectionError as RedisConnectionError
    from sqlalchemy.exc import OperationalError as DatabaseError

    return (DatabaseError, RedisConnectionError, BrokerError)


#: Errors of our own infrastructure (database, broker, a deadlock the database broke): a task
#: that meets one is retried with backoff; anything else is recorded against the candidate or
#: the campaign, never left to strand it.
INFRA_ERRORS = _infra_errors()

#: A candidate whose evaluation was delivered this many times without finishing (its worker
#: process died, or the hard time limit killed it) is recorded ``crashed``, not requeued again.
MAX_EVALUATION_ATTEMPTS = 2


def time_limits(settings: Settings) -> dict[str, tuple[float, float]]:
    """(soft, hard) seconds of every task. The soft limit lets a task record what happened;
    the hard one kills the pool process (the message is then redelivered, see
    :data:`MAX_EVALUATION_ATTEMPTS`)."""
    compile_soft = settings.compile_timeout_s + 30.0
    # GPU child start-up (support kernels, inputs) + candidate and incumbent under the watchdog
    evaluate_soft = 120.0 + 4 * settings.eval_timeout_s
    # compile again (a cache hit), probe the GPU, then memcheck and racecheck, each under its
    # own time limit
    sanitize_soft = settings.compile_timeout_s + 120.0 + 2 * settings.sanitize_timeout_s
    return {
        TaskName.DECIDE: (60.0, 90.0),
        TaskName.COMPILED: (60.0, 90.0),
        TaskName.MEASURED: (60.0, 90.0),
        TaskName.SANITIZED: (60.0, 90.0),
        TaskName.COMPILE: (compile_soft, compile_soft + 30.0),
        TaskName.EVALUATE: (evaluate_soft, evaluate_soft + 60.0),
        TaskName.SANITIZE: (sanitize_soft, sanitize_soft + 60.0),
    }


def visibility_timeout(settings: Settings) -> int:
    """Redis redelivers an unacknowledged message after this long: above the longest task, so
    that a slow evaluation is never handed to a second GPU while the first still runs."""
    longest = max(hard for _soft, hard in time_limits(settings).values())
    return int(max(3600.0, 2 * longest))


def celery_config(settings: Settings) -> dict[str, Any]:
    """The Celery configuration (reliability first: late acks, redelivery of lost work)."""
    limits = time_limits(settings)
    return {
        "broker_url": settings.redis_url,
        "result_backend": settings.redis_url,
        "task_ignore_result": True,  # the database is the record; nobody waits on a result
        "result_expires": 3600,
        "task_serializer": "json",
        "result_serializer": "json",
        "accept_content": ["json"],
        "task_default_queue": CeleryQueue.AGENT.value,
        "task_routes": {name: {"queue": queue} for name, queue in ROUTES.items()},
        "task_create_missing_queues": True,
        # acknowledge after the task ran: a worker that dies mid-task loses nothing
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        # a task killed by its hard limit is requeued too (counted against the attempts cap)
        "task_acks_on_timeout": False,
        # a worker holds one message per process: a busy GPU never hoards queued work
        "worker_prefetch_multiplier": 1,
        "broker_transport_options": {"visibility_timeout": visibility_timeout(settings)},
        "broker_connection_retry_on_startup": True,
        "task_annotations": {
            name: {"soft_time_limit": soft, "time_limit": hard}
            for name, (soft, hard) in limits.items()
        },
        # a GPU worker's pool process builds its evaluator (GPU child, inputs) when it starts
        "worker_proc_alive_timeout": 180.0,
        "worker_send_task_events": False,
        "worker_hijack_root_logger": False,
    }


def make_app(settings: Settings | None = None) -> Celery:
    """A Celery app configured from ``settings``; task modules are loaded by the workers."""
    settings = settings or get_settings()
    celery = Celery("tuneforge", include=["worker.tasks", "agent.tasks"])
    celery.conf.update(celery_config(settings))
    return celery


app = make_app()


@lru_cache(maxsize=4)
def _redis(url: str) -> Any:
    import redis

    return redis.Redis.from_url(url)


def redis_client(settings: Settings | None = None) -> Any:
    """A Redis client on the broker's database (queue lengths, the enqueue guard)."""
    return _redis((settings or get_settings()).redis_url)


def enqueue(name: TaskName, *args: Any, queue: str | None = None) -> None:
    """Send a task by name (after the caller committed the state it depends on)."""
    # argsrepr (what monitors show) names the ids only: Celery's own repr of a result payload
    # costs more CPU than sending it
    app.send_task(str(name), args=list(args), queue=queue or ROUTES.get(name),
                  argsrepr=repr([a for a in args if isinstance(a, str)]), kwargsrepr="{}")


#: How long the enqueue guard remembers that a step was sent (longer than any queue wait).
ONCE_TTL_S = 24 * 3600


def enqueue_once(name: TaskName, key: str, *args: Any, queue: str | None = None) -> bool:
    """Send a task unless the same ``(name, key)`` step was already sent.

    Tasks re-enqueue the next step from the database state (so a task redelivered after its
    commit still sends what its first run may not have sent); this guard makes that idempotent.
    """
    guard = f"tuneforge:sent:{name}:{key}"
    if not redis_client().set(guard, b"1", nx=True, ex=ONCE_TTL_S):
        return False
    try:
        enqueue(name, *args, queue=queue)
    except BaseException:
        redis_client().delete(guard)
        raise
    return True


def _kept_key(candidate_id: str) -> str:
    return f"tuneforge:measured:{candidate_id}"


def keep_report(candidate_id: str, payload: dict[str, Any]) -> None:
    """Keep a GPU worker's measurement until the agent has recorded it: its ``agent.measured``
    message is its only other copy, and an agent killed right after Redis handed the message
    over (popped off the queue, not yet in the ``unacknowledged`` hash) takes it along."""
    redis_client().set(_kept_key(candidate_id), json.dumps(payload), ex=ONCE_TTL_S)


def kept_reports(candidate_ids: list[str]) -> dict[str, dict[str, Any]]:
    """The kept measurements of those of ``candidate_ids`` that have one."""
    if not candidate_ids:
        return {}
    found = redis_client().mget([_kept_key(cid) for cid in candidate_ids])
    return {cid: json.loads(raw) for cid, raw in zip(candidate_ids, found, strict=True)
            if raw is not None}


def drop_report(candidate_id: str) -> None:
    """Forget a kept measurement (the agent recorded it)."""
    redis_client().delete(_kept_key(candidate_id))


def forget_sent(name: TaskName, key: str) -> None:
    """Drop the enqueue guard of one step (its message is known lost: it may be sent again)."""
    redis_client().delete(f"tuneforge:sent:{name}:{key}")


def mentioned_in_messages(ids: set[str]) -> set[str]:
    """Which of ``ids`` some message of the broker names: waiting in a queue (every list of
    the broker's database) or delivered and not yet acknowledged (kombu's ``unacked`` hash,
    which holds a task while it runs, ``acks_late``). An in-flight candidate that no message
    names was lost with its message (a broker restarted without persistence)."""
    if not ids:
        return set()
    client = redis_client()
    needles = {i: i.encode() for i in ids}
    found: set[str] = set()

    def scan(payloads: Any) -> None:
        for raw in payloads:
            found.update(i for i, needle in needles.items() if needle in raw)

    for name in client.scan_iter(_type="list", count=500):
        scan(client.lrange(name, 0, -1))
    scan(client.hvals("unacked"))
    return found


def restore_unacked(queue: str | Callable[[str], bool], delivered_before: float,
                    wanted: Callable[[str, list[Any]], bool] | None = None) -> list[str]:
    """Hand out again the messages of ``queue`` (a name, or a test of one) that a consumer
    took before ``delivered_before`` (a Unix time) and never acknowledged, those of them that
    ``wanted(task name, args)`` picks when given: what Redis does by itself once the
    visibility timeout (an hour) has passed, for a queue whose consumer is known to be gone.
    kombu's own restore (atomic per message); the task names of the messages restored."""
    in_queue = (lambda name: name == queue) if isinstance(queue, str) else queue
    names: list[str] = []
    with app.connection_for_write() as conn:
        channel: Any = conn.default_channel
        client = channel.client
        for tag, _at in client.zrange(channel.unacked_index_key, 0, delivered_before,
                                      byscore=True, withscores=True):
            raw = client.hget(channel.unacked_key, tag)
            if raw is None:
                continue  # acknowledged meanwhile
            message, _exchange, routing_key = json.loads(raw)
            if not in_queue(str(routing_key)):
                continue
            task = str((message.get("headers") or {}).get("task"))
            if wanted is not None and not wanted(task, task_args(message)):
                continue
            channel.qos.restore_by_tag(tag, client)
            names.append(task)
    return names


def task_args(message: dict[str, Any]) -> list[Any]:
    """The positional arguments of a Celery message as kombu stores it (protocol 2, JSON,
    base64 body); [] when it cannot be read."""
    try:
        body = message["body"]
        if (message.get("properties") or {}).get("body_encoding") == "base64":
            body = base64.b64decode(body)
        args = json.loads(body)[0]
    except (KeyError, IndexError, TypeError, ValueError):
        return []
    return list(args) if isinstance(args, list) else []


def publish_events(campaign_id: str, events: list[dict[str, Any]],
                   redis_url: str | None = None) -> None:
    """Publish a committed transaction's events of one campaign (``core.feed``'s publisher in
    the service's processes): one Redis message, ``{"campaign_id", "events": [...]}``."""
    from core.feed import channel

    _redis(redis_url or get_settings().redis_url).publish(channel(campaign_id), json.dumps(
        {"campaign_id": campaign_id, "events": events}, separators=(",", ":"), default=str))


def queue_lengths(arches: tuple[str, ...] = ("sm_90",)) -> dict[str, int]:
    """Messages waiting in each queue (Redis ``LLEN``; cheap)."""
    names = [CeleryQueue.AGENT.value, CeleryQueue.COMPILE.value, *(gpu_queue(a) for a in arches)]
    pipe = redis_client().pipeline()
    for name in names:
        pipe.llen(name)
    return dict(zip(names, (int(n) for n in pipe.execute()), strict=True))
