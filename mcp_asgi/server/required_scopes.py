"""`RequiredScopes`: the OAuth scopes each tool, resource and prompt of a registry needs,
and so each request (what `auth/` checks a principal's token against, and what a list
shows a principal).

A primitive registered with `scopes=` (or with FastAPI `Security` dependencies) needs its
own; a source's items, their source's `scopes`; anything else the server's default.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp_asgi.server.listen import LISTEN
from mcp_asgi.server.registry import Registry


class RequiredScopes:
    """The OAuth scopes asked of a caller, read from `registry` at every question."""

    __slots__ = ("_registry",)

    def __init__(self, registry: Registry) -> None:
        self._registry = registry

    def of(self, kind: str, key: str) -> frozenset[str]:
        """The scopes a `"tool"`, `"resource"` or `"prompt"` (by name, or URI as
        registered) needs: its own, else the server's default; a source's tool or prompt,
        its source's; a URI a resource source serves, that source's."""
        registry = self._registry
        default = registry.default_scopes
        own = registry.own_scopes.get((kind, key))
        if own is not None:
            return own
        if kind == "tool" and key not in registry.tools and registry.tool_sources:
            return registry.tool_sources.scopes_of(key, default)
        if kind == "prompt" and key not in registry.prompts and registry.prompt_sources:
            return registry.prompt_sources.scopes_of(key, default)
        sources = registry.resource_sources
        if kind == "resource" and key not in registry.resources and sources:
            routed = sources.route(key)
            if routed is None:  # none yet: those of every unread source, or the default
                return sources.scopes_of(key, default)
            return routed[0].scopes if routed[0].scopes is not None else default
        return default

    def declared(self) -> frozenset[str]:
        """Every scope the tools, resources and prompts need (with the default)."""
        registry = self._registry
        return registry.default_scopes.union(
            *registry.own_scopes.values(), *(c.declared_scopes() for c in registry.catalogs())
        )

    def for_request(self, method: str, params: Mapping[str, Any]) -> frozenset[str]:
        """`McpServer.required_scopes`."""
        resource_key = self._registry.resource_key
        if method in ("tools/call", "prompts/get"):
            return self.of("tool" if method == "tools/call" else "prompt", str(params.get("name")))
        if method in ("resources/read", "resources/subscribe"):
            return self.of("resource", resource_key(params.get("uri")))
        if method == "completion/complete":
            ref = params.get("ref")
            if isinstance(ref, Mapping) and ref.get("type") == "ref/prompt":
                return self.of("prompt", str(ref.get("name")))
            if isinstance(ref, Mapping) and ref.get("type") == "ref/resource":
                return self.of("resource", str(ref.get("uri")))
            return frozenset()
        if method == LISTEN:
            notifications = params.get("notifications")
            if not isinstance(notifications, dict):
                return frozenset()
            uris = notifications.get("resourceSubscriptions")
            if not isinstance(uris, list):
                return frozenset()
            return frozenset().union(*(self.of("resource", resource_key(uri)) for uri in uris))
        return frozenset()
