"""A 2025-era request asks its client while it runs (`ctx.elicit`, `sample`, `list_roots`):
the request goes out on its stream, the official clients' handlers answer, the handler goes
on where it waited. Missing capabilities, a client that leaves, and a missing answer."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import anyio
import pytest
from mcp import Client, types
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel

from mcp_asgi import CancelReason, Context, McpServer
from mcp_asgi.testing import serve

from ..helpers import Probe, mcp_app, wait_for
from ..input.test_rounds import FORM, WRONG_FORMS
from ..servers import LegacyClient
from .test_legacy_node import NODE, NODE_DIR


class Person(BaseModel):
    name: str


def asking_server(probe: Probe) -> McpServer:
    """`ask` elicits, samples and lists roots; `wait_for_answer` elicits and records how
    its wait ended."""
    server = McpServer("asking")

    @server.tool()
    async def ask(ctx: Context) -> dict[str, Any]:
        """Asks the client three things, one after the other."""
        person = await ctx.elicit("Who are you?", Person)
        said = await ctx.sample("Say hello", max_tokens=5)
        roots = await ctx.list_roots()
        assert person.content is not None
        return {"name": person.content.name, "said": said["content"]["text"], "roots": roots}

    @server.tool()
    async def profile(ctx: Context) -> dict[str, Any]:
        """Asks for a form given as a plain JSON Schema."""
        answer = await ctx.elicit("Who are you?", FORM)
        return {"action": answer.action, "content": answer.content}

    @server.tool()
    async def pinged(ctx: Context) -> dict[str, bool]:
        """Pings the client (2025 era: a request on the call's stream) and says whether it
        answered."""
        return {"answered": await ctx.ping()}

    @server.tool()
    async def wait_for_answer(ctx: Context) -> str:
        """Elicits; records why the wait ended."""
        with probe.running(ctx):
            try:
                await ctx.elicit("Anyone?", {"type": "object", "properties": {}})
            except Exception as error:
                probe.notes.append(repr(error))
                raise
        return "answered"

    return server


async def test_python_sdk_answers_elicitation_sampling_and_roots() -> None:
    """The official Python SDK in 2025 mode answers all three with its callbacks."""
    asked: list[str] = []

    async def on_elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"name": "Grace"})

    async def on_sample(context: Any, params: types.CreateMessageRequestParams) -> Any:
        asked.append("sample")
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="hi"), model="m"
        )

    async def on_roots(context: Any) -> types.ListRootsResult:
        asked.append("roots")
        root = types.Root.model_validate({"uri": "file:///src", "name": "src"})
        return types.ListRootsResult(roots=[root])

    with serve(mcp_app(asking_server(Probe()))) as live:
        async with Client(
            live.url + "/mcp",
            mode="legacy",
            elicitation_callback=on_elicit,
            sampling_callback=on_sample,
            list_roots_callback=on_roots,
        ) as client:
            result = await client.call_tool("ask", {})
    assert asked == ["Who are you?", "sample", "roots"]
    assert result.structured_content == {
        "name": "Grace",
        "said": "hi",
        "roots": [{"uri": "file:///src", "name": "src"}],
    }


async def test_the_official_clients_answer_a_ping_and_2026_has_none() -> None:
    """`ctx.ping()` on a 2025-era call: `ping` goes out on the call's stream and the Python
    SDK (legacy mode) answers it by itself: True. On a 2026-07-28 call (ping removed)
    nothing is sent: False."""
    with serve(mcp_app(asking_server(Probe()))) as live:
        async with Client(live.url + "/mcp", mode="legacy") as client:
            legacy = await client.call_tool("pinged", {})
        async with Client(live.url + "/mcp") as client:
            modern = await client.call_tool("pinged", {})
    assert legacy.structured_content == {"answered": True}
    assert modern.structured_content == {"answered": False}


def test_typescript_sdk_1x_answers_elicitation_sampling_and_roots() -> None:
    """The TypeScript SDK 1.x client answers with its request handlers."""
    with serve(mcp_app(asking_server(Probe()))) as live:
        assert NODE is not None
        done = subprocess.run(
            [NODE, str(NODE_DIR / "input_legacy_client.mjs"), live.url + "/mcp"],
            capture_output=True,
            text=True,
            timeout=25,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["asked"] == ["Who are you?", "Say hello", "roots"]
    assert out["pinged"] == {"answered": True}  # answered by the SDK itself
    assert out["result"] == {
        "name": "Ada",
        "said": "hello",
        "roots": [{"uri": "file:///work", "name": "work"}],
    }


async def test_a_missing_capability_is_the_same_error_as_in_2026() -> None:
    """A session that did not declare elicitation: -32021 with requiredCapabilities, in-band
    (HTTP 200), before anything is sent to the client."""
    with serve(mcp_app(asking_server(Probe()))) as live:
        async with Client(live.url + "/mcp", mode="legacy") as client:
            with pytest.raises(MCPError) as raised:
                await client.call_tool("ask", {})
    assert raised.value.code == -32021
    assert raised.value.data == {"requiredCapabilities": {"elicitation": {}}}


async def _asked(client: LegacyClient, stream: Any) -> dict[str, Any]:
    """The server's request on the call's stream."""
    with anyio.fail_after(10):
        while True:
            message = await stream.next_message()
            assert message is not None
            if message.get("method") == "elicitation/create":
                return dict(message)


async def _declare(client: LegacyClient) -> None:
    body = client.body(
        "initialize",
        {
            "protocolVersion": client.version,
            "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "t", "version": "1"},
        },
    )
    response = await client.post(body, {"content-type": "application/json", "accept": "*/*"})
    client.session_id = response.headers["mcp-session-id"]


async def test_an_answer_posted_to_the_session_resumes_the_handler() -> None:
    """The answer is POSTed (202); the handler goes on and the call's stream ends with
    its result. An answer for an unknown id is accepted and dropped."""
    probe = Probe()
    with serve(mcp_app(asking_server(probe))) as live:
        client = LegacyClient(live.url + "/mcp")
        await _declare(client)
        async with client.open("tools/call", {"name": "wait_for_answer"}) as stream:
            asked = await _asked(client, stream)
            stray = {"jsonrpc": "2.0", "id": "nobody", "result": {"action": "cancel"}}
            assert (await client.post(stray, client.session_headers())).status == 202
            answer = {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "decline"}}
            assert (await client.post(answer, client.session_headers())).status == 202
            with anyio.fail_after(10):
                final = await stream.next_message()
    assert final is not None
    assert final["result"]["content"][0]["text"] == "answered"


async def test_a_client_that_leaves_cancels_the_wait() -> None:
    """The client closes the call's stream while the handler waits for its answer: the wait
    ends with the request's cancel (client_disconnect)."""
    probe = Probe()
    with serve(mcp_app(asking_server(probe))) as live:
        client = LegacyClient(live.url + "/mcp")
        await _declare(client)
        async with client.open("tools/call", {"name": "wait_for_answer"}) as stream:
            await _asked(client, stream)
            await stream.drop()
        await wait_for(probe.exited)
    assert probe.reason is CancelReason.CLIENT_DISCONNECT


async def test_a_missing_answer_times_out() -> None:
    """No answer within legacy_input_timeout: the handler gets -32001, the client a
    notifications/cancelled for the server's request, then the call's error."""
    probe = Probe()
    with serve(mcp_app(asking_server(probe), legacy_input_timeout=0.2)) as live:
        client = LegacyClient(live.url + "/mcp")
        await _declare(client)
        async with client.open("tools/call", {"name": "wait_for_answer"}) as stream:
            asked = await _asked(client, stream)
            with anyio.fail_after(10):
                cancelled = await stream.next_message()
                final = await stream.next_message()
    assert cancelled is not None
    assert final is not None
    assert cancelled["method"] == "notifications/cancelled"
    assert cancelled["params"]["requestId"] == asked["id"]
    assert final["error"]["code"] == -32001
    assert final["error"]["data"] == {"reason": "timeout", "method": "elicitation/create"}
    assert probe.reason is None


async def test_a_cancel_notification_ends_the_wait() -> None:
    """notifications/cancelled for the call while its handler waits for an answer: the
    wait ends with that cancel (client_notification) and the call's stream ends."""
    probe = Probe()
    with serve(mcp_app(asking_server(probe))) as live:
        client = LegacyClient(live.url + "/mcp")
        await _declare(client)
        async with client.open("tools/call", {"name": "wait_for_answer"}, id=9) as stream:
            await _asked(client, stream)
            assert (await client.notify("notifications/cancelled", {"requestId": 9})).status == 202
            with anyio.fail_after(10):
                assert await stream.next_message() is None
        await wait_for(probe.exited)
    assert probe.reason is CancelReason.CLIENT_NOTIFICATION


async def test_the_session_ending_ends_the_wait() -> None:
    """DELETE of the session while the handler waits for an answer: session_closed."""
    probe = Probe()
    with serve(mcp_app(asking_server(probe))) as live:
        client = LegacyClient(live.url + "/mcp")
        await _declare(client)
        async with client.open("tools/call", {"name": "wait_for_answer"}) as stream:
            await _asked(client, stream)
            assert (await client.delete()).status == 204
            with anyio.fail_after(10):
                assert await stream.next_message() is None
        await wait_for(probe.exited)
    assert probe.reason is CancelReason.SESSION_CLOSED


async def test_a_form_answer_is_checked_against_the_requested_schema() -> None:
    """The same check as a 2026-07-28 retry gets (tests/input/test_rounds.py): a POSTed
    answer that breaks the plain JSON Schema asked ends the call with -32602 saying what is
    wrong where; a fitting one reaches the handler."""
    good = {"name": "Ada", "color": "green"}
    with serve(mcp_app(asking_server(Probe()))) as live:
        client = LegacyClient(live.url + "/mcp")
        await _declare(client)
        finals = []
        for content in [*(form for form, _ in WRONG_FORMS), good]:
            async with client.open("tools/call", {"name": "profile"}) as stream:
                asked = await _asked(client, stream)
                result: dict[str, Any] = {"action": "accept"}
                if content is not None:
                    result["content"] = content
                answer = {"jsonrpc": "2.0", "id": asked["id"], "result": result}
                assert (await client.post(answer, client.session_headers())).status == 202
                with anyio.fail_after(10):
                    finals.append(await stream.next_message())
    for final, (_, words) in zip(finals[:-1], WRONG_FORMS, strict=True):
        assert final is not None
        assert final["error"]["code"] == -32602
        assert "content does not match the requested schema" in final["error"]["message"]
        assert words in final["error"]["message"]
    assert finals[-1] is not None
    assert finals[-1]["result"]["structuredContent"] == {"action": "accept", "content": good}
