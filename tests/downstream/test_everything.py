"""The reference server `@modelcontextprotocol/server-everything` mounted on an McpServer
(`DownstreamTools`), over stdio and over Streamable HTTP, driven through a live uvicorn:
its tools listed and called through ours, progress relayed, and an upstream disconnect
reaching the downstream as `notifications/cancelled` for the id minted there (the
downstream's own SDK saw the request running and aborted it). No child left behind."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
from opentelemetry.trace import SpanKind

from mcp_asgi import McpServer
from mcp_asgi.downstream import Downstream, DownstreamTools
from mcp_asgi.testing import McpTestClient, serve

from ..helpers import Otel, attrs, eventually, mcp_app
from . import everything
from .everything import LONG, needs_everything

pytestmark = needs_everything


def gateway(downstream: Downstream, **options: Any) -> McpServer:
    server = McpServer("gateway")

    @server.tool()
    async def local(text: str) -> str:
        """A tool of the gateway's own."""
        return text

    server.add_source(DownstreamTools(downstream, include=["echo", "get-sum", LONG], **options))
    return server


async def test_stdio_mounted_and_cancelled(tmp_path: Path) -> None:
    """stdio: the tools are listed under the prefix beside ours; a call works; a long call
    relays progress with the upstream's token; the upstream client's disconnect ends the
    downstream request (it was running, its AbortSignal fired); the CLIENT span carries
    client_disconnect and its trace context reached the downstream in `_meta`; the child,
    which ignores its stdin closing and SIGTERM, is still gone once the app stops (the
    SIGKILL to its process group after the grace)."""
    tap = tmp_path / "tap.jsonl"
    otel = Otel()
    downstream = everything.stdio(tap, mode="stubborn", tracer_provider=otel.tracer_provider)
    app = mcp_app(gateway(downstream), otel)
    with serve(app) as live:
        assert len(everything.processes_of(tap)) == 1  # started with the app's lifespan
        await through(live.url, tap, otel, "client_disconnect")
    await eventually(lambda: everything.processes_of(tap) == [], what="the child to exit")
    assert everything.records(tap, "sigterm-ignored") != []  # it took the SIGKILL


async def test_http_mounted_and_cancelled(tmp_path: Path) -> None:
    """Streamable HTTP (a 2025-era session, server-everything's own process): the same,
    the cancel POSTed as notifications/cancelled with the minted id; the downstream gets
    the headers configured for it and never the inbound caller's Authorization."""
    tap = tmp_path / "tap.jsonl"
    otel = Otel()
    with everything.http(tap) as url:
        downstream = Downstream.http(
            "everything", url, headers={"x-gateway-key": "k"}, tracer_provider=otel.tracer_provider
        )
        with serve(mcp_app(gateway(downstream), otel)) as live:
            await through(live.url, tap, otel, "client_disconnect")
    for request in everything.records(tap, "request"):  # its own headers, never the caller's
        assert "x-gateway-key" in request["headers"], request
        assert "authorization" not in request["headers"], request


async def through(url: str, tap: Path, otel: Otel, reason: str) -> None:
    client = McpTestClient(url + "/mcp", headers={"authorization": "Bearer the-callers-token"})
    listed = await client.request("tools/list", {})
    names = {tool["name"] for tool in listed.final["result"]["tools"]}
    assert names == {"local", "everything_echo", "everything_get-sum", f"everything_{LONG}"}

    answer = await client.call_tool("everything_get-sum", {"a": 2, "b": 3})
    assert "5" in answer["content"][0]["text"], answer

    params = {"name": f"everything_{LONG}", "arguments": {"duration": 60, "steps": 600}}
    async with client.stream("tools/call", params, id="up", progress=True) as stream:
        first = await stream.next_message()
        assert first is not None
        assert first["method"] == "notifications/progress"
        assert first["params"]["progressToken"] == "p-up"
        [call] = [r for r in everything.requests(tap, "tools/call") if r["id"] != 0][-1:]
        await stream.drop()
        dropped = anyio.current_time()
    await eventually(lambda: _cancelled(tap, call["id"]) is not None, what="the cancel")
    print(f"downstream cancelled within {anyio.current_time() - dropped:.3f}s")
    seen = _cancelled(tap, call["id"])
    assert seen is not None
    assert seen["running"], seen
    assert seen["aborted"], seen

    span = await otel.wait_span(f"tools/call {LONG}")
    assert span.kind == SpanKind.CLIENT
    assert attrs(span)["mcp_asgi.cancellation.reason"] == reason
    assert attrs(span)["server.address"] == "everything"
    parent = await otel.wait_span(f"tools/call everything_{LONG}")
    assert span.parent is not None
    assert span.parent.span_id == parent.context.span_id
    traceparent = call["meta"]["traceparent"]
    assert traceparent.startswith(f"00-{span.context.trace_id:032x}-{span.context.span_id:016x}-")


def _cancelled(tap: Path, request_id: Any) -> dict[str, Any] | None:
    found = [r for r in everything.records(tap, "cancelled") if r["id"] == request_id]
    return found[0] if found else None
