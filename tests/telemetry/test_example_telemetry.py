"""The example app's telemetry, run as `make run` runs it: the SDK configured by the `OTEL_*`
variables (opentelemetry-instrument), the providers shut down at exit so that the spans of
the requests a shutdown cancels are exported, and an exporter set to `none` left off."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio

from mcp_asgi.testing import McpTestClient

from ..example_app import ExampleApp
from .otlp_receiver import OtlpReceiver, attributes_of


def console_spans(stdout: str) -> list[dict[str, Any]]:
    """The spans the console exporter printed (one indented JSON object each)."""
    decoder, spans, at = json.JSONDecoder(), [], 0
    while (start := stdout.find("{", at)) >= 0:
        span, at = decoder.raw_decode(stdout, start)
        spans.append(span)
    return spans


async def drop_after_progress(client: McpTestClient) -> None:
    """Call search_books and hang up after its first progress notification."""
    params = {"name": "search_books", "arguments": {"query": "dune", "delay": 0.2}}
    async with client.stream("tools/call", params, progress=True) as stream:
        first = await stream.next_message()
        assert first is not None
        assert first["method"] == "notifications/progress"


async def test_make_run_prints_spans_on_the_console(tmp_path: Path) -> None:
    """With no OTEL_* variable set, `make run` prints each span as the console exporter's
    JSON (the sample in docs/observability.md), and the span of a dropped call is there."""
    example = ExampleApp(tmp_path, {})
    try:
        await drop_after_progress(McpTestClient(example.url + "/mcp"))
        await anyio.sleep(0.3)  # the handler's next await sees the cancel
    finally:
        example.stop()
    by_name = {span["name"]: span for span in console_spans(example.stdout())}
    span = by_name["tools/call search_books"]
    assert span["kind"] == "SpanKind.SERVER"
    assert span["status"] == {"status_code": "UNSET"}
    attributes = span["attributes"]
    assert attributes["mcp_asgi.cancellation.reason"] == "client_disconnect"
    assert attributes["mcp_asgi.cancellation.outcome"] == "exited"
    assert [event["name"] for event in span["events"]] == ["mcp_asgi.cancellation"]
    assert span["resource"]["attributes"]["service.name"] == "library"
    assert "tools/call search_books cancelled: client_disconnect (exited)" in example.stderr()


async def test_a_traces_only_backend_gets_the_shutdown_span_and_no_metrics(
    tmp_path: Path,
) -> None:
    """OTLP to a traces-only backend with OTEL_METRICS_EXPORTER=none: a call in flight at
    SIGTERM gets the shutdown error, and its span (outcome exited, with its latency)
    reaches the backend, flushed at exit; no metrics are sent, no export fails."""
    with OtlpReceiver() as receiver:
        env = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
            "OTEL_TRACES_EXPORTER": "otlp",
            "OTEL_METRICS_EXPORTER": "none",
            "OTEL_BSP_SCHEDULE_DELAY": "60000",  # only the exit's flush exports it
        }
        example = ExampleApp(tmp_path, env)
        try:
            client = McpTestClient(example.url + "/mcp")
            slow = {"name": "search_books", "arguments": {"query": "x", "delay": 1}}
            async with client.stream("tools/call", slow, progress=True) as stream:
                assert await stream.next_message() is not None  # progress: it is running
                await anyio.to_thread.run_sync(example.stop)
                messages = []
                while (message := await stream.next_message()) is not None:
                    messages.append(message)
        finally:
            example.kill()
        cancelled = [
            attributes
            for attributes in (attributes_of(span.attributes) for _, span in receiver.spans())
            if "mcp_asgi.cancellation.reason" in attributes
        ]
        metrics = receiver.metrics()
    assert messages[-1]["error"]["data"] == {"reason": "server_shutdown"}
    [shutdown] = cancelled
    assert shutdown["mcp_asgi.cancellation.reason"] == "server_shutdown"
    assert shutdown["gen_ai.tool.name"] == "search_books"
    assert shutdown["mcp_asgi.cancellation.outcome"] == "exited"
    assert shutdown["mcp_asgi.cancellation.latency"] >= 0
    assert metrics == []
    assert "Failed to export" not in example.stderr()
