"""Absurd and malformed requests against the real service: each gets a 4xx whose message names
the field or the problem, and leaves nothing in the database (no campaign, no candidate, no
event, no action). Also the event stream's bad input, and ``tuneforge submit``/``export``/
``watch`` against the service."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from core.db import get_engine
from service.service_stack import Stack, create_team_in_db, wait_finished

SHAPE = {"m": 4096, "n": 4096, "k": 4096}
LIMIT = 1 << 20  # TUNEFORGE_MAX_BODY_BYTES's default


@dataclass
class Team:
    """A team of this module and its one finished campaign."""

    name: str
    key: str
    campaign_id: str


@pytest.fixture(scope="module")
def team(stack: Stack) -> Team:
    made = create_team_in_db(stack, f"bad-input-{secrets.token_hex(3)}")
    with stack.client(made.key) as client:
        cid = client.post("/campaigns", json={"shape": SHAPE, "budget": {"iterations": 2}}
                          ).json()["id"]
        wait_finished(client, cid, stack=stack)
    return Team(made.name, made.key, cid)


def team_rows(stack: Stack, team: Team) -> dict[str, Any]:
    """What the database holds for the team: campaigns, candidates, events, injected actions."""
    with get_engine(stack.db_url).connect() as conn:
        def one(sql: str) -> Any:
            return conn.execute(text(sql), {"team": team.name}).scalar_one()

        mine = ("SELECT c.id FROM campaigns c JOIN teams t ON t.id = c.team_id "
                "WHERE t.name = :team")
        return {
            "campaigns": one(f"SELECT count(*) FROM ({mine}) x"),
            "candidates": one(f"SELECT count(*) FROM candidates WHERE campaign_id IN ({mine})"),
            "events": one(f"SELECT count(*) FROM events WHERE campaign_id IN ({mine})"),
            "injected": one(f"SELECT string_agg(injected_actions::text, '|') FROM campaigns "
                            f"WHERE id IN ({mine})"),
        }


def body(spec: dict[str, Any], **raw: str) -> bytes:
    """``spec`` as JSON, with the fields of ``raw`` written as given (``NaN``, ``"8"`` …)."""
    text_ = json.dumps(spec)
    for name, value in raw.items():
        text_ = text_[:-1] + f', "{name}": {value}}}'
    return text_.encode()


def huge_body() -> bytes:
    """A valid campaign over 1 MiB (a leaderboard of 150 000 times)."""
    return body({"shape": SHAPE, "leaderboard": [123.456] * 150_000})


#: (id, body, content type, status, loc of the refused field or None, words of the message)
BAD_CAMPAIGNS: list[tuple[str, bytes | Iterator[bytes], str, int, list[Any] | None, str]] = [
    ("zero-size", body({"shape": {**SHAPE, "m": 0}}), "application/json", 422,
     ["body", "shape"], "shape.m must be in [1, 65536], got 0"),
    ("negative-size", body({"shape": {**SHAPE, "k": -4096}}), "application/json", 422,
     ["body", "shape"], "shape.k must be in [1, 65536], got -4096"),
    ("size-over-65536", body({"shape": {**SHAPE, "n": 70000}}), "application/json", 422,
     ["body", "shape"], "shape.n must be in [1, 65536], got 70000"),
    ("unknown-dimension", body({"shape": {**SHAPE, "rows": 8}}), "application/json", 422,
     ["body", "shape"], "shape: unknown dimension(s) rows (dimensions: m, n, k)"),
    ("sizes-beyond-gpu-memory", body({"shape": {"m": 65536, "n": 65536, "k": 65536}}),
     "application/json", 422, ["body", "shape"],
     "65536x65536x65536 needs 112.1 GiB for A, B, bias, C and the fp64 reference, more than "
     "the 80 GiB a campaign may use (TUNEFORGE_GPU_MEMORY_GIB)"),
    ("unknown-kernel", body({"shape": SHAPE, "kernel": "conv2d"}), "application/json", 422,
     ["body", "kernel"], "unknown kernel family 'conv2d'; known: gemm_bias_relu"),
    # the whole 900 KB name came back in the message
    ("unknown-kernel-900KB", body({"shape": SHAPE, "kernel": "k" * 900_000}),
     "application/json", 422, ["body", "kernel"],
     f"unknown kernel family {'k' * 64!r}… (900000 characters); known: gemm_bias_relu"),
    ("unknown-policy", body({"shape": SHAPE, "policy": "genius"}), "application/json", 422,
     ["body", "policy"], "'expert', 'optuna', 'random' or 'llm'"),
    ("unknown-action", body({"shape": SHAPE, "allowed_actions": ["apply_magic"]}),
     "application/json", 422, ["body", "allowed_actions"], "unknown action(s) 'apply_magic'"),
    ("unknown-start-from", body({"shape": SHAPE, "start_from": "worst"}), "application/json",
     422, ["body", "start_from"], "Input should be 'best'"),
    ("budget-0", body({"shape": SHAPE, "budget": {"iterations": 0}}), "application/json", 422,
     ["body", "budget", "iterations"], "greater than or equal to 1"),
    ("budget-negative-settle", body({"shape": SHAPE, "budget": {"settle_after": -1}}),
     "application/json", 422, ["body", "budget", "settle_after"], "greater than or equal to 0"),
    ("budget-negative-seconds", body({"shape": SHAPE, "budget": {"wall_seconds": -1}}),
     "application/json", 422, ["body", "budget", "wall_seconds"], "greater than 0"),
    ("budget-nan-seconds", b'{"shape": {"m": 8, "n": 8, "k": 8}, "budget": '
     b'{"gpu_seconds": NaN}}', "application/json", 422, ["body", "budget", "gpu_seconds"],
     "finite number"),
    ("tolerance-nan", body({"shape": SHAPE}, tolerance="NaN"), "application/json", 422,
     ["body", "tolerance"], "Input should be a finite number"),
    ("tolerance-inf", body({"shape": SHAPE}, tolerance="Infinity"), "application/json", 422,
     ["body", "tolerance"], "Input should be a finite number"),
    ("tolerance-minus-inf", body({"shape": SHAPE}, tolerance="-Infinity"), "application/json",
     422, ["body", "tolerance"], "Input should be a finite number"),
    ("tolerance-negative", body({"shape": SHAPE, "tolerance": -1e-4}), "application/json", 422,
     ["body", "tolerance"], "greater than 0"),
    ("tolerance-0", body({"shape": SHAPE, "tolerance": 0}), "application/json", 422,
     ["body", "tolerance"], "greater than 0"),
    ("tolerance-0.5", body({"shape": SHAPE, "tolerance": 0.5}), "application/json", 422,
     ["body", "tolerance"], "less than or equal to 0.1"),
    ("leaderboard-nan", body({"shape": SHAPE}, leaderboard="[NaN]"), "application/json", 422,
     ["body", "leaderboard"], "leaderboard times must be finite numbers > 0"),
    ("parallel-0", body({"shape": SHAPE, "parallel": 0}), "application/json", 422,
     ["body", "parallel"], "greater than or equal to 1"),
    ("parallel-1000", body({"shape": SHAPE, "parallel": 1000}), "application/json", 422,
     ["body", "parallel"], "at most 64 (TUNEFORGE_MAX_PARALLEL)"),
    ("size-as-string", body({"shape": {**SHAPE, "m": "4096"}}), "application/json", 422,
     ["body", "shape", "m"], "Input should be a valid integer"),
    ("size-as-bool", body({"shape": {**SHAPE, "m": True}}), "application/json", 422,
     ["body", "shape", "m"], "Input should be a valid integer"),
    ("size-fractional", body({"shape": {**SHAPE, "m": 4096.5}}), "application/json", 422,
     ["body", "shape", "m"], "Input should be a valid integer"),
    ("budget-as-string", body({"shape": SHAPE, "budget": {"iterations": "10"}}),
     "application/json", 422, ["body", "budget", "iterations"], "valid integer"),
    ("shape-as-list", body({"shape": [4096, 4096, 4096]}), "application/json", 422,
     ["body", "shape"], "valid dictionary"),
    ("policy-as-number", body({"shape": SHAPE, "policy": 3}), "application/json", 422,
     ["body", "policy"], "Input should be 'expert'"),
    ("unknown-field", body({"shape": SHAPE, "colour": "blue"}), "application/json", 422,
     ["body", "colour"], "Extra inputs are not permitted"),
    ("no-shape", b"{}", "application/json", 422, ["body", "shape"], "Field required: shape"),
    ("not-json", b"shape = 4096^3", "application/json", 422, ["body", 0],
     "the body is not valid JSON: Expecting value at character 0"),
    ("truncated-json", b'{"shape": {"m": 8', "application/json", 422, ["body"],
     "the body is not valid JSON"),
    ("json-array", b"[4096, 4096, 4096]", "application/json", 422, ["body"],
     "the body must be a JSON object"),
    ("json-as-text-plain", body({"shape": SHAPE}), "text/plain", 422, ["body"],
     "the body must be JSON, sent with Content-Type: application/json"),
    ("empty-body", b"", "application/json", 422, ["body"], "Field required"),
    ("not-utf8", b'{"shape": "\xff"}', "application/json", 400, None,
     "the body cannot be read as JSON: UnicodeDecodeError"),
    # json.loads(bytes) guesses UTF-16 and UTF-32 from the first bytes: these were a 201
    ("utf-16", json.dumps({"shape": SHAPE}).encode("utf-16"), "application/json", 400, None,
     "the body cannot be read as JSON: UnicodeDecodeError: 'utf-8' codec can't decode"),
    # ASCII in UTF-16 without a BOM is valid UTF-8 (NUL bytes): not JSON, then
    ("utf-16-le-no-bom", json.dumps({"shape": SHAPE}).encode("utf-16-le"), "application/json",
     422, ["body", 1], "the body is not valid JSON: Expecting property name"),
    ("utf-32", json.dumps({"shape": SHAPE}).encode("utf-32"), "application/json", 400, None,
     "UnicodeDecodeError"),
    # the last of two equal keys was taken silently
    ("duplicate-key", b'{"shape": {"m": 8, "n": 8, "k": 8}, "policy": "random", '
     b'"policy": "expert"}', "application/json", 422, ["body", 56],
     'the body is not valid JSON: key "policy" is given twice in one object: send each field '
     "once at character 56"),
    ("duplicate-nested-key", b'{"shape": {"m": 8, "m": 16, "n": 8, "k": 8}}',
     "application/json", 422, ["body"], 'key "m" is given twice'),
    ("number-of-5000-digits", b'{"shape": {"m": ' + b"9" * 5000 + b', "n": 8, "k": 8}}',
     "application/json", 422, ["body"],
     "an integer of 5000 characters at line 1 column 17 (field 'm'): at most 64"),
    ("nested-100000-deep", b"[" * 100_000 + b"]" * 100_000, "application/json", 400, None,
     "RecursionError"),
    ("body-over-1MiB", huge_body(), "application/json", 413, None,
     f"the request body is larger than {LIMIT} bytes (TUNEFORGE_MAX_BODY_BYTES)"),
    ("chunked-body-over-1MiB", iter([huge_body()[i:i + 65536]
                                     for i in range(0, len(huge_body()), 65536)]),
     "application/json", 413, None,
     f"the request body is larger than {LIMIT} bytes (TUNEFORGE_MAX_BODY_BYTES)"),
]


def refusal(response: httpx.Response, loc: list[Any] | None) -> str:
    """The message of a refusal: the 422 entry at ``loc``, or the detail string."""
    detail = response.json()["detail"]
    if loc is None:
        assert isinstance(detail, str), detail
        return detail
    assert isinstance(detail, list), detail
    found = [d for d in detail if d["loc"][:len(loc)] == loc]
    assert found, f"no error at {loc}: {detail}"
    return " | ".join(d["msg"] for d in found)


@pytest.mark.parametrize(("content", "content_type", "status", "loc", "words"),
                         [case[1:] for case in BAD_CAMPAIGNS],
                         ids=[case[0] for case in BAD_CAMPAIGNS])
def test_absurd_campaigns_are_refused_naming_the_problem(
        stack: Stack, team: Team, content: bytes | Iterator[bytes], content_type: str,
        status: int, loc: list[Any] | None, words: str) -> None:
    before = team_rows(stack, team)
    with stack.client(team.key) as client:
        response = client.post("/campaigns", content=content,
                               headers={"Content-Type": content_type})
    assert response.status_code == status, response.text[:500]
    assert words in refusal(response, loc), response.text[:500]
    assert len(response.content) < 2000  # what was refused is named, not echoed
    assert team_rows(stack, team) == before  # not half a campaign: nothing at all


def test_a_valid_campaign_is_taken_by_the_same_route(stack: Stack) -> None:
    """The refusals above are about their input: the same route takes a valid body, NaN-free
    raw text included (another team's, cancelled at once: its stragglers touch no count
    above)."""
    other = create_team_in_db(stack, f"bad-input-ok-{secrets.token_hex(3)}")
    with stack.client(other.key) as client:
        created = client.post("/campaigns", content=body({"shape": SHAPE}, tolerance="1e-4"),
                              headers={"Content-Type": "application/json"})
        assert created.status_code == 201, created.text
        cancelled = client.post(f"/campaigns/{created.json()['id']}/cancel")
        assert cancelled.json()["tolerance"] == 1e-4


#: (id, body of POST /campaigns/{id}/actions, status, loc or None, words of the message)
BAD_ACTIONS: list[tuple[str, bytes, int, list[Any] | None, str]] = [
    ("unknown-action", body({"actions": ["apply_magic(2)"]}), 422, ["body", "actions"],
     "unknown action 'apply_magic'"),
    ("argument-outside-domain", body({"actions": ["apply_unroll(3)"]}), 422,
     ["body", "actions"], "factor=3 is outside its domain [1, 2, 4, 8]"),
    ("too-many-arguments", body({"actions": ["apply_unroll(2, 3)"]}), 422, ["body", "actions"],
     "apply_unroll takes 1 argument(s)"),
    ("unparseable", body({"actions": ["apply_unroll("]}), 422, ["body", "actions"],
     "cannot parse action 'apply_unroll('"),
    ("no-actions", body({"actions": []}), 422, ["body", "actions"], "at least 1 item"),
    ("nul-byte", body({"actions": ["apply_unroll\u0000(2)"]}), 422, ["body", "actions", 0],
     "String should match pattern"),
    ("500-characters", body({"actions": ["x" * 500]}), 422, ["body", "actions", 0],
     "at most 200 characters"),
    ("not-a-list", body({"actions": "apply_unroll(2)"}), 422, ["body", "actions"],
     "valid list"),
    ("action-as-number", body({"actions": [2]}), 422, ["body", "actions", 0], "valid string"),
    ("unknown-field", body({"actions": ["apply_unroll(2)"], "now": True}), 422, ["body", "now"],
     "Extra inputs are not permitted"),
    ("finished-campaign", body({"actions": ["apply_unroll(2)"]}), 409, None,
     "campaign is done: it takes no new actions"),
]


@pytest.mark.parametrize(("content", "status", "loc", "words"),
                         [case[1:] for case in BAD_ACTIONS], ids=[c[0] for c in BAD_ACTIONS])
def test_bad_actions_are_refused_naming_the_problem(stack: Stack, team: Team, content: bytes,
                                                    status: int, loc: list[Any] | None,
                                                    words: str) -> None:
    before = team_rows(stack, team)
    with stack.client(team.key) as client:
        response = client.post(f"/campaigns/{team.campaign_id}/actions", content=content,
                               headers={"Content-Type": "application/json"})
    assert response.status_code == status, response.text[:500]
    assert words in refusal(response, loc), response.text[:500]
    assert team_rows(stack, team) == before  # no action recorded, no event


@pytest.mark.parametrize("campaign_id", ["0" * 32, "f" * 31, "not-an-id", "a%00b", "x" * 64,
                                         "x" * 65, "f" * 33, "0" * 5000])
def test_ids_that_name_nothing_are_a_404(stack: Stack, team: Team, campaign_id: str) -> None:
    """Any length: ids of 65 characters or more were a 422 (the docs say 404), and the 404
    quotes at most 64 characters of the id."""
    with stack.client(team.key) as client:
        for method, path in (("GET", ""), ("GET", "/candidates"), ("GET", "/best"),
                             ("GET", "/points"), ("GET", "/events"), ("POST", "/cancel"),
                             ("POST", "/actions")):
            response = client.request(method, f"/campaigns/{campaign_id}{path}",
                                      json={"actions": ["apply_unroll(2)"]})
            assert response.status_code == 404, (method, path, response.text[:500])
            assert response.json()["detail"].startswith("no campaign '"), response.text[:500]
            assert len(response.content) < 300
        candidate = client.get(f"/campaigns/{team.campaign_id}/candidates/{campaign_id}")
        assert candidate.status_code == 404, candidate.text[:500]
        assert len(candidate.content) < 300
        assert "no candidate '" in candidate.json()["detail"]


@pytest.mark.parametrize(("path", "loc", "words"), [
    ("/campaigns?offset=9223372036854775808", ["query", "offset"], "less than or equal to"),
    ("/campaigns?offset=-1", ["query", "offset"], "greater than or equal to 0"),
    ("/campaigns?limit=0", ["query", "limit"], "greater than or equal to 1"),
    ("/campaigns?limit=1e3", ["query", "limit"], "valid integer"),
    ("/campaigns/{cid}/candidates?offset=99999999999999999999", ["query", "offset"],
     "less than or equal to 2147483647"),
    ("/campaigns/{cid}/candidates?status=great", ["query", "status"], "Input should be"),
    ("/campaigns/{cid}/points?limit=100000", ["query", "limit"], "less than or equal to 5000"),
    ("/history?kernel=gemm_bias_relu&shape=4294967296x1x1", ["query", "shape"],
     "shape.m must be in [1, 65536], got 4294967296"),
    ("/history?kernel=gemm_bias_relu&shape=0x1", ["query", "shape"], "shape must look like"),
    ("/history?shape=8x8x8", ["query", "shape"], "shape needs kernel"),
    ("/history?gpu=H200%00", ["query", "gpu"], "String should match pattern"),
    ("/history?kernel=" + "g" * 300, ["query", "kernel"], "at most 200 characters"),
])
def test_bad_query_values_are_a_422_naming_them(stack: Stack, team: Team, path: str,
                                                loc: list[str], words: str) -> None:
    with stack.client(team.key) as client:
        response = client.get(path.format(cid=team.campaign_id))
    assert response.status_code == 422, response.text
    assert words in refusal(response, loc)


def read_stream(stack: Stack, team: Team, campaign_id: str, *, params: dict[str, str] | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, str, float]:
    """Status, text and seconds of a GET of the event stream (which must end by itself)."""
    started = time.monotonic()
    with httpx.stream("GET", f"{stack.api}/api/v1/campaigns/{campaign_id}/events",
                      params=params, headers={"X-API-Key": team.key, **(headers or {})},
                      timeout=httpx.Timeout(10.0)) as response:
        content = response.read().decode()
    return response.status_code, content, time.monotonic() - started


def test_event_stream_bad_input(stack: Stack, team: Team) -> None:
    """The event stream, left out of the schemathesis run: a finished campaign's stream ends on
    its own; bad ``after`` / ``Last-Event-ID`` are a 422 naming them; unknown ids a 404."""
    code, stream, seconds = read_stream(stack, team, team.campaign_id)
    assert code == 200
    assert "event: finished" in stream
    assert seconds < 5
    last = max(int(line.split(":")[1]) for line in stream.splitlines()
               if line.startswith("id:"))
    code, rest, seconds = read_stream(stack, team, team.campaign_id, params={"after": str(last)})
    assert (code, rest.strip()) == (200, "retry: 2000")  # nothing after the last: it ends
    assert seconds < 5
    for params, headers, loc, words in (
            ({"after": "-1"}, {}, ["query", "after"], "greater than or equal to 0"),
            ({"after": str(2**63)}, {}, ["query", "after"], "less than or equal to"),
            ({"after": "x"}, {}, ["query", "after"], "valid integer"),
            ({}, {"Last-Event-ID": "x"}, ["header", "Last-Event-ID"], "valid integer"),
            ({}, {"Last-Event-ID": "-5"}, ["header", "Last-Event-ID"], "greater than or equal"),
    ):
        with httpx.Client(base_url=f"{stack.api}/api/v1", timeout=10.0) as client:
            response = client.get(f"/campaigns/{team.campaign_id}/events", params=params,
                                  headers={"X-API-Key": team.key, **headers})
        assert response.status_code == 422, (params, headers, response.text)
        assert words in refusal(response, loc)
    code, text_, _ = read_stream(stack, team, "0" * 32)
    assert code == 404
    assert "no campaign" in text_


def one_line_error(done: Any, code: int, words: str) -> None:
    """Exit ``code``, no traceback, and one stderr line holding ``words``."""
    assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    assert [line for line in done.stderr.splitlines() if words in line], done.stderr


def test_cli_submit_bad_specs(stack: Stack, team: Team, tmp_path: Path) -> None:
    """``tuneforge submit`` says what is wrong with a file, and shows the API's refusal."""
    files = {
        "not-json.json": b"shape: 4096x4096x4096\n",
        "zero.json": json.dumps({"shape": {**SHAPE, "m": 0}, "budget": {"iterations": 0}}
                                ).encode(),
        "nan.json": body({"shape": SHAPE}, tolerance="NaN"),
        "array.json": b"[1, 2, 3]",
        "huge.json": huge_body(),
        "latin1.json": '{"shape": "é"}'.encode("latin-1"),
    }
    for name, content in files.items():
        (tmp_path / name).write_bytes(content)
    before = team_rows(stack, team)
    for args, code, words in (
            ([str(tmp_path / "missing.json")], 2, "missing.json: [Errno 2] No such file"),
            ([str(tmp_path / "not-json.json")], 2, "not-json.json: Expecting value"),
            ([str(tmp_path / "latin1.json")], 2, "latin1.json: 'utf-8' codec can't decode"),
            ([str(tmp_path / "zero.json")], 2,
             "error: the server refused the request: shape: Value error, shape.m must be in "
             "[1, 65536], got 0; budget.iterations: Input should be greater than or equal to 1"),
            ([str(tmp_path / "nan.json")], 2,
             "the server refused the request: tolerance: Input should be a finite number"),
            ([str(tmp_path / "array.json")], 2,
             "the server refused the request: body: the body must be a JSON object"),
            ([str(tmp_path / "huge.json")], 2, "the server refused the request (HTTP 413): the "
             f"request body is larger than {LIMIT} bytes (TUNEFORGE_MAX_BODY_BYTES)"),
    ):
        one_line_error(stack.tuneforge("submit", *args, key=team.key), code, words)
    assert team_rows(stack, team) == before


def test_cli_export_and_watch_bad_ids(stack: Stack, team: Team) -> None:
    for args, code, words in (
            (["export", "f" * 32], 4, f"no campaign '{'f' * 32}'"),
            (["export", "zz"], 4, "no campaign 'zz' in http://127.0.0.1"),
            (["export", team.campaign_id, "--format", "pdf"], 2,
             "--format must be one of cu, json, t4, kt, not 'pdf'"),
            (["report", "0" * 32], 4, "no campaign '00000000000000000000000000000000'"),
            (["watch", "nope"], 4, "no campaign 'nope'"),
    ):
        one_line_error(stack.tuneforge(*args, key=team.key), code, words)
