"""Resumable 2025-era streams on a live uvicorn: event ids, the priming event, a stream the
handler closes early (`ctx.close_stream()`, SSE polling), a client cut off while its
request goes on (`legacy_disconnect_cancels=False`), a GET stream resumed, and a
`Last-Event-ID` that is not ours."""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx

from mcp_asgi import Context, McpServer
from mcp_asgi.testing import serve

from ..helpers import Probe, mcp_app, trigger, wait_for
from ..servers import LegacyClient, changing_app

Event = dict[str, str]


def resuming_server(go: threading.Event, probe: Probe) -> McpServer:
    server = McpServer("resuming")

    @server.tool()
    async def polled(ctx: Context) -> str:
        """Reports progress, closes its stream early, reports more, answers."""
        await ctx.report_progress(1, 3)
        closed = await ctx.close_stream()
        await ctx.report_progress(2, 3)
        await anyio.sleep(0.05)
        await ctx.report_progress(3, 3)
        return f"closed={closed}"

    @server.tool()
    async def gated(ctx: Context) -> str:
        """Reports progress, waits for the test's go, reports again, answers."""
        with probe.running(ctx):
            await ctx.report_progress(1, 2)
            await anyio.to_thread.run_sync(go.wait)  # set from the test's thread
            await ctx.report_progress(2, 2)
        return "done"

    return server


def parse_sse(text: str) -> list[Event]:
    """The events of an SSE body (id, retry, event, data), comments left out."""
    events: list[Event] = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        event: Event = {}
        for line in block.split("\n"):
            if not line or line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            event[name] = value.removeprefix(" ")
        if event:
            events.append(event)
    return events


@asynccontextmanager
async def opened(
    url: str, headers: dict[str, str], body: Any = None
) -> AsyncIterator[httpx.Response]:
    async with httpx.AsyncClient(timeout=10) as http:
        method = "GET" if body is None else "POST"
        content = None if body is None else json.dumps(body)
        async with http.stream(method, url, headers=headers, content=content) as response:
            yield response


async def read_events(response: httpx.Response, until: int | None = None) -> list[Event]:
    """Read events; stop after `until` of them carrying data (None: to the end)."""
    text = ""
    with anyio.fail_after(10):
        async for chunk in response.aiter_text():
            text += chunk
            if until is not None and len([e for e in parse_sse(text) if e.get("data")]) >= until:
                break
    return parse_sse(text)


async def session(url: str) -> LegacyClient:
    client = LegacyClient(url)
    await client.initialize()
    return client


def get_headers(client: LegacyClient, last: str | None) -> dict[str, str]:
    headers = {**client.session_headers(), "accept": "text/event-stream"}
    del headers["content-type"]
    if last is not None:
        headers["last-event-id"] = last
    return headers


def data(events: list[Event]) -> list[dict[str, Any]]:
    return [json.loads(e["data"]) for e in events if e.get("data")]


async def test_a_stream_closed_early_is_fetched_with_last_event_id() -> None:
    """`ctx.close_stream()`: the POST stream opens with the priming event (an id, retry,
    empty data), ends without the result; a GET with Last-Event-ID gets what followed, in
    order with ids, then the result, and ends. Read again from the same id: the same."""
    with serve(mcp_app(resuming_server(threading.Event(), Probe()))) as live:
        url = live.url + "/mcp"
        client = await session(url)
        body = client.body("tools/call", {"name": "polled"}, progress=True)
        async with opened(url, client.session_headers(), body) as response:
            first = await read_events(response)
        priming = first[0]
        assert priming["data"] == ""
        assert priming["retry"] == "1000"
        assert priming["id"]
        assert [m.get("method") for m in data(first)] == ["notifications/progress"]
        assert all(e.get("id") for e in first if "data" in e)
        seen = []
        for _ in range(2):
            async with opened(url, get_headers(client, first[-2]["id"])) as response:
                assert response.status_code == 200
                rest = await read_events(response)
            messages = data(rest)
            assert [m.get("params", {}).get("progress") for m in messages] == [2, 3, None]
            assert messages[-1]["result"]["content"][0]["text"] == "closed=True"
            assert len({e["id"] for e in rest}) == 3
            seen.append([e["id"] for e in rest])
        assert seen[0] == seen[1]


async def test_a_cut_client_resumes_when_disconnects_do_not_cancel() -> None:
    """With legacy_disconnect_cancels=False the client's socket closes mid-call; the
    handler goes on (not cancelled) and the GET with the last id it saw delivers the rest
    and the result."""
    go, probe = threading.Event(), Probe()
    app = mcp_app(resuming_server(go, probe), legacy_disconnect_cancels=False)
    with serve(app) as live:
        url = live.url + "/mcp"
        client = await session(url)
        body = client.body("tools/call", {"name": "gated"}, progress=True)
        async with opened(url, client.session_headers(), body) as response:
            seen = await read_events(response, until=1)  # then the socket closes
        last = [e for e in seen if e.get("data")][-1]["id"]
        go.set()
        await wait_for(probe.exited)
        async with opened(url, get_headers(client, last)) as response:
            rest = data(await read_events(response))
    assert probe.reason is None
    assert rest[0]["params"]["progress"] == 2
    assert rest[-1]["result"]["content"][0]["text"] == "done"


