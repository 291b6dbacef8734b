"""`InFlight`: the requests this middleware is serving, in either era.

It opens each request's scope and the `Context` its handler gets (built by the endpoint's
`RequestRuntime`), keeps it while it runs, and cancels every one of them at shutdown. Both
endpoints (2026-07-28 and 2025-era) open their requests here; per-request state lives in
the scopes, never on the middleware.
"""

from __future__ import annotations

import anyio

from mcp_asgi.http.exchange import Exchange
from mcp_asgi.http.reply import ReplyWriter
from mcp_asgi.input.asking import Asking
from mcp_asgi.lifecycle.cancel import CancelReason
from mcp_asgi.lifecycle.scope import RequestScope
from mcp_asgi.protocol.request import McpRequest
from mcp_asgi.runtime import RequestRuntime
from mcp_asgi.server.context import Context
from mcp_asgi.telemetry import Telemetry


class InFlight:
    """Opens, tracks and, at shutdown, cancels the request scopes of one middleware."""

    def __init__(self, runtime: RequestRuntime, telemetry: Telemetry) -> None:
        self._runtime = runtime
        self._telemetry = telemetry
        self._scopes: set[RequestScope] = set()
        self.draining = False
        """Whether the server is shutting down (`cancel_all` was called): new requests are
        refused from then on. (Read it; only `cancel_all` sets it.)"""

    def open(
        self,
        exchange: Exchange,
        request: McpRequest,
        writer: ReplyWriter,
        inputs: Asking | None = None,
        cancel_on_disconnect: bool = True,
    ) -> tuple[RequestScope, Context]:
        """The scope and context of one request, tracked as in flight from here until
        `close(scope)` (call it in a `finally`). The exchange's ASGI scope and body back the
        context's read-only `Request`; its arrival starts the deadline."""
        runtime, asgi_scope = self._runtime, exchange.asgi_scope
        request_scope = runtime.scope(  # positional: see `RequestRuntime.context`
            request,
            writer,
            self._telemetry.begin(asgi_scope, request),  # observer
            exchange.arrived,  # started
            exchange.clock,
            exchange.task,
            cancel_on_disconnect,
        )
        ctx = runtime.context(request_scope, inputs, asgi_scope, exchange.body)
        self._scopes.add(request_scope)
        return request_scope, ctx

    def close(self, request_scope: RequestScope) -> None:
        """A request `open` gave is over: no longer in flight (idempotent)."""
        self._scopes.discard(request_scope)

    def __len__(self) -> int:
        """How many requests are in flight."""
        return len(self._scopes)

    def cancel_all(self) -> list[RequestScope]:
        """Start draining and cancel every request in flight (reason `server_shutdown`);
        returns them."""
        self.draining = True
        scopes = list(self._scopes)
        for request_scope in scopes:
            request_scope.cancel(CancelReason.SERVER_SHUTDOWN)
        return scopes

    async def wait_exited(self, scopes: list[RequestScope]) -> None:
        """Wait, bounded by the cancel grace period (plus a second to write the replies),
        for the handlers of `scopes` to exit."""
        with anyio.move_on_after(self._runtime.cancel_grace + 1.0):
            for request_scope in scopes:
                await request_scope.wait_exited()
