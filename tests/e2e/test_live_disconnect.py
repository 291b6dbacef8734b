"""A client that really closes its socket mid-call cancels the handler, in every mode."""

from __future__ import annotations

import pytest

from mcp_asgi import CancelReason

from ..helpers import Probe, drop_mid_call, mcp_app, serving, wait_for
from ..servers import outcomes_server


@pytest.mark.parametrize("mode", ["json", "sse", "auto"])
async def test_disconnect_cancels_handler(mode: str) -> None:
    """Dropping the connection mid-call stops the handler with reason client_disconnect."""
    probe = Probe()
    app = mcp_app(outcomes_server(probe), response_mode=mode)
    with serving(app) as client:
        sse = mode != "json"
        await drop_mid_call(client, "slow", probe, {}, read_progress=sse, progress=True)
        await wait_for(probe.exited)
        assert probe.reason is CancelReason.CLIENT_DISCONNECT
        response = await client.request("tools/list")
        assert response.status == 200
