"""Reading a request's headers (`RequestHeaders`, once a request), and decoding MCP header
values (plain or `=?base64?...?=`)."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Sequence
from typing import Final

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


ORIGIN: Final = 0
HOST: Final = 1
ACCEPT: Final = 2
CONTENT_TYPE: Final = 3
CONTENT_LENGTH: Final = 4
PROTOCOL_VERSION: Final = 5
MCP_METHOD: Final = 6
MCP_NAME: Final = 7
SESSION_ID: Final = 8
AUTHORIZATION: Final = 9
LAST_EVENT_ID: Final = 10
_SLOTS: Final = {
    b"origin": ORIGIN,
    b"host": HOST,
    b"accept": ACCEPT,
    b"content-type": CONTENT_TYPE,
    b"content-length": CONTENT_LENGTH,
    b"mcp-protocol-version": PROTOCOL_VERSION,
    b"mcp-method": MCP_METHOD,
    b"mcp-name": MCP_NAME,
    b"mcp-session-id": SESSION_ID,
    b"authorization": AUTHORIZATION,
    b"last-event-id": LAST_EVENT_ID,
}
"""The request headers an endpoint reads, by lower-case name: their slot."""
_COUNT: Final = len(_SLOTS)


class RequestHeaders:
    """The headers an MCP request is read by, found in one pass over the ASGI scope's
    list: `first`, the first value of each by slot (`ORIGIN`, `ACCEPT`, ...; None when
    absent), and `repeated`, a bit (1 << slot) for each sent more than once. `raw` is the
    whole list (the `Mcp-Param-*` headers a tool declares are looked up there).

    Names are matched as ASGI servers send them, in lower case; a server that sends
    another case is matched too."""

    __slots__ = ("first", "raw", "repeated")

    def __init__(self, raw: Sequence[tuple[bytes, bytes]]) -> None:
        # one pass, one dict lookup a header: the endpoint reads up to seven of them for
        # every request, and a scan a header costs more than this whole pass
        first: list[bytes | None] = [None] * _COUNT
        repeated = 0
        for key, value in raw:
            slot = _SLOTS.get(key)
            if slot is None:
                if key.islower():
                    continue
                slot = _SLOTS.get(key.lower())
                if slot is None:
                    continue
            if first[slot] is None:
                first[slot] = value
            else:
                repeated |= 1 << slot
        self.first = first
        self.repeated = repeated
        self.raw = raw

    @classmethod
    def of(cls, asgi_scope: Scope) -> RequestHeaders:
        """The headers of an ASGI HTTP scope."""
        return cls(asgi_scope["headers"])

    def text(self, slot: int) -> str | None:
        """A header's first value, decoded as latin-1; None when it was not sent."""
        value = self.first[slot]
        return None if value is None else value.decode("latin-1")
