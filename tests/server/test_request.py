"""What a handler sees of its request: `ctx.progress_token`, `ctx.input_responses`, and
the HTTP request as a read-only Starlette `Request` (`ctx.request`, or a parameter typed
`Request`) whose body and disconnect checks never take the watcher's `http.disconnect`."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from fastapi import FastAPI
from starlette.authentication import AuthCredentials, AuthenticationBackend, SimpleUser
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import HTTPConnection, Request

from mcp_asgi import CancelReason, Context, McpMiddleware, McpServer
from mcp_asgi.server.http_request import read_only_request

from ..helpers import Probe, call, http_scope, mcp_app, request_scope, wire_for
from .handler_apps import request_server


class Alice(AuthenticationBackend):
    """Every request is alice's, with the `read` scope."""

    async def authenticate(self, conn: HTTPConnection) -> tuple[AuthCredentials, SimpleUser]:
        return AuthCredentials(["read"]), SimpleUser("alice")


def authenticated_app(probe: Probe) -> FastAPI:
    app = FastAPI()
    app.state.name = "host"
    app.add_middleware(McpMiddleware, server=request_server(probe))
    app.add_middleware(AuthenticationMiddleware, backend=Alice())  # outermost: runs first
    return app


async def test_a_handler_sees_the_http_request_and_the_raw_request_fields(probe: Probe) -> None:
    """Headers, client, url, app.state, the user an authentication middleware set, the
    body as read (`is_disconnected()` first takes nothing from it), the progress token and
    `inputResponses` as sent."""
    answers = {"k": {"action": "accept", "content": {"x": 1}}}
    params = {"name": "inspect", "arguments": {}, "inputResponses": answers}
    wire = await call(
        authenticated_app(probe), "tools/call", params, progress=True, headers={"x-tenant": "t1"}
    )
    seen = wire.result["structuredContent"]
    assert seen == {
        "same": True,
        "disconnected": False,
        "body_method": "tools/call",
        "body_length": seen["body_length"],
        "tenant": "t1",
        "client": "127.0.0.1",
        "path": "/mcp",
        "app_name": "host",
        "user": "alice",
        "scopes": ["read"],
        "progress_token": "p-7",
        "input_responses": answers,
    }
    assert seen["body_length"] > len(json.dumps(answers))


async def test_without_progress_or_input_responses_they_are_none(probe: Probe) -> None:
    wire = await call(authenticated_app(probe), "tools/call", {"name": "inspect"})
    seen = wire.result["structuredContent"]
    assert (seen["progress_token"], seen["input_responses"]) == (None, None)


async def test_a_request_parameter_works_on_a_plain_starlette_host(probe: Probe) -> None:
    """A `Request` parameter needs no FastAPI; a `def` handler gets it in its thread."""
    app = mcp_app(request_server(probe))
    wire = await call(
        app, "tools/call", {"name": "sync_inspect", "arguments": {}}, headers={"x-tenant": "t2"}
    )
    assert wire.result["content"][0]["text"] == "t2"
    tools = (await call(app, "tools/list")).result["tools"]
    assert all(t["inputSchema"]["properties"] == {} for t in tools)


@pytest.mark.both_loops
async def test_body_and_is_disconnected_never_take_the_disconnect(probe: Probe) -> None:
    """A handler polling `request.is_disconnected()` is still cancelled when the client
    leaves (the watcher saw it), and the check never said True."""
    server = request_server(probe)
    wire = wire_for(
        "tools/call", {"name": "poll_disconnect", "arguments": {}}, leave_on=probe.started
    )
    with anyio.fail_after(10):
        await wire.run(mcp_app(server))
    assert probe.reason is CancelReason.CLIENT_DISCONNECT
    assert probe.notes == []
    assert wire.written_after_disconnect == []


@pytest.mark.both_loops
async def test_the_replayed_body_survives_a_disconnect_check_and_then_blocks() -> None:
    """`is_disconnected()` before reading leaves the body whole; after the body, `receive`
    never returns (no `http.disconnect` is ever made up)."""
    request = read_only_request(http_scope(), b'{"a": 1}')
    assert await request.is_disconnected() is False
    assert await request.json() == {"a": 1}
    assert await request.body() == b'{"a": 1}'
    assert await request.is_disconnected() is False
    with anyio.move_on_after(0.05) as waited:
        await request.receive()
    assert waited.cancelled_caught


async def test_the_request_is_a_copy_of_the_scope() -> None:
    """Keys a handler adds to its request's scope stay its own."""
    asgi_scope = http_scope()
    request = read_only_request(asgi_scope, b"")
    request.scope["mine"] = 1
    request.state.seen = True
    assert "mine" not in asgi_scope
    assert request.headers["host"] == "127.0.0.1:8000"


async def test_a_context_without_http_has_no_request() -> None:
    async def send(message: Any) -> None:
        pass

    ctx = Context(request_scope(send))
    with pytest.raises(RuntimeError, match="did not come over HTTP"):
        _ = ctx.request
    assert ctx.progress_token is None
    assert ctx.input_responses is None


async def test_a_handler_that_does_not_ask_gets_no_request_built(probe: Probe) -> None:
    """The `Request` is made on first use: a handler that never reads it costs nothing."""
    server = McpServer("lazy")
    seen: list[Context] = []

    @server.tool()
    async def plain(ctx: Context) -> str:
        seen.append(ctx)
        return "ok"

    await call(mcp_app(server), "tools/call", {"name": "plain"})
    (ctx,) = seen
    assert ctx._http_request is None
    assert isinstance(ctx.request, Request)
