"""What a 2025-era session's GET stream carries: the notification a bus event becomes for
one session, and the events a stream's subscription has not read yet (taken over by the
stream that comes next, so none is lost between two streams)."""

from __future__ import annotations

from typing import Any, Final

import anyio

from mcp_asgi.bus.in_process import ChangeEvent, ChangeKind
from mcp_asgi.legacy.sessions import LegacySession
from mcp_asgi.protocol import jsonrpc
from mcp_asgi.protocol.jsonrpc import JsonObject

_METHODS: Final[dict[ChangeKind, str]] = {  # (task status: 2026-07-28 listen streams only)
    "tools_list_changed": "notifications/tools/list_changed",
    "prompts_list_changed": "notifications/prompts/list_changed",
    "resources_list_changed": "notifications/resources/list_changed",
    "resource_updated": "notifications/resources/updated",
}


def notification(event: ChangeEvent, session: LegacySession) -> JsonObject | None:
    """The notification for `event` on this session's stream; None when it did not ask."""
    if event.kind not in _METHODS:
        return None
    if event.kind == "resource_updated":
        if event.uri is None or event.uri not in session.subscriptions:
            return None
        return jsonrpc.notification(_METHODS[event.kind], {"uri": event.uri})
    return jsonrpc.notification(_METHODS[event.kind], {})


def unread(events: Any) -> list[ChangeEvent]:
    """What a subscription (a memory object stream, as both buses give) holds unread, taken
    without waiting; nothing for anything else."""
    taken: list[ChangeEvent] = []
    receive_nowait = getattr(events, "receive_nowait", None)
    if receive_nowait is None:
        return taken
    while True:
        try:
            taken.append(receive_nowait())
        except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
            return taken
