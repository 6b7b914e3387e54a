"""Per-team rate limits on the API's costly writes, counted in Redis (so every API process
shares them) over fixed windows of one minute. A request over the limit is a 429 with
``Retry-After``, before any of its work is done; where Redis cannot be reached the limit is
not applied (the request is served, and the failure logged)."""

from __future__ import annotations

import logging
import time

from fastapi import HTTPException, status

from core.queues import redis_client
from core.settings import Settings

log = logging.getLogger(__name__)
WINDOW_S = 60


def check_rate(settings: Settings, *, team_id: str, action: str, per_minute: int,
               setting: str) -> None:
    """Count one ``action`` of the team in this minute; 429 naming ``setting`` when it is past
    ``per_minute`` (0: no limit)."""
    if per_minute <= 0:
        return
    import redis

    now = time.time()
    key = f"tuneforge:rate:{action}:{team_id}:{int(now // WINDOW_S)}"
    try:
        pipe = redis_client(settings).pipeline()
        pipe.incr(key)
        pipe.expire(key, 2 * WINDOW_S)
        count = int(pipe.execute()[0])
    except redis.RedisError as exc:
        log.warning("rate limit of %s not applied: %s", action, exc)
        return
    if count > per_minute:
        retry = int(WINDOW_S - now % WINDOW_S) + 1
        raise HTTPException(
            status.HTTP_429_TOO_MANY_REQUESTS,
            f"{action}: at most {per_minute} a minute for a team ({setting}); try again in "
            f"{retry} s", headers={"Retry-After": str(retry)})
