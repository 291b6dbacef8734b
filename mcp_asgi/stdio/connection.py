"""`StdioConnection`: one client on a pipe, in either era, many requests in flight.

    a line ──► parse ──► notification:  notifications/cancelled ──► that request cancelled
                                        (reason client_notification; unknown or finished
                                        ids ignored at DEBUG), others ignored
                     ──► request:       _meta with a protocolVersion   ──► 2026-07-28
                                        initialize                     ──► 2025 handshake
                                        after initialize, without it   ──► 2025 request
                                        else                           ──► 2026-07-28
                                        (its validation answers -32602)
                     ──► its own RequestScope, run beside the reading; while
                         `stdio_max_in_flight` run, no further line is taken (the reader
                         reads ahead only so far: then the client's writes wait)
    EOF ─────────────► the client is gone (the spec's shutdown): nothing more is written,
                       lines read but not taken are dropped, every request in flight is
                       cancelled (client_disconnect), and the connection ends once they
                       have exited (bounded by the grace period)
    shutdown() ──────► no further line is taken; every request in flight is cancelled
                       (server_shutdown, answered), and nothing is written after

One pipe multiplexes all requests, so a request's id is its address: an id already in
flight is refused (-32600). Replies are lines; a cancelled request's writer is abandoned at
the signal, so nothing is written for it afterwards. A 2025-era client is sent the change
notifications of the server's bus (list changes, updates of subscribed resources); a
2026-07-28 client gets them on its `subscriptions/listen` requests.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, Final

import anyio
from starlette.types import Message

from mcp_asgi._loggers import stdio_logger as logger
from mcp_asgi.http.reply import dump
from mcp_asgi.legacy import methods as legacy
from mcp_asgi.legacy.era import negotiate_version
from mcp_asgi.legacy.sessions import LegacySession, session_request
from mcp_asgi.legacy.stream import notification as change_notification
from mcp_asgi.lifecycle.armed import plain_anywhere
from mcp_asgi.lifecycle.cancel import CancelReason
from mcp_asgi.lifecycle.scope import RequestScope
from mcp_asgi.protocol import jsonrpc
from mcp_asgi.protocol.jsonrpc import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    JsonObject,
    McpError,
    ProtocolError,
    RequestId,
    ResourceNotFound,
    is_request_id,
)
from mcp_asgi.protocol.message import IncomingMessage, load, parse_message
from mcp_asgi.protocol.request import META_VERSION_KEY, McpRequest
from mcp_asgi.protocol.validate import validate
from mcp_asgi.runtime import RequestRuntime, input_rounds, result_options
from mcp_asgi.server.context import Context
from mcp_asgi.server.listen import LISTEN, SubscriptionFilter
from mcp_asgi.server.mcp_server import McpServer
from mcp_asgi.settings import McpSettings
from mcp_asgi.stdio.lines import LineReader, LineWriter, StdioWriter
from mcp_asgi.telemetry import Telemetry
from mcp_asgi.telemetry.span_attributes import STDIO_SCOPE_TYPE

Call = Callable[[Context], Awaitable[JsonObject]]
_STDIO_SCOPE: Final = {"type": STDIO_SCOPE_TYPE}
"""What telemetry and input rounds read instead of an ASGI scope: no headers, no client
address, no principal (a stdio server reads its credentials from its environment)."""
_DISCONNECT: Final[Message] = {"type": "http.disconnect"}
_FLUSH_TIMEOUT: Final = 1.0  # bound on writing what is queued when the connection ends


class StdioConnection:
    """Serves `server` to the one client at the other end of a pipe."""

    def __init__(
        self,
        server: McpServer,
        reader: LineReader,
        writer: LineWriter,
        *,
        settings: McpSettings,
        telemetry: Telemetry,
    ) -> None:
        self._server = server
        self._reader = reader
        self._out = writer
        self._settings = settings
        self._telemetry = telemetry
        self._runtime = RequestRuntime(server, settings.runtime)  # this connection's thread slots
        self._inputs = input_rounds(settings.input)
        self._options = result_options(settings.results)
        self._session: LegacySession | None = None  # after a 2025-era initialize
        self._in_flight: dict[RequestId, tuple[RequestScope, StdioWriter]] = {}
        self._max_in_flight = settings.stdio_max_in_flight
        self._room = anyio.Event()  # a request ended, or EOF
        self._reading = anyio.CancelScope()  # cancelled by shutdown()
        self._served = anyio.Event()

    def __len__(self) -> int:
        """How many requests are in flight."""
        return len(self._in_flight)

    async def serve(self) -> None:
        """Read and serve messages until EOF or `shutdown()`, then cancel what is in flight
        and return once it has exited (or after the grace period and a second more)."""
        async with anyio.create_task_group() as background:
            background.start_soon(self._out.run)
            background.start_soon(self._watch_stdin)
            background.start_soon(self._relay_changes)
            async with anyio.create_task_group() as requests:
                with self._reading:
                    await self._read(requests)
                if self._in_flight:
                    logger.debug("stopped reading with %d requests in flight", len(self))
                requests.cancel_scope.deadline = (
                    anyio.current_time() + self._settings.cancel_grace + 1.0
                )
            self._out.close()  # what is queued is written (nothing at EOF), nothing after
            with anyio.move_on_after(_FLUSH_TIMEOUT):
                await self._out.flushed()
            background.cancel_scope.cancel()
        self._served.set()

    async def _read(self, requests: anyio.abc.TaskGroup) -> None:
        """Take lines until EOF, while fewer than `stdio_max_in_flight` requests run."""
        while not self._reader.eof.is_set():
            if len(self._in_flight) >= self._max_in_flight:
                self._room = anyio.Event()
                await self._room.wait()
                continue
            try:
                line = await self._reader.readline()
            except ValueError:
                await self._reply(
                    None, ProtocolError(400, INVALID_REQUEST, "Invalid Request: line too long")
                )
                continue
            if line is None:
                return
            if line.strip():
                await self._on_line(line, requests)

    async def _watch_stdin(self) -> None:
        """Read stdin (ahead of the lines taken, up to a bound) until EOF: then the client
        is gone, every watcher reports it, and nothing more is written."""
        await self._reader.run()
        self._out.abort()
        self._room.set()

    async def shutdown(self) -> None:
        """Stop reading and cancel every request in flight (reason `server_shutdown`: each
        is answered with its error); return once `serve()` has (bounded by the grace period
        and a few seconds). Nothing is written after their errors."""
        self._reading.cancel()
        for request_scope, _ in list(self._in_flight.values()):
            request_scope.cancel(CancelReason.SERVER_SHUTDOWN)
        with anyio.move_on_after(self._settings.cancel_grace + 1.0 + _FLUSH_TIMEOUT):
            await self._served.wait()

    # -- one line ----------------------------------------------------------------------

    async def _on_line(self, line: bytes, requests: anyio.abc.TaskGroup) -> None:
        max_values = self._settings.max_json_values
        try:
            message = parse_message(line, max_values)
        except ProtocolError as error:
            if not _is_response(line, max_values):  # we send no requests: it answers nothing
                await self._reply(error.request_id, error)
            return
        if message.is_notification:
            self._notified(message)
            return
        request_id = message.id
        assert request_id is not None
        if request_id in self._in_flight:
            await self._reply(
                request_id,
                McpError(
                    INVALID_REQUEST,
                    "Invalid Request: a request with this id is already in flight",
                ),
            )
            return
        try:
            request, call = self._prepare(message)
            inputs = self._inputs.begin(_STDIO_SCOPE, request)
        except ProtocolError as error:
            self._telemetry.rejected(_STDIO_SCOPE, message, error)
            await self._reply(request_id, error)
            return
        request_scope, writer, ctx = self._open(request, inputs)
        self._in_flight[request_id] = (request_scope, writer)
        requests.start_soon(self._run, request_scope, ctx, call)

    def _prepare(self, message: IncomingMessage) -> tuple[McpRequest, Call]:
        """The validated request and what answers it, in its era."""
        meta = message.params.get("_meta")
        modern = isinstance(meta, dict) and META_VERSION_KEY in meta
        if message.method == "initialize" and not modern:
            return self._initialize(message)
        if modern or self._session is None:
            server, options = self._server, self._options
            request = validate(None, message, server)
            if request.method == LISTEN:
                SubscriptionFilter.parse(request.params, request.id)  # 400 before it opens
            return request, lambda ctx: server.dispatch(request, ctx, options)
        return self._legacy_request(message, self._session)

    def _initialize(self, message: IncomingMessage) -> tuple[McpRequest, Call]:
        params = message.params
        capabilities = params.get("capabilities", {})
        client_info = params.get("clientInfo")
        if not isinstance(params.get("protocolVersion"), str) or not isinstance(capabilities, dict):
            raise ProtocolError(
                400,
                INVALID_PARAMS,
                "Invalid params: initialize needs 'protocolVersion' and 'capabilities'",
                request_id=message.id,
            )
        session = LegacySession(
            "stdio",
            protocol_version=negotiate_version(params["protocolVersion"]),
            capabilities=capabilities,
            client_info=client_info if isinstance(client_info, dict) else None,
            clock=time.monotonic,
        )
        self._session = session
        result = legacy.initialize_result(self._server, session.protocol_version)

        async def call(ctx: Context) -> JsonObject:
            return result

        return session_request(message, session, session_id=None), call

    def _legacy_request(
        self, message: IncomingMessage, session: LegacySession
    ) -> tuple[McpRequest, Call]:
        method, params = message.method, message.params
        if not legacy.serves(self._server, method):
            raise ProtocolError(
                200, METHOD_NOT_FOUND, f"Method not found: {method}", request_id=message.id
            )
        problem = legacy.check_params(method, params)
        if problem is not None:
            raise ProtocolError(200, INVALID_PARAMS, problem, request_id=message.id)
        request = session_request(message, session, session_id=None)
        if method in legacy.SESSION_METHODS:

            async def call(ctx: Context) -> JsonObject:
                return legacy.session_method(session, method, params)

            return request, call
        server, options = self._server, self._options

        async def dispatch(ctx: Context) -> JsonObject:
            try:
                result = await server.dispatch(request, ctx, options)
            except ResourceNotFound as error:
                raise legacy.legacy_error(error) from None
            return legacy.legacy_result(result)

        return request, dispatch

    def _notified(self, message: IncomingMessage) -> None:
        if message.method != "notifications/cancelled":
            return  # notifications/initialized and the rest need nothing
        request_id = message.params.get("requestId")
        found = self._in_flight.get(request_id) if is_request_id(request_id) else None
        if found is None:
            logger.debug("cancel ignored: no such request in flight")
            return
        request_scope, writer = found
        if request_scope.request.method == "initialize":
            return  # the spec: initialize is never cancelled
        if request_scope.cancel(CancelReason.CLIENT_NOTIFICATION):
            writer.abandon()  # a line already waiting for its turn is dropped too

    # -- one request -------------------------------------------------------------------

    def _open(self, request: McpRequest, inputs: Any) -> tuple[RequestScope, StdioWriter, Context]:
        writer = StdioWriter(self._out)
        observer = self._telemetry.begin(_STDIO_SCOPE, request)
        request_scope = self._runtime.scope(request, writer, observer=observer)
        return request_scope, writer, self._runtime.context(request_scope, inputs=inputs)

    async def _run(self, request_scope: RequestScope, ctx: Context, call: Call) -> None:
        request_id = request_scope.request.id
        try:
            await request_scope.run(self._receive, lambda: call(ctx))
        finally:
            if self._in_flight.get(request_id, (None,))[0] is request_scope:
                del self._in_flight[request_id]
                self._room.set()

    @plain_anywhere  # an anyio Event's wait: begun in a request's task, finished anywhere
    async def _receive(self) -> Message:
        """What a request's watcher reads: the client is gone when stdin closes."""
        await self._reader.eof.wait()
        return _DISCONNECT

    async def _reply(self, request_id: RequestId | None, error: McpError) -> None:
        await self._out.write(dump(jsonrpc.error_response(request_id, error)))

    async def _relay_changes(self) -> None:
        """Change notifications for a 2025-era client (2026-07-28 clients listen)."""
        async with self._server.bus.subscribe() as events:
            async for event in events:
                session = self._session
                message = change_notification(event, session) if session is not None else None
                if message is not None:
                    await self._out.write(dump(message))


def _is_response(line: bytes, max_values: int) -> bool:
    try:
        data = load(line, max_values)
    except ValueError:
        return False
    return isinstance(data, dict) and "method" not in data and ("result" in data or "error" in data)
