"""The example app's telemetry in real backends, configured only by `OTEL_*` variables:
traces over OTLP/HTTP to Arize Phoenix, found again through Phoenix's span query API by
`mcp_asgi.cancellation.reason` (a shutdown's span included); metrics through the
OpenTelemetry Prometheus exporter, scraped by Prometheus and read back with the PromQL of
docs/observability.md."""

from __future__ import annotations

import functools
import math
import signal
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from mcp_asgi.testing import McpTestClient

from ..example_app import ExampleApp
from ..servers import free_port
from .conftest import Backend, poll, start_prometheus

# The queries of docs/observability.md, as written there.
CANCELLATIONS_BY_REASON = "sum by (mcp_asgi_cancellation_reason) (mcp_asgi_cancellations_total)"
P99_BY_REASON = (
    "histogram_quantile(0.99, sum by (le, mcp_asgi_cancellation_reason) "
    "(rate(mcp_asgi_cancellation_latency_seconds_bucket[5m])))"
)


def phoenix_spans(phoenix: Backend, reason: str) -> list[dict[str, Any]] | None:
    """Phoenix's query API: the spans whose `mcp_asgi.cancellation.reason` is `reason`."""
    response = httpx.get(
        f"{phoenix.url}/v1/projects/default/spans",
        params={"attribute": f"mcp_asgi.cancellation.reason:{reason}"},
        timeout=5,
    )
    response.raise_for_status()
    spans: list[dict[str, Any]] = response.json()["data"]
    return spans or None


async def drop_after_progress(client: McpTestClient) -> None:
    params = {"name": "search_books", "arguments": {"query": "dune", "delay": 0.2}}
    async with client.stream("tools/call", params, progress=True) as stream:
        assert await stream.next_message() is not None


@pytest.mark.timeout(150)  # Phoenix alone takes 15-30 s to start on the 2-core machine
async def test_phoenix_and_prometheus(phoenix: Backend, tmp_path: Path) -> None:
    """A dropped call, a timed-out call and a call cut by SIGTERM: Phoenix finds each span
    by reason with elapsed, latency and outcome; Prometheus returns the cancellations
    counter and the cancel-latency p99 by reason."""
    metrics_port = free_port()
    env = {
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{phoenix.url}/v1/traces",
        "OTEL_METRICS_EXPORTER": "prometheus",
        "OTEL_EXPORTER_PROMETHEUS_HOST": "127.0.0.1",
        "OTEL_EXPORTER_PROMETHEUS_PORT": str(metrics_port),
        "APP_MCP__MAX_REQUEST_DURATION": "3",
    }
    example = ExampleApp(tmp_path, env)
    prometheus = start_prometheus(tmp_path, f"127.0.0.1:{metrics_port}")
    try:
        client = McpTestClient(example.url + "/mcp")
        timed_out: list[Any] = []

        async def time_out() -> None:
            params = {"name": "search_books", "arguments": {"query": "x", "delay": 5}}
            timed_out.append((await client.request("tools/call", params)).final)

        async with anyio.create_task_group() as tg:
            tg.start_soon(time_out)
            await drop_after_progress(client)
        assert timed_out[0]["error"]["data"] == {"reason": "timeout"}

        def counted() -> dict[str, float] | None:
            found = prometheus.by_reason(CANCELLATIONS_BY_REASON)
            return found if {"client_disconnect", "timeout"} <= set(found) else None

        assert await poll(counted, "the counter in Prometheus") == {
            "client_disconnect": 1.0,
            "timeout": 1.0,
        }
        await drop_after_progress(client)  # a second one: the rate over the window grows

        def p99() -> dict[str, float] | None:
            found = prometheus.by_reason(P99_BY_REASON)
            value = found.get("client_disconnect", math.nan)
            return found if not math.isnan(value) else None

        quantiles = await poll(p99, "the cancel-latency p99 in Prometheus")
        assert 0 <= quantiles["client_disconnect"] < 1

        # a call in flight when the server is stopped
        params = {"name": "search_books", "arguments": {"query": "x", "delay": 0.5}}
        async with client.stream("tools/call", params, progress=True) as stream:
            assert await stream.next_message() is not None
            assert await anyio.to_thread.run_sync(example.stop, signal.SIGTERM) != 0
            last = None
            while (message := await stream.next_message()) is not None:
                last = message
        assert last is not None
        assert last["error"]["data"] == {"reason": "server_shutdown"}
    finally:
        example.kill()
        prometheus.stop()

    for reason in ("client_disconnect", "timeout", "server_shutdown"):
        spans = await poll(functools.partial(phoenix_spans, phoenix, reason), f"{reason} spans")
        for span in spans:
            attributes = span["attributes"]
            assert span["name"] == "tools/call search_books"
            assert attributes["mcp_asgi.cancellation.outcome"] == "exited"
            assert attributes["mcp_asgi.cancellation.elapsed"] > 0
            assert attributes["mcp_asgi.cancellation.latency"] >= 0
        statuses = {span["status_code"] for span in spans}
        assert statuses == ({"UNSET"} if reason == "client_disconnect" else {"ERROR"})
