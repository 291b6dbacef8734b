"""`McpServer`: what one MCP endpoint serves, and the dispatch of MCP methods.

`McpServer` is put together from three parts, each in its own module::

    Registry              _registry.py   @server.tool / resource / prompt / completion
    Methods               _methods.py    the methods that read the registry
    ChangeNotifications   _changes.py    list-changed announcements, removal, listen streams

This module holds the server's identity and capabilities, the table from method name to
handler, and what every result carries (`resultType`, server info, cache hints).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final

from mcp_asgi.bus.in_process import NotificationBus
from mcp_asgi.input.rounds import InputRequired, is_retry
from mcp_asgi.protocol.jsonrpc import JsonObject
from mcp_asgi.protocol.request import (
    MODERN_VERSIONS,
    TASK_METHODS,
    TASKS_EXTENSION,
    McpRequest,
    ParamHeader,
)
from mcp_asgi.server.changes import ChangeNotifications
from mcp_asgi.server.context import Context
from mcp_asgi.server.listen import LISTEN, Subscriptions, TaskWatch
from mcp_asgi.server.methods import Methods, ResultOptions
from mcp_asgi.server.registry import Registry
from mcp_asgi.server.scopes import check_scopes
from mcp_asgi.server.sources import TaskPolicy

__all__ = ["SERVER_INFO_KEY", "McpServer", "ResultOptions"]

SERVER_INFO_KEY: Final = "io.modelcontextprotocol/serverInfo"
_CACHEABLE: Final = frozenset(
    {
        "server/discover",
        "tools/list",
        "resources/list",
        "resources/templates/list",
        "prompts/list",
        "resources/read",
    }
)
Method = Callable[[McpRequest, Context, ResultOptions], Awaitable[JsonObject]]


class McpServer(Registry, Methods, ChangeNotifications):
    """The tools, resources and prompts one MCP endpoint serves.

    Register handlers with the decorators. Parameter type hints and the docstring become
    the JSON Schema and descriptions; a parameter annotated `Context` receives the request
    context, one annotated `CancelToken` the thread cancel token. `def` handlers run in a
    worker thread, `async def` handlers on the event loop.

    Change notifications (`notify_tools_changed()` ..., `remove_tool()` ...) travel on
    `bus`: in-process by default, or e.g. a `RedisBus` shared by every replica.

    - `name`, `version`, `title`: the server's `Implementation`, sent with every result
      (`_meta` `io.modelcontextprotocol/serverInfo`); `name` must not be empty.
    - `instructions`: how to use this server, for the model (in `server/discover`).
    - `bus`: the `NotificationBus` of change notifications; default: in-process, or the
      Redis bus of `McpSettings.bus_url` once the middleware is built (giving both is a
      `ValueError`).
    - `default_scopes`: the OAuth scopes a tool, resource or prompt registered without
      `scopes=` needs, with authorization on (docs/authorization.md); default: none.
    """

    def __init__(
        self,
        name: str,
        *,
        version: str = "0.0.0",
        instructions: str | None = None,
        title: str | None = None,
        bus: NotificationBus | None = None,
        default_scopes: Sequence[str] = (),
    ) -> None:
        if not name:
            raise ValueError("server name must not be empty")
        super().__init__()
        self._default_scopes = check_scopes(default_scopes, "default_scopes") or frozenset()
        self.name = name
        """The server's name (`serverInfo.name`)."""
        self.version = version
        """The server's version (`serverInfo.version`)."""
        self.instructions = instructions
        """The instructions `server/discover` sends, or None."""
        self._server_info: JsonObject = {"name": name, "version": version}
        if title:
            self._server_info["title"] = title
        self.subscriptions = Subscriptions(bus, lambda: self._server_info)
        """The `subscriptions/listen` streams of this process and the bus they listen on."""
        self._methods: dict[str, Method] = {
            "server/discover": self._discover,
            "tools/list": self._list,
            "tools/call": self._call_tool,
            "resources/list": self._list,
            "resources/templates/list": self._list,
            "resources/read": self._read_resource,
            "prompts/list": self._list,
            "prompts/get": self._get_prompt,
            "completion/complete": self._complete,
            LISTEN: self._listen,
        }

    # -- what validation and the middleware ask --------------------------------------

    @property
    def server_info(self) -> JsonObject:
        """This server's `Implementation` (name, version, title): a copy."""
        return dict(self._server_info)

    def capabilities(self) -> JsonObject:
        """The server capabilities advertised by `server/discover`."""
        caps: JsonObject = {"logging": {}}
        if self._tools or self._sourced:
            caps["tools"] = {"listChanged": True}
        if self._resources or self._sourced_resources:
            caps["resources"] = {"listChanged": True, "subscribe": True}
        if self._prompts or self._sourced_prompts:
            caps["prompts"] = {"listChanged": True}
        if self._completers:
            caps["completions"] = {}
        return caps

    def has_method(self, method: str) -> bool:
        """Whether `method` is served (capability-gated methods only when advertised; the
        Tasks extension's methods when a tool may run as a task)."""
        if method in TASK_METHODS:
            return self.has_tasks
        if method not in self._methods:
            return False
        family = method.partition("/")[0]  # checked on every request: no dict built here
        if family == "tools":
            return bool(self._tools or self._sourced)
        if family == "resources":
            return bool(self._resources or self._sourced_resources)
        if family == "prompts":
            return bool(self._prompts or self._sourced_prompts)
        if family == "completion":
            return bool(self._completers)
        return True

    @property
    def has_tasks(self) -> bool:
        """Whether a tool may run as a task (`@tool(task=...)`): the Tasks extension is
        then advertised in `server/discover` and its methods are served. A source's
        `task=` counts too."""
        return (
            any(name in self._tools for name in self._task_policies)
            or self._sourced.may_run_tasks()
        )

    def task_policy(self, tool_name: str) -> TaskPolicy:
        """Whether a call of `tool_name` may run as a task (`never` for an unknown tool):
        a decorated tool's `task=`, a source's tool its source's (`"optional"` for a name
        not known while a source with tasks is still unread: see `call_task_policy`)."""
        if tool_name in self._tools:
            return self._task_policies.get(tool_name, "never")
        return self._sourced.task_of(tool_name) if self._sourced else "never"

    async def call_task_policy(self, tool_name: str, ctx: Context) -> TaskPolicy:
        """`task_policy` for a `tools/call` about to run: a name no tool has yet is first
        looked up in the sources not read yet (with `ctx`, as the call would)."""
        if tool_name not in self._tools and self._sourced and not self._sourced.get(tool_name):
            await self._sourced.load(ctx, self._tools)
        return self.task_policy(tool_name)

    def param_headers(self, tool_name: str) -> tuple[ParamHeader, ...]:
        """The `Mcp-Param-*` headers a call of `tool_name` must carry (from the
        `x-mcp-header` annotations of its input schema); none for an unknown tool."""
        tool = self._tools.get(tool_name)
        return tool.headers if tool else ()

    # -- authorization ---------------------------------------------------------------

    def declared_scopes(self) -> frozenset[str]:
        """Every scope the server's tools, resources and prompts need (with the default):
        what the Protected Resource Metadata lists as `scopes_supported`."""
        return self._default_scopes.union(
            *self._scopes.values(), *(c.declared_scopes() for c in self._catalogs())
        )

    def required_scopes(self, method: str, params: Mapping[str, Any]) -> frozenset[str]:
        """The scopes a request needs: the called tool's, the prompt's, the read resource's
        (a template's for a URI it matches), the completed prompt's or template's, and for
        a resource subscription (`subscriptions/listen`, `resources/subscribe`) every
        subscribed URI's. An unknown name or URI needs the server's default scopes; a list,
        `server/discover` and the rest need none of their own."""
        if method in ("tools/call", "prompts/get"):
            kind = "tool" if method == "tools/call" else "prompt"
            return self.scopes_of(kind, str(params.get("name")))
        if method in ("resources/read", "resources/subscribe"):
            return self.scopes_of("resource", self._resource_key(params.get("uri")))
        if method == "completion/complete":
            ref = params.get("ref")
            if isinstance(ref, Mapping) and ref.get("type") == "ref/prompt":
                return self.scopes_of("prompt", str(ref.get("name")))
            if isinstance(ref, Mapping) and ref.get("type") == "ref/resource":
                return self.scopes_of("resource", str(ref.get("uri")))
            return frozenset()
        if method == LISTEN:
            notifications = params.get("notifications")
            if not isinstance(notifications, dict):
                return frozenset()
            uris = notifications.get("resourceSubscriptions")
            if not isinstance(uris, list):
                return frozenset()
            return frozenset().union(
                *(self.scopes_of("resource", self._resource_key(uri)) for uri in uris)
            )
        return frozenset()

    def _resource_key(self, uri: object) -> str:
        """The registered URI (or template) serving `uri`, else `uri` itself."""
        uri = str(uri)
        static = self._resources.get(uri)
        if static is not None:
            return uri
        for resource in self._resources.values():
            if resource.is_template and resource.match(uri) is not None:
                return resource.uri
        return uri

    def timeout_for(self, request: McpRequest) -> float | None:
        """The tool's own timeout, if the request calls a tool that has one."""
        if request.method == "tools/call":
            name = str(request.params.get("name"))
            tool = self._tools.get(name)
            return tool.timeout if tool else self._sourced.timeout_of(name)
        return None

    # -- dispatch --------------------------------------------------------------------

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
            result.setdefault("cacheScope", options.cache_scope)
            if is_retry(request.params):  # answers from an MRTR round: never cached
                result["ttlMs"] = 0
        return result

    async def _discover(
        self, request: McpRequest, ctx: Context, options: ResultOptions
    ) -> JsonObject:
        capabilities = self.capabilities()
        if self.has_tasks:  # an extension of 2026-07-28 only: never in a 2025 initialize
            capabilities["extensions"] = {TASKS_EXTENSION: {}}
        result: JsonObject = {
            "supportedVersions": list(MODERN_VERSIONS),
            "capabilities": capabilities,
        }
        if self.instructions:
            result["instructions"] = self.instructions
        return result

    async def _listen(
        self,
        request: McpRequest,
        ctx: Context,
        options: ResultOptions,
        tasks: TaskWatch | None = None,
    ) -> JsonObject:
        return await self.subscriptions.serve(
            request, ctx, self.capabilities(), options.listen_max_duration, tasks
        )

    async def listen(
        self, request: McpRequest, ctx: Context, options: ResultOptions, tasks: TaskWatch
    ) -> JsonObject:
        """A `subscriptions/listen` stream that may also watch the tasks `tasks` accepts."""
        return await self._listen(request, ctx, options, tasks)
