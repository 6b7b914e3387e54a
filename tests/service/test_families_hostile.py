"""Hostile family specs sent to the running service (real API, Postgres, Redis, Celery, nvcc):
each is a 4xx naming the field, costs the API under a second of CPU (the nvcc check runs in a
child process under its own limit), stores nothing, and leaves the team's listing answering
200."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from core.db import session_scope
from core.models import Family
from kernels.userspec import load_spec_dir
from service.service_stack import Stack, TeamKey

DATA = Path(__file__).resolve().parents[1] / "data" / "families"
ONE_FILE = load_spec_dir(DATA / "scaled_transpose")
KERNEL = "transpose.cu"
TICKS = os.sysconf("SC_CLK_TCK")


def spec(**changes: Any) -> dict[str, Any]:
    return json.loads(json.dumps({**ONE_FILE, **changes}))


def api_cpu_s(stack: Stack) -> float:
    """CPU seconds the API process itself spent so far (its children not counted)."""
    fields = Path(f"/proc/{stack.procs['api'].pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def stored(stack: Stack) -> int:
    with session_scope(stack.db_url) as s:
        return int(s.scalar(select(func.count()).select_from(Family)) or 0)


def kernel_with(text: str) -> dict[str, Any]:
    return spec(files={KERNEL: text})


def _bad_buffer(count: str) -> dict[str, Any]:
    body = spec()
    body["signature"]["buffers"][0]["count"] = count
    body["edge_shapes"] = [{"R": 7, "C": 33}]
    return body


def _declared_float64() -> dict[str, Any]:
    """The reference writes float*, the spec leaves outputs_dtype at its default."""
    body = spec()
    del body["reference"]["outputs_dtype"]
    return body


JOIN_BOMB = "{{ range(70000)|join('\\n#define QQQQQQQQQQQQ 1') }}\n"
# (case, raw JSON body, loc's field, words of the message)
RAW: list[tuple[str, str, str, str]] = [
    ("surrogate_in_the_kernel_file",
     json.dumps(spec()).replace('in[(size_t)y * C + x];', 'in[(size_t)y * C + x]; // \\ud800', 1),
     f"files.{KERNEL}", "lone surrogate"),
    ("surrogate_in_the_description",
     json.dumps(spec(description="desc \\udfff")).replace("\\\\udfff", "\\udfff"),
     "description", "lone surrogate"),
    ("surrogate_in_a_buffer_name",
     json.dumps(spec()).replace('"name": "src"', '"name": "s\\udc00"', 1),
     "signature.buffers[0].name", "lone surrogate"),
]


def _jinja_bomb() -> dict[str, Any]:
    body = spec()
    body["kernel"]["template"] = "jinja"
    text = ONE_FILE["files"][KERNEL].replace("TILE", "{{ TILE }}").replace("PAD", "{{ PAD }}")
    body["files"] = {KERNEL: JOIN_BOMB + text}
    return body


def _digits(n: int) -> str:
    return json.dumps(spec()).replace('"max": 65536', '"max": ' + "7" * n, 1)


PARSED: list[tuple[str, dict[str, Any], str, str]] = [
    ("render_bomb", _jinja_bomb(), "kernel.source", "grows past 65536"),
    ("count_negative_at_small_shapes", _bad_buffer("R * C - 5"),
     "signature.buffers[0].count", "is -4 at the dimensions' bounds R=1, C=1"),
    ("count_absurd_at_the_default", _bad_buffer("R * C * 1000000000"),
     "signature.buffers[0].count", "GiB at default_dims 8192x8192"),
    ("reference_writes_float_declared_float64", _declared_float64(),
     "reference.outputs_dtype", "declare \"outputs_dtype\": \"float32\""),
    ("kernel_does_not_compile", kernel_with(ONE_FILE["files"][KERNEL].replace(
        "2.0f * in[", "2.0f * missing_scale * in[", 1)), "kernel.source",
     'identifier "missing_scale" is undefined'),
    ("buffer_named_in", json.loads(json.dumps(spec()).replace('"name": "src"', '"name": "in"')),
     "signature.buffers[0].name", "keyword of the spec's Python-like expressions"),
]


@pytest.fixture
def team(make_team: Any) -> TeamKey:
    return make_team("hostile")


def _check_refused(stack: Stack, team: TeamKey, send: Any, field: str, words: str,
                   cpu_limit: float = 1.0) -> dict[str, Any]:
    before = stored(stack)
    cpu = api_cpu_s(stack)
    with stack.client(team.key) as client:
        refused = send(client)
        spent = api_cpu_s(stack) - cpu
        assert refused.status_code == 422, refused.text
        detail = refused.json()["detail"][0]
        assert detail["loc"] == ["body", field], detail
        assert detail["msg"].startswith(f"{field}: "), detail
        assert words in detail["msg"], detail
        listing = client.get("/families")
        assert listing.status_code == 200
        assert [f for f in listing.json() if f["origin"] == "team"] == []
    assert stored(stack) == before
    assert spent < cpu_limit, f"{spent:.2f} CPU s of the API"
    return dict(detail)


@pytest.mark.parametrize(("case", "body", "field", "words"), RAW, ids=[c[0] for c in RAW])
def test_text_that_is_not_utf8_is_a_422_naming_the_field(
        stack: Stack, team: TeamKey, case: str, body: str, field: str, words: str) -> None:
    assert "\\ud" in body  # sent as a JSON escape: the bytes are ASCII, the text is not UTF-8
    _check_refused(stack, team, lambda c: c.post(
        "/families", content=body.encode(), headers={"Content-Type": "application/json"}),
        field, words)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
@pytest.mark.parametrize(("case", "body", "field", "words"), PARSED,
                         ids=[c[0] for c in PARSED])
def test_each_hostile_spec_is_a_422_in_under_a_second_of_api_cpu(
        stack: Stack, team: TeamKey, case: str, body: dict[str, Any], field: str,
        words: str) -> None:
    start = time.monotonic()
    _check_refused(stack, team, lambda c: c.post("/families", json=body), field, words)
    if case != "kernel_does_not_compile":  # refused before nvcc runs
        assert time.monotonic() - start < 1.0


def test_a_five_thousand_digit_number_names_its_place_and_gives_no_python_advice(
        stack: Stack, team: TeamKey) -> None:
    body = _digits(5000)
    with stack.client(team.key) as client:
        refused = client.post("/families", content=body.encode(),
                              headers={"Content-Type": "application/json"})
    assert refused.status_code == 422, refused.text
    msg = refused.json()["detail"][0]["msg"]
    assert "an integer of 5000 characters at line 1 column" in msg
    assert "(field 'max')" in msg
    assert "set_int_max_str_digits" not in refused.text


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
def test_the_one_file_family_registers_over_the_api(stack: Stack, team: TeamKey) -> None:
    with stack.client(team.key) as client:
        done = client.post("/families", json=spec())
        assert done.status_code == 201, done.text
        assert client.get("/families/scaled_transpose").status_code == 200
