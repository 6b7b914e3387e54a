"""Schemathesis over the API's own OpenAPI schema, against the real service (API process,
Postgres, Redis, workers): whatever it sends, valid or not, no answer is a 5xx, and every status
code, content type and body is one the schema documents for the operation.

The event stream (``/campaigns/{id}/events``) is left out: it lasts as long as its campaign, and
schemathesis would wait on it; ``test_bad_input.py::test_event_stream_bad_input`` covers it."""

from __future__ import annotations

import os
import secrets
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from api.main import create_app
from service.service_stack import Stack, TeamKey, create_team_in_db, wait_finished

#: Examples per operation (schemathesis's fuzzing phase; its coverage phase adds its own boundary
#: and negative cases). The module takes about 40 s on 2 cores.
MAX_EXAMPLES = int(os.environ.get("TUNEFORGE_FUZZ_EXAMPLES", "100"))
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_schema_conformance]

#: The app's own schema (what ``/api/v1/openapi.json`` serves: checked below), loaded at
#: collection so that each operation is a test of its own; every request goes to the real server.
schema = schemathesis.openapi.from_dict(create_app().openapi()).exclude(path_regex=r"/events$")

#: Requests sent, per operation and per answer (the figures in docs/RELIABILITY.md).
SENT: Counter[str] = Counter()
ANSWERS: Counter[int] = Counter()
BY_OPERATION: Counter[tuple[str, int]] = Counter()


@dataclass
class FuzzTeam:
    """The team the requests authenticate as, and a finished campaign of it with candidates."""

    key: str
    campaign_id: str
    candidate_id: str


@pytest.fixture(scope="module")
def fuzz_team(stack: Stack) -> Iterator[FuzzTeam]:
    """A team of its own with one finished campaign; at the end, every campaign schemathesis
    made is cancelled (the replay workers would run them for the rest of the session)."""
    team: TeamKey = create_team_in_db(stack, f"fuzz-{secrets.token_hex(3)}")
    with stack.client(team.key) as client:
        cid = client.post("/campaigns", json={"shape": {"m": 4096, "n": 4096, "k": 4096},
                                              "budget": {"iterations": 3}}).json()["id"]
        wait_finished(client, cid, stack=stack)
        first = client.get(f"/campaigns/{cid}/candidates").json()["items"][0]["id"]
    yield FuzzTeam(team.key, cid, first)
    with stack.client(team.key) as client:
        for campaign in client.get("/campaigns", params={"limit": 200}).json():
            if campaign["status"] in ("queued", "running"):
                client.post(f"/campaigns/{campaign['id']}/cancel")


@schema.parametrize()
@settings(max_examples=MAX_EXAMPLES, derandomize=True, database=None, deadline=None,
          suppress_health_check=list(HealthCheck))
def test_no_5xx_and_every_answer_is_documented(case: Any, stack: Stack, fuzz_team: FuzzTeam
                                               ) -> None:
    ids = case.path_parameters or {}
    if "campaign_id" in ids and zlib.crc32(repr(ids).encode()) % 2:
        # half the cases (chosen by what was generated: deterministic) name the real campaign
        # and candidate, so that they get past the 404 to the endpoint's own checks
        ids["campaign_id"] = fuzz_team.campaign_id
        if "candidate_id" in ids:
            ids["candidate_id"] = fuzz_team.candidate_id
    response = case.call(base_url=stack.api, headers={"X-API-Key": fuzz_team.key}, timeout=30)
    SENT[case.operation.label] += 1
    ANSWERS[response.status_code] += 1
    BY_OPERATION[case.operation.label, response.status_code] += 1
    case.validate_response(response, checks=CHECKS)


def test_fuzzing_reached_every_operation(stack: Stack) -> None:
    """The run above sent requests to every operation, and some got through (2xx) while others
    were refused (4xx)."""
    if not SENT:
        pytest.skip("runs after test_no_5xx_and_every_answer_is_documented (not selected)")
    spec = httpx.get(f"{stack.api}/api/v1/openapi.json").json()
    assert spec == create_app().openapi()  # the server serves the schema that was fuzzed
    operations = {f"{method.upper()} {path}" for path, item in spec["paths"].items()
                  for method in item if not path.endswith("/events")}
    assert set(SENT) == operations, operations ^ set(SENT)
    assert sum(SENT.values()) >= 10 * MAX_EXAMPLES, SENT
    assert {200, 201, 404, 422} <= {code for code, n in ANSWERS.items() if n}, BY_OPERATION
    # a campaign was created (the body's documented examples are valid requests)
    assert BY_OPERATION["POST /api/v1/campaigns", 201], BY_OPERATION
    assert not [code for code in ANSWERS if code >= 500], ANSWERS
    print(f"\nschemathesis: {len(SENT)} operations, {sum(SENT.values())} requests, answers "  # noqa: T201
          f"{dict(sorted(ANSWERS.items()))}; per operation: "
          + ", ".join(f"{label} {n}" for label, n in sorted(SENT.items())))
