"""The REST API's client for the CLI: the httpx client of ``--url``/``--key`` and the one-line
errors of a refused or failed request (``submit``, ``watch`` and the ``--url`` reading of
``campaigns``, ``report`` and ``export``)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from cli.common import fail
from core.settings import get_settings

UrlOpt = Annotated[str | None, typer.Option("--url", help="API URL (TUNEFORGE_API_URL)")]
KeyOpt = Annotated[str | None, typer.Option("--key", help="API key (TUNEFORGE_API_KEY)")]


def api_client(url: str | None, key: str | None) -> Any:
    """An httpx client of the API at ``url`` (TUNEFORGE_API_URL) with the key of ``key``
    (TUNEFORGE_API_KEY); exit 2 without a key."""
    import httpx

    settings = get_settings()
    key = key or settings.api_key
    if not key:
        fail("no API key: set TUNEFORGE_API_KEY or pass --key")
    base = (url or settings.api_url).rstrip("/") + "/api/v1"
    return httpx.Client(base_url=base, headers={"X-API-Key": key}, timeout=30.0)


def check_response(response: Any, names: dict[str, str] | None = None) -> Any:
    """The JSON body, or an error that says what to do. ``names``: the command's option for a
    body field (``{"shapes": "--shape"}``), named in a 422 in place of the field's path."""
    code = response.status_code
    if code < 400:
        return response.json()
    try:
        detail = response.json().get("detail")
    except ValueError:
        detail = response.text[:300]
    if code == 401:
        fail(f"{detail} (set TUNEFORGE_API_KEY or pass --key)", code=3)
    if code == 404:
        fail(f"{detail} (is it your team's campaign? `tuneforge` lists none of the others)",
             code=4)
    if code == 422 and isinstance(detail, list):
        def where(loc: list[Any]) -> str:
            if len(loc) > 1 and names and str(loc[1]) in names:
                return names[str(loc[1])]
            return ".".join(str(p) for p in loc[1:]) or "body"

        problems = [f"{where(d.get('loc', []))}: {d.get('msg')}" for d in detail]
        fail("the server refused the request: " + "; ".join(problems))
    if code in (400, 413, 422):  # the request itself is bad
        fail(f"the server refused the request (HTTP {code}): {detail}")
    fail(f"HTTP {code}: {detail}", code=1)


def call(client: Any, method: str, path: str, names: dict[str, str] | None = None,
         **kwargs: Any) -> Any:
    """One request; its JSON body, or exit with an error that says what to do (``names`` as
    for :func:`check_response`)."""
    import httpx

    try:
        return check_response(client.request(method, path, **kwargs), names)
    except httpx.TransportError as exc:
        fail(f"cannot reach the API at {client.base_url} ({exc.__class__.__name__}): is "
             "`tuneforge serve` running? set TUNEFORGE_API_URL or pass --url", code=1)


def find_families_on(client: Any) -> None:
    """Let ``kernels.get_family`` find the team's own families on the service by content key
    (``GET /families/{key}`` gives their spec; built here, where the campaign's figures are
    read: its unit, its points for ``export --format kt``)."""
    from urllib.parse import quote

    import httpx

    from kernels import add_resolver

    base, headers = str(client.base_url).rstrip("/"), dict(client.headers)

    def find(name: str) -> Any:
        if "@" not in name:
            return None
        from kernels.userspec import build_family

        try:
            found = httpx.get(f"{base}/families/{quote(name, safe='@')}", headers=headers,
                              timeout=30.0)
        except httpx.TransportError:
            return None
        spec = found.json().get("spec") if found.status_code == 200 else None
        return build_family(spec) if isinstance(spec, dict) else None

    add_resolver(find)
