"""The app's routes as tools over a real server (uvicorn on 127.0.0.1), called by the
official MCP Python SDK client (`mcp` 2.x): the calls, the caller's identity, a dropped
call that cancels the route, and the list following the app."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import pytest
from fastapi import FastAPI
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ToolsListChanged

from mcp_asgi import CancelReason
from mcp_asgi.routes import AppRoutes
from mcp_asgi.testing import serve

from ..helpers import Otel, attrs, trigger, wait_for
from ..servers import MODERN
from .apps import Record, lifespan_state, mcp_routes_app


@asynccontextmanager
async def sdk(url: str, token: str | None = None) -> AsyncIterator[Client]:
    """The SDK client at 2026-07-28, with a bearer token if given."""
    headers = {"authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=10) as http,
        Client(streamable_http_client(url, http_client=http), mode=MODERN, cache=None) as client,
    ):
        yield client


def text(result: Any) -> str:
    return "\n".join(block.text for block in result.content)


@pytest.fixture(scope="module")
def shop() -> Iterator[tuple[str, Record, Otel]]:
    """The shop app served by uvicorn: every route of GET, HEAD, POST, PUT, DELETE."""
    record, otel = Record(), Otel()
    app, _, _ = mcp_routes_app(record, otel=otel)
    lifespan_state(app)
    with serve(app) as live:
        yield live.url + "/mcp", record, otel


async def test_the_sdk_lists_and_calls_the_routes(shop: tuple[str, Record, Otel]) -> None:
    """The SDK takes the tools (their output schemas validate what the routes answer),
    and the answers: structured, text, an error with its detail."""
    url, record, _ = shop
    async with sdk(url) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert {"ping", "read_item_items__item_id__get", "create_item", "tree"} <= set(tools)
        assert tools["delete_item"].annotations is not None
        assert tools["delete_item"].annotations.destructive_hint is True
        read = await client.call_tool(
            "read_item_items__item_id__get", {"item_id": 1, "q": "blue", "x-shop-tag": "sale"}
        )
        assert read.structured_content == {
            "name": "kettle blue sale",
            "price": 25.0,
            "tags": ["kitchen"],
        }
        assert record.state == ("open", "yes")  # app.state and the lifespan state
        tree = await client.call_tool("tree", {})
        assert tree.structured_content == {
            "label": "root",
            "children": [{"label": "leaf", "children": []}],
        }
        created = await client.call_tool("create_item", {"name": "cup", "price": 3})
        assert created.structured_content == {"name": "cup", "price": 3.0, "tags": []}
        missing = await client.call_tool("read_item_items__item_id__get", {"item_id": 99})
        assert missing.is_error
        assert text(missing) == "HTTP 404 Not Found: Item 99 not found"
        anonymous = await client.call_tool("whoami", {})  # the route's own auth: 401
        assert anonymous.is_error
        assert text(anonymous) == "HTTP 401 Unauthorized: Not authenticated"
        streamed = await client.call_tool("stream", {"lines": 3})
        assert text(streamed) == "line 0\nline 1\nline 2\n"


async def test_a_2025_era_client_gets_them_too(shop: tuple[str, Record, Otel]) -> None:
    """The SDK in legacy mode (a 2025-era session): the same tools and answers."""
    url, _, _ = shop
    async with Client(url, mode="legacy") as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"ping", "read_item_items__item_id__get", "tree"} <= names
        read = await client.call_tool("read_item_items__item_id__get", {"item_id": 1})
    assert read.structured_content == {"name": "kettle", "price": 25.0, "tags": ["kitchen"]}


async def test_dropping_the_call_cancels_the_route(shop: tuple[str, Record, Otel]) -> None:
    """The SDK's call cancelled mid-route closes its stream: the route's work is cancelled
    and its `yield` dependency closed, and the span says client_disconnect."""
    url, record, otel = shop
    async with sdk(url) as client:
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.call_tool, "slow", {})
            await wait_for(record.started)
            tg.cancel_scope.cancel()
        await wait_for(record.exited)
        await wait_for(record.closed)
        assert record.events == ["open", "route CancelledError", "closed by CancelledError"]
        span = await otel.wait_span("tools/call slow")
        assert attrs(span)["mcp_asgi.cancellation.reason"] == CancelReason.CLIENT_DISCONNECT.value
        again = await client.call_tool("ping", {})
        assert text(again) == "pong"


@pytest.fixture(scope="module")
def protected() -> Iterator[str]:
    """An endpoint that verifies bearer tokens; the routes once with the principal handed
    over (the default), once (prefix fwd_) with the token forwarded."""
    forwarded = AppRoutes(include=["whoami"], prefix="fwd_", forward_authorization=True)
    app, _, _ = mcp_routes_app(Record(), protected=True, routes=AppRoutes(), extra=(forwarded,))
    with serve(app) as live:
        yield live.url + "/mcp"


async def test_the_principal_is_handed_over_and_no_token_forwarded(protected: str) -> None:
    async with sdk(protected, "alice-token") as client:
        me = await client.call_tool("whoami", {})
        assert me.structured_content == {"subject": "alice", "authorization": None, "user": "alice"}
        stats = await client.call_tool("stats", {})
        assert not stats.is_error


async def test_the_token_is_forwarded_when_configured(protected: str) -> None:
    """forward_authorization=True: the route authenticates the forwarded header itself."""
    async with sdk(protected, "alice-token") as client:
        me = await client.call_tool("fwd_whoami", {})
    assert me.structured_content == {
        "subject": "alice",
        "authorization": "Bearer alice-token",
        "user": None,
    }


async def test_the_routes_403_is_an_error_result(protected: str) -> None:
    """The route's own authorization decides: bob lacks items:admin."""
    async with sdk(protected, "bob-token") as client:
        stats = await client.call_tool("stats", {})
    assert stats.is_error
    assert text(stats) == "HTTP 403 Forbidden: Needs the items:admin scope"


async def test_routes_added_later_after_refresh() -> None:
    """A route added at run time is listed after refresh(), and a listening SDK client
    gets notifications/tools/list_changed."""
    record = Record()
    routes = AppRoutes()
    app, _, _ = mcp_routes_app(record, routes=routes)

    async def add() -> dict[str, str]:
        async def late() -> dict[str, str]:
            return {"late": "yes"}

        app.add_api_route("/late", late, methods=["GET"], operation_id="late")
        routes.refresh()
        return {"added": "late"}

    app.add_api_route("/admin/add", add, methods=["PUT"])
    with serve(app) as live:
        async with sdk(live.url + "/mcp") as client:
            before = {tool.name for tool in (await client.list_tools()).tools}
            assert "late" not in before
            async with client.listen(tools_list_changed=True) as subscription:
                await trigger(live.url, "PUT", "/admin/add")
                with anyio.fail_after(10):
                    event = await subscription.__anext__()
            assert isinstance(event, ToolsListChanged)
            after = {tool.name for tool in (await client.list_tools()).tools}
            assert after - before == {"late"}
            late = await client.call_tool("late", {})
            assert late.structured_content == {"late": "yes"}
    assert isinstance(app, FastAPI)
