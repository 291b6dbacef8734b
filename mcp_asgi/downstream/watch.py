"""Watching one live connection to a downstream: is it still there, and did its lists
(tools, prompts, resources) change. Each runs in the `Downstream`'s supervisor while
the connection lives.

    until_lost     a call saw the connection break (`lost`), or a check every
                   `interval` failed: `ping` on a 2025-era connection, `server/discover`
                   on a 2026-07-28 one (where `ping` is gone)
    follow         2026-07-28 only: `subscriptions/listen` for the list changes of the
                   kinds asked (`tools`, `prompts`, `resources`; a 2025-era server sends
                   notifications/*/list_changed unasked: the client's message handler
                   sees those); each event calls `changed(kind)`, and a stream that ends
                   is opened again after `backoff`, with one `changed` of each kind for
                   what it may have missed
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection
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


_FLAGS: Final = {
    "tools": "tools_list_changed",
    "prompts": "prompts_list_changed",
    "resources": "resources_list_changed",
}


async def follow(
    client: Any,
    kinds: Collection[str],
    changed: Callable[[str], None],
    backoff: float,
    name: str,
) -> None:
    from mcp.client.subscriptions import ListenNotSupportedError

    if not is_modern(client) or not kinds:
        return
    while True:
        try:
            async with client.listen(**{_FLAGS[kind]: True for kind in kinds}) as subscription:
                if not any(getattr(subscription.honored, _FLAGS[kind]) for kind in kinds):
                    return  # the server announces none of these changes
                async for event in subscription:
                    kind = _KINDS.get(type(event).__name__)
                    if kind is not None:
                        changed(kind)
        except ListenNotSupportedError:
            return
        except Exception:
            logger.debug("downstream %r: its listen stream ended", name, exc_info=True)
        await anyio.sleep(backoff)
        for kind in kinds:  # no replay: what changed meanwhile is read again
            changed(kind)


_KINDS: Final = {
    "ToolsListChanged": "tools",
    "PromptsListChanged": "prompts",
    "ResourcesListChanged": "resources",
}
