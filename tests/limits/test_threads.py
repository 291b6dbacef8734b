"""Threads are bounded by what runs, not by what is still waited on: cutting `def` calls
does not make threads faster than they finish (live uvicorn, threads counted in-process)."""

from __future__ import annotations

import threading

import anyio
import pytest

from mcp_asgi.testing import McpTestClient, serve

from ..helpers import Otel, eventually
from .apps import Seen, limits_app, raw_post

pytestmark = pytest.mark.anyio

UNLIMITED = {"rate_limit": None, "max_requests_per_client": None}


async def test_cut_thread_calls_never_run_more_threads_than_the_limit() -> None:
    """300 calls of a `def` tool sleeping 1.5 s, each cut 0.2 s after it is sent: live
    threads stay within max_threads (8) plus a small margin, and no more than 8 calls
    ever start (the rest were cancelled while they waited for a slot)."""
    seen = Seen()
    app = limits_app(seen, max_threads=8, cancel_grace=0.1, process_kill_grace=0.1, **UNLIMITED)
    with serve(app) as live:
        baseline = threading.active_count()
        client = McpTestClient(live.url + "/mcp")
        wire = raw_post(
            client, client.build("tools/call", {"name": "sleepy", "arguments": {"seconds": 1.5}})
        )
        peak = 0

        async def call_and_hang_up() -> None:
            sock = await anyio.connect_tcp(client.host, client.port)
            await sock.send(wire)
            await anyio.sleep(0.2)
            await sock.aclose()

        async def sample() -> None:
            nonlocal peak
            while True:
                peak = max(peak, threading.active_count() - baseline)
                await anyio.sleep(0.01)

        async with anyio.create_task_group() as group:
            group.start_soon(sample)
            async with anyio.create_task_group() as callers:
                for _ in range(300):
                    callers.start_soon(call_and_hang_up)
            await anyio.sleep(2.0)  # the first threads finish; nothing queued is left
            group.cancel_scope.cancel()
        assert app._runtime.threads.in_use == 0
    assert peak <= 8 + 4, peak
    assert seen.sync_started <= 8, seen.sync_started


async def test_a_queued_call_keeps_its_deadline_and_its_cancel() -> None:
    """max_threads=1 held by a long call: a second call times out while it waits (it
    never starts), and a third whose client leaves while it waits never starts either."""
    seen = Seen()
    app = limits_app(
        seen, max_threads=1, max_request_duration=1.0, cancel_grace=0.1, process_kill_grace=0.1
    )
    with serve(app) as live:
        client = McpTestClient(live.url + "/mcp")
        async with client.stream(
            "tools/call", {"name": "sleepy", "arguments": {"seconds": 2.0}}
        ) as holder:
            await eventually(lambda: seen.sync_started == 1)
            async with client.stream(
                "tools/call", {"name": "sleepy", "arguments": {"seconds": 0.1}}
            ) as leaver:
                await anyio.sleep(0.1)
                await leaver.drop()
            queued = await client.request(
                "tools/call", {"name": "sleepy", "arguments": {"seconds": 0.1}}
            )
            await holder.drop()
    assert queued.final["error"]["data"]["reason"] == "timeout"
    assert seen.sync_started == 1


async def test_an_abandoned_thread_is_an_orphan_and_keeps_its_slot(otel: Otel) -> None:
    """A cut `def` call whose thread runs past cancel_grace: the orphan gauge shows it and
    its slot stays taken until the thread returns; then both are given back."""
    seen = Seen()
    app = limits_app(seen, otel, max_threads=2, cancel_grace=0.1, process_kill_grace=0.1)
    with serve(app) as live:
        client = McpTestClient(live.url + "/mcp")
        async with client.stream(
            "tools/call", {"name": "sleepy", "arguments": {"seconds": 1.0}}
        ) as call:
            await eventually(lambda: seen.sync_started == 1)
            await call.drop()
        await eventually(lambda: otel.orphans_active() == 1, what="the orphan")
        assert app._runtime.threads.in_use == 1
        await eventually(lambda: otel.orphans_active() == 0, what="the thread to return")
        await eventually(lambda: app._runtime.threads.in_use == 0)
