"""The server matrix: on each ASGI server people deploy on, a client's departure cancels an
async, a thread and a subprocess tool (JSON and SSE replies) with reason
`client_disconnect` and nothing is written after; over HTTP/2 a reset stream cancels its
call while another call on the same connection completes; a graceful shutdown (SIGTERM or
SIGINT to the server process) cancels what is in flight with `server_shutdown`; the
official Python SDK client works, and so do the host app's own routes.

Each server is a real process serving `app.py` (stacks.py has the command lines); what
happened inside it is read from its event file. The full disconnect cross-product on
uvicorn h11 in-process is in tests/e2e/test_live_disconnect.py and tests/lifecycle; here
one test per server runs every kind and reply mode at once.

Where a server cannot do what mcp_asgi needs, the test is an xfail saying why, and
docs/deployment.md ("Servers") says what to do.
"""

from __future__ import annotations

import os
import signal
import ssl
from collections.abc import Callable
from contextlib import AsyncExitStack, suppress
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mcp_asgi.testing import McpStream, McpTestClient

from ...limits.apps import raw_post, read_all, status_of
from ...servers import MODERN
from .h2client import H2Client, H2Stream
from .stacks import STACKS, ServerProcess

pytestmark = pytest.mark.usefixtures("subreaper")

KINDS = ("async", "thread", "process")
ACCEPT = {"json": "application/json", "sse": "text/event-stream"}
CALLS = [(kind, mode) for kind in KINDS for mode in ACCEPT]
SHUTDOWN_CALLS = [("async", "sse"), ("thread", "json"), ("process", "sse")]

SERVED = [name for name in STACKS if name != "gunicorn-mcp-worker"]  # same as "gunicorn"
HTTP1 = [name for name in SERVED if not STACKS[name].http2]
HTTP2 = [name for name in SERVED if STACKS[name].http2]

SIGNALS = {
    "uvicorn-h11": signal.SIGTERM,
    "uvicorn-httptools": signal.SIGINT,
    "hypercorn-h1": signal.SIGTERM,
    "hypercorn-h2": signal.SIGINT,
    "granian": signal.SIGTERM,
    "daphne": signal.SIGTERM,
    "gunicorn": signal.SIGTERM,
    "gunicorn-mcp-worker": signal.SIGTERM,
}

GRANIAN_WAITS = (
    "Granian never cancels requests in flight at shutdown: it waits for them to end before "
    "its lifespan shutdown, then --workers-kill-timeout SIGKILLs the worker; nothing is "
    "cancelled with server_shutdown and a request's subprocesses are left running"
)
GUNICORN_KILLS = (
    "uvicorn-worker gives uvicorn no timeout_graceful_shutdown: uvicorn waits for requests "
    "in flight until gunicorn's --graceful-timeout SIGKILLs the worker; nothing is "
    "cancelled with server_shutdown and a request's subprocesses are left running "
    "(gunicorn-mcp-worker, the worker docs/deployment.md recommends, passes)"
)
DAPHNE_CUTS = (
    "Daphne cancels every application instance at shutdown but waits only until the first "
    "has finished (asyncio.gather without return_exceptions) before stopping its reactor: "
    "slower cleanups (a subprocess group's stop) are cut short, unrecorded"
)
# Hypercorn over HTTP/2 ends the streams at its graceful timeout without the app's last
# write: the call is cancelled with server_shutdown, but its reply carries no error
REPLY_LOST_AT_SHUTDOWN = {"hypercorn-h2"}
SHUTDOWN_DEPARTURES = {
    "granian": pytest.mark.xfail(reason=GRANIAN_WAITS, strict=True),
    "gunicorn": pytest.mark.xfail(reason=GUNICORN_KILLS, strict=True),
    "daphne": pytest.mark.xfail(reason=DAPHNE_CUTS, strict=False),
}


# -- what the server's process saw ---------------------------------------------------------


async def until(server: ServerProcess, limit: float = 10, **match: Any) -> dict[str, Any]:
    """The first event matching `match`, once the server has recorded it."""
    with anyio.move_on_after(limit):
        while not (found := server.events(**match)):  # noqa: ASYNC110 - another process
            await anyio.sleep(0.01)
        return found[0]
    seen = "\n".join(map(str, server.events()[-30:]))
    raise AssertionError(
        f"no event {match} in {limit} s; the last ones:\n{seen}\n{server.output()}"
    )


