"""The whole service, for real: a Postgres database of its own, a Redis database of its own, the
API (``tuneforge serve``) and Celery workers (``tuneforge worker``, replay backend) as
subprocesses. Started once per test session, torn down and dropped at the end."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from core.db import upgrade_database
from service.service_stack import (
    REDIS_HOST,
    START_TIMEOUT_S,
    Stack,
    TeamKey,
    create_database,
    create_team,
    create_team_in_db,
    drop_database,
    free_port,
    live_roles,
    service_env,
    wait_until,
)


@pytest.fixture(scope="session")
def service_db() -> Iterator[str]:
    """A Postgres database for this test session, migrated to head, dropped at the end."""
    url = create_database()
    try:
        upgrade_database(url)
        yield url
    finally:
        drop_database(url)


@pytest.fixture
def empty_db() -> Iterator[str]:
    """An empty Postgres database of the test's own (no table), dropped after it."""
    url = create_database("tuneforge_test")
    try:
        yield url
    finally:
        drop_database(url)


@pytest.fixture
def fresh_db(empty_db: str) -> str:
    """A Postgres database of the test's own, migrated to head, dropped after it."""
    upgrade_database(empty_db)
    return empty_db


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """An empty Redis database number of its own (claimed with a key), flushed at the end."""
    for number in range(15, 0, -1):
        client = redis.Redis.from_url(f"{REDIS_HOST}/{number}")
        if client.dbsize() == 0 and client.set("tuneforge:test-claim", os.getpid(), nx=True):
            break
    else:
        pytest.fail("no empty Redis database number (1-15) to run the service tests in")
    try:
        yield f"{REDIS_HOST}/{number}"
    finally:
        client.flushdb()


@pytest.fixture(scope="session")
def stack(service_db: str, redis_url: str, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[Stack]:
    """API + agent, compile and two replay GPU workers, ready to take campaigns."""
    home = tmp_path_factory.mktemp("service-home")
    port = free_port()
    api = f"http://127.0.0.1:{port}"
    st = Stack(api=api, db_url=service_db, redis_url=redis_url,
               env=service_env(service_db, redis_url, home, api),
               logs=tmp_path_factory.mktemp("service-logs"))
    try:
        st.start("api", "serve", "--port", str(port))
        st.start("agent", "worker", "--role", "agent", "--concurrency", "2")
        st.start("compile", "worker", "--role", "compile", "--concurrency", "1")
        st.start("gpu", "worker", "--role", "gpu", "--backend", "replay", "--gpus", "0,1")
        st.wait_api("api", port)

        def workers_up() -> bool:
            roles = live_roles(st)
            return roles.get("agent", 0) >= 1 and roles.get("compile", 0) >= 1 \
                and roles.get("gpu", 0) >= 2

        wait_until(workers_up, START_TIMEOUT_S, "worker heartbeats", st, interval=0.3)
        yield st
    finally:
        st.stop_all()


@pytest.fixture(scope="session")
def team_a(stack: Stack) -> TeamKey:
    """A team made with ``tuneforge admin create-team``."""
    return create_team(stack, f"team-a-{secrets.token_hex(3)}")


@pytest.fixture(scope="session")
def team_b(stack: Stack) -> TeamKey:
    """A second team (isolation tests)."""
    return create_team_in_db(stack, f"team-b-{secrets.token_hex(3)}")


@pytest.fixture
def make_team(stack: Stack) -> Any:
    """Make a fresh team on demand."""
    return lambda prefix="team": create_team_in_db(stack, f"{prefix}-{secrets.token_hex(3)}")
