"""Time bounds on reading a request, on a live uvicorn (h11 and httptools): a slow body is
408 and its connection closed; the request's deadline counts from its headers."""

from __future__ import annotations

import json

import anyio
import pytest

from mcp_asgi.testing import McpTestClient, serve

from .apps import Seen, json_body, limits_app, raw_post, read_all, status_of

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("http", ["h11", "httptools"])]


async def test_a_body_sent_byte_by_byte_is_408_and_the_connection_closed(http: str) -> None:
    """body_read_timeout=0.5 with max_request_duration off: 20 connections trickling their
    bodies a byte every 0.1 s all get 408 with a JSON-RPC error, then the server closes
    them."""
    app = limits_app(Seen(), body_read_timeout=0.5, max_request_duration=None)
    with serve(app, http=http) as live:
        client = McpTestClient(live.url + "/mcp")
        wire = raw_post(client, client.build("tools/call", {"name": "echo", "arguments": {}}))
        head, body = wire.split(b"\r\n\r\n", 1)
        answers: list[bytes] = []

        async def trickle() -> None:
            sock = await anyio.connect_tcp(client.host, client.port)
            async with sock:
                await sock.send(head + b"\r\n\r\n")
                async with anyio.create_task_group() as group:

                    async def send_slowly() -> None:
                        for byte in body:
                            await anyio.sleep(0.1)
                            try:
                                await sock.send(bytes([byte]))
                            except (anyio.BrokenResourceError, OSError):
                                return

                    group.start_soon(send_slowly)
                    answers.append(await read_all(sock, limit=5))
                    group.cancel_scope.cancel()

        async with anyio.create_task_group() as group:
            for _ in range(20):
                group.start_soon(trickle)
    assert len(answers) == 20
    for raw in answers:
        assert status_of(raw) == 408
        assert b"connection: close" in raw.lower()
        error = json_body(raw)["error"]
        assert error["code"] == -32600
        assert "did not arrive" in error["message"]


async def test_the_deadline_counts_from_the_headers(http: str) -> None:
    """max_request_duration=1.5: a body that takes 1 s to arrive, then a tool of 1 s, is
    a timeout (2 s from the headers), though the tool alone fits in the deadline."""
    seen = Seen()
    with serve(limits_app(seen, max_request_duration=1.5), http=http) as live:
        client = McpTestClient(live.url + "/mcp")
        body = client.build("tools/call", {"name": "slow", "arguments": {"seconds": 1.0}})
        wire = raw_post(client, body)
        sock = await anyio.connect_tcp(client.host, client.port)
        async with sock:
            await sock.send(wire[:-5])
            await anyio.sleep(1.0)
            await sock.send(wire[-5:])
            raw = await read_all(sock)
    final = [line for line in raw.split(b"\n") if b'"jsonrpc"' in line][-1]
    message = json.loads(final[final.index(b"{") :])
    assert message["error"]["data"]["reason"] == "timeout"
    assert seen.slow_cancelled == 1
    assert seen.slow_finished == 0