async def started(server: ServerProcess, kind: str, key: str) -> None:
    """Wait until the call's tool runs (a process tool: until its shell has started)."""
    await until(server, event="spawned" if kind == "process" else "started", key=key)


def live_group_members(pgid: int) -> list[int]:
    """The processes of group `pgid` that are alive (zombies are dead: in this sandbox
    nothing may ever reap an orphan)."""
    members = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                text = stat.read()
        except OSError:
            continue
        fields = text[text.rfind(b")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            members.append(int(name))
    return members


def kill_leftover_groups(server: ServerProcess) -> None:
    """Whatever a failed check left running (a server that did not stop its subprocesses)."""
    for spawned in server.events(event="spawned"):
        with suppress(ProcessLookupError):
            os.killpg(spawned["pgid"], signal.SIGKILL)


def check_cancelled(server: ServerProcess, key: str, reason: str) -> None:
    """The call `key` (`prefix-kind-mode`) was cancelled for `reason`: its tool saw it, one
    cancellation record (outcome `exited`), nothing written after the client left, and no
    process of its group alive."""
    kind = key.split("-")[1]
    exits = server.events(event="exited", key=key)
    assert len(exits) == 1, f"{key}: {exits}"
    assert exits[0]["reason"] == reason, exits
    logs = server.events(event="cancel_log", request_id=key)
    assert [(log["reason"], log["outcome"]) for log in logs] == [(reason, "exited")], logs
    late = [e for e in server.events(event="late_write", key=key) if e["body"]]
    assert late == [], f"{key}: written after the client left: {late}"
    if kind == "process":
        spawned = server.events(event="spawned", key=key)[0]
        assert live_group_members(spawned["pgid"]) == [], f"{key}: its processes live on"


async def check_host_routes(server: ServerProcess, tls: ssl.SSLContext | None) -> None:
    """The host app's own routes answer beside the MCP endpoint."""
    async with httpx.AsyncClient(
        base_url=server.url, verify=tls or False, http2=server.stack.http2, timeout=10
    ) as http:
        home = await http.get("/")
        echoed = await http.post("/echo", content=b"plain")
        missing = await http.get("/nowhere")
    assert (home.status_code, home.text) == (200, "home")
    assert echoed.json()["echo"] == "plain"
    assert (missing.status_code, missing.text) == (404, "host app")
    if server.stack.http2:
        assert home.http_version == "HTTP/2"


# -- the official SDK client, and the host routes -----------------------------------------


@pytest.mark.parametrize("served", SERVED, indirect=True)
async def test_the_official_sdk_client_and_the_host_routes_work(
    served: ServerProcess, client_tls: Callable[..., ssl.SSLContext]
) -> None:
    """The official Python SDK client (`mcp` 2.x, over HTTP/2 where the server speaks it)
    lists and calls a tool; the host app's routes answer."""
    tls = client_tls() if served.certs else None
    key = "sdk-echo"
    async with AsyncExitStack() as stack:
        http = await stack.enter_async_context(
            httpx2.AsyncClient(http2=served.stack.http2, verify=tls or True, timeout=10)
        )
        transport = streamable_http_client(served.url + "/mcp", http_client=http)
        client = await stack.enter_async_context(Client(transport, mode=MODERN, cache=None))
        tools = await client.list_tools()
        result = await client.call_tool("echo", {"text": "hi", "key": key})
    assert {"echo", "async", "thread", "process"} <= {tool.name for tool in tools.tools}
    assert not result.is_error
    assert result.content[0].model_dump()["text"] == "hi"
    request = await until(served, event="request", key=key)
    assert request["http_version"] == ("2" if served.stack.http2 else "1.1")
    await check_host_routes(served, tls)


@pytest.mark.parametrize("served", HTTP1, indirect=True)
async def test_a_body_sent_after_its_headers_is_read(served: ServerProcess) -> None:
    """A POST whose body comes 0.3 s after its headers (the server's `receive()` must wait
    for it: on Granian a bare awaitable, not a coroutine) is answered like any other."""
    client = McpTestClient(served.url + "/mcp")
    wire = raw_post(
        client, client.build("tools/call", {"name": "echo", "arguments": {"text": "late"}})
    )
    head, body = wire.split(b"\r\n\r\n", 1)
    sock = await anyio.connect_tcp(client.host, client.port)
    async with sock:
        await sock.send(head + b"\r\n\r\n")
        await anyio.sleep(0.3)
        await sock.send(body)
        raw = await read_all(sock)
    assert status_of(raw) == 200, raw[:300]
    assert b'"late"' in raw


# -- HTTP/1.1: closing the connection ------------------------------------------------------


@pytest.mark.parametrize("served", HTTP1, indirect=True)
async def test_a_disconnect_cancels_every_kind_of_tool(served: ServerProcess) -> None:
    """Six calls at once (async, thread, subprocess x JSON, SSE), each dropped (the socket
    closed) once its tool runs: each is cancelled with `client_disconnect`, the server told
    the app (http.disconnect), nothing was written after, and the server goes on."""
    keys: list[str] = []

    async def call_and_drop(kind: str, mode: str) -> None:
        key = f"drop-{kind}-{mode}"
        keys.append(key)
        client = McpTestClient(served.url + "/mcp", headers={"accept": ACCEPT[mode]})
        params = {"name": kind, "arguments": {"key": key}}
        async with client.stream("tools/call", params, id=key, progress=True) as stream:
            await started(served, kind, key)
            if mode == "sse":  # the stream is open (progress or keep-alives) when it drops
                await stream.read_head()
                assert stream.headers["content-type"].startswith("text/event-stream")
            await stream.drop()

    try:
        async with anyio.create_task_group() as tg:
            for kind, mode in CALLS:
                tg.start_soon(call_and_drop, kind, mode)
        for key in keys:
            done = await until(served, event="done", key=key)
            assert done["disconnect_seen"], f"{key}: the server never said the client left"
            check_cancelled(served, key, "client_disconnect")
    finally:
        kill_leftover_groups(served)
    answer = await McpTestClient(served.url + "/mcp").call_tool("echo", {"text": "still here"})
    assert answer["content"][0]["text"] == "still here"
    await check_host_routes(served, None)


# -- HTTP/2: resetting one stream ----------------------------------------------------------


@pytest.mark.parametrize("served", HTTP2, indirect=True)
async def test_a_stream_reset_cancels_its_call_while_the_connection_goes_on(
    served: ServerProcess, client_tls: Callable[..., ssl.SSLContext]
) -> None:
    """On one HTTP/2 connection: six calls (async, thread, subprocess x JSON, SSE) and a
    slow echo. RST_STREAM for each of the six cancels it with `client_disconnect` (nothing
    written after), while the slow echo, in flight through the resets, completes on the
    same connection, and so does a call started after them. Closing the connection then
    cancels the call still open on it."""
    async with H2Client.connect("127.0.0.1", served.port, client_tls("h2")) as h2:
        slow = await h2.start(
            "tools/call",
            {"name": "slow_echo", "arguments": {"text": "through", "seconds": 1.0}},
            id="h2-slow",
        )
        calls: dict[str, H2Stream] = {}
        for kind, mode in CALLS:
            key = f"reset-{kind}-{mode}"
            params = {"name": kind, "arguments": {"key": key}}
            calls[key] = await h2.start("tools/call", params, id=key, accept=ACCEPT[mode])
        try:
            for key in calls:
                await started(served, key.split("-")[1], key)
            for stream in calls.values():
                await h2.reset(stream)
            assert not slow.ended.is_set(), "the slow call ended before the resets"
            for key in calls:
                done = await until(served, event="done", key=key)
                assert done["disconnect_seen"], f"{key}: the server never said it was reset"
                check_cancelled(served, key, "client_disconnect")
            through = (await h2.response(slow))[-1]
            assert through["result"]["content"][0]["text"] == "through"
            after = await h2.call(
                "tools/call", {"name": "echo", "arguments": {"text": "on"}}, id="h2-after"
            )
            assert after["result"]["content"][0]["text"] == "on"
            assert not h2.closed.is_set()
            last = await h2.start(
                "tools/call",
                {"name": "async", "arguments": {"key": "close-async-sse"}},
                id="close-async-sse",
                accept=ACCEPT["sse"],
            )
            await started(served, "async", "close-async-sse")
            assert not last.ended.is_set()
        finally:
            kill_leftover_groups(served)
    for key in [*calls, "close-async-sse"]:
        request = await until(served, event="request", key=key)
        assert request["http_version"] == "2"
    await until(served, event="done", key="close-async-sse")
    check_cancelled(served, "close-async-sse", "client_disconnect")
    await check_host_routes(served, client_tls())


# -- graceful shutdown ---------------------------------------------------------------------


class Call:
    """One call in flight through the shutdown: its last message, or what went wrong."""

    def __init__(self, kind: str, mode: str) -> None:
        self.kind = kind
        self.key = f"stop-{kind}-{mode}"
        self.mode = mode
        self.last: dict[str, Any] | None = None
        self.failure: str | None = None

    @property
    def params(self) -> dict[str, Any]:
        return {"name": self.kind, "arguments": {"key": self.key}}

    async def read_h1(self, stream: McpStream) -> None:
        try:
            while (message := await stream.next_message()) is not None:
                self.last = message
        except (ConnectionError, OSError, anyio.BrokenResourceError) as exc:
            self.failure = repr(exc)


@pytest.mark.parametrize(
    "name",
    [pytest.param(name, marks=SHUTDOWN_DEPARTURES.get(name, ())) for name in STACKS],
)
async def test_a_graceful_shutdown_cancels_with_server_shutdown(
    name: str,
    start: Callable[[str], ServerProcess],
    client_tls: Callable[..., ssl.SSLContext],
) -> None:
    """SIGTERM (or SIGINT) to the server while an async (SSE), a thread (JSON) and a
    subprocess (SSE) call are in flight: each is cancelled with `server_shutdown` (the
    thread and the subprocess tool are told so, every subprocess is stopped), its reply
    ends with the shutdown error, the lifespan shutdown runs, and the server exits."""
    server = start(name)
    calls = [Call(kind, mode) for kind, mode in SHUTDOWN_CALLS]
    try:
        with anyio.fail_after(20):
            if server.stack.http2:
                await stop_h2(server, calls, client_tls("h2"), SIGNALS[name])
            else:
                await stop_h1(server, calls, SIGNALS[name])
        for call in calls:
            check_cancelled(server, call.key, "server_shutdown")
            if name in REPLY_LOST_AT_SHUTDOWN:
                assert call.last is None, call.last
                continue
            assert call.last is not None, f"{call.key}: {call.failure}"
            assert call.last["error"]["data"] == {"reason": "server_shutdown"}, call.last
        if server.stack.lifespan:
            await until(server, event="lifespan", phase="shutdown", limit=1)
    finally:
        kill_leftover_groups(server)


async def stop_h1(server: ServerProcess, calls: list[Call], sig: signal.Signals) -> None:
    async with AsyncExitStack() as stack, anyio.create_task_group() as tg:
        for call in calls:
            client = McpTestClient(server.url + "/mcp", headers={"accept": ACCEPT[call.mode]})
            stream = await stack.enter_async_context(
                client.stream("tools/call", call.params, id=call.key, progress=True)
            )
            await started(server, call.kind, call.key)
            tg.start_soon(call.read_h1, stream)
        await stop(server, sig)


async def stop_h2(
    server: ServerProcess, calls: list[Call], tls: ssl.SSLContext, sig: signal.Signals
) -> None:
    async with H2Client.connect("127.0.0.1", server.port, tls) as h2:
        streams = []
        for call in calls:
            streams.append(
                await h2.start("tools/call", call.params, id=call.key, accept=ACCEPT[call.mode])
            )
            await started(server, call.kind, call.key)
        await stop(server, sig)
        for call, stream in zip(calls, streams, strict=True):
            await stream.ended.wait()
            messages = stream.messages
            call.last = messages[-1] if messages else None
            call.failure = None if messages else f"reset={stream.reset_by_server}"


async def stop(server: ServerProcess, sig: signal.Signals) -> None:
    """Signal the server and wait for its process to exit."""
    server.signal(sig)
    await anyio.to_thread.run_sync(server.process.wait, 15)
