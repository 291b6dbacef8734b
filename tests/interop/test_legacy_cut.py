"""A 2025-era client cut off by the network and resumed with `Last-Event-ID`: the official
Python SDK (legacy mode) and the TypeScript SDK 1.x talk to a live uvicorn through a TCP
proxy (tests/cut_proxy.py) that the test severs, socket by socket, while a call runs and
the session's GET stream is open. The server does not cancel on a disconnect
(`legacy_disconnect_cancels=False`, the letter of the 2025 spec); each client reconnects
by itself: the call's stream with a GET from its last event id (the rest of the progress,
then the result), its GET stream with its own (a notification raised during the cut)."""

from __future__ import annotations

import json
import threading
from typing import Any

import anyio
from mcp import Client

from mcp_asgi import Context, McpServer
from mcp_asgi.testing import serve

from ..cut_proxy import CutProxy, lines
from ..helpers import Probe, mcp_app, trigger, wait_for
from ..servers import change_routes
from .test_legacy_node import NODE, NODE_DIR

RESUMING: dict[str, Any] = {"legacy_disconnect_cancels": False, "legacy_sse_retry": 0.1}


def cut_server(go: threading.Event, probe: Probe) -> McpServer:
    server = McpServer("cut")

    @server.tool()
    async def gated(ctx: Context) -> str:
        """Reports progress, waits for the test's go, reports again, answers."""
        with probe.running(ctx):
            await ctx.report_progress(1, 2)
            await anyio.to_thread.run_sync(go.wait, 20)  # set from the test's thread
            await ctx.report_progress(2, 2)
        return "done"

    return server


def cut_app(go: threading.Event, probe: Probe) -> Any:
    server = cut_server(go, probe)
    return mcp_app(server, routes=change_routes(server), **RESUMING)


def _method(message: Any) -> str | None:
    method = getattr(message, "method", None)
    return (
        method
        if isinstance(method, str)
        else getattr(getattr(message, "root", None), "method", None)
    )


async def test_python_sdk_resumes_a_call_and_its_get_stream_after_a_cut() -> None:
    """The Python SDK (legacy mode) through the proxy: the cut comes after the call's first
    progress; a tools/list_changed is raised while nothing is connected; the handler goes
    on. The SDK reconnects both streams with Last-Event-ID: the call gets progress 2 and
    its result, the session gets the notification, and the handler was never cancelled."""
    go, probe = threading.Event(), Probe()
    seen: list[float] = []
    first = anyio.Event()
    changed = anyio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)
        first.set()

    async def on_message(message: Any) -> None:
        if _method(message) == "notifications/tools/list_changed":
            changed.set()

    with serve(cut_app(go, probe)) as live:
        async with (
            CutProxy.running(live.port) as proxy,
            Client(proxy.url + "/mcp", mode="legacy", message_handler=on_message) as client,
        ):
            async with anyio.create_task_group() as tg:
                results: list[Any] = []

                async def call() -> None:
                    results.append(
                        await client.call_tool("gated", {}, progress_callback=on_progress)
                    )

                tg.start_soon(call)
                with anyio.fail_after(10):
                    await first.wait()
                connections = proxy.connections
                await proxy.cut()
                await trigger(live.url, "POST", "/notify/tools")  # nobody connected
                go.set()
                with anyio.fail_after(15):
                    await changed.wait()
            await wait_for(probe.exited)
    assert results[0].content[0].text == "done"
    assert seen == [1.0, 2.0]
    assert probe.reason is None  # the cut did not cancel it
    assert proxy.connections > connections  # the client really came back


async def test_typescript_sdk_1x_resumes_a_call_and_its_get_stream_after_a_cut() -> None:
    """The TypeScript SDK 1.x through the proxy, the same cut: it prints `progress` once its
    first progress arrived; the test severs every connection, raises tools/list_changed and
    lets the handler finish. The SDK resumes both streams by itself (the priming event's id,
    the `retry` field): the call's progress 2 and result, and the notification."""
    assert NODE is not None
    go, probe = threading.Event(), Probe()

    with serve(cut_app(go, probe)) as live:
        async with CutProxy.running(live.port) as proxy:
            script = [NODE, str(NODE_DIR / "resume_legacy_client.mjs"), proxy.url + "/mcp"]
            async with await anyio.open_process(script, cwd=NODE_DIR) as process:
                assert process.stdout is not None
                output = lines(process.stdout)
                with anyio.fail_after(15):
                    assert await anext(output) == "progress"
                    await proxy.cut()
                    await trigger(live.url, "POST", "/notify/tools")
                    go.set()
                    out = json.loads(await anext(output))
                    code = await process.wait()
            await wait_for(probe.exited)
    assert code == 0
    assert out["result"] == "done"
    assert out["progress"] == [1, 2]
    assert out["listChanged"] >= 1
    assert probe.reason is None
