"""The app the live shutdown tests run in a real server process, mounted each way the docs
offer. What the process saw is written as JSON lines under `$SHUTDOWN_OUT`:

    handlers.jsonl   each handler's exit: the reason it saw (`ctx.cancel_reason` or its
                     thread's token) when its cancellation reached it
    spans.jsonl      the spans, from a batch processor that exports only when the app's
                     lifespan shuts the provider down (so a span there proves the flush)
    log.jsonl        the `mcp_asgi` log records with their structured fields

Apps: `app` (FastAPI, `add_middleware`), `mounted` (a Starlette root mounting it at
/notes-api with `lifespan=mounted_lifespan(...)`), `mounted_unfixed` (the same without it),
`bare` (`McpMiddleware` around an app that ignores lifespan events).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
from fastapi import FastAPI
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
from starlette.applications import Starlette
from starlette.routing import Mount
from uvicorn_worker import UvicornWorker

from mcp_asgi import CancelToken, Context, McpMiddleware, McpServer, McpSettings
from mcp_asgi.lifespan import mounted_lifespan

OUT = Path(os.environ.get("SHUTDOWN_OUT", "."))
_LOG_FIELDS = ("request_id", "reason", "outcome", "elapsed", "latency", "tool")


def _append(name: str, entry: dict[str, Any]) -> None:
    with (OUT / name).open("a") as out:
        out.write(json.dumps(entry) + "\n")


class _JsonLines(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        entry = {"logger": record.name, "level": record.levelname, "message": record.getMessage()}
        entry.update({f: getattr(record, f) for f in _LOG_FIELDS if hasattr(record, f)})
        _append("log.jsonl", entry)


def _one_line(span: ReadableSpan) -> str:
    return str(span.to_json(indent=None)) + "\n"


def _telemetry() -> TracerProvider:
    library = logging.getLogger("mcp_asgi")
    library.addHandler(_JsonLines())
    library.setLevel(logging.INFO)
    provider = TracerProvider()
    exporter = ConsoleSpanExporter(out=(OUT / "spans.jsonl").open("a"), formatter=_one_line)
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=60_000))
    return provider


def build_server() -> McpServer:
    server = McpServer("shutdown")

    @server.tool()
    async def slow(ctx: Context) -> str:
        """Reports progress, then works until cancelled."""
        _append("handlers.jsonl", {"tool": "slow", "event": "started"})
        await ctx.report_progress(1)
        try:
            await anyio.sleep(60)
        finally:
            _append("handlers.jsonl", {"tool": "slow", "reason": ctx.cancel_reason})
        return "done"

    @server.tool()
    def threaded(token: CancelToken) -> str:
        """A worker thread that polls its token."""
        _append("handlers.jsonl", {"tool": "threaded", "event": "started"})
        while not token.wait(0.02):
            pass
        _append("handlers.jsonl", {"tool": "threaded", "reason": token.reason})
        return "stopped"

    return server


def build_app(provider: TracerProvider) -> FastAPI:
    """The FastAPI app with the middleware added, shutting the provider down at exit."""

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        provider.shutdown()  # flush: the server re-raises SIGTERM, so no atexit hook runs

    app = FastAPI(lifespan=lifespan)
    settings = McpSettings(cancel_grace=float(os.environ.get("CANCEL_GRACE", "2")))
    app.add_middleware(
        McpMiddleware, server=build_server(), settings=settings, tracer_provider=provider
    )

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    return app


async def _ignores_lifespan(scope: Any, receive: Any, send: Any) -> None:
    if scope["type"] == "http":
        await send({"type": "http.response.start", "status": 404, "headers": []})
        await send({"type": "http.response.body", "body": b""})


class GracefulWorker(UvicornWorker):  # type: ignore[misc]  # an untyped package
    """uvicorn-worker's worker with a graceful timeout for uvicorn (it sets none, so uvicorn
    would wait for the calls until gunicorn's --graceful-timeout SIGKILLs the worker)."""

    CONFIG_KWARGS: dict[str, Any] = {**UvicornWorker.CONFIG_KWARGS, "timeout_graceful_shutdown": 1}


_provider = _telemetry()
app = build_app(_provider)
mounted = Starlette(routes=[Mount("/notes-api", app=app)], lifespan=mounted_lifespan(app))
mounted_unfixed = Starlette(routes=[Mount("/notes-api", app=build_app(_provider))])
bare = McpMiddleware(_ignores_lifespan, server=build_server(), tracer_provider=_provider)
