"""The MCP methods that read the registry: listing, calling tools, reading resources,
getting prompts and completing arguments.

A mixin of `McpServer`, next to `Registry` (which fills what these read). Every method
takes `(request, ctx, options)`, so that `McpServer.dispatch` can look them up by name;
each answers a result or raises `McpError`.
"""

from __future__ import annotations

import base64
import binascii
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar, cast

from mcp_asgi.protocol.jsonrpc import (
    INVALID_PARAMS,
    MISSING_CLIENT_CAPABILITY,
    JsonObject,
    McpError,
    ResourceNotFound,
)
from mcp_asgi.protocol.request import TASKS_EXTENSION, McpRequest
from mcp_asgi.server.context import Context
from mcp_asgi.server.primitives import Prompt, Resource, Tool
from mcp_asgi.server.sourced import Sourced
from mcp_asgi.server.sources import PromptSource

T = TypeVar("T")
_MAX_COMPLETIONS = 100


@dataclass(frozen=True, slots=True)
class ResultOptions:
    """Endpoint settings that shape results: list page size and cache lifetime."""

    page_size: int = 100
    ttl_ms: int = 0
    cache_scope: Literal["public", "private"] = "public"
    listen_max_duration: float | None = None


class _Describable(Protocol):
    def describe(self) -> JsonObject: ...


class Methods:
    """Mixed into `McpServer`; relies on the registries of its `Registry` base."""

    _tools: dict[str, Tool]
    _resources: dict[str, Resource]
    _prompts: dict[str, Prompt]
    _completers: dict[tuple[str, str], Callable[..., Any]]
    _scopes: dict[tuple[str, str], frozenset[str]]
    _default_scopes: frozenset[str]
    _sourced: Sourced
    _sourced_prompts: Sourced
    _sourced_resources: Sourced
    _task_policies: dict[str, Literal["never", "optional", "required"]]

    def scopes_of(self, kind: str, key: str) -> frozenset[str]:
        """The scopes a `"tool"`, `"resource"` or `"prompt"` (by name, or URI as
        registered) needs: its own, else the server's default; a source's tool or prompt,
        its source's; a URI a resource source serves, that source's."""
        own = self._scopes.get((kind, key))
        if own is not None:
            return own
        if kind == "tool" and key not in self._tools and self._sourced:
            return self._sourced.scopes_of(key, self._default_scopes)
        if kind == "prompt" and key not in self._prompts and self._sourced_prompts:
            return self._sourced_prompts.scopes_of(key, self._default_scopes)
        if kind == "resource" and key not in self._resources and self._sourced_resources:
            routed = self._sourced_resources.route(key)
            if routed is None:  # none yet: those of every unread source, or the default
                return self._sourced_resources.scopes_of(key, self._default_scopes)
            return routed[0].scopes if routed[0].scopes is not None else self._default_scopes
        return self._default_scopes

    async def _list(self, request: McpRequest, ctx: Context, options: ResultOptions) -> JsonObject:
        """`tools/list`, `resources/list`, `resources/templates/list` and `prompts/list`;
        with an authenticated principal, only what it may call or read."""
        sourced, taken = self._sources_of(request.method)
        if sourced:
            await sourced.load(ctx, taken)
        key, items = self._listed(request.method)
        principal = ctx.principal
        if principal is not None:
            kind = {"tools": "tool", "prompts": "prompt"}.get(key, "resource")
            items = [
                item for item in items if principal.has_scopes(*self.scopes_of(kind, _key_of(item)))
            ]
        return _page(request, key, items, options.page_size)

    def _listed(self, method: str) -> tuple[str, Sequence[_Describable]]:
        """The result key and all the items of a list method."""
        if method == "tools/list":
            return "tools", [*self._tools.values(), *self._sourced.tools()]
        if method == "prompts/list":
            return "prompts", [*self._prompts.values(), *self._sourced_prompts.tools()]
        templates = method == "resources/templates/list"
        items: list[_Describable] = [
            r for r in self._resources.values() if r.is_template == templates
        ]
        items += [r for r in self._sourced_resources.tools() if r.is_template == templates]
        return ("resourceTemplates" if templates else "resources"), items

    def _sources_of(self, method: str) -> tuple[Sourced, Mapping[str, Any]]:
        """The sources a list (or a get, a read) of `method` reads, and the names the
        decorated ones have taken."""
        family = method.partition("/")[0]
        if family == "prompts":
            return self._sourced_prompts, self._prompts
        if family == "resources":
            return self._sourced_resources, self._resources
        return self._sourced, self._tools

    async def _call_tool(
        self, request: McpRequest, ctx: Context, options: ResultOptions
    ) -> JsonObject:
        name = str(request.params["name"])
        if name not in self._tools and self._sourced:
            sourced = self._sourced.get(name)
            if sourced is None:
                await self._sourced.load(ctx, self._tools)
                sourced = self._sourced.get(name)
            if sourced is not None:
                if ctx.task_id is None and self._sourced.task_of(name) == "required":
                    raise missing_tasks_extension(name)  # a 2025-era request: no tasks there
                return await sourced.call(_arguments(request), ctx)
        tool = _named(self._tools, request, "tool")
        if ctx.task_id is None and self._task_policies.get(tool.name) == "required":
            raise missing_tasks_extension(tool.name)  # a 2025-era request: no tasks there
        return await tool.call(_arguments(request), ctx)

    async def _get_prompt(
        self, request: McpRequest, ctx: Context, options: ResultOptions
    ) -> JsonObject:
        name = str(request.params["name"])
        if name not in self._prompts and self._sourced_prompts:
            sourced = self._sourced_prompts.get(name)
            if sourced is None:
                await self._sourced_prompts.load(ctx, self._prompts)
                sourced = self._sourced_prompts.get(name)
            if sourced is not None:
                prompts = cast(PromptSource, sourced.source)
                return await prompts.get_prompt(sourced.tool, _arguments(request), ctx)
        prompt = _named(self._prompts, request, "prompt")
        return await prompt.get(_arguments(request), ctx)

    async def _read_resource(
        self, request: McpRequest, ctx: Context, options: ResultOptions
    ) -> JsonObject:
        uri = str(request.params["uri"])
        static = self._resources.get(uri)
        if static is not None and not static.is_template:
            return await static.read(uri, {}, ctx)
        for resource in self._resources.values():
            variables = resource.match(uri)
            if variables is not None:
                return await resource.read(uri, variables, ctx)
        if self._sourced_resources:
            await self._sourced_resources.load(ctx, self._resources)
            routed = self._sourced_resources.route(uri)
            if routed is not None:
                source, own = routed
                return await source.read_resource(own, ctx)
        raise ResourceNotFound(uri)

    async def _complete(
        self, request: McpRequest, ctx: Context, options: ResultOptions
    ) -> JsonObject:
        ref, argument = request.params.get("ref"), request.params.get("argument")
        if not isinstance(ref, dict) or not isinstance(argument, dict):
            raise McpError(INVALID_PARAMS, "Invalid params: 'ref' and 'argument' are required")
        name, value = argument.get("name"), argument.get("value", "")
        if not isinstance(name, str) or not isinstance(value, str):
            raise McpError(INVALID_PARAMS, "Invalid params: argument name and value are strings")
        completer = self._completers.get(self._completion_key(ref))
        if completer is None:
            return {"completion": {"values": [], "total": 0, "hasMore": False}}
        context = request.params.get("context")
        args = context.get("arguments") if isinstance(context, dict) else None
        call_args = (name, value, dict(args) if isinstance(args, dict) else {})
        if inspect.iscoroutinefunction(completer):
            values = await completer(*call_args)
        else:
            values = await ctx.run_sync(completer, *call_args)
        values = [str(v) for v in values]
        return {
            "completion": {
                "values": values[:_MAX_COMPLETIONS],
                "total": len(values),
                "hasMore": len(values) > _MAX_COMPLETIONS,
            }
        }

    def _completion_key(self, ref: dict[str, Any]) -> tuple[str, str]:
        kind = ref.get("type")
        if kind == "ref/prompt":
            name = ref.get("name")
            if not isinstance(name, str) or name not in self._prompts:
                raise McpError(INVALID_PARAMS, f"Unknown prompt: {name}")
            return kind, name
        if kind == "ref/resource":
            uri = ref.get("uri")
            if not isinstance(uri, str) or uri not in self._resources:
                raise McpError(INVALID_PARAMS, f"Unknown resource or template: {uri}")
            return kind, uri
        raise McpError(INVALID_PARAMS, "Invalid params: ref.type is ref/prompt or ref/resource")


