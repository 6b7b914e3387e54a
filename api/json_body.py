"""Request bodies as the API documents them: UTF-8 JSON, each key of an object once.

Starlette reads a JSON body with ``json.loads(bytes)``, which also takes UTF-16 and UTF-32 (it
guesses the encoding from the first bytes) and keeps the last of two equal keys. Routes of the
API use :class:`StrictJsonRoute`, whose requests read the body strictly: bytes that are not
UTF-8 are a 400 that says so (the ``UnicodeDecodeError``), a key given twice a 422 naming it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute


class DuplicateKeyError(json.JSONDecodeError):
    """A key given twice in one JSON object (FastAPI answers a ``JSONDecodeError`` with a 422
    ``json_invalid`` naming its message and position)."""


def loads(body: bytes) -> Any:
    """The JSON value of a UTF-8 body whose objects name each key once."""
    text = body.decode("utf-8")  # UnicodeDecodeError: not UTF-8 (UTF-16 and UTF-32 included)

    def one_each(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                quoted = json.dumps(key)
                first = text.find(quoted)
                at = text.find(quoted, first + 1) if first >= 0 else -1
                raise DuplicateKeyError(
                    f"key {quoted[:66]} is given twice in one object: send each field once",
                    text, max(at, 0))
            out[key] = value
        return out

    def bounded_int(token: str) -> int:
        if len(token) > MAX_INT_DIGITS:
            raise NumberTooLongError(number_problem(text, token), text,
                                     number_position(text, token))
        return int(token)

    return json.loads(text, object_pairs_hook=one_each, parse_int=bounded_int)


#: Most characters of an integer in a body (no field takes a larger one).
MAX_INT_DIGITS = 64


class NumberTooLongError(json.JSONDecodeError):
    """An integer of more than :data:`MAX_INT_DIGITS` characters (a 422 ``json_invalid`` naming
    the nearest field and the position)."""


def number_position(text: str, token: str) -> int:
    """Where in ``text`` the number ``token`` starts (its first occurrence as a whole number)."""
    match = re.search(rf"(?<![0-9.eE+\-]){re.escape(token)}(?![0-9])", text)
    return match.start() if match else 0


def number_problem(text: str, token: str) -> str:
    """What is wrong with the integer ``token``: its size, its line and column, the field."""
    pos = number_position(text, token)
    line = text.count("\n", 0, pos) + 1
    column = pos - (text.rfind("\n", 0, pos) + 1) + 1
    keys = re.findall(r'"((?:[^"\\]|\\.){1,64})"\s*:', text[max(0, pos - 4096):pos])
    field = f" (field {keys[-1]!r})" if keys else ""
    return (f"an integer of {len(token)} characters at line {line} column {column}{field}: "
            f"at most {MAX_INT_DIGITS}")


class StrictJsonRequest(Request):
    """A request whose :meth:`json` is :func:`loads`."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = loads(await self.body())
        return self._json


class StrictJsonRoute(APIRoute):
    """An API route whose JSON body is read by :class:`StrictJsonRequest`."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def strict(request: Request) -> Response:
            return await handler(StrictJsonRequest(request.scope, request.receive))

        return strict
