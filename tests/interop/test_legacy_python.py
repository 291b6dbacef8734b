"""Interop with the official MCP Python SDK client (`mcp` 2.x) in its 2025-era mode."""

from __future__ import annotations

import anyio
from mcp import Client
from mcp.shared.exceptions import MCPError

from mcp_asgi.testing import serve

from ..helpers import Probe, Wiretap, wait_for
from ..servers import LATEST, check_aborted_slow_call, legacy_app


async def test_python_sdk_legacy_client_end_to_end() -> None:
    """Connect, list, call, read, get a prompt, receive progress, abort a call: the handler
    stops (client_notification), nothing more is sent for it, and the session goes on."""
    probe = Probe()
    wiretap = Wiretap(legacy_app(probe))
    got_progress = anyio.Event()
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)
        got_progress.set()

    with serve(wiretap) as live:
        async with Client(live.url + "/mcp", mode="legacy") as client:
            assert client.protocol_version == LATEST
            assert client.server_info is not None
            assert client.server_info.name == "legacy"
            tools = await client.list_tools()
            added = await client.call_tool("add", {"a": 2, "b": 3})
            read = await client.read_resource("docs://readme")
            prompt = await client.get_prompt("greet", {"name": "Ada"})
            try:
                await client.read_resource("docs://nothing")
            except MCPError as error:
                missing_code = error.code
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: client.call_tool("slow", {}, progress_callback=on_progress))
                with anyio.fail_after(10):
                    await got_progress.wait()
                tg.cancel_scope.cancel()
            await wait_for(probe.exited)
            after = await client.call_tool("add", {"a": 1, "b": 1})
    assert {t.name for t in tools.tools} == {"add", "chatty", "slow"}
    assert added.structured_content == {"result": 5}
    assert read.contents[0].text == "read me"  # type: ignore[union-attr]
    assert prompt.messages[0].content.text == "Hello Ada!"  # type: ignore[union-attr]
    assert missing_code == -32002
    assert seen == [1.0]
    assert after.structured_content == {"result": 2}
    methods = check_aborted_slow_call(probe, wiretap)
    assert "GET" in methods
    assert methods[-1] == "DELETE"
