"""Watching one live connection to a downstream: is it still there, and did its tools
change. Each runs in the `Downstream`'s supervisor while the connection lives.

    until_lost     a call saw the connection break (`lost`), or a check every
                   `interval` failed: `ping` on a 2025-era connection, `server/discover`
                   on a 2026-07-28 one (where `ping` is gone)
    follow_tools   2026-07-28 only: `subscriptions/listen` for toolsListChanged (a
                   2025-era server sends notifications/tools/list_changed unasked: the
                   client's message handler sees those); each event calls `changed`, and
                   a stream that ends is opened again after `backoff`, with one
                   `changed` for what it may have missed
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Final

import anyio

from mcp_asgi._loggers import downstream_logger as logger

CHECK_TIMEOUT: Final = 10.0  # seconds a connection check may take before it counts as lost


def is_modern(client: Any) -> bool:
    """Whether the connection speaks 2026-07-28 (or later) rather than a 2025 revision."""
    from mcp.types.version import HANDSHAKE_PROTOCOL_VERSIONS

    return client.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS


async def until_lost(client: Any, lost: anyio.Event, interval: float | None, name: str) -> None:
    while not lost.is_set():
        with anyio.move_on_after(interval if interval is not None else math.inf):
            await lost.wait()
        if lost.is_set() or interval is None:
            return
        try:
            with anyio.fail_after(max(interval, CHECK_TIMEOUT)):
                if is_modern(client):
                    await client.session.discover()
                else:  # (Client.send_ping warns whatever was negotiated)
                    await client.session.send_ping()
        except Exception:
            logger.warning("downstream %r: the connection check failed", name, exc_info=True)
            return


async def follow_tools(client: Any, changed: Callable[[], None], backoff: float, name: str) -> None:
    from mcp.client.subscriptions import ListenNotSupportedError

    if not is_modern(client):
        return
    while True:
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                if not subscription.honored.tools_list_changed:
                    return  # the server does not announce tool changes
                async for _ in subscription:
                    changed()
        except ListenNotSupportedError:
            return
        except Exception:
            logger.debug("downstream %r: its listen stream ended", name, exc_info=True)
        await anyio.sleep(backoff)
        changed()  # no replay: what changed meanwhile is read again
