"""Accept negotiation: whether the reply is a JSON body or an SSE stream."""

from __future__ import annotations

from typing import Final, Literal

from mcp_asgi.protocol.headers import ACCEPT, RequestHeaders

ResponseMode = Literal["auto", "json", "sse"]


def negotiate(headers: RequestHeaders, preferred: ResponseMode) -> ResponseMode | None:
    """The reply mode the client's Accept admits; None when it admits neither (406).

    No Accept header, or one admitting only JSON, is answered with JSON; one admitting only
    SSE with SSE; one admitting both with the configured mode.
    """
    value = headers.first[ACCEPT]
    if value is None:
        return "json"
    admitted = _admitted.get(value)
    if admitted is None:  # parsed once per distinct header value (clients send one or two)
        admitted = _parse(value.decode("latin-1"))
        if len(_admitted) >= _REMEMBERED:  # a client varying it on purpose: start over
            _admitted.clear()
        _admitted[value] = admitted
    json_ok, sse_ok = admitted
    if json_ok and sse_ok:
        return preferred
    if json_ok:
        return "json"
    if sse_ok:
        return "sse"
    return None


_REMEMBERED: Final = 256
_admitted: dict[bytes, tuple[bool, bool]] = {}
"""Accept header value -> (admits JSON, admits SSE)."""


def _parse(value: str) -> tuple[bool, bool]:
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
    return json_ok, sse_ok


def _q_is_zero(params: str) -> bool:
    for param in params.split(";"):
        key, _, value = param.partition("=")
        if key.strip().lower() == "q":
            try:
                return float(value) == 0
            except ValueError:
                return False
    return False