async def test_a_get_stream_resumes_after_what_it_saw() -> None:
    """GET stream events carry ids; a GET with the id of its first event gets the events
    logged after it, then goes on live on the same log."""
    with serve(changing_app(McpServer("quiet"))) as live:
        url = live.url + "/mcp"
        client = await session(url)

        async def announce() -> None:
            await anyio.sleep(0.2)
            await trigger(live.url, "POST", "/notify/tools")
            await trigger(live.url, "POST", "/notify/prompts")

        async with (
            opened(url, get_headers(client, None)) as response,
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(announce)
            events = await read_events(response, until=2)
        ids = [e["id"] for e in events if e.get("data")]
        async with opened(url, get_headers(client, ids[0])) as response:
            again = await read_events(response, until=1)
    assert [m["method"] for m in data(again)] == ["notifications/prompts/list_changed"]
    assert [e["id"] for e in again if e.get("data")] == ids[1:]


async def test_a_last_event_id_not_ours_is_400() -> None:
    """A Last-Event-ID this server never sent: 400 with a JSON-RPC error."""
    with serve(mcp_app(McpServer("quiet"))) as live:
        url = live.url + "/mcp"
        client = await session(url)
        async with httpx.AsyncClient(timeout=10) as http:
            response = await http.get(url, headers=get_headers(client, "nope"))
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32600


async def test_an_unknown_request_stream_is_404() -> None:
    """A Last-Event-ID shaped like a request stream's id of this server but naming no log
    (never written, or expired): 404 with a JSON-RPC error, no stream."""
    with serve(mcp_app(McpServer("quiet"))) as live:
        url = live.url + "/mcp"
        client = await session(url)
        async with httpx.AsyncClient(timeout=10) as http:
            response = await http.get(url, headers=get_headers(client, "r" + "0" * 16 + ":1-0"))
    assert response.status_code == 404
    assert response.json()["error"]["code"] == -32600
    assert "expired" in response.json()["error"]["message"]


async def test_a_get_from_a_requests_final_event_ends_at_once() -> None:
    """Last-Event-ID naming a request's response (its last event): 200, nothing to replay,
    and the stream ends at once instead of waiting for events that never come."""
    with serve(mcp_app(resuming_server(threading.Event(), Probe()))) as live:
        url = live.url + "/mcp"
        client = await session(url)
        body = client.body("tools/call", {"name": "polled"}, progress=True)
        async with opened(url, client.session_headers(), body) as response:
            first = await read_events(response)
        async with opened(url, get_headers(client, first[-2]["id"])) as response:
            rest = await read_events(response)
        final = [e for e in rest if e.get("data")][-1]
        assert "result" in json.loads(final["data"])
        with anyio.fail_after(3):  # keepalive_interval is 15 s: an open stream would hang
            async with opened(url, get_headers(client, final["id"])) as response:
                assert response.status_code == 200
                assert data(await read_events(response)) == []


async def test_notifications_while_no_get_stream_is_connected_are_replayed() -> None:
    """A 2025-11-25 GET stream opens with a priming event (an id before any notification);
    its client goes; the notifications raised meanwhile are logged and the GET with that
    id gets them, in order, then goes on live."""
    with serve(changing_app(McpServer("quiet"))) as live:
        url = live.url + "/mcp"
        client = await session(url)
        async with opened(url, get_headers(client, None)) as response:
            async for chunk in response.aiter_text():
                primed = parse_sse(chunk)
                break
        assert primed[0]["data"] == ""
        assert primed[0]["id"]
        await anyio.sleep(0.2)  # the server has seen the client go
        await trigger(live.url, "POST", "/notify/tools")
        await trigger(live.url, "POST", "/notify/prompts")

        async def announce() -> None:
            await anyio.sleep(0.2)
            await trigger(live.url, "POST", "/notify/resources")

        async with (
            opened(url, get_headers(client, primed[0]["id"])) as response,
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(announce)
            events = await read_events(response, until=3)
    assert [m["method"] for m in data(events)] == [
        "notifications/tools/list_changed",
        "notifications/prompts/list_changed",
        "notifications/resources/list_changed",
    ]
    assert len({e["id"] for e in events if e.get("data")}) == 3


async def test_a_newer_get_stream_takes_over_without_loss() -> None:
    """Notifications raised around the moment a resumed GET replaces the parked one are
    delivered once each: none twice, and the burst still reaches the new stream (as a few
    notifications: a listener's pending changes are coalesced)."""
    with serve(changing_app(McpServer("quiet"))) as live:
        url = live.url + "/mcp"
        client = await session(url)
        async with opened(url, get_headers(client, None)) as response:
            async for chunk in response.aiter_text():
                primed = parse_sse(chunk)
                break
        await anyio.sleep(0.2)
        announced = anyio.Event()

        async def announce() -> None:
            for _ in range(10):
                await trigger(live.url, "POST", "/notify/tools")
            announced.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(announce)
            await anyio.sleep(0.01)
            async with opened(url, get_headers(client, primed[0]["id"])) as response:
                events = await read_until_quiet(response, announced)
    ids = [e["id"] for e in events if e.get("data")]
    assert 1 <= len(ids) <= 10
    assert len(set(ids)) == len(ids)
    assert {m["method"] for m in data(events)} == {"notifications/tools/list_changed"}


async def read_until_quiet(response: httpx.Response, done: anyio.Event) -> list[Event]:
    """Read events until `done` is set and then a second passes without one."""
    text = ""
    chunks = response.aiter_text()
    with anyio.fail_after(15):
        while True:
            with anyio.move_on_after(1.0) as quiet:
                text += await chunks.__anext__()
            if quiet.cancelled_caught and done.is_set():
                return parse_sse(text)
