"""The Starlette `Request` a handler may receive: the HTTP request its MCP request came in,
read-only with respect to the connection.

The request's watcher (lifecycle/) is the only reader of the ASGI `receive()` once the
body is read: it is how a disconnect is noticed. So the `Request` given to handlers never
holds the real `receive`. Its own hands over the body the middleware already read, once,
and then never returns (it never yields `http.disconnect`):

- `await request.body()`, `.json()`, `.stream()` give the body as it was read;
- `await request.is_disconnected()` is always False: Starlette's check calls `receive` in
  an already-cancelled anyio cancel scope, which ours never completes, so it takes nothing
  from the watcher (a disconnect cancels the handler instead; read `ctx.cancelled`);
- its `send` is Starlette's default, which refuses to send: a handler cannot answer the
  HTTP request itself.

Its ASGI scope (`request.scope`) is a shallow copy of the HTTP request's: headers, client,
url, `app`, `state`, `scope["user"]` and `scope["auth"]` (set by an authentication
middleware) are the HTTP request's, and keys a handler adds are its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio
import anyio.lowlevel
from starlette.requests import Request
from starlette.types import Message, Receive


def read_only_request(asgi_scope: Mapping[str, Any], body: bytes) -> Request:
    """A `Request` over a copy of `asgi_scope` whose `receive` replays `body`."""
    return Request(dict(asgi_scope), replay_body(body))


def replay_body(body: bytes) -> Receive:
    """A `receive` that returns `body` as one `http.request` message, then never returns.

    It checkpoints before handing the body over, so a call made in an already-cancelled
    scope (Starlette's `is_disconnected`) raises there and leaves the body for a later
    read instead of consuming it.
    """
    delivered = False

    async def receive() -> Message:
        nonlocal delivered
        await anyio.lowlevel.checkpoint()
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await anyio.sleep_forever()
        raise AssertionError("unreachable")  # pragma: no cover

    return receive
