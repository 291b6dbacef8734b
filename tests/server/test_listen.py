"""subscriptions/listen over a real uvicorn server: ack, opt-in, tagging, and both ends."""

from __future__ import annotations

import contextlib
from typing import Any

import anyio
import pytest

from mcp_asgi.testing import McpTestClient, serve

from ..helpers import Otel, attrs, next_message, serving, trigger, wait_for
from ..servers import ALL, SUB_ID, WatchedBus, changing_app, listen_server


async def test_first_message_acknowledges_the_honoured_subset() -> None:
    """The first event is the ack: the filter minus what the server cannot deliver."""
    server = listen_server()
    server.remove_resource("res://a")
    server.remove_resource("res://notes/{note}")
    with serving(changing_app(server)) as client:
        notifications = dict(ALL, taskIds=["t1"])
        async with client.stream(
            "subscriptions/listen", {"notifications": notifications}, id="L1"
        ) as stream:
            ack = await next_message(stream)
            assert stream.status == 200
            assert stream.headers["content-type"].startswith("text/event-stream")
            assert stream.headers["x-accel-buffering"] == "no"
    assert ack == {
        "jsonrpc": "2.0",
        "method": "notifications/subscriptions/acknowledged",
        "params": {
            "_meta": {SUB_ID: "L1"},
            "notifications": {"toolsListChanged": True, "promptsListChanged": True},
        },
    }


async def test_only_opted_in_kinds_arrive_tagged_with_the_listen_id() -> None:
    """Unrequested kinds and unsubscribed URIs are skipped; every event carries the id."""
    server = listen_server()
    with serve(changing_app(server)) as live:
        client = McpTestClient(live.url + "/mcp")
        wanted = {"toolsListChanged": True, "resourceSubscriptions": ["res://notes"]}
        async with client.stream("subscriptions/listen", {"notifications": wanted}, id=7) as s:
            ack = await next_message(s)
            assert ack["params"]["notifications"] == wanted
            for path in (
                "/notify/prompts",
                "/notify/resources",
                "/notify/updated?uri=res://a",
                "/notify/updated?uri=res://notesbook",
                "/notify/updated?uri=res://notes/1",
                "/notify/tools",
            ):
                await trigger(live.url, "POST", path)
            first, second = await next_message(s), await next_message(s)
    assert first == {
        "jsonrpc": "2.0",
        "method": "notifications/resources/updated",
        "params": {"_meta": {SUB_ID: 7}, "uri": "res://notes/1"},
    }
    assert second == {
        "jsonrpc": "2.0",
        "method": "notifications/tools/list_changed",
        "params": {"_meta": {SUB_ID: 7}},
    }


async def test_each_subscription_gets_its_own_tag() -> None:
    """Two listen streams each receive the event, tagged with their own request id."""
    server = listen_server()
    with serve(changing_app(server)) as live:
        client = McpTestClient(live.url + "/mcp")
        params = {"notifications": {"promptsListChanged": True}}
        async with (
            client.stream("subscriptions/listen", params, id="a") as first,
            client.stream("subscriptions/listen", params, id="b") as second,
        ):
            await next_message(first)
            await next_message(second)
            await trigger(live.url, "POST", "/notify/prompts")
            got = [await next_message(first), await next_message(second)]
    assert [m["params"]["_meta"][SUB_ID] for m in got] == ["a", "b"]
    assert {m["method"] for m in got} == {"notifications/prompts/list_changed"}


async def test_a_burst_of_changes_is_a_few_notifications() -> None:
    """2000 tools changes announced one after another, the listener free to write between
    any two (a downstream relaying its list_changed): a few notifications, not 2000."""
    server = listen_server()
    with serve(changing_app(server)) as live:
        client = McpTestClient(live.url + "/mcp")
        params = {"notifications": {"toolsListChanged": True}}
        async with client.stream("subscriptions/listen", params) as s:
            await next_message(s)
            await trigger(live.url, "POST", "/notify/tools", times="2000")
            methods = []
            while True:  # until the stream is quiet
                with anyio.move_on_after(1):
                    methods.append((await next_message(s))["method"])
                    continue
                break
    assert set(methods) == {"notifications/tools/list_changed"}
    assert 1 <= len(methods) <= 50


async def test_registering_and_removing_a_tool_notifies() -> None:
    """Adding a tool (on the loop) and removing one (from a worker thread) both notify."""
    server = listen_server()
    with serve(changing_app(server)) as live:
        client = McpTestClient(live.url + "/mcp")
        params = {"notifications": {"toolsListChanged": True}}
        async with client.stream("subscriptions/listen", params) as s:
            await next_message(s)
            await trigger(live.url, "PUT", "/tools/added")
            assert (await next_message(s))["method"] == "notifications/tools/list_changed"
            listed = await client.request("tools/list")
            assert {t["name"] for t in listed.final["result"]["tools"]} == {"echo", "added"}
            await trigger(live.url, "DELETE", "/tools/added")
            assert (await next_message(s))["method"] == "notifications/tools/list_changed"
        listed = await client.request("tools/list")
        assert {t["name"] for t in listed.final["result"]["tools"]} == {"echo"}


