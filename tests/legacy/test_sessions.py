"""2025-era sessions on a live server: handshake, session ids, expiry, DELETE, cancellation,
the GET stream, and era routing that leaves 2026-07-28 requests untouched."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from mcp_asgi import CancelReason
from mcp_asgi.testing import LiveServer, McpStream, McpTestClient, serve

from ..helpers import Otel, Probe, next_message, trigger, wait_for
from ..servers import LATEST, LegacyClient, legacy_app

_VISIBLE_ASCII = re.compile(r"^[\x21-\x7e]+$")


async def open_session(live: LiveServer, version: str | None = None) -> LegacyClient:
    """A 2025-era client of `live` with an open session."""
    client = LegacyClient(live.url + "/mcp")
    await client.initialize(version)
    return client


@asynccontextmanager
async def slow_call(client: LegacyClient, **options: Any) -> AsyncIterator[McpStream]:
    """The session's `slow` call, once its first progress notification says it runs."""
    async with client.open("tools/call", {"name": "slow"}, progress=True, **options) as stream:
        assert (await next_message(stream))["method"] == "notifications/progress"
        yield stream


async def rest_once_exited(stream: McpStream, probe: Probe) -> bytes:
    """Everything the stream still sends once the handler has exited, up to its end."""
    await wait_for(probe.exited)
    with anyio.fail_after(10):
        return await stream.read_raw()


@pytest.mark.parametrize(
    ("requested", "negotiated"),
    [
        ("2025-11-25", "2025-11-25"),
        ("2025-06-18", "2025-06-18"),
        ("2025-03-26", "2025-03-26"),
        ("2024-11-05", LATEST),
        ("2031-01-01", LATEST),
    ],
)
async def test_initialize_negotiates_a_version_and_opens_a_session(
    requested: str, negotiated: str
) -> None:
    """initialize answers the client's version if served (else the latest) and a session id."""
    with serve(legacy_app(Probe())) as live:
        client = LegacyClient(live.url + "/mcp")
        response = await client.initialize(requested)
    result = response.final["result"]
    assert result["protocolVersion"] == negotiated
    assert result["serverInfo"] == {
        "name": "legacy",
        "version": "1.2.3",
        "title": "Legacy test server",
    }
    assert result["capabilities"]["tools"] == {"listChanged": True}
    assert result["capabilities"]["resources"] == {"listChanged": True, "subscribe": True}
    assert "resultType" not in result
    assert client.session_id is not None
    assert _VISIBLE_ASCII.match(client.session_id)
    assert len(client.session_id) >= 32


async def test_a_2025_03_26_client_sends_no_version_header() -> None:
    """Requests without MCP-Protocol-Version are 2025-era and use the negotiated revision."""
    with serve(legacy_app(Probe())) as live:
        client = await open_session(live, "2025-03-26")
        headers = client.session_headers()
        del headers["mcp-protocol-version"]
        response = await client.post(client.body("tools/list"), headers)
    assert response.status == 200
    assert {t["name"] for t in response.final["result"]["tools"]} == {"add", "chatty", "slow"}


async def test_each_initialize_opens_its_own_session() -> None:
    """Two initializes get two different session ids."""
    with serve(legacy_app(Probe())) as live:
        first, second = await open_session(live), await open_session(live)
    assert first.session_id != second.session_id


