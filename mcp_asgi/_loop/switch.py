"""The switch that forces the plain-anyio path: every fast path of this package then steps
aside, and requests run on anyio's public API alone (as they do on trio).

Read once, at import, from `MCP_ASGI_PLAIN_ANYIO` (`1` turns it on); tests flip it with
`use_plain_anyio`. It is for finding out whether a fault lies in a fast path, and for the
test run that keeps the plain path working on asyncio.
"""

from __future__ import annotations

import os

ENV = "MCP_ASGI_PLAIN_ANYIO"

_ON, _OFF = {"1", "true", "yes", "on"}, {"", "0", "false", "no", "off"}


def _from_env(value: str) -> bool:
    """The switch as `MCP_ASGI_PLAIN_ANYIO` sets it; any other value is refused, never
    read as off."""
    word = value.strip().lower()
    if word not in _ON | _OFF:
        raise ValueError(f"{ENV}={value!r}: use 1 (the plain-anyio path) or 0 (the default)")
    return word in _ON


_plain = _from_env(os.environ.get(ENV, ""))


def plain_anyio() -> bool:
    """Whether the plain-anyio path is forced."""
    return _plain


def use_plain_anyio(on: bool) -> None:
    """Force the plain-anyio path (True) or allow the fast paths again (False). Takes
    effect for what starts afterwards: set it between requests, not during one."""
    global _plain
    _plain = on
