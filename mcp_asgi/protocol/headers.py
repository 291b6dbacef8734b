"""Reading request headers from the ASGI scope, and decoding MCP header values (plain or
`=?base64?...?=`)."""

from __future__ import annotations

import base64
import binascii
import re

from starlette.types import Scope

_HEADER_SAFE = re.compile(r"[\x20-\x7e]*")


_B64_SENTINEL = re.compile(r"=\?base64\?(.*)\?=", re.DOTALL)


def decode_header_value(raw: str) -> str | None:
    """Decode an MCP header value (plain or `=?base64?…?=`); None when it is malformed."""
    if not raw.startswith("=?"):  # plain (most values): printable ASCII only
        return raw if raw.isascii() and raw.isprintable() else None
    match = _B64_SENTINEL.fullmatch(raw)
    if match is None:
        return raw if _HEADER_SAFE.fullmatch(raw) else None
    payload = match.group(1)
    try:
        decoded = base64.b64decode(payload, validate=True)
        if base64.b64encode(decoded).decode("ascii") != payload:
            return None  # non-canonical: no conforming client sends it
        return decoded.decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None


def header(asgi_scope: Scope, name: bytes) -> str | None:
    """The first value of a request header (name in lower case), decoded as latin-1."""
    for key, value in asgi_scope["headers"]:
        if key == name:
            decoded: str = value.decode("latin-1")
            return decoded
    return None