async def test_methods_answer_in_2025_shapes() -> None:
    """Results lose the 2026-only fields; a missing resource is -32002; unknown methods -32601."""
    with serve(legacy_app(Probe())) as live:
        client = await open_session(live)
        ping = await client.call("ping")
        tools = await client.call("tools/list")
        added = await client.call("tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}})
        read = await client.call("resources/read", {"uri": "docs://readme"})
        missing = await client.call("resources/read", {"uri": "docs://nothing"})
        prompt = await client.call("prompts/get", {"name": "greet", "arguments": {"name": "Ada"}})
        discover = await client.call("server/discover")
        level = await client.call("logging/setLevel", {"level": "loud"})
        no_name = await client.call("tools/call", {"arguments": {}})
    assert ping.final["result"] == {}
    listed = tools.final["result"]
    assert {t["name"] for t in listed["tools"]} == {"add", "chatty", "slow"}
    for key in ("resultType", "ttlMs", "cacheScope", "_meta"):
        assert key not in listed
    assert added.final["result"]["structuredContent"] == {"result": 5}
    assert read.final["result"]["contents"][0]["text"] == "read me"
    assert (missing.status, missing.final["error"]["code"]) == (200, -32002)
    assert missing.final["error"]["data"] == {"uri": "docs://nothing"}
    assert prompt.final["result"]["messages"][0]["content"]["text"] == "Hello Ada!"
    assert (discover.status, discover.final["error"]["code"]) == (200, -32601)
    assert level.final["error"]["code"] == -32602
    assert (no_name.status, no_name.final["error"]["code"]) == (200, -32602)


async def test_log_messages_follow_the_session_level() -> None:
    """No log messages until logging/setLevel; then those at or above the level, on the
    request's own stream."""
    with serve(legacy_app(Probe(), response_mode="sse")) as live:
        client = await open_session(live)
        before = await client.call("tools/call", {"name": "chatty"})
        level = await client.call("logging/setLevel", {"level": "info"})
        after = await client.call("tools/call", {"name": "chatty"})
    assert [m.get("method") for m in before.messages] == [None]
    assert level.final["result"] == {}
    logs = [m["params"] for m in after.messages if m.get("method") == "notifications/message"]
    assert logs == [{"level": "info", "data": "shown at info"}]
    assert after.final["result"]["content"][0]["text"] == "said"


async def test_requests_need_an_open_session() -> None:
    """No Mcp-Session-Id: 400; an unknown one: 404; both with a JSON-RPC error body."""
    with serve(legacy_app(Probe())) as live:
        client = LegacyClient(live.url + "/mcp")
        missing = await client.call("tools/list")
        client.session_id = "no-such-session"
        unknown = await client.call("tools/list")
        unknown_get = await client.post(b"", client.session_headers(), http_method="GET")
        unknown_delete = await client.delete()
        unknown_notification = await client.notify("notifications/initialized")
    assert missing.status == 400
    assert missing.final["error"]["code"] == -32600
    assert missing.final["id"] == 1
    for response in (unknown, unknown_get, unknown_delete, unknown_notification):
        assert response.status == 404
        assert response.final["error"]["code"] == -32600


async def test_unsupported_protocol_version_header_is_400() -> None:
    """A 2025-era request naming a revision this server does not serve gets 400."""
    with serve(legacy_app(Probe())) as live:
        client = await open_session(live)
        client.version = "2024-11-05"
        response = await client.call("tools/list")
    assert response.status == 400
    assert response.final["error"]["data"]["supported"] == [
        "2025-11-25",
        "2025-06-18",
        "2025-03-26",
    ]


async def test_an_idle_session_expires() -> None:
    """A session unused for session_ttl seconds is gone: its id answers 404."""
    with serve(legacy_app(Probe(), session_ttl=0.05)) as live:
        client = await open_session(live)
        await anyio.sleep(0.2)
        response = await client.call("ping")
    assert response.status == 404


async def test_delete_ends_the_session_and_cancels_its_requests() -> None:
    """DELETE answers 204, cancels the session's request (session_closed) and ends its id."""
    probe = Probe()
    with serve(legacy_app(probe)) as live:
        client = await open_session(live)
        async with slow_call(client) as stream:
            deleted = await client.delete()
            rest = await rest_once_exited(stream, probe)
        after = await client.call("ping")
    assert deleted.status == 204
    assert probe.reason is CancelReason.SESSION_CLOSED
    assert b"data:" not in rest  # nothing more for the cancelled request, and the stream ended
    assert after.status == 404


async def test_cancelled_notification_stops_the_request_and_nothing_follows() -> None:
    """notifications/cancelled cancels the session's request; its stream ends with no reply."""
    probe = Probe()
    with serve(legacy_app(probe)) as live:
        client = await open_session(live)
        async with slow_call(client, id=41) as stream:
            accepted = await client.notify(
                "notifications/cancelled", {"requestId": 41, "reason": "user"}
            )
            rest = await rest_once_exited(stream, probe)
        still_open = await client.call("ping")
    assert accepted.status == 202
    assert probe.reason is CancelReason.CLIENT_NOTIFICATION
    assert b"data:" not in rest
    assert still_open.final["result"] == {}


async def test_a_session_cannot_cancel_another_sessions_request() -> None:
    """A cancel naming another session's request id (or an unknown one) is ignored."""
    probe = Probe()
    with serve(legacy_app(probe)) as live:
        owner, other = await open_session(live), await open_session(live)
        async with slow_call(owner, id=7) as stream:
            foreign = await other.notify("notifications/cancelled", {"requestId": 7})
            unknown = await owner.notify("notifications/cancelled", {"requestId": 99})
            malformed = await owner.notify("notifications/cancelled", {"requestId": [7]})
            probe.release.set()
            final = await next_message(stream)
    assert (foreign.status, unknown.status, malformed.status) == (202, 202, 202)
    assert probe.reason is None
    assert probe.notes == ["finished"]
    assert final["id"] == 7
    assert final["result"]["content"][0]["text"] == "released"


async def test_a_request_id_in_flight_cannot_be_reused() -> None:
    """A second request with the id of one still in flight on the session is refused."""
    probe = Probe()
    with serve(legacy_app(probe)) as live:
        client = await open_session(live)
        async with slow_call(client, id=5) as stream:
            again = await client.post(client.body("ping", id=5), client.session_headers())
            probe.release.set()
            await next_message(stream)
    assert again.status == 400
    assert again.final["id"] == 5


async def test_disconnect_cancels_by_default() -> None:
    """A 2025-era client that drops the connection cancels its request (client_disconnect)."""
    probe = Probe()
    with serve(legacy_app(probe)) as live:
        client = await open_session(live)
        async with slow_call(client) as stream:
            await stream.drop()
        await wait_for(probe.exited)
    assert probe.reason is CancelReason.CLIENT_DISCONNECT


async def test_without_disconnect_cancels_work_goes_on_until_the_session_expires() -> None:
    """legacy_disconnect_cancels=False: a dropped request runs on; expiry then cancels it."""
    probe = Probe()
    app = legacy_app(probe, legacy_disconnect_cancels=False, session_ttl=0.05)
    with serve(app) as live:
        client = await open_session(live)
        async with slow_call(client) as stream:
            await stream.drop()
        await anyio.sleep(0.2)  # past the ttl: the request no longer holds the session
        assert not probe.exited.is_set()
        expired = await client.call("ping")  # the arrival checks expiry
        await wait_for(probe.exited)
    assert expired.status == 404
    assert probe.reason is CancelReason.SESSION_CLOSED


async def test_get_stream_carries_list_changes_and_subscribed_updates() -> None:
    """The GET stream gets tools/list_changed, and updates only of subscribed resources."""
    with serve(legacy_app(Probe())) as live:
        client = await open_session(live)
        subscribed = await client.call("resources/subscribe", {"uri": "docs://readme"})
        async with client.get_stream() as stream:
            await trigger(live.url, "POST", "/notify/tools")
            tools_changed = await next_message(stream)
            await trigger(live.url, "POST", "/notify/updated", uri="docs://other")
            await trigger(live.url, "POST", "/notify/updated", uri="docs://readme")
            updated = await next_message(stream)
        assert stream.headers["content-type"].startswith("text/event-stream")
        assert stream.headers["mcp-session-id"] == client.session_id
    assert subscribed.final["result"] == {}
    assert tools_changed["method"] == "notifications/tools/list_changed"
    assert updated == {
        "jsonrpc": "2.0",
        "method": "notifications/resources/updated",
        "params": {"uri": "docs://readme"},
    }


async def test_a_newer_get_stream_replaces_the_older_one() -> None:
    """A session has one GET stream: opening another ends the first (no message twice)."""
    with serve(legacy_app(Probe())) as live:
        client = await open_session(live)
        async with client.get_stream() as first, client.get_stream() as second:
            with anyio.fail_after(10):
                assert await first.next_message() is None
            await trigger(live.url, "POST", "/notify/tools")
            changed = await next_message(second)
    assert changed["method"] == "notifications/tools/list_changed"


async def test_get_and_delete_without_a_session_are_405() -> None:
    """GET and DELETE naming no session get 405, as from a 2026-07-28-only server."""
    with serve(legacy_app(Probe())) as live:
        client = McpTestClient(live.url + "/mcp")
        get = await client.post(b"", {"accept": "text/event-stream"}, http_method="GET")
        delete = await client.post(b"", {}, http_method="DELETE")
    for response in (get, delete):
        assert response.status == 405
        assert response.headers["allow"] == "POST"
        assert response.final["error"]["code"] == -32600


@pytest.mark.parametrize(
    ("headers", "meta", "status", "code"),
    [
        ({"mcp-protocol-version": "2026-07-28"}, False, 400, -32602),
        ({"mcp-protocol-version": "2099-01-01"}, False, 400, -32022),
        ({"mcp-protocol-version": "2025-11-25"}, True, 400, -32020),
        ({"mcp-session-id": "stray"}, True, 200, None),
    ],
)
async def test_modern_requests_keep_their_errors(
    headers: dict[str, str], meta: bool, status: int, code: int | None
) -> None:
    """Requests a 2026-07-28 client sends stay on the modern path, with its error bodies."""
    with serve(legacy_app(Probe())) as live:
        client = McpTestClient(live.url + "/mcp")
        body = client.build("tools/list")
        if not meta:
            del body["params"]["_meta"]
        response = await client.post(body, {**client.headers_for(body), **headers})
    assert response.status == status
    if code is None:
        assert response.final["result"]["resultType"] == "complete"
    else:
        assert response.final["error"]["code"] == code
        assert response.final["id"] == body["id"]


async def test_initialize_with_the_modern_envelope_is_the_modern_404() -> None:
    """initialize claiming 2026-07-28 in _meta gets the modern answer: 404, -32601."""
    with serve(legacy_app(Probe())) as live:
        client = McpTestClient(live.url + "/mcp")
        response = await client.request("initialize", {"protocolVersion": LATEST})
    assert response.status == 404
    assert response.final["error"]["code"] == -32601
    assert "mcp-session-id" not in response.headers


async def test_legacy_disabled_serves_only_2026() -> None:
    """legacy_enabled=False: initialize is rejected by the modern path, with its error body."""
    with serve(legacy_app(Probe(), legacy_enabled=False)) as live:
        client = LegacyClient(live.url + "/mcp")
        response = await client.post(
            client.body("initialize", {"protocolVersion": LATEST, "capabilities": {}}),
            {"content-type": "application/json"},
        )
    assert response.status == 400
    assert response.final["error"]["data"]["supported"] == ["2026-07-28"]


async def test_spans_carry_the_session_and_the_negotiated_version(otel: Otel) -> None:
    """A 2025-era request's span has mcp.session.id and mcp.protocol.version; 2026 ones no id."""
    with serve(legacy_app(Probe(), otel)) as live:
        client = await open_session(live, "2025-06-18")
        await client.call("tools/call", {"name": "add", "arguments": {"a": 1, "b": 1}})
        await McpTestClient(live.url + "/mcp").call_tool("add", {"a": 1, "b": 1})
    spans: dict[str, list[Any]] = {}
    for span in otel.spans.get_finished_spans():
        spans.setdefault(span.name, []).append(dict(span.attributes or {}))
    (initialize,) = spans["initialize"]
    legacy, modern = spans["tools/call add"]
    assert initialize["mcp.session.id"] == client.session_id
    assert legacy["mcp.session.id"] == client.session_id
    assert legacy["mcp.protocol.version"] == "2025-06-18"
    assert "mcp.session.id" not in modern
    assert modern["mcp.protocol.version"] == "2026-07-28"
