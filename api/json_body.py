"""Request bodies as the API documents them: UTF-8 JSON, each key of an object once.

Starlette reads a JSON body with ``json.loads(bytes)``, which also takes UTF-16 and UTF-32 (it
guesses the encoding from the first bytes) and keeps the last of two equal keys. Routes of the
API use :class:`StrictJsonRoute`, whose requests read the body strictly: bytes that are not
UTF-8 are a 400 that says so (the ``UnicodeDecodeError``), a key given twice a 422 naming it.
"""

from __future__ import annotations

import json
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

    return json.loads(text, object_pairs_hook=one_each)


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
