"""Per-request cost of telemetry: `python -m bench.telemetry_overhead [--requests N --rounds R]`.

Drives the ASGI app directly (no sockets, no server) with one `tools/call echo` after
another and compares:

    off           the middleware with its telemetry replaced by a do-nothing observer (floor)
    api-noop      opentelemetry-api only, no SDK configured: what a library user pays
    sdk-unsampled SDK providers, sampler ALWAYS_OFF (spans not recorded, metrics recorded)
    sdk           SDK providers, every span recorded and handed to a no-op exporter through a
                  BatchSpanProcessor; metrics aggregated by a reader that never exports

Prints microseconds per request (best round) and the ratio to `off`. The process never
sets a global provider, so `api-noop` really is the no-SDK path.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

import anyio
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from starlette.types import Message, Receive, Scope, Send

from mcp_asgi import McpMiddleware, McpServer
from mcp_asgi.lifecycle.outcome import ScopeObserver
from mcp_asgi.testing import McpTestClient

from .inprocess import http_scope
from .otel_sinks import noop_providers


class TelemetryOff:
    """Stands in for `Telemetry`: no span, no metric, nothing."""

    def begin(self, asgi_scope: Scope, request: Any) -> ScopeObserver:
        return ScopeObserver()

    def rejected(self, asgi_scope: Scope, message: Any, error: Any) -> None:
        return None


async def _not_found(asgi_scope: Scope, receive: Receive, send: Send) -> None:
    await send({"type": "http.response.start", "status": 404, "headers": []})
    await send({"type": "http.response.body", "body": b""})


def _server() -> McpServer:
    server = McpServer("bench")

    @server.tool()
    async def echo(text: str) -> str:
        """Returns its input."""
        return text

    return server


def build(variant: str) -> tuple[McpMiddleware, Callable[[], None]]:
    """The app for one variant, and a function that shuts its providers down."""
    if variant in ("off", "api-noop"):
        app = McpMiddleware(_not_found, server=_server())
        if variant == "off":
            off = TelemetryOff()
            app._telemetry = app._inflight._telemetry = off  # type: ignore[assignment]
        return app, lambda: None
    sampler = ALWAYS_OFF if variant == "sdk-unsampled" else None
    tracer_provider, meter_provider = noop_providers(
        export_interval_millis=3_600_000, sampler=sampler
    )
    app = McpMiddleware(
        _not_found,
        server=_server(),
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
    )

    def shutdown() -> None:
        tracer_provider.shutdown()
        meter_provider.shutdown()

    return app, shutdown


def _request() -> tuple[bytes, list[tuple[bytes, bytes]]]:
    client = McpTestClient("http://127.0.0.1/mcp")
    body = client.build("tools/call", {"name": "echo", "arguments": {"text": "hi"}}, id=1)
    headers = [(k.encode(), v.encode()) for k, v in client.headers_for(body).items()]
    return json.dumps(body).encode(), headers


async def drive(app: McpMiddleware, requests: int) -> float:
    """Seconds per request for `requests` sequential calls."""
    body, headers = _request()
    scope = http_scope([(name.lower(), value) for name, value in headers])
    statuses: list[int] = []

    async def send(message: Message) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    start = time.perf_counter()
    for _ in range(requests):
        sent = False

        async def receive() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await anyio.sleep_forever()
            raise AssertionError("unreachable")

        await app(dict(scope), receive, send)
    elapsed = time.perf_counter() - start
    if statuses != [200] * requests:
        raise RuntimeError(f"unexpected statuses: {sorted(set(statuses))}")
    return elapsed / requests


VARIANTS = ("off", "api-noop", "sdk-unsampled", "sdk")


async def main(requests: int, rounds: int) -> dict[str, float]:
    """Best seconds per request of each variant over `rounds` interleaved rounds."""
    apps = {variant: build(variant) for variant in VARIANTS}
    best = dict.fromkeys(VARIANTS, float("inf"))
    try:
        for app, _ in apps.values():
            await drive(app, min(requests, 200))  # warm-up
        for round_ in range(rounds):
            order = VARIANTS[round_ % len(VARIANTS) :] + VARIANTS[: round_ % len(VARIANTS)]
            for variant in order:
                best[variant] = min(best[variant], await drive(apps[variant][0], requests))
    finally:
        for _, shutdown in apps.values():
            shutdown()
    return best


def report(best: dict[str, float]) -> str:
    """A small table: µs per request and the ratio to the floor."""
    floor = best["off"]
    lines = [f"{'variant':<14} {'µs/request':>11} {'ratio':>7} {'+µs':>7}"]
    for variant, seconds in best.items():
        lines.append(
            f"{variant:<14} {seconds * 1e6:>11.1f} {seconds / floor:>7.2f} "
            f"{(seconds - floor) * 1e6:>7.1f}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3000, help="requests per round")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds; best kept")
    args = parser.parse_args()
    print(report(anyio.run(main, args.requests, args.rounds)))
