"""Every way a POST ends gives back the request it held against its client's limit
(`ClientLimits.admit` / `leave` in the middleware), driven in process: nothing is left
counted, whatever the answer was."""

from __future__ import annotations

from typing import Any

import pytest

import mcp_asgi.endpoint as endpoint_module
from mcp_asgi import McpMiddleware, McpServer

from ..helpers import mcp_app, mcp_body, post

pytestmark = pytest.mark.anyio

CLIENT = "addr:127.0.0.1"  # the scripted client's address (tests.helpers.http_scope)


def echo_app() -> McpMiddleware:
    server = McpServer("accounting")

    @server.tool()
    async def echo(text: str) -> str:
        return text

    return mcp_app(server, rate_limit=None, max_requests_per_client=2)


CALL = mcp_body("tools/call", {"name": "echo", "arguments": {"text": "hi"}})


async def test_every_way_a_post_ends_gives_its_request_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    app = echo_app()
    statuses = [
        (await post(app, CALL)).status,  # answered
        (await post(app, CALL, content_type="text/plain")).status,  # 415
        (await post(app, CALL, accept="text/html")).status,  # 406
        (await post(app, {"jsonrpc": "2.0", "id": 3, "result": {}}, headers_of=CALL)).status,
    ]

    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("a bug of ours")

    monkeypatch.setattr(endpoint_module, "validate", broken)
    statuses.append((await post(app, CALL)).status)  # 500
    assert statuses == [200, 415, 406, 400, 500]
    assert app._limits.held("requests", CLIENT) == 0