async def test_client_close_cancels_and_releases_the_subscription(otel: Otel) -> None:
    """Closing the stream cancels the scope (client_disconnect) and unsubscribes at once."""
    bus = WatchedBus()
    server = listen_server(bus)
    app = changing_app(server, otel)
    with serving(app) as client:
        async with client.stream("subscriptions/listen", {"notifications": ALL}) as s:
            await next_message(s)
            assert bus.subscriber_count == 1
            assert server.subscriptions.open_streams == 1
            await s.drop()
        await wait_for(bus.empty)
        assert bus.subscriber_count == 0
        assert server.subscriptions.open_streams == 0
        span = await otel.wait_span("subscriptions/listen")
    assert attrs(span)["mcp_asgi.cancellation.reason"] == "client_disconnect"


async def test_close_subscriptions_sends_the_final_result_then_closes() -> None:
    """A server-initiated end: the listen result (with the subscription id) is the last event."""
    server = listen_server()
    with serve(changing_app(server)) as live:
        client = McpTestClient(live.url + "/mcp")
        async with client.stream(
            "subscriptions/listen", {"notifications": ALL}, id="L", progress=True, log_level="debug"
        ) as s:
            await next_message(s)
            await trigger(live.url, "POST", "/close")
            final = await next_message(s)
            assert await s.next_message() is None
    assert final["id"] == "L"
    result = final["result"]
    assert result["resultType"] == "complete"
    assert result["_meta"][SUB_ID] == "L"
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "listen"


async def test_shutdown_ends_listen_streams_with_the_final_result() -> None:
    """When uvicorn shuts down, an open listen stream gets its final result, then closes."""
    server = listen_server()
    stack = contextlib.ExitStack()
    live = stack.enter_context(serve(changing_app(server), timeout_graceful_shutdown=0.2))
    client = McpTestClient(live.url + "/mcp")
    try:
        async with client.stream("subscriptions/listen", {"notifications": ALL}, id=3) as s:
            await next_message(s)
            await anyio.to_thread.run_sync(stack.close)
            final = await next_message(s)
            assert await s.next_message() is None
    finally:
        stack.close()
    assert final == {
        "jsonrpc": "2.0",
        "id": 3,
        "result": {
            "resultType": "complete",
            "_meta": {SUB_ID: 3, "io.modelcontextprotocol/serverInfo": server.server_info},
        },
    }


async def test_listen_outlives_max_request_duration_and_sends_keepalives() -> None:
    """max_request_duration does not end a listen stream; keep-alive comments flow."""
    server = listen_server()
    app = changing_app(server, max_request_duration=0.1, keepalive_interval=0.05)
    with serve(app) as live:
        client = McpTestClient(live.url + "/mcp")
        params = {"notifications": {"toolsListChanged": True}}
        async with client.stream("subscriptions/listen", params) as s:
            await next_message(s)
            await anyio.sleep(0.5)
            await trigger(live.url, "POST", "/notify/tools")
            await trigger(live.url, "POST", "/close")
            rest = await s.read_raw()
    assert b": \r\n\r\n" in rest
    assert rest.index(b"notifications/tools/list_changed") < rest.index(b'"resultType"')


async def test_listen_max_duration_ends_the_stream_gracefully() -> None:
    """With listen_max_duration set, the stream ends with the final result (client re-listens)."""
    server = listen_server()
    with serving(changing_app(server, listen_max_duration=0.2)) as client:
        async with client.stream("subscriptions/listen", {"notifications": ALL}, id=1) as s:
            await next_message(s)
            final = await next_message(s)
    assert final["result"]["_meta"][SUB_ID] == 1


@pytest.mark.parametrize("mode", ["json", "auto", "sse"])
async def test_listen_always_answers_with_sse(mode: str) -> None:
    """Whatever the response mode, a client that accepts SSE gets an SSE listen stream."""
    with serving(changing_app(listen_server(), response_mode=mode)) as client:
        async with client.stream("subscriptions/listen", {"notifications": ALL}) as s:
            ack = await next_message(s)
            assert s.headers["content-type"].startswith("text/event-stream")
    assert ack["method"] == "notifications/subscriptions/acknowledged"


async def test_a_client_that_accepts_only_json_is_refused() -> None:
    """Accept without text/event-stream: 406 with a JSON-RPC error echoing the id."""
    with serving(changing_app(listen_server())) as client:
        body = client.build("subscriptions/listen", {"notifications": ALL}, id=9)
        headers = client.headers_for(body) | {"accept": "application/json"}
        response = await client.post(body, headers)
    assert response.status == 406
    assert response.final["id"] == 9
    assert response.final["error"]["code"] == -32600


@pytest.mark.parametrize(
    "params",
    [{}, {"notifications": []}, {"notifications": {"toolsListChanged": "yes"}}],
)
async def test_a_malformed_filter_is_invalid_params(params: dict[str, Any]) -> None:
    """A missing or ill-typed filter is -32602 with HTTP 400, before any stream opens."""
    with serving(changing_app(listen_server())) as client:
        response = await client.request("subscriptions/listen", params)
    assert response.status == 400
    assert response.final["error"]["code"] == -32602


async def test_discover_advertises_list_changed_and_subscribe() -> None:
    """server/discover matches what listen delivers."""
    with serving(changing_app(listen_server())) as client:
        response = await client.request("server/discover")
    capabilities = response.final["result"]["capabilities"]
    assert capabilities["tools"] == {"listChanged": True}
    assert capabilities["prompts"] == {"listChanged": True}
    assert capabilities["resources"] == {"listChanged": True, "subscribe": True}
