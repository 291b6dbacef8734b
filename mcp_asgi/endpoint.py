"""`ModernEndpoint`: serves a 2026-07-28 POST, once the middleware has read it.

    validate ──► listen checks ──► requestState ──► scope + Context ──► dispatch ──► reply

A notification is accepted (202). Every rejection is a `ProtocolError`, answered by the
middleware with its HTTP status and a JSON-RPC error.
"""

from __future__ import annotations

from mcp_asgi.http.exchange import Exchange
from mcp_asgi.http.reply import ReplyWriter, send_empty
from mcp_asgi.inflight import InFlight
from mcp_asgi.input.rounds import InputRounds
from mcp_asgi.limits import ClientLimits
from mcp_asgi.protocol.message import IncomingMessage
from mcp_asgi.protocol.validate import validate
from mcp_asgi.server.listen import LISTEN, check_listen
from mcp_asgi.server.mcp_server import McpServer, ResultOptions
from mcp_asgi.tasks import TaskMethods


class ModernEndpoint:
    """The 2026-07-28 side of one MCP endpoint: stateless, one request per POST."""

    def __init__(
        self,
        server: McpServer,
        *,
        inflight: InFlight,
        inputs: InputRounds,
        options: ResultOptions,
        limits: ClientLimits,
        tasks: TaskMethods | None = None,
    ) -> None:
        self._server = server
        self._tasks = tasks
        self._limits = limits
        self._inflight = inflight
        self._inputs = inputs
        self._options = options

    async def serve_post(self, exchange: Exchange, message: IncomingMessage) -> None:
        """Serve one POSTed message (the middleware has checked method, Origin, body and
        Accept, and read `message` from the exchange's body)."""
        if message.is_notification:
            await send_empty(exchange.send, 202)
            return
        server, asgi_scope = self._server, exchange.asgi_scope
        request = validate(exchange.headers, message, server)
        listen = request.method == LISTEN
        if listen:
            check_listen(exchange.headers, request)  # needs SSE (406) and a valid filter (400)
        inputs = self._inputs.begin(asgi_scope, request)  # verifies requestState (400)
        held = self._limits.hold("listen_streams", self._limits.key(asgi_scope)) if listen else None
        writer = ReplyWriter(exchange.send, "sse" if listen else exchange.mode)
        options = self._options
        tasks = self._tasks
        routed = None if tasks is None else tasks.route(request, exchange, inputs)
        dispatch = routed or server.dispatch  # the Tasks extension's methods, or the server's
        try:
            inflight = self._inflight
            request_scope, ctx = inflight.open(exchange, request, writer, inputs)
            try:
                await request_scope.run(exchange.receive, dispatch, request, ctx, options)
                if not writer.end_at_once():  # (most replies are complete: no coroutine)
                    await writer.end()
            finally:
                inflight.close(request_scope)
        finally:
            if held is not None:
                held.release()
