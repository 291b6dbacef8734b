"""`McpServer`: what one MCP endpoint serves, and the dispatch of MCP methods.

`McpServer` is the face handlers and the middleware see; the work is done by the parts it
owns, each of which knows only those below it::

    McpServer ─┬─► Methods         methods.py          the methods that read the registry
               ├─► RequiredScopes  required_scopes.py  the OAuth scopes each request needs
               ├─► Registry        registry.py         what @tool / resource / prompt /
               │                                       completion and add_source registered
               └─► Subscriptions   listen.py           listen streams and the bus they
                                                       listen on; the registry announces
                                                       its changes to it (a callback)

This module holds the server's identity and capabilities, the table from method name to
handler, and what every result carries (`resultType`, server info, cache hints).

Change notifications go through the server's `NotificationBus` to every
`subscriptions/listen` stream of every process that shares the bus. Registering or
removing a tool, prompt or resource announces itself: synchronously and without waiting
(`publish_nowait`), so it works from a plain `def`, a worker thread, or the event loop.
Registrations made before the server runs (at import) announce nothing: nobody can be
listening yet.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, Final, TypeVar, overload

from mcp_asgi.bus.in_process import ChangeEvent, NotificationBus
from mcp_asgi.input.rounds import InputRequired, is_retry
from mcp_asgi.protocol.jsonrpc import JsonObject
from mcp_asgi.protocol.request import (
    MODERN_VERSIONS,
    TASK_METHODS,
    TASKS_EXTENSION,
    McpRequest,
    ParamHeader,
)
from mcp_asgi.server.context import Context
from mcp_asgi.server.listen import LISTEN, Subscriptions, TaskWatch
from mcp_asgi.server.metadata import Annotations, Icon, ToolAnnotations
from mcp_asgi.server.methods import Methods, ResultOptions
from mcp_asgi.server.oauth_scopes import check_scopes
from mcp_asgi.server.registry import Registry
from mcp_asgi.server.required_scopes import RequiredScopes
from mcp_asgi.server.sources import Source, TaskPolicy

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
_FAMILIES: Final = frozenset({"tools", "resources", "prompts", "completion"})
F = TypeVar("F", bound=Callable[..., Any])
Method = Callable[[McpRequest, Context, ResultOptions], Awaitable[JsonObject]]


class McpServer:
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
        self._registry = Registry(
            self.subscriptions.changed,
            check_scopes(default_scopes, "default_scopes") or frozenset(),
        )
        self._required_scopes = RequiredScopes(self._registry)
        methods = Methods(self._registry, self._required_scopes)
        self._methods: dict[str, Method] = {
            "server/discover": self._discover,
            "tools/list": methods.list_page,
            "tools/call": methods.call_tool,
            "resources/list": methods.list_page,
            "resources/templates/list": methods.list_page,
            "resources/read": methods.read_resource,
            "prompts/list": methods.list_page,
            "prompts/get": methods.get_prompt,
            "completion/complete": methods.complete,
            LISTEN: self._listen,
        }
        # each method -> the family whose registrations it needs ("" for none): `has_method`
        self._gates: dict[str, str] = {
            method: family if (family := method.partition("/")[0]) in _FAMILIES else ""
            for method in self._methods
        }

    # -- registering -----------------------------------------------------------------

    @overload
    def tool(self, name: F, /) -> F: ...

    @overload
    def tool(
        self,
        name: str | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        annotations: ToolAnnotations | None = None,
        icons: Sequence[Icon] | None = None,
        meta: Mapping[str, Any] | None = None,
        input_schema: Mapping[str, Any] | None = None,
        output_schema: Mapping[str, Any] | None = None,
        timeout: float | None = None,
        scopes: Sequence[str] | None = None,
        task: TaskPolicy = "never",
    ) -> Callable[[F], F]: ...

    def tool(
        self,
        name: str | Callable[..., Any] | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        annotations: ToolAnnotations | None = None,
        icons: Sequence[Icon] | None = None,
        meta: Mapping[str, Any] | None = None,
        input_schema: Mapping[str, Any] | None = None,
        output_schema: Mapping[str, Any] | None = None,
        timeout: float | None = None,
        scopes: Sequence[str] | None = None,
        task: TaskPolicy = "never",
    ) -> Any:
        """Register a tool (`@server.tool` or `@server.tool(...)`).

        The handler's parameters are the tool's arguments (their type hints its
        `inputSchema`); its return annotation decides whether the result is structured
        (`outputSchema`, `structuredContent`) or plain text content.

        - `name`: the tool's name; default: the function's name. 1 to 128 ASCII letters,
          digits, `_`, `-` or `.` (the spec's rule, else `ValueError`); a dot or more than
          64 characters warns (`ToolNameWarning`): several popular clients refuse those.
        - `title`: a human-readable name for user interfaces.
        - `description`: what the tool does, for the model; default: the docstring's text
          before its `Args:` section.
        - `annotations`: the MCP `ToolAnnotations` hints, e.g.
          `{"readOnlyHint": True, "destructiveHint": False}` (`title`, `readOnlyHint`,
          `destructiveHint`, `idempotentHint`, `openWorldHint`; other keys are refused).
        - `icons`: icons a client may show, e.g. `[{"src": "https://.../t.png",
          "mimeType": "image/png", "sizes": ["48x48"]}]`.
        - `meta`: the tool's `_meta` in `tools/list` (keys like `"com.example/owner"`).
        - `input_schema`: the `inputSchema` to list instead of the one the parameters'
          hints give, kept verbatim (a JSON Schema 2020-12 object schema unless its
          `$schema` names another dialect). Arguments are validated against it before
          the handler's own type hints convert them; its `properties` must be handler
          parameters.
        - `output_schema`: the `outputSchema` to list instead of the one the return
          annotation gives, kept verbatim. What the tool returns (unless a `ToolResult`
          with `is_error`) is its `structuredContent`, and must match it; content blocks
          alone, which have none, are an `isError` result.
        - `timeout`: seconds after which a call is cancelled (reason `timeout`); it can only
          shorten the endpoint's `max_request_duration`, not extend it.
        - `scopes`: the OAuth scopes a caller needs (with authorization on), e.g.
          `["files:write"]`; default: the server's `default_scopes`. `[]` needs none. The
          scopes of the handler's FastAPI `Security(..., scopes=[...])` dependencies are
          added. A caller without them gets 403 `insufficient_scope`, and does not see
          the tool in `tools/list`.
        - `task`: whether a call may run as a task (the Tasks extension, docs/tasks.md):
          `"never"` (default: always a plain call), `"optional"` (a task when the request
          declares the extension and the work has not finished within the endpoint's
          `task_result_window`; the plain result otherwise), `"required"` (always a task;
          a request that does not declare the extension gets -32021). A task outlives its
          request's connection and ends only when done, cancelled (`tasks/cancel`), past
          `max_task_duration` or its TTL, or at server shutdown.

        Raises `TypeError` or `ValueError` at once for a bad option, a handler signature
        that cannot be served, or a name already registered. Returns the function unchanged.
        """
        if callable(name):
            return self.tool()(name)
        return self._registry.tool(
            name,
            title=title,
            description=description,
            annotations=annotations,
            icons=icons,
            meta=meta,
            input_schema=input_schema,
            output_schema=output_schema,
            timeout=timeout,
            scopes=scopes,
            task=task,
        )

    def resource(
        self,
        uri: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        annotations: Annotations | None = None,
        icons: Sequence[Icon] | None = None,
        meta: Mapping[str, Any] | None = None,
        scopes: Sequence[str] | None = None,
    ) -> Callable[[F], F]:
        """Register a resource at a fixed URI or a URI template such as `notes://{id}`.

        - `uri`: the resource's URI (it needs a scheme: `file:///x`, `notes://today`). With
          `{variables}` it is a template, listed by `resources/templates/list`, and the
          variables must be exactly the handler's parameters (each matches one segment).
        - `name`: the name listed to clients; default: the function's name.
        - `title`: a human-readable name for user interfaces.
        - `description`: default: the docstring's text before its `Args:` section.
        - `mime_type`: the `mimeType` of what the handler returns; default: none for text
          and bytes, `application/json` for anything else.
        - `annotations`: hints for the client, e.g. `{"audience": ["user"],
          "priority": 0.8, "lastModified": "2026-07-28T12:00:00Z"}`.
        - `icons`: icons a client may show (`[{"src": ..., "mimeType": ...}]`).
        - `meta`: the resource's `_meta` in `resources/list`.
        - `scopes`: the OAuth scopes a caller needs to read it (or subscribe to it), with
          authorization on; default: the server's `default_scopes`.

        A URI can be registered only once. Returns the function unchanged.
        """
        return self._registry.resource(
            uri,
            name=name,
            title=title,
            description=description,
            mime_type=mime_type,
            annotations=annotations,
            icons=icons,
            meta=meta,
            scopes=scopes,
        )

    @overload
    def prompt(self, name: F, /) -> F: ...

    @overload
    def prompt(
        self,
        name: str | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        icons: Sequence[Icon] | None = None,
        meta: Mapping[str, Any] | None = None,
        scopes: Sequence[str] | None = None,
    ) -> Callable[[F], F]: ...

    def prompt(
        self,
        name: str | Callable[..., Any] | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        icons: Sequence[Icon] | None = None,
        meta: Mapping[str, Any] | None = None,
        scopes: Sequence[str] | None = None,
    ) -> Any:
        """Register a prompt (`@server.prompt` or `@server.prompt(...)`); its parameters are
        the prompt's (string) arguments.

        - `name`: the prompt's name; default: the function's name.
        - `title`: a human-readable name for user interfaces.
        - `description`: default: the docstring's text before its `Args:` section, whose
          lines describe the arguments.
        - `icons`: icons a client may show (`[{"src": ..., "mimeType": ...}]`).
        - `meta`: the prompt's `_meta` in `prompts/list`.
        - `scopes`: the OAuth scopes a caller needs (with authorization on); default: the
          server's `default_scopes`.

        Returns the function unchanged.
        """
        if callable(name):
            return self.prompt()(name)
        return self._registry.prompt(
            name, title=title, description=description, icons=icons, meta=meta, scopes=scopes
        )

    def completion(
        self, *, prompt: str | None = None, resource: str | None = None
    ) -> Callable[[F], F]:
        """Register argument completion for a prompt or a resource template.

        Give exactly one of `prompt` (a prompt's name) or `resource` (a resource template's
        URI, as registered). The handler receives `argument: str, value: str,
        context: dict[str, str]` (the argument's name, what the user typed so far, the
        other arguments already filled in) and returns a list of suggestions; the first
        100 are sent. Registering completion advertises the `completions` capability.
        """
        return self._registry.completion(prompt=prompt, resource=resource)

    def add_source(self, source: Source) -> None:
        """Serve the tools of a `ToolSource` beside the decorated ones (the host app's
        routes, `AppRoutes`; a downstream's, `DownstreamTools`), or the prompts of a
        `PromptSource`, or the resources and templates of a `ResourceSource`.

        Its items are listed from the source when first needed (a list, or a call, get or
        read of a name no decorated one has) and again after `source.changed()`, which
        also tells listening clients (`notifications/tools/list_changed`, or the prompts'
        or resources'). A decorated tool, prompt or resource keeps its name (URI) over a
        source's. Adding a source announces the change too. `TypeError` for something
        that is not a `ToolSource`, `PromptSource` or `ResourceSource`, `ValueError` for
        a source already added.
        """
        self._registry.add_source(source)

    # -- change notifications and removal ---------------------------------------------

    @property
    def bus(self) -> NotificationBus:
        """The bus change notifications travel on (in-process unless configured)."""
        return self.subscriptions.bus

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

    def remove_tool(self, name: str) -> None:
        """Unregister a tool (listeners are told); KeyError if there is none by that name."""
        self._registry.remove("tool", name)

    def remove_prompt(self, name: str) -> None:
        """Unregister a prompt (listeners are told); KeyError if there is none."""
        self._registry.remove("prompt", name)

    def remove_resource(self, uri: str) -> None:
        """Unregister a resource or template by its URI (listeners are told); KeyError if
        there is none."""
        self._registry.remove("resource", uri)

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
        async with self._registry.running(), self.bus.running():
            yield

    # -- what validation and the middleware ask --------------------------------------

    @property
    def server_info(self) -> JsonObject:
        """This server's `Implementation` (name, version, title): a copy."""
        return dict(self._server_info)

    def capabilities(self) -> JsonObject:
        """The server capabilities advertised by `server/discover`."""
        serves = self._registry.serves
        caps: JsonObject = {"logging": {}}
        if serves("tools"):
            caps["tools"] = {"listChanged": True}
        if serves("resources"):
            caps["resources"] = {"listChanged": True, "subscribe": True}
        if serves("prompts"):
            caps["prompts"] = {"listChanged": True}
        if serves("completion"):
            caps["completions"] = {}
        return caps

    def has_method(self, method: str) -> bool:
        """Whether `method` is served (capability-gated methods only when advertised; the
        Tasks extension's methods when a tool may run as a task)."""
        gate = self._gates.get(method)
        if gate is None:
            return method in TASK_METHODS and self.has_tasks
        return not gate or self._registry.serves(gate)

    @property
    def has_tasks(self) -> bool:
        """Whether a tool may run as a task (`@tool(task=...)`): the Tasks extension is
        then advertised in `server/discover` and its methods are served. A source's
        `task=` counts too."""
        return self._registry.has_tasks

    def task_policy(self, tool_name: str) -> TaskPolicy:
        """Whether a call of `tool_name` may run as a task (`never` for an unknown tool):
        a decorated tool's `task=`, a source's tool its source's (`"optional"` for a name
        not known while a source with tasks is still unread: see `call_task_policy`)."""
        return self._registry.task_policy(tool_name)

    async def call_task_policy(self, tool_name: str, ctx: Context) -> TaskPolicy:
        """`task_policy` for a `tools/call` about to run: a name no tool has yet is first
        looked up in the sources not read yet (with `ctx`, as the call would)."""
        await self._registry.load_tool(tool_name, ctx)
        return self.task_policy(tool_name)

    def param_headers(self, tool_name: str) -> tuple[ParamHeader, ...]:
        """The `Mcp-Param-*` headers a call of `tool_name` must carry (from the
        `x-mcp-header` annotations of its input schema); none for an unknown tool."""
        tool = self._registry.tools.get(tool_name)  # asked for every tools/call: no call more
        return tool.headers if tool else ()

    def timeout_for(self, request: McpRequest) -> float | None:
        """The tool's own timeout, if the request calls a tool that has one."""
        if request.method == "tools/call":
            name = str(request.params.get("name"))
            tool = self._registry.tools.get(name)  # (`Registry.timeout_of`'s common case)
            return tool.timeout if tool is not None else self._registry.timeout_of(name)
        return None

    # -- authorization ---------------------------------------------------------------

    def declared_scopes(self) -> frozenset[str]:
        """Every OAuth scope the server's tools, resources and prompts need (with the
        default): what the Protected Resource Metadata lists as `scopes_supported`."""
        return self._required_scopes.declared()

    def required_scopes(self, method: str, params: Mapping[str, Any]) -> frozenset[str]:
        """The OAuth scopes a request needs: the called tool's, the prompt's, the read
        resource's (a template's for a URI it matches), the completed prompt's or
        template's, and for a resource subscription (`subscriptions/listen`,
        `resources/subscribe`) every subscribed URI's. An unknown name or URI needs the
        server's default scopes; a list, `server/discover` and the rest need none of their
        own."""
        return self._required_scopes.for_request(method, params)

    def scopes_of(self, kind: str, key: str) -> frozenset[str]:
        """The OAuth scopes a `"tool"`, `"resource"` or `"prompt"` (by name, or URI as
        registered) needs: its own, else the server's default; a source's tool or prompt,
        its source's; a URI a resource source serves, that source's."""
        return self._required_scopes.of(kind, key)

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
