"""The server's side of its sources (server/sources.py): for each source, the catalog of
what it exposes.

    SourceCatalogs  the sources of one kind on a server (tools, prompts, or resources and
                    resource templates) and their catalogs; one instance for each kind
    ExposedItem     one item a source offers (a `SourceItem`), as the server exposes it:
                    under its exposed name (a resource: URI), with its source

A catalog is read from its source when first needed (a list, or a call/get/read of a name
no decorated primitive has) and again after the source's `changed()`; what the source
offers is selected, named, and checked against the names (a resource: the URIs) already
taken. A source whose list cannot be read keeps its last catalog (logged); the next
request tries again.

While the server runs (`running()`), every source's own `running()` is entered, and a
source that can list its items without a request (`list_at_start`) is read at once, so a
name it would take twice is refused before the first request (`on_collision="refuse"`).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable, Container, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any, cast

from mcp_asgi._loggers import errors_logger as _errors
from mcp_asgi.protocol.jsonrpc import INTERNAL_ERROR, JsonObject, McpError
from mcp_asgi.server.context import Context
from mcp_asgi.server.primitives import tool_error
from mcp_asgi.server.sources import (
    PromptSource,
    ResourceSource,
    Source,
    SourceItem,
    SourceKind,
    TaskPolicy,
    ToolSource,
)


@dataclass(frozen=True, slots=True)
class ExposedItem:
    """An item a source offers, as the server exposes it (`name`: a resource's URI;
    `item`: the item as the source offers it)."""

    name: str
    source: Source  # a ToolSource, PromptSource or ResourceSource
    item: SourceItem
    key: str = "name"  # what `name` is listed as: "name", "uri" or "uriTemplate"

    @property
    def is_template(self) -> bool:
        return self.key == "uriTemplate"

    def describe(self) -> JsonObject:
        return {**self.item.definition, self.key: self.name}

    async def call(self, arguments: dict[str, Any], ctx: Context) -> JsonObject:
        """The source's answer; a failure of the source (not the request's cancellation,
        nor an `McpError`) becomes an `isError` result, logged."""
        try:
            return await cast(ToolSource, self.source).call_tool(self.item, arguments, ctx)
        except McpError:
            raise
        except Exception as exc:
            if not ctx.cancelled:
                _errors.warning(
                    "tool %r of %s failed",
                    self.name,
                    type(self.source).__name__,
                    exc_info=True,
                    extra={"request_id": ctx.request_id, "method": ctx.method},
                )
            return tool_error(f"Tool {self.name!r} failed: {type(exc).__name__}")


class _Catalog:
    """What one source exposes, by exposed name, and whether it must be read again."""

    __slots__ = ("items", "read", "source", "version")

    def __init__(self, source: Source) -> None:
        self.source = source
        self.items: dict[str, ExposedItem] = {}
        self.version = 1  # raised by every changed()
        self.read = 0  # the version the items were read at

    @property
    def stale(self) -> bool:
        return self.read != self.version


_CLASSES: dict[SourceKind, type] = {
    "tool": ToolSource,
    "prompt": PromptSource,
    "resource": ResourceSource,
}


class SourceCatalogs:
    """The sources of one kind on one server, and the items each exposes."""

    def __init__(
        self,
        kind: SourceKind,
        announce: Callable[[], None],
        updated: Callable[[str], None] | None = None,
    ) -> None:
        self.kind: SourceKind = kind
        self._catalogs: list[_Catalog] = []
        self._announce = announce
        self._updated = updated  # a resource source's update, by its exposed URI

    def __bool__(self) -> bool:
        return bool(self._catalogs)

    def add(self, source: Source) -> None:
        if not isinstance(source, _CLASSES[self.kind]):
            raise TypeError(f"this catalog takes a {_CLASSES[self.kind].__name__}")
        if any(c.source is source for c in self._catalogs):
            raise ValueError(f"this {type(source).__name__} is already added")
        catalog = _Catalog(source)

        def changed() -> None:
            catalog.version += 1
            self._announce()

        source._watch(changed)
        if isinstance(source, ResourceSource) and self._updated is not None:
            source._watch_updates(self._updated)
        self._catalogs.append(catalog)
        self._announce()

    @asynccontextmanager
    async def running(self, taken: Container[str]) -> AsyncIterator[None]:
        """Every source's `running()`, then the sources that list at start read: a
        refused name raises `ValueError` here, before the server serves anything."""
        async with AsyncExitStack() as stack:
            for catalog in list(self._catalogs):
                await stack.enter_async_context(catalog.source.running())
            for catalog in self._catalogs:
                try:
                    offered = await catalog.source.list_at_start()
                except Exception:
                    _errors.warning(
                        "%s: its %ss could not be listed at start; they will be at the "
                        "first request",
                        type(catalog.source).__name__,
                        self.kind,
                        exc_info=True,
                    )
                    continue
                if offered is not None and catalog.stale:
                    self._install(catalog, offered, taken, catalog.version)
            yield

    async def load(self, ctx: Context, taken: Container[str]) -> None:
        """Read every source whose catalog is stale; `taken`: the decorated ones' names.
        A source refusing a name taken (at its first read) fails the request with an
        `McpError` (-32603) carrying the refusal's message."""
        for catalog in self._catalogs:
            if catalog.stale:
                try:
                    await self._read(catalog, ctx, taken)
                except ValueError as refused:
                    _errors.error("%s", refused)
                    raise McpError(INTERNAL_ERROR, str(refused)) from None

    def items(self) -> list[ExposedItem]:
        """Every item exposed (tools, prompts, or resources and templates)."""
        return [item for catalog in self._catalogs for item in catalog.items.values()]

    def route(self, uri: str) -> tuple[ResourceSource, str] | None:
        """The resource source that serves `uri`, and its own URI for it: the source
        listing it, else the first whose template matches it, else the first with a
        prefix `uri` starts with (the downstream decides: not every resource is listed)."""
        exposed = self.get(uri)
        if exposed is not None and not exposed.is_template:
            return self._routed(exposed.source, uri)
        for item in self.items():
            if item.is_template and _template_matches(item.name, uri):
                return self._routed(item.source, uri)
        for catalog in self._catalogs:
            prefix = cast(ResourceSource, catalog.source).prefix
            if prefix and uri.startswith(prefix):
                return self._routed(catalog.source, uri)
        return None

    @staticmethod
    def _routed(source: Source, uri: str) -> tuple[ResourceSource, str] | None:
        resources = cast(ResourceSource, source)
        own = resources.own_uri(uri)
        return None if own is None else (resources, own)

    def get(self, name: str) -> ExposedItem | None:
        """The item exposed as `name` (a resource: its URI), if a catalog has it."""
        for catalog in self._catalogs:
            item = catalog.items.get(name)
            if item is not None:
                return item
        return None

    def scopes_of(self, name: str, default: frozenset[str]) -> frozenset[str]:
        """The OAuth scopes calling `name` needs: its source's; for a name no catalog has while a
        catalog is still unread, those of every unread source (the strictest answer)."""
        for catalog in self._catalogs:
            if name in catalog.items:
                return _oauth_scopes(catalog.source, default)
        unread = [c.source for c in self._catalogs if c.stale and not c.items]
        return default.union(*(_oauth_scopes(source, default) for source in unread))

    def declared_scopes(self) -> frozenset[str]:
        found = (c.source.scopes for c in self._catalogs)
        return frozenset().union(*(s for s in found if s))

    def task_of(self, name: str) -> TaskPolicy:
        """Whether a call of `name` may run as a task: its source's `task`; for a name no
        catalog has while a catalog is still unread, `"optional"` if an unread source's
        tools may run as tasks (the caller reads the sources, then asks again)."""
        exposed = self.get(name)
        if exposed is not None:
            return _tools(exposed.source).task
        unread = [_tools(c.source).task for c in self._catalogs if c.stale and not c.items]
        return "optional" if any(task != "never" for task in unread) else "never"

    def may_run_tasks(self) -> bool:
        """Whether a source's tools may run as tasks."""
        return any(_tools(c.source).task != "never" for c in self._catalogs)

    def timeout_of(self, name: str) -> float | None:
        """A call's timeout: its source's; for a name no catalog has while a catalog is
        still unread, the shortest of the unread sources' (the call reads them)."""
        exposed = self.get(name)
        if exposed is not None:
            return _tools(exposed.source).timeout
        unread = [_tools(c.source).timeout for c in self._catalogs if c.stale and not c.items]
        timeouts = [t for t in unread if t is not None]
        return min(timeouts) if timeouts else None

    async def _read(self, catalog: _Catalog, ctx: Context, taken: Container[str]) -> None:
        version = catalog.version
        try:
            offered = await catalog.source.list_items(ctx)
        except Exception:
            _errors.warning(
                "%s: its %ss could not be listed",
                type(catalog.source).__name__,
                self.kind,
                exc_info=True,
            )
            return
        self._install(catalog, offered, taken, version)

    def _install(
        self,
        catalog: _Catalog,
        offered: Sequence[SourceItem],
        taken: Container[str],
        version: int,
    ) -> None:
        """Select and name what a source offers; a name taken is skipped (logged), or at a
        refusing source's first read raises `ValueError`."""
        source = catalog.source
        kind = type(source).__name__
        items: dict[str, ExposedItem] = {}
        others = {n for c in self._catalogs if c is not catalog for n in c.items}
        clashes: list[tuple[str, str]] = []
        for item in offered:
            if not source.selection.selects(item.name, item.labels):
                continue
            name = source.exposed_name(item)
            if name in taken or name in others or name in items:
                clashes.append((name, item.name))
                continue
            key = "name" if self.kind != "resource" else _uri_key(item)
            items[name] = ExposedItem(name, source, item, key)
        refuse = source.on_collision == "refuse"
        if clashes and refuse and catalog.read == 0:
            names = ", ".join(f"{name!r} ({own!r})" for name, own in clashes)
            raise ValueError(
                f"{kind}: {_NOUNS[self.kind]} already taken: {names}; give the source a prefix=, "
                "rename them with names=, or leave them out with exclude="
            )
        for name, own in clashes:
            (_errors.error if refuse else _errors.warning)(
                "%s: %s %r (%r) is not exposed: the name is already taken",
                kind,
                self.kind,
                name,
                own,
            )
        catalog.items = items
        catalog.read = version  # a changed() during the read leaves it stale


_NOUNS: dict[SourceKind, str] = {
    "tool": "tool names",
    "prompt": "prompt names",
    "resource": "resource URIs",
}


def _tools(source: Source) -> ToolSource:
    return cast(ToolSource, source)  # (only a tools catalog is asked about tasks, timeouts)


def _uri_key(item: SourceItem) -> str:
    return "uriTemplate" if "uriTemplate" in item.definition else "uri"


def _template_matches(template: str, uri: str) -> bool:
    """Whether `uri` can be an expansion of the URI template: its literal text in order,
    each `{expression}` matching any text (the downstream checks the rest)."""
    parts = re.split(r"\{[^{}]*\}", template)
    pattern = ".*".join(re.escape(part) for part in parts)
    return re.fullmatch(pattern, uri, re.DOTALL) is not None


def _oauth_scopes(source: Source, default: frozenset[str]) -> frozenset[str]:
    return source.scopes if source.scopes is not None else default
