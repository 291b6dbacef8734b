"""Origin validation against DNS rebinding, and Accept negotiation.

Allowed origins: none given (non-browser clients), any in `allowed_origins` ('*' allows
all), and the request's own host — unless the request reached a loopback socket under a
name that is not a loopback name, which is what a DNS-rebinding attack looks like.
"""

from __future__ import annotations

import ipaddress
from typing import Final
from urllib.parse import urlsplit

from ._asgi import Scope, header
from .settings import ResponseMode

_LOOPBACK_NAMES: Final = frozenset({"localhost", "localhost.localdomain"})


def origin_allowed(scope: Scope, allowed: frozenset[str]) -> bool:
    """Whether the request's Origin (if any) may use the endpoint."""
    origin = header(scope, b"origin")
    if origin is None or "*" in allowed or origin.rstrip("/").lower() in allowed:
        return True
    host = header(scope, b"host")
    try:
        origin_host = urlsplit(origin).netloc.lower()
    except ValueError:
        return False
    if not host or origin_host != host.lower():
        return False
    server = scope.get("server")
    if server and _is_loopback(str(server[0])):
        return _is_loopback(urlsplit(origin).hostname or "")
    return True


def _is_loopback(host: str) -> bool:
    name = host.strip("[]").lower()
    if name in _LOOPBACK_NAMES or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def negotiate(scope: Scope, preferred: ResponseMode) -> ResponseMode | None:
    """The reply mode the client's Accept admits; None when it admits neither (406).

    No Accept header, or one admitting only JSON, is answered with JSON; one admitting only
    SSE with SSE; one admitting both with the configured mode.
    """
    value = header(scope, b"accept")
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
