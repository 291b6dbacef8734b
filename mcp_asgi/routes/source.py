"""`AppRoutes`: the host app's own routes as tools, called in process."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from starlette.types import ASGIApp

from mcp_asgi._loggers import routes_logger as logger
from mcp_asgi.protocol.jsonrpc import JsonObject
from mcp_asgi.routes.call import call_app
from mcp_asgi.routes.openapi import METHODS, Operation, Skipped, operation_of
from mcp_asgi.routes.request import Identity, route_request
from mcp_asgi.routes.result import tool_result
from mcp_asgi.routes.target import Target
from mcp_asgi.server.context import Context
from mcp_asgi.server.primitives import tool_error
from mcp_asgi.server.sources import SourceItem, TaskPolicy, ToolSource

OpenApi = Mapping[str, Any] | Callable[[], Mapping[str, Any]]


class AppRoutes(ToolSource):
    """The routes of a FastAPI app (or of any ASGI app with an OpenAPI document) as tools;
    add it with `server.add_source(AppRoutes(...))`. See docs/routes-as-tools.md.

    - `app`: the app to call, entered at the top of its middleware stack, and whose
      routes are read; default: `scope["app"]` of each MCP request (the FastAPI or
      Starlette app `McpMiddleware` was added to).
    - `openapi`: the OpenAPI document, or a function returning it; default:
      `app.openapi()` (FastAPI's).
    - `include`, `exclude`: selectors (`Selection`): an operation id, `tag:<tag>`,
      `path:<pattern>`, `method:<METHOD>`; default: every route of `methods`.
    - `methods`: the HTTP methods exposed; default: the safe ones, GET and HEAD. POST,
      PUT, PATCH and DELETE routes are exposed only when named here.
    - `names`: tool names by operation id (default: the operation id); `prefix`.
    - `forward_authorization`: send the MCP request's `Authorization` header on. Only
      when the app's API and the MCP endpoint are the same protected resource (the same
      audience): MCP forbids passing a token to another. Default: no token; the verified
      principal is handed over (`scope["user"]`, `scope["auth"]`, `Principal.of`).
    - `forward_headers`: other headers of the MCP request to send on (e.g.
      `["accept-language"]`); never `Authorization`, `Cookie`... by default none.
    - `max_response_bytes`: how much of an answer is read (default 1 MB); a longer one is
      cut, the route told the client left, and the result says so.
    - `scopes`, `timeout`: as for every source (`ToolSource`).

    A call runs its own route and no other, whatever its arguments hold, or is refused
    with -32602 naming the argument: a path value is one segment (no `/`, not empty,
    unless its convertor is `path`), no control characters in path and header values,
    and with a FastAPI or Starlette router the request must match the tool's route
    first (docs/routes-as-tools.md, "A call runs its own route").
    - `task`: whether its routes may run as tasks (`"never"`, `"optional"`,
      `"required"`; the Tasks extension, docs/tasks.md), as for every source. A route run
      as a task goes on when its caller disconnects; `tasks/cancel` cancels it as a
      disconnect would (`http.disconnect`, its work cancelled, its `yield` dependencies
      closed). To make only some routes tasks, add two sources with their own
      `include=`.
    """

    def __init__(
        self,
        app: ASGIApp | None = None,
        *,
        openapi: OpenApi | None = None,
        include: Sequence[str] | None = None,
        exclude: Sequence[str] = (),
        methods: Sequence[str] = ("GET", "HEAD"),
        names: Mapping[str, str] | None = None,
        prefix: str = "",
        forward_authorization: bool = False,
        forward_headers: Sequence[str] = (),
        max_response_bytes: int = 1_000_000,
        scopes: Sequence[str] | None = None,
        timeout: float | None = None,
        task: TaskPolicy = "never",
    ) -> None:
        super().__init__(
            include=include,
            exclude=exclude,
            names=names,
            prefix=prefix,
            scopes=scopes,
            timeout=timeout,
            task=task,
        )
        if isinstance(methods, str) or not methods:
            raise TypeError("methods must be a list of HTTP methods, e.g. ['GET', 'POST']")
        unknown = sorted({m.upper() for m in methods} - set(METHODS))
        if unknown:
            raise ValueError(f"methods: {', '.join(unknown)}: use {', '.join(METHODS)}")
        if not isinstance(max_response_bytes, int) or max_response_bytes < 1:
            raise ValueError("max_response_bytes must be a positive int")
        if app is not None and openapi is None and not callable(getattr(app, "openapi", None)):
            raise TypeError(
                f"{type(app).__name__} has no openapi(): pass the document, "
                "AppRoutes(app, openapi=...)"
            )
        self._app = app
        self._openapi = openapi
        self._methods = frozenset(m.upper() for m in methods)
        self._identity = Identity.of(forward_authorization, forward_headers)
        self._max_bytes = max_response_bytes
        self._regenerate = False

    def refresh(self) -> None:
        """Read the app's routes again: call it after adding routes at run time. The next
        `tools/list` has the new ones (FastAPI's cached schema is rebuilt), and clients
        listening for list changes get `notifications/tools/list_changed` now."""
        self._regenerate = True
        self.changed()

    async def list_tools(self, ctx: Context) -> Sequence[SourceItem]:
        document = self._document(self._app_of(ctx))
        tools: list[SourceItem] = []
        for path, item in (document.get("paths") or {}).items():
            for method in METHODS:
                operation = item.get(method.lower()) if isinstance(item, Mapping) else None
                if not isinstance(operation, Mapping) or method not in self._methods:
                    continue
                tool = self._tool(document, path, method, operation)
                if tool is not None:
                    tools.append(tool)
        return tools

    async def call_tool(
        self, tool: SourceItem, arguments: dict[str, Any], ctx: Context
    ) -> JsonObject:
        operation: Operation = tool.handle
        problem = operation.validator.problems(arguments)
        if problem is not None:
            return tool_error(f"Invalid arguments for tool {tool.name!r}: {problem}")
        request = ctx.request
        app = self._app_of(ctx)
        target = Target.of(app, operation)
        target.check_values(tool.name, arguments)
        scope, body = route_request(
            request.scope, operation, arguments, self._identity, ctx.principal
        )
        target.check_reached(tool.name, scope, arguments)
        answer = await call_app(
            app,
            scope,
            body,
            max_bytes=self._max_bytes,
            cancelled=lambda: ctx.cancelled,
        )
        url = str(request.url.replace(path=scope["path"], query=scope["query_string"].decode()))
        return tool_result(answer, url, self._max_bytes, wrap=operation.wrap_output)

    def _tool(
        self, document: Mapping[str, Any], path: str, method: str, spec: Mapping[str, Any]
    ) -> SourceItem | None:
        made = operation_of(document, path, method, spec)
        name = made.operation_id if isinstance(made, Operation) else spec.get("operationId")
        labels = frozenset(
            [f"path:{path}", f"method:{method}", *(f"tag:{t}" for t in spec.get("tags", ()))]
        )
        if not self.selection.selects(str(name or ""), labels):
            return None
        if isinstance(made, Skipped):
            logger.info("route %s %s is not exposed as a tool: %s", method, path, made.reason)
            return None
        return SourceItem(made.operation_id, made.definition, labels, made)

    def _document(self, app: ASGIApp) -> Mapping[str, Any]:
        source = self._openapi
        if source is None:
            if self._regenerate and hasattr(app, "openapi_schema"):
                app.openapi_schema = None  # FastAPI's cache: built again with the new routes
            source = getattr(app, "openapi", None)
            if not callable(source):
                raise TypeError(
                    f"{type(app).__name__} has no openapi(): give AppRoutes the document"
                )
        self._regenerate = False
        document = source() if callable(source) else source
        if not isinstance(document, Mapping):
            raise TypeError("the OpenAPI document must be a dict")
        return document

    def _app_of(self, ctx: Context) -> ASGIApp:
        if self._app is not None:
            return self._app
        app = ctx.request.scope.get("app")
        if app is None:
            raise RuntimeError(
                "AppRoutes() without an app needs scope['app'] (McpMiddleware added to a "
                "FastAPI or Starlette app): pass the app, AppRoutes(app)"
            )
        return app  # type: ignore[no-any-return]
