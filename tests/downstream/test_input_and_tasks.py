"""server-everything asks its client (elicitation, sampling) during a call: the gateway
relays the question to its own client where the inbound request can hold it open (a
2025-era session, a task), and refuses it with a clear error on a plain 2026-07-28
request. A task whose work calls the downstream is cancelled by tasks/cancel: the cancel
reaches the id minted downstream (server-everything over stdio)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, types

from mcp_asgi import Context, McpServer
from mcp_asgi.downstream import DownstreamTools
from mcp_asgi.testing import LiveServer, McpTestClient, serve

from ..helpers import Otel, attrs, eventually, mcp_app
from ..tasks.apps import TaskClient
from . import everything
from .everything import LONG, needs_everything

pytestmark = needs_everything
ELICIT = "trigger-elicitation-request"
SAMPLE = "trigger-sampling-request"


@contextmanager
def gateway(tap: Path, otel: Otel | None = None) -> Iterator[LiveServer]:
    """The downstream's asking tools mounted, and `relay`, a task-capable tool calling
    the downstream directly."""
    downstream = everything.stdio(tap, tracer_provider=otel.tracer_provider if otel else None)
    server = McpServer("gateway")
    include = [ELICIT, SAMPLE, LONG]
    server.add_source(DownstreamTools(downstream, prefix="ev_", include=include, task="optional"))

    @server.tool(task="optional")
    async def relay(tool: str, arguments: dict[str, Any], ctx: Context) -> dict[str, Any]:
        """Call a tool of the downstream (as a task when the client asks for one)."""
        await ctx.start_task()
        return await downstream.call_tool(tool, arguments, ctx)

    with serve(mcp_app(server, otel)) as live:
        yield live


async def test_relayed_on_a_2025_session(tmp_path: Path) -> None:
    """The official SDK client in 2025 mode: the downstream's elicitation and sampling
    reach its callbacks through the gateway, and their answers the downstream tool."""
    asked: list[str] = []

    async def on_elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"name": "Grace", "check": True})

    async def on_sample(context: Any, params: types.CreateMessageRequestParams) -> Any:
        asked.append("sample")
        text = types.TextContent(type="text", text="relayed answer")
        return types.CreateMessageResult(role="assistant", content=text, model="m")

    with gateway(tmp_path / "tap.jsonl") as live:
        async with Client(
            live.url + "/mcp",
            mode="legacy",
            elicitation_callback=on_elicit,
            sampling_callback=on_sample,
        ) as client:
            elicited = await client.call_tool(f"ev_{ELICIT}", {})
            sampled = await client.call_tool(f"ev_{SAMPLE}", {"prompt": "hi", "maxTokens": 5})
    assert asked == ["Please provide inputs for the following fields:", "sample"]
    assert not elicited.is_error, elicited
    assert "Grace" in str(elicited.content), elicited
    assert not sampled.is_error, sampled
    assert "relayed answer" in str(sampled.content), sampled


async def test_refused_on_a_plain_2026_request(tmp_path: Path) -> None:
    """A 2026-07-28 request cannot hold the question open: the call answers -32603 naming
    the downstream and the method asked, and the downstream request was cancelled."""
    tap = tmp_path / "tap.jsonl"
    with gateway(tap) as live:
        client = McpTestClient(live.url + "/mcp", capabilities={"elicitation": {}})
        response = await client.request("tools/call", {"name": f"ev_{ELICIT}", "arguments": {}})
    error = response.final["error"]
    assert error["code"] == -32603, error
    assert error["data"] == {"downstream": "everything", "inputRequest": "elicitation/create"}
    assert "only a task or a 2025-era session" in error["message"]
    [call] = [r for r in everything.requests(tap, "tools/call")]
    await eventually(lambda: _cancelled(tap, call["id"]) is not None, what="the cancel")


@pytest.mark.parametrize("mounted", [False, True], ids=["handler", "mounted"])
async def test_relayed_on_a_task(mounted: bool, tmp_path: Path) -> None:
    """On a task the downstream's question puts the task in input_required; the answer
    given by tasks/update is handed down, and the task completes with the tool's result.
    Through a handler already a task, and through the mounted tool (task="optional"),
    which the question makes a task at once."""
    with gateway(tmp_path / "tap.jsonl") as live:
        client = TaskClient(live.url, elicitation={})
        if mounted:
            task_id = await client.start(f"ev_{ELICIT}")
        else:
            task_id = await client.start("relay", tool=ELICIT, arguments={})
        asking = await client.until(task_id, "input_required")
        [(key, question)] = asking["inputRequests"].items()
        assert question["method"] == "elicitation/create"
        answer = {"action": "accept", "content": {"name": "Ada", "check": True}}
        await client.rpc("tasks/update", task_id, inputResponses={key: answer})
        done = await client.until(task_id, "completed", "failed")
    assert done["status"] == "completed", done
    assert "Ada" in str(done["result"]["content"])


async def test_task_cancel_reaches_downstream(tmp_path: Path) -> None:
    """tasks/cancel of a task whose work waits on the downstream: notifications/cancelled
    for the minted id (the downstream's request was running and aborted), the CLIENT
    span says task_cancelled, the task ends cancelled."""
    tap = tmp_path / "tap.jsonl"
    otel = Otel()
    with gateway(tap, otel) as live:
        client = TaskClient(live.url)
        arguments = {"duration": 60, "steps": 60}
        task_id = await client.start("relay", tool=LONG, arguments=arguments)
        await eventually(lambda: everything.requests(tap, "tools/call") != [])
        [call] = everything.requests(tap, "tools/call")
        await client.rpc("tasks/cancel", task_id)
        ended = await client.until(task_id, "cancelled", "completed", "failed")
        assert ended["status"] == "cancelled"
        await eventually(lambda: _cancelled(tap, call["id"]) is not None, what="the cancel")
    seen = _cancelled(tap, call["id"])
    assert seen is not None
    assert seen["running"], seen
    assert seen["aborted"], seen
    span = await otel.wait_span(f"tools/call {LONG}")
    assert attrs(span)["mcp_asgi.cancellation.reason"] == "task_cancelled"


def _cancelled(tap: Path, request_id: Any) -> dict[str, Any] | None:
    found = [r for r in everything.records(tap, "cancelled") if r["id"] == request_id]
    return found[0] if found else None


async def test_mounted_tool_as_a_task(tmp_path: Path) -> None:
    """DownstreamTools(task="optional"): a mounted tool called as a task (ctx.start_task
    is not needed: the result window ends) and cancelled by tasks/cancel: the downstream
    request is cancelled (running, aborted) and the task ends cancelled."""
    tap = tmp_path / "tap.jsonl"
    with gateway(tap) as live:
        client = TaskClient(live.url)
        result = await client.call(f"ev_{LONG}", duration=60, steps=60)
        assert result["resultType"] == "task", result
        [call] = everything.requests(tap, "tools/call")
        await client.rpc("tasks/cancel", str(result["taskId"]))
        ended = await client.until(str(result["taskId"]), "cancelled", "completed", "failed")
        assert ended["status"] == "cancelled"
        await eventually(lambda: _cancelled(tap, call["id"]) is not None, what="the cancel")
    seen = _cancelled(tap, call["id"])
    assert seen is not None
    assert seen["running"], seen
    assert seen["aborted"], seen
