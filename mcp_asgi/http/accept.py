"""Accept negotiation: whether the reply is a JSON body or an SSE stream."""

from __future__ import annotations

from typing import Literal

from starlette.types import Scope

from mcp_asgi.protocol.headers import header

ResponseMode = Literal["auto", "json", "sse"]


def negotiate(asgi_scope: Scope, preferred: ResponseMode) -> ResponseMode | None:
    """The reply mode the client's Accept admits; None when it admits neither (406).

    No Accept header, or one admitting only JSON, is answered with JSON; one admitting only
    SSE with SSE; one admitting both with the configured mode.
    """
    value = header(asgi_scope, b"accept")
    if value is None:
        return "json"
    json_ok = sse_ok = False
    for part in value.split(","):
        media, _, params = part.partition(";")
        media = media.strip().lower()
        if _q_is_zero(params):
            continue
        if media in ("application/json", "application/*", "*/*"):
            json_ok = True
        if media in ("text/event-stream", "text/*", "*/*"):
            sse_ok = True
    if json_ok and sse_ok:
        return preferred
    if json_ok:
        return "json"
    if sse_ok:
        return "sse"
    return None


def _q_is_zero(params: str) -> bool:
    for param in params.split(";"):
        key, _, value = param.partition("=")
        if key.strip().lower() == "q":
            try:
                return float(value) == 0
            except ValueError:
                return False
    return False
