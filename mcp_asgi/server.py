"""`McpServer`: the registry of tools, resources and prompts, and dispatch of MCP methods."""

from __future__ import annotations

import base64
import binascii
import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, overload

from ._changes import ChangeNotifications
from ._listen import LISTEN, Subscriptions
from ._primitives import Prompt, Resource, Tool
from ._validate import SUPPORTED_VERSIONS, McpRequest, ParamHeader
from .bus import NotificationBus
from .context import Context
from .input import InputRequired, is_retry
from .jsonrpc import INVALID_PARAMS, JsonObject, McpError, ResourceNotFound
from .schema import inspect_handler, parse_docstring

F = TypeVar("F", bound=Callable[..., Any])
Completer = Callable[..., Any]
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"


@dataclass(frozen=True, slots=True)
class ResultOptions:
    """Endpoint settings that shape results: list page size and cache lifetime."""

    page_size: int = 100
    ttl_ms: int = 0
    listen_max_duration: float | None = None


_CACHEABLE = frozenset(
    {
        "server/discover",
        "tools/list",
        "resources/list",
        "resources/templates/list",
        "prompts/list",
        "resources/read",
    }
)


class McpServer(ChangeNotifications):
    """The tools, resources and prompts one MCP endpoint serves.

    Register handlers with the decorators. Parameter type hints and the docstring become
    the JSON Schema and descriptions; a parameter annotated `Context` receives the request
    context, one annotated `CancelToken` the thread cancel token. `def` handlers run in a
    worker thread, `async def` handlers on the event loop.

    Change notifications (`notify_tools_changed()` ..., `remove_tool()` ...) travel on
    `bus`: in-process by default, or e.g. a `RedisBus` shared by every replica.
    """

    def __init__(
        self,
        name: str,
        *,
        version: str = "0.0.0",
        instructions: str | None = None,
        title: str | None = None,
        bus: NotificationBus | None = None,
    ) -> None:
        if not name:
            raise ValueError("server name must not be empty")
        self.name = name
        self.version = version
        self.instructions = instructions
        self._server_info: JsonObject = {"name": name, "version": version}
        if title:
            self._server_info["title"] = title
        self._tools: dict[str, Tool] = {}
        self._resources: dict[str, Resource] = {}
        self._prompts: dict[str, Prompt] = {}
        self._completers: dict[tuple[str, str], Completer] = {}
        self.subscriptions = Subscriptions(bus, lambda: self._server_info)
        self._methods: dict[
            str, Callable[[McpRequest, Context, ResultOptions], Awaitable[JsonObject]]
        ] = {
            "server/discover": self._discover,
            "tools/list": self._list_tools,
            "tools/call": self._call_tool,
            "resources/list": self._list_resources,
            "resources/templates/list": self._list_templates,
            "resources/read": self._read_resource,
            "prompts/list": self._list_prompts,
            "prompts/get": self._get_prompt,
            "completion/complete": self._complete,
            LISTEN: self._listen,
        }

    # -- registration ----------------------------------------------------------------

    @overload
    def tool(self, name: F, /) -> F: ...

    @overload
    def tool(
        self,
        name: str | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        annotations: JsonObject | None = None,
        timeout: float | None = None,
    ) -> Callable[[F], F]: ...

    def tool(
        self,
        name: str | Callable[..., Any] | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        annotations: JsonObject | None = None,
        timeout: float | None = None,
    ) -> Any:
        """Register a tool (`@server.tool` or `@server.tool(...)`).

        `timeout` (seconds) caps this tool below `max_request_duration`.
        """
        if callable(name):
            return self.tool()(name)
        if name is not None and (not isinstance(name, str) or not name):
            raise TypeError("tool name must be a non-empty string")
        if timeout is not None and timeout <= 0:
            raise ValueError("tool timeout must be positive")

        def register(fn: F) -> F:
            tool_name = name or fn.__name__
            summary = description or parse_docstring(fn)[0]
            self._add(
                self._tools,
                tool_name,
                Tool.build(
                    fn,
                    name=tool_name,
                    title=title,
                    description=summary,
                    annotations=annotations,
                    timeout=timeout,
                ),
            )
            return fn

        return register

    def resource(
        self,
        uri: str,
        *,
        name: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
    ) -> Callable[[F], F]:
        """Register a resource at a fixed URI or a URI template such as `notes://{id}`."""
        if not isinstance(uri, str):
            raise TypeError("resource() needs a URI: use @server.resource('scheme://...')")
        if "://" not in uri:
            raise ValueError(f"resource URI {uri!r} must have a scheme, e.g. 'file:///x'")

        def register(fn: F) -> F:
            summary = description or parse_docstring(fn)[0]
            self._add(
                self._resources,
                uri,
                Resource.build(
                    fn,
                    uri=uri,
                    name=name or fn.__name__,
                    description=summary,
                    mime_type=mime_type,
                ),
            )
            return fn

        return register

    @overload
    def prompt(self, name: F, /) -> F: ...

    @overload
    def prompt(
        self, name: str | None = None, *, title: str | None = None, description: str | None = None
    ) -> Callable[[F], F]: ...

    def prompt(
        self,
        name: str | Callable[..., Any] | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
    ) -> Any:
        """Register a prompt (`@server.prompt` or `@server.prompt(...)`); its parameters are
        the prompt's (string) arguments."""
        if callable(name):
            return self.prompt()(name)
        if name is not None and (not isinstance(name, str) or not name):
            raise TypeError("prompt name must be a non-empty string")

        def register(fn: F) -> F:
            prompt_name = name or fn.__name__
            summary = description or parse_docstring(fn)[0]
            prompt = Prompt.build(fn, name=prompt_name, title=title, description=summary)
            self._add(self._prompts, prompt_name, prompt)
            return fn

        return register

    def completion(
        self, *, prompt: str | None = None, resource: str | None = None
    ) -> Callable[[F], F]:
        """Register argument completion for a prompt or a resource template.

        The handler receives `argument: str, value: str, context: dict[str, str]` and
        returns a list of suggestions.
        """
        if (prompt is None) == (resource is None):
            raise ValueError("completion needs exactly one of prompt= or resource=")
        key = ("ref/prompt", prompt) if prompt is not None else ("ref/resource", str(resource))

        def register(fn: F) -> F:
            inspect_handler(fn, name=f"completion {key[1]}")
            self._completers[key] = fn
            return fn

        return register

    def _add(self, registry: dict[str, Any], key: str, item: Any) -> None:
        if key in registry:
            raise ValueError(f"{key!r} is already registered")
        registry[key] = item
        self._registry_changed(registry)

    # -- what validation and the middleware ask --------------------------------------

    @property
    def server_info(self) -> JsonObject:
        """This server's `Implementation` (name, version, title): a copy."""
        return dict(self._server_info)

    def capabilities(self) -> JsonObject:
        """The server capabilities advertised by `server/discover`."""
        caps: JsonObject = {"logging": {}}
        if self._tools:
            caps["tools"] = {"listChanged": True}
        if self._resources:
            caps["resources"] = {"listChanged": True, "subscribe": True}
        if self._prompts:
            caps["prompts"] = {"listChanged": True}
        if self._completers:
            caps["completions"] = {}
        return caps

    def has_method(self, method: str) -> bool:
        """Whether `method` is served (capability-gated methods only when advertised)."""
        if method not in self._methods:
            return False
        family = method.split("/", 1)[0]
        gate = {
            "tools": self._tools,
            "resources": self._resources,
            "prompts": self._prompts,
            "completion": self._completers,
        }.get(family)
        return gate is None or bool(gate)

    def param_headers(self, tool_name: str) -> tuple[ParamHeader, ...]:
        tool = self._tools.get(tool_name)
        return tool.headers if tool else ()

    def timeout_for(self, request: McpRequest) -> float | None:
        """The tool's own timeout, if the request calls a tool that has one."""
        if request.method == "tools/call":
            tool = self._tools.get(str(request.params.get("name")))
            return tool.timeout if tool else None
        return None

    async def dispatch(
        self, request: McpRequest, ctx: Context, options: ResultOptions | None = None
    ) -> JsonObject:
        """Answer one validated request; raises `McpError` for JSON-RPC errors."""
        options = options or ResultOptions()
        try:
            result = await self._methods[request.method](request, ctx, options)
        except InputRequired as pending:  # a handler asked the client for input (MRTR)
            result = pending.result
        result.setdefault("resultType", "complete")
        meta = result.get("_meta")
        meta = dict(meta) if isinstance(meta, dict) else {}
        meta[SERVER_INFO_KEY] = self._server_info
        result["_meta"] = meta
        if request.method in _CACHEABLE and result["resultType"] == "complete":
            result.setdefault("ttlMs", options.ttl_ms)
            result.setdefault("cacheScope", "public")
            if is_retry(request.params):  # answers from an MRTR round: never cached
                result["ttlMs"] = 0
        return result

    # -- methods ---------------------------------------------------------------------

    async def _discover(
        self, request: McpRequest, ctx: Context, options: ResultOptions
    ) -> JsonObject:
        result: JsonObject = {
            "supportedVersions": list(SUPPORTED_VERSIONS),
            "capabilities": self.capabilities(),
        }
        if self.instructions:
            result["instructions"] = self.instructions
        return result

    async def _listen(
        self, request: McpRequest, ctx: Context, options: ResultOptions
    ) -> JsonObject:
        capabilities = self.capabilities()
        return await self.subscriptions.serve(
            request, ctx, capabilities, options.listen_max_duration
        )

    async def _list_tools(
        self, request: McpRequest, ctx: Context, options: ResultOptions
    ) -> JsonObject:
        items = [t.describe() for t in self._tools.values()]
        return _page(request, "tools", items, options.page_size)

    async def _call_tool(
        self, request: McpRequest, ctx: Context, options: ResultOptions
    ) -> JsonObject:
        name = str(request.params["name"])
        tool = self._tools.get(name)
        if tool is None:
            raise McpError(INVALID_PARAMS, f"Unknown tool: {name}")
        arguments = request.params.get("arguments") or {}
        if not isinstance(arguments, dict):
            raise McpError(INVALID_PARAMS, "Invalid params: 'arguments' must be an object")
        return await tool.call(arguments, ctx)

    async def _list_resources(
        self, request: McpRequest, ctx: Context, options: ResultOptions
    ) -> JsonObject:
        items = [r.describe() for r in self._resources.values() if not r.is_template]
        return _page(request, "resources", items, options.page_size)

    async def _list_templates(
        self, request: McpRequest, ctx: Context, options: ResultOptions
    ) -> JsonObject:
        items = [r.describe() for r in self._resources.values() if r.is_template]
        return _page(request, "resourceTemplates", items, options.page_size)

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
        raise ResourceNotFound(uri)

    async def _list_prompts(
        self, request: McpRequest, ctx: Context, options: ResultOptions
    ) -> JsonObject:
        items = [p.describe() for p in self._prompts.values()]
        return _page(request, "prompts", items, options.page_size)

    async def _get_prompt(
        self, request: McpRequest, ctx: Context, options: ResultOptions
    ) -> JsonObject:
        name = str(request.params["name"])
        prompt = self._prompts.get(name)
        if prompt is None:
            raise McpError(INVALID_PARAMS, f"Unknown prompt: {name}")
        arguments = request.params.get("arguments") or {}
        if not isinstance(arguments, dict):
            raise McpError(INVALID_PARAMS, "Invalid params: 'arguments' must be an object")
        return await prompt.get(arguments, ctx)

    async def _complete(
        self, request: McpRequest, ctx: Context, options: ResultOptions
    ) -> JsonObject:
        ref, argument = request.params.get("ref"), request.params.get("argument")
        if not isinstance(ref, dict) or not isinstance(argument, dict):
            raise McpError(INVALID_PARAMS, "Invalid params: 'ref' and 'argument' are required")
        name, value = argument.get("name"), argument.get("value", "")
        if not isinstance(name, str) or not isinstance(value, str):
            raise McpError(INVALID_PARAMS, "Invalid params: argument name and value are strings")
        key = self._completion_key(ref)
        completer = self._completers.get(key)
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
                "values": values[:100],
                "total": len(values),
                "hasMore": len(values) > 100,
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


def _page(request: McpRequest, key: str, items: Sequence[JsonObject], size: int) -> JsonObject:
    start = _decode_cursor(request.params.get("cursor"), len(items))
    end = start + size
    result: JsonObject = {key: list(items[start:end])}
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