def missing_tasks_extension(tool_name: str) -> McpError:
    """-32021 (HTTP 400) for a call of a tool that runs only as a task, from a request
    that did not declare the Tasks extension."""
    return McpError(
        MISSING_CLIENT_CAPABILITY,
        f"Missing required client capability: extensions.{TASKS_EXTENSION} (tool "
        f"{tool_name!r} runs only as a task; declare the extension in _meta "
        "io.modelcontextprotocol/clientCapabilities)",
        {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
    )


def _key_of(item: Any) -> str:
    uri = getattr(item, "uri", None)
    return str(uri) if isinstance(item, Resource) else str(getattr(item, "name", uri))


def _named(registry: Mapping[str, T], request: McpRequest, what: str) -> T:
    """The tool or prompt that `params.name` names; -32602 if there is none."""
    name = str(request.params["name"])
    item = registry.get(name)
    if item is None:
        raise McpError(INVALID_PARAMS, f"Unknown {what}: {name}")
    return item


def _arguments(request: McpRequest) -> dict[str, Any]:
    arguments = request.params.get("arguments") or {}
    if not isinstance(arguments, dict):
        raise McpError(INVALID_PARAMS, "Invalid params: 'arguments' must be an object")
    return arguments


def _page(request: McpRequest, key: str, items: Sequence[_Describable], size: int) -> JsonObject:
    """The page of `items` that `params.cursor` starts, described, and the next cursor."""
    start = _decode_cursor(request.params.get("cursor"), len(items))
    end = start + size
    result: JsonObject = {key: [item.describe() for item in items[start:end]]}
    if end < len(items):
        result["nextCursor"] = base64.urlsafe_b64encode(str(end).encode()).decode()
    return result


def _decode_cursor(cursor: Any, size: int) -> int:
    if cursor is None:
        return 0
    try:
        if not isinstance(cursor, str):
            raise ValueError
        offset = int(base64.urlsafe_b64decode(cursor.encode()).decode())
    except (ValueError, binascii.Error, UnicodeDecodeError):
        offset = -1
    if not 0 <= offset <= size:
        raise McpError(INVALID_PARAMS, "Invalid params: unknown cursor")
    return offset
