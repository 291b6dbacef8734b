"""`Exchange`: one HTTP POST to the MCP endpoint, once the middleware has read it.

The ASGI triple, the body as read, when the request arrived (and on which clock) and the
reply's mode travel together from the middleware to the era's endpoint and on to the
request's runtime::

    McpMiddleware ──► Exchange(asgi_scope, headers, receive, send, body, arrived, mode, clock, task)
                  ──► ModernEndpoint.serve_post | LegacyEndpoint.serve_post ──► InFlight.open
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Final

from starlette.types import Receive, Scope, Send

from mcp_asgi._loop import Clock
from mcp_asgi.http.accept import ResponseMode
from mcp_asgi.protocol.headers import RequestHeaders


# Not frozen, as `McpRequest` (one is made per request).
@dataclass(slots=True)
class Exchange:
    """One POST's ASGI scope, the `headers` it is read by, `receive` and `send`; its
    `body` as read (for the handler's
    `Request`); `arrived`, when its headers came on the loop's clock (the request's
    deadline counts from it); `mode`, how the reply is written (Accept); and `clock`, the
    event loop's clock `arrived` was read on (the request's scope reads it too); `task`,
    the request's own task where anyio's cancellation is asyncio's (`native_task()`: the
    request is run in it), else None.

    Read-only: every field is `Final`, which the type checker enforces."""

    asgi_scope: Final[Scope]
    headers: Final[RequestHeaders]
    receive: Final[Receive]
    send: Final[Send]
    body: Final[bytes]
    arrived: Final[float]
    mode: Final[ResponseMode]
    clock: Final[Clock]
    task: Final[asyncio.Task[object] | None]
