"""The switch that forces the plain-anyio path: every fast path of this package then steps
aside, and requests run on anyio's public API alone (as they do on trio).

Read once, at import, from `MCP_ASGI_PLAIN_ANYIO` (`1` turns it on); tests flip it with
`use_plain_anyio`. It is for finding out whether a fault lies in a fast path, and for the
test run that keeps the plain path working on asyncio.
"""

from __future__ import annotations

import os

ENV = "MCP_ASGI_PLAIN_ANYIO"

_plain = os.environ.get(ENV, "").strip().lower() in {"1", "true", "yes", "on"}


def plain_anyio() -> bool:
    """Whether the plain-anyio path is forced."""
    return _plain


def use_plain_anyio(on: bool) -> None:
    """Force the plain-anyio path (True) or allow the fast paths again (False). Takes
    effect for what starts afterwards: set it between requests, not during one."""
    global _plain
    _plain = on
