"""The change-notification part of `McpServer`: announcing changes, removing primitives,
and ending listen streams.

A mixin of `McpServer`, next to `Registry` and `Methods`. Announcements go through the
server's `NotificationBus` to every `subscriptions/listen` stream of every process that
shares the bus. Registering or removing a tool, prompt or resource announces itself:
synchronously and without waiting (`publish_nowait`), so it works from a plain `def`, a
worker thread, or the event loop. Registrations made before the server runs (at import)
announce nothing: nobody can be listening yet.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp_asgi.bus.in_process import ChangeEvent, ChangeKind, NotificationBus
from mcp_asgi.server.listen import Subscriptions
from mcp_asgi.server.sourced import Sourced


class ChangeNotifications:
    """Mixed into `McpServer`; relies on its registries and its `subscriptions` hub."""

    _tools: dict[str, Any]
    _resources: dict[str, Any]
    _prompts: dict[str, Any]
    _sourced: Sourced
    _sourced_prompts: Sourced
    _sourced_resources: Sourced
    subscriptions: Subscriptions

    @property
    def bus(self) -> NotificationBus:
        """The bus change notifications travel on (in-process unless configured)."""
        return self.subscriptions.bus

    # -- announcing ------------------------------------------------------------------

    async def notify_tools_changed(self) -> None:
        """Tell listeners that opted into `toolsListChanged` to fetch `tools/list` again."""
        await self.bus.publish(ChangeEvent("tools_list_changed"))

    async def notify_prompts_changed(self) -> None:
        """Tell listeners that opted into `promptsListChanged`."""
        await self.bus.publish(ChangeEvent("prompts_list_changed"))

    async def notify_resources_changed(self) -> None:
        """Tell listeners that opted into `resourcesListChanged`."""
        await self.bus.publish(ChangeEvent("resources_list_changed"))

    async def notify_resource_updated(self, uri: str) -> None:
        """Tell listeners subscribed to `uri` (or to a parent of it) that it changed."""
        if not isinstance(uri, str) or not uri:
            raise ValueError("uri must be a non-empty string")
        await self.bus.publish(ChangeEvent("resource_updated", uri))

    # -- removing --------------------------------------------------------------------

    def remove_tool(self, name: str) -> None:
        """Unregister a tool (listeners are told); KeyError if there is none by that name."""
        self._remove(self._tools, name, "tool")

    def remove_prompt(self, name: str) -> None:
        """Unregister a prompt (listeners are told); KeyError if there is none."""
        self._remove(self._prompts, name, "prompt")

    def remove_resource(self, uri: str) -> None:
        """Unregister a resource or template by its URI (listeners are told); KeyError if
        there is none."""
        self._remove(self._resources, uri, "resource")

    def _remove(self, registry: dict[str, Any], key: str, what: str) -> None:
        if key not in registry:
            raise KeyError(f"no {what} {key!r} is registered")
        del registry[key]
        self._registry_changed(registry)

    def _resource_updated(self, uri: str) -> None:
        """A source's resource at `uri` changed (sync): announced without waiting."""
        self.subscriptions.changed(ChangeEvent("resource_updated", uri))

    def _registry_changed(self, registry: dict[str, Any]) -> None:
        kind: ChangeKind
        if registry is self._tools:
            kind = "tools_list_changed"
        elif registry is self._prompts:
            kind = "prompts_list_changed"
        elif registry is self._resources:
            kind = "resources_list_changed"
        else:
            return
        self.subscriptions.changed(ChangeEvent(kind))

    # -- lifetime --------------------------------------------------------------------

    async def close_subscriptions(self) -> int:
        """End this process's listen streams gracefully: each gets its final
        `subscriptions/listen` result, then closes. Returns how many were open."""
        return await self.subscriptions.close_all()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The bus's background work and every source's `running()` (the middleware
        enters it around the lifespan, `serve_stdio` around the pipe). A source refusing a
        name already taken raises `ValueError` here (the sources are entered first, so the
        error is not wrapped by the bus's task group)."""
        async with (
            self._sourced.running(self._tools),
            self._sourced_prompts.running(self._prompts),
            self._sourced_resources.running(self._resources),
            self.bus.running(),
        ):
            yield
