"""The server the stdio tests serve with `python -m mcp_asgi.stdio`: tools that answer,
report progress and log, and one that waits until it is cancelled and writes what it saw
to the file `MCP_STDIO_PROBE` names (one line per event: `started <id>`, `cancelled <id>
<reason>`), so the test, in another process, can read it; and one that counts how many of
its calls run at once; and a `def` tool that holds its worker thread."""

from __future__ import annotations

import os
import time
from pathlib import Path

import anyio

from mcp_asgi import Context, McpServer

server = McpServer("stdio-test", version="1.0.0")
_busy = {"now": 0, "most": 0}


def _probe(line: str) -> None:
    path = os.environ.get("MCP_STDIO_PROBE")
    if path:
        with Path(path).open("a") as probe:
            probe.write(line + "\n")


@server.tool()
async def echo(text: str) -> str:
    """Answer with the text."""
    return text


@server.tool()
async def count(n: int, ctx: Context) -> str:
    """Report progress n times, log once, then answer."""
    await ctx.log("info", f"counting to {n}")
    for i in range(1, n + 1):
        await ctx.report_progress(i, n, f"step {i}")
        await anyio.sleep(0.01)
    return f"counted {n}"


@server.tool()
async def wait(label: str, ctx: Context) -> str:
    """Wait until cancelled, writing what happened to the probe file."""
    _probe(f"started {label}")
    try:
        await anyio.sleep_forever()
    finally:
        _probe(f"cancelled {label} {ctx.cancel_reason.value if ctx.cancel_reason else None}")
    return "never"


@server.tool()
def shout(text: str) -> str:
    """Answer with the text in capitals (a sync tool, in a worker thread)."""
    print("a stray print: it must not reach the protocol stream")
    return text.upper()


@server.tool()
def hold(label: str, seconds: float) -> str:
    """Block its worker thread for `seconds`, deaf to cancellation as blocking code is,
    writing `thread <label> started` and `... returned` to the probe file."""
    _probe(f"thread {label} started")
    time.sleep(seconds)
    _probe(f"thread {label} returned")
    return "held"


@server.tool()
async def busy() -> str:
    """Take a moment; answer with the most calls of this tool that ran at once so far."""
    _busy["now"] += 1
    _busy["most"] = max(_busy["most"], _busy["now"])
    try:
        await anyio.sleep(0.001)
    finally:
        _busy["now"] -= 1
    return str(_busy["most"])
