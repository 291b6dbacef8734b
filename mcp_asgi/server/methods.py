"""`Methods`: the MCP methods that read the registry: listing, calling tools, reading
resources, getting prompts and completing arguments.

`McpServer` owns one, over its `Registry` (which it only reads). Every method takes
`(request, ctx, options)`, so that `McpServer.dispatch` can look them up by name; each
answers a result or raises `McpError`.
"""

from __future__ import annotations

import base64
import binascii
import inspect
from collections.abc import Awaitable, Mapping, Sequence
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
from mcp_asgi.server.catalogs import SourceCatalogs
from mcp_asgi.server.context import Context
from mcp_asgi.server.primitives import Resource, Tool
from mcp_asgi.server.registry import Registry
from mcp_asgi.server.required_scopes import RequiredScopes
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
    """The handlers of the methods that read `registry`, as `McpServer` dispatches them
    (`required_scopes`: what a principal must hold to see an item in a list)."""

    __slots__ = ("_registry", "_required_scopes")

    def __init__(self, registry: Registry, required_scopes: RequiredScopes) -> None:
        self._registry = registry
        self._required_scopes = required_scopes

    async def list_page(
        self, request: McpRequest, ctx: Context, options: ResultOptions
    ) -> JsonObject:
        """`tools/list`, `resources/list`, `resources/templates/list` and `prompts/list`;
        with an authenticated principal, only what it may call or read."""
        sources, taken = self._sources_of(request.method)
        if sources:
            await sources.load(ctx, taken)
        key, items = self._listed(request.method)
        principal = ctx.principal
        if principal is not None:
            kind = {"tools": "tool", "prompts": "prompt"}.get(key, "resource")
            scopes_of = self._required_scopes.of
            items = [
                item for item in items if principal.has_scopes(*scopes_of(kind, _key_of(item)))
            ]
        return _page(request, key, items, options.page_size)

    def _listed(self, method: str) -> tuple[str, Sequence[_Describable]]:
        """The result key and all the items of a list method."""
        registry = self._registry
        if method == "tools/list":
            return "tools", [*registry.tools.values(), *registry.tool_sources.items()]
        if method == "prompts/list":
            return "prompts", [*registry.prompts.values(), *registry.prompt_sources.items()]
        templates = method == "resources/templates/list"
        items: list[_Describable] = [
            r for r in registry.resources.values() if r.is_template == templates
        ]
        items += [r for r in registry.resource_sources.items() if r.is_template == templates]
        return ("resourceTemplates" if templates else "resources"), items

    def _sources_of(self, method: str) -> tuple[SourceCatalogs, Mapping[str, Any]]:
        """The sources a list (or a get, a read) of `method` reads, and the names the
        decorated ones have taken."""
        registry = self._registry
        family = method.partition("/")[0]
        if family == "prompts":
            return registry.prompt_sources, registry.prompts
        if family == "resources":
            return registry.resource_sources, registry.resources
        return registry.tool_sources, registry.tools

    def call_tool(
        self, request: McpRequest, ctx: Context, options: ResultOptions
    ) -> Awaitable[JsonObject]:
        """`await call_tool(...)`, `tools/call`: a decorated tool's handler, else a source's
        tool. For a decorated tool (most calls) a plain function handing back `Tool.call`'s
        coroutine: no frame of its own while the tool runs (a cancellation unwinds through
        one frame less); its refusals are raised at once, before anything is awaited."""
        registry = self._registry
        name = str(request.params["name"])
        tool = registry.tools.get(name)  # looked up once: a decorated tool, most calls
        if tool is None:
            if registry.tool_sources:
                return self._call_source_tool(request, ctx, name)
            tool = _named(registry.tools, request, "tool")
        return self._call_decorated(tool, request, ctx)

    async def _call_source_tool(self, request: McpRequest, ctx: Context, name: str) -> JsonObject:
        """`tools/call` of a name no decorated tool has: a source's tool (read first if need
        be), or a decorated tool the read added."""
        registry = self._registry
        sources = registry.tool_sources
        exposed = sources.get(name)
        if exposed is None:
            await sources.load(ctx, registry.tools)
            exposed = sources.get(name)
        if exposed is not None:
            if ctx.task_id is None and sources.task_of(name) == "required":
                raise missing_tasks_extension(name)  # a 2025-era request: no tasks there
            return await exposed.call(_arguments(request), ctx)
        tool = _named(registry.tools, request, "tool")  # a source's read may have added it
        return await self._call_decorated(tool, request, ctx)

    def _call_decorated(
        self, tool: Tool, request: McpRequest, ctx: Context
    ) -> Awaitable[JsonObject]:
        policies = self._registry.task_policies  # (empty on most servers: no lookup then)
        if policies and policies.get(tool.name) == "required" and ctx.task_id is None:
            raise missing_tasks_extension(tool.name)  # a 2025-era request: no tasks there
        return tool.call(_arguments(request), ctx)

    async def get_prompt(
        self, request: McpRequest, ctx: Context, options: ResultOptions
    ) -> JsonObject:
        """`prompts/get`: a decorated prompt, else a source's."""
        registry = self._registry
        name = str(request.params["name"])
        sources = registry.prompt_sources
        if name not in registry.prompts and sources:
            exposed = sources.get(name)
            if exposed is None:
                await sources.load(ctx, registry.prompts)
                exposed = sources.get(name)
            if exposed is not None:
                prompts = cast(PromptSource, exposed.source)
                return await prompts.get_prompt(exposed.item, _arguments(request), ctx)
        prompt = _named(registry.prompts, request, "prompt")
        return await prompt.get(_arguments(request), ctx)

    async def read_resource(
        self, request: McpRequest, ctx: Context, options: ResultOptions
    ) -> JsonObject:
        """`resources/read`: a decorated resource or template matching the URI, else the
        resource source that serves it."""
        registry = self._registry
        uri = str(request.params["uri"])
        static = registry.resources.get(uri)
        if static is not None and not static.is_template:
            return await static.read(uri, {}, ctx)
        for resource in registry.resources.values():
            variables = resource.match(uri)
            if variables is not None:
                return await resource.read(uri, variables, ctx)
        if registry.resource_sources:
            await registry.resource_sources.load(ctx, registry.resources)
            routed = registry.resource_sources.route(uri)
            if routed is not None:
                source, own = routed
                return await source.read_resource(own, ctx)
        raise ResourceNotFound(uri)

    async def complete(
        self, request: McpRequest, ctx: Context, options: ResultOptions
    ) -> JsonObject:
        """`completion/complete`: the completer of the prompt or template, if any."""
        ref, argument = request.params.get("ref"), request.params.get("argument")
        if not isinstance(ref, dict) or not isinstance(argument, dict):
            raise McpError(INVALID_PARAMS, "Invalid params: 'ref' and 'argument' are required")
        name, value = argument.get("name"), argument.get("value", "")
        if not isinstance(name, str) or not isinstance(value, str):
            raise McpError(INVALID_PARAMS, "Invalid params: argument name and value are strings")
        completer = self._registry.completers.get(self._completion_key(ref))
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
            if not isinstance(name, str) or name not in self._registry.prompts:
                raise McpError(INVALID_PARAMS, f"Unknown prompt: {name}")
            return kind, name
        if kind == "ref/resource":
            uri = ref.get("uri")
            if not isinstance(uri, str) or uri not in self._registry.resources:
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
