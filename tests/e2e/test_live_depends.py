"""Over a real socket (uvicorn): a client that drops mid-call cancels a handler that holds a
FastAPI `yield` dependency (closed before the request ends) or reads its `Request`."""

from __future__ import annotations

import pytest

from mcp_asgi import CancelReason

from ..helpers import Probe, drop_mid_call, serving, wait_for
from ..server.handler_apps import DependencyLog, depends_server, fastapi_host, request_server


@pytest.mark.parametrize("mode", ["json", "sse"])
async def test_a_dropped_connection_closes_the_yield_dependency(mode: str) -> None:
    """The handler is cancelled with reason client_disconnect and its dependency is
    closed with the cancellation, in the handler's task."""
    probe, log = Probe(), DependencyLog()
    app = fastapi_host(depends_server(probe), log, response_mode=mode)
    with serving(app) as client:
        await drop_mid_call(client, "slow", probe, {})
        await wait_for(probe.exited)
        await wait_for(log.closed)
        assert probe.reason is CancelReason.CLIENT_DISCONNECT
        assert log.events[-2:] == [log.events[-2], "close"]
        assert log.events[-2].startswith("closed by ")
        after = await client.call_tool("lookup", {"key": "k"})
        assert after["content"][0]["text"] == "k@memory:// (memory://)"


async def test_reading_the_request_does_not_hide_a_dropped_connection() -> None:
    """A handler reading its body and polling `is_disconnected()` is still cancelled."""
    probe = Probe()
    app = fastapi_host(request_server(probe))
    with serving(app) as client:
        await drop_mid_call(client, "poll_disconnect", probe, {})
        await wait_for(probe.exited)
        assert probe.reason is CancelReason.CLIENT_DISCONNECT
        assert probe.notes == []
