"""Serving an `McpServer` on this process's stdin and stdout.

`run_stdio(server)` is the whole program; `serve_stdio(server)` the coroutine, for a
program that runs its own event loop. `python -m mcp_asgi.stdio module:attribute` does
`run_stdio` on the server that `module.attribute` names.

Stdout carries the protocol only: `run_stdio` writes it through a private copy of the
descriptor and points descriptor 1 at stderr, so a stray `print()` in a handler lands in
the log instead of corrupting the stream. Logs go to stderr.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
from typing import Any

import anyio
from opentelemetry import metrics, trace

from mcp_asgi.server.mcp_server import McpServer
from mcp_asgi.settings import McpSettings
from mcp_asgi.stdio.connection import StdioConnection
from mcp_asgi.stdio.lines import LineReader, LineWriter
from mcp_asgi.telemetry import Telemetry


async def serve_stdio(
    server: McpServer,
    *,
    settings: McpSettings | None = None,
    tracer_provider: trace.TracerProvider | None = None,
    meter_provider: metrics.MeterProvider | None = None,
    stdin: int = 0,
    stdout: int = 1,
    handle_signals: bool = True,
) -> None:
    """Serve `server` to the client on the pipes `stdin` and `stdout` (descriptors) until
    stdin closes (every request in flight is then cancelled with `client_disconnect`, and
    nothing more is written) or, with `handle_signals`, SIGTERM or SIGINT arrives
    (cancelled with `server_shutdown`, each answered with its error, and nothing after).
    Either way it returns once their handlers have exited, or after
    `settings.cancel_grace` and a second more. At most `settings.stdio_max_in_flight`
    requests run at once: no further line is taken from stdin meanwhile.

    The settings a stdio server reads: `stdio_max_in_flight`, `max_request_duration`,
    `cancel_grace`, `keepalive_interval` (how often a request notices a closed stdin),
    `max_body_bytes` (the longest line), `max_json_values` (the most values on a line),
    `max_threads`,
    `progress_min_interval`, `process_kill_grace`, `record_arguments`, `page_size`,
    `list_ttl`, `cache_scope`, `request_state_key`/`_ttl` and `listen_max_duration`.
    HTTP settings (path, origins, authorization) do not apply.
    """
    if not isinstance(server, McpServer):
        raise TypeError("server must be an McpServer")
    settings = settings or McpSettings()
    telemetry = Telemetry(
        tracer_provider, meter_provider, record_arguments=settings.record_arguments
    )
    connection = StdioConnection(
        server,
        LineReader(stdin, max_line=settings.max_body_bytes),
        LineWriter(stdout),
        settings=settings,
        telemetry=telemetry,
    )
    async with server.running(), anyio.create_task_group() as tg:
        if handle_signals:
            tg.start_soon(_stop_on_signal, connection, tg.cancel_scope)
        await connection.serve()
        tg.cancel_scope.cancel()


def run_stdio(server: McpServer, **options: Any) -> None:
    """Run `serve_stdio(server, **options)` as the program (on asyncio), with the protocol
    on a private copy of stdout and descriptor 1 pointed at stderr."""
    protocol_out = os.dup(1)
    sys.stdout.flush()
    os.dup2(2, 1)
    try:
        anyio.run(lambda: serve_stdio(server, stdout=protocol_out, **options))
    finally:
        os.close(protocol_out)


def load_server(spec: str) -> McpServer:
    """The `McpServer` that `"module:attribute"` names (the attribute may also be a
    function of no arguments that returns one); `ValueError` with a message otherwise."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"expected module:attribute, got {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"cannot import {module_name!r}: {exc}") from exc
    target: Any = module
    for part in attribute.split("."):
        target = getattr(target, part, None)
        if target is None:
            raise ValueError(f"{module_name!r} has no attribute {attribute!r}")
    if callable(target) and not isinstance(target, McpServer):
        target = target()
    if not isinstance(target, McpServer):
        raise ValueError(f"{spec!r} is a {type(target).__name__}, not an McpServer")
    return target


async def _stop_on_signal(connection: StdioConnection, scope: anyio.CancelScope) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for _ in signals:
            await connection.shutdown()
            scope.cancel()
            return
