"""The API's schema documents the errors the app answers before any route runs: every
operation that reads a body may answer 400 (a body that cannot be read), 413 (a body over
TUNEFORGE_MAX_BODY_BYTES) and 422 (a body that does not validate); every operation but the
health check may answer 401. The API fuzz test holds the server to this schema."""

from __future__ import annotations

import pytest

from api.main import create_app

SCHEMA = create_app().openapi()
OPERATIONS = [(f"{method.upper()} {path}", op) for path, item in SCHEMA["paths"].items()
              for method, op in item.items()]


@pytest.mark.parametrize(("label", "operation"), OPERATIONS, ids=[x[0] for x in OPERATIONS])
def test_body_errors_are_documented(label: str, operation: dict) -> None:
    documented = set(operation["responses"])
    if "requestBody" in operation:
        assert {"400", "413", "422"} <= documented, (label, sorted(documented))
    if operation.get("security") or "X-API-Key" in str(operation.get("parameters", "")):
        assert "401" in documented, (label, sorted(documented))


def test_some_operations_read_a_body() -> None:
    """The check above has something to check: the create and probe operations read bodies."""
    with_body = {label for label, op in OPERATIONS if "requestBody" in op}
    assert {"POST /api/v1/campaigns", "POST /api/v1/families",
            "POST /api/v1/library/{family}/probe"} <= with_body, with_body
