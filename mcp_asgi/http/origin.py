"""Origin validation against DNS rebinding, and Accept negotiation.

Allowed origins: none given (non-browser clients), any in `allowed_origins` ('*' allows
all), and the request's own host — unless the request reached a loopback socket under a
name that is not a loopback name, which is what a DNS-rebinding attack looks like.
"""

from __future__ import annotations

import ipaddress
from typing import Final
from urllib.parse import urlsplit

from starlette.types import Scope

from mcp_asgi.protocol.headers import HOST, ORIGIN, RequestHeaders

_LOOPBACK_NAMES: Final = frozenset({"localhost", "localhost.localdomain"})
_DEFAULT_PORTS: Final = {"http": 80, "https": 443, "ws": 80, "wss": 443}


def normalize_origin(origin: str) -> str:
    """`scheme://host[:port]` in lower case, without a default port or a trailing slash.

    '*' stays '*'; a value that is not an origin is returned lower-cased (it never
    matches a real Origin header, which is normalised the same way).
    """
    origin = origin.strip()
    if origin == "*":
        return origin
    parts = _split(origin)
    if parts is None:
        return origin.rstrip("/").lower()
    scheme, host, port = parts
    return f"{scheme}://{_netloc(host, port, _DEFAULT_PORTS.get(scheme))}"


def origin_allowed(asgi_scope: Scope, headers: RequestHeaders, allowed: frozenset[str]) -> bool:
    """Whether the request's Origin (if any) may use the endpoint.

    `allowed` holds origins already passed through `normalize_origin`.
    """
    raw = headers.first[ORIGIN]
    if raw is None:  # not a browser's request (most)
        return True
    origin = raw.decode("latin-1")
    if "*" in allowed or normalize_origin(origin) in allowed:
        return True
    parts = _split(origin.strip())
    host_header = headers.text(HOST)
    if parts is None or not host_header:
        return False
    scheme, origin_host, origin_port = parts
    host = _split(f"{scheme}://{host_header.strip()}")
    if host is None:
        return False
    default = _DEFAULT_PORTS.get(scheme)
    if (host[1], host[2] or default) != (origin_host, origin_port or default):
        return False
    server = asgi_scope.get("server")
    if server and _is_loopback(str(server[0])):
        return _is_loopback(origin_host)
    return True


def _split(origin: str) -> tuple[str, str, int | None] | None:
    """(scheme, host, port) of an origin; None when it is not one (e.g. 'null')."""
    try:
        parts = urlsplit(origin)
        port = parts.port
    except ValueError:
        return None
    host = parts.hostname
    if not parts.scheme or not host or parts.path not in ("", "/") or parts.username:
        return None
    return parts.scheme.lower(), host.lower(), port


def _netloc(host: str, port: int | None, default: int | None) -> str:
    name = f"[{host}]" if ":" in host else host
    return name if port is None or port == default else f"{name}:{port}"


def _is_loopback(host: str) -> bool:
    name = host.strip("[]").lower()
    if name in _LOOPBACK_NAMES or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False
