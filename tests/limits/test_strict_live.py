"""Strict decoding on a live uvicorn: an edited requestState signature is `tampered`
(whatever lenient base64 would have made of it), and NaN or Infinity is not JSON."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mcp_asgi import Context, McpServer
from mcp_asgi.testing import McpTestClient, serve

from ..helpers import mcp_app, serving

pytestmark = pytest.mark.anyio

ASK = {"type": "object", "properties": {"seats": {"type": "integer"}}, "required": ["seats"]}


def asking_server() -> McpServer:
    server = McpServer("strict")

    @server.tool()
    async def book(ctx: Context) -> str:
        answer = await ctx.elicit("Seats?", ASK)
        return str(answer.action)

    return server


async def test_an_edited_request_state_signature_is_tampered() -> None:
    """Padding, junk, whitespace, the +/ alphabet or a sibling last character in the
    signature: every retry is 400 with reason `tampered`, never accepted."""
    params: dict[str, Any] = {"name": "book", "arguments": {}}
    app = mcp_app(asking_server(), request_state_key="k", rate_limit=None)
    with serving(app, capabilities={"elicitation": {}}) as client:
        first = await client.request("tools/call", params)
        head, payload, mac = first.final["result"]["requestState"].split(".")
        sibling = mac[:-1] + chr(ord(mac[-1]) ^ 1)
        edits = [mac + "==", mac[:4] + "!*~" + mac[4:], mac[:4] + " " + mac[4:], sibling]
        edits.append(
            mac.replace("-", "+").replace("_", "/") if {"-", "_"} & set(mac) else mac + "+"
        )
        answers = {"elicitation-1": {"action": "accept", "content": {"seats": 1}}}
        reasons = []
        for edited in edits:
            retry = {
                **params,
                "inputResponses": answers,
                "requestState": f"{head}.{payload}.{edited}",
            }
            response = await client.request("tools/call", retry)
            assert response.status == 400
            reasons.append(response.final["error"]["data"]["reason"])
    assert reasons == ["tampered"] * len(edits)


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999"])
async def test_non_finite_numbers_are_refused_as_parse_errors(literal: str) -> None:
    """A tool's argument written as NaN, Infinity or 1e999: 400 -32700, the tool never runs."""
    ran: list[float] = []
    server = McpServer("strict")

    @server.tool()
    async def wait(seconds: float) -> str:
        ran.append(seconds)
        return "waited"

    with serve(mcp_app(server)) as live:
        client = McpTestClient(live.url + "/mcp")
        body = client.build("tools/call", {"name": "wait", "arguments": {"seconds": 0}})
        raw = json.dumps(body).replace('"seconds": 0', f'"seconds": {literal}').encode()
        response = await client.post(raw, client.headers_for(body))
    assert response.status == 400
    assert response.final["error"]["code"] == -32700
    assert ran == []
