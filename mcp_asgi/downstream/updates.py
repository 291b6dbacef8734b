"""A downstream's resource subscriptions: the URIs the gateway keeps it subscribed to
while connected (again after every reconnection), and its updates handed to listeners.

    2025 era     resources/subscribe for each URI; its notifications/resources/updated
                 reach the client's message handler, which calls `updated`
    2026-07-28   a `subscriptions/listen` stream for each batch of URIs subscribed
                 together (opened again after `backoff` if it ends), whose
                 ResourceUpdated events call `updated`

Nothing is unsubscribed: a URI stays subscribed for as long as the `Downstream` lives.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import anyio
from anyio.abc import TaskGroup

from mcp_asgi._loggers import downstream_logger as logger
from mcp_asgi.downstream.watch import is_modern


class ResourceUpdates:
    """The URIs subscribed on one downstream, and who hears of their updates."""

    def __init__(self, name: str, backoff: float) -> None:
        self._name = name
        self._backoff = backoff
        self._uris: set[str] = set()
        self._listeners: list[Callable[[str], None]] = []
        self._watching: TaskGroup | None = None

    def on_updated(self, listener: Callable[[str], None]) -> None:
        self._listeners.append(listener)

    def updated(self, uri: str) -> None:
        for listener in list(self._listeners):
            try:
                listener(uri)
            except Exception:
                logger.warning(
                    "downstream %r: a resource listener failed", self._name, exc_info=True
                )

    def connected(self, client: Any, watching: TaskGroup | None) -> None:
        """A connection is made (`watching`: its task group) or gone (None): every URI
        subscribed so far is subscribed on it."""
        self._watching = watching
        if watching is not None and self._uris:
            watching.start_soon(self._subscribe, client, sorted(self._uris), watching)

    async def subscribe(self, client: Any, uris: Iterable[str]) -> None:
        """Subscribe the URIs not subscribed yet (none if the downstream does not offer
        resource subscriptions)."""
        resources = getattr(client.server_capabilities, "resources", None)
        if resources is None or not resources.subscribe:
            return
        new = sorted(set(uris) - self._uris)
        if not new:
            return
        self._uris.update(new)
        if self._watching is not None:
            await self._subscribe(client, new, self._watching)

    async def _subscribe(self, client: Any, uris: Sequence[str], watching: TaskGroup) -> None:
        if is_modern(client):
            watching.start_soon(self._listen, client, uris)
            return
        from mcp import types

        for uri in uris:
            request = types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri))
            await client.session.send_request(request, types.EmptyResult)

    async def _listen(self, client: Any, uris: Sequence[str]) -> None:
        from mcp.shared.subscriptions import ResourceUpdated

        while True:
            try:
                async with client.listen(resource_subscriptions=uris) as subscription:
                    if not subscription.honored.resource_subscriptions:
                        return
                    async for event in subscription:
                        if isinstance(event, ResourceUpdated):
                            self.updated(event.uri)
            except Exception:
                logger.debug("downstream %r: a listen stream ended", self._name, exc_info=True)
            await anyio.sleep(self._backoff)
