"""`Downstream`: one downstream MCP server, and calls to it from a handler.

    async with Downstream.stdio("files", "npx", ["-y", "some-server"]) as files:
        ...   # (in the app's lifespan) the connection lives here, restarted with backoff

    @server.tool()
    async def read(path: str, ctx: Context) -> dict:
        return await files.call_tool("read_file", {"path": path}, ctx)

A call runs in the handler's own task. When the inbound request is cancelled, for any
reason (the client left, its deadline, shutdown, a `notifications/cancelled`), the SDK
client cancels the request it minted downstream by the downstream's transport rule:
`notifications/cancelled` with that id on stdio and on a 2025-era session (which also drops
the request's stream), closing the request's stream on 2026-07-28 HTTP. A late downstream
result is dropped by the SDK; a downstream that never knew the id ignores the cancel.

    supervisor (its own task)   connect ──► ready ──► connection lost ──► backoff ──► connect
                                (lost: a call saw it break, or the check every
                                ping_interval failed: ping, or server/discover at
                                2026-07-28; a reconnection tells the tools' listeners)
    call_tool (handler's task)  wait ready (bounded by the timeout) ──► CLIENT span ──► call
                                connection lost mid-call ──► DownstreamUnavailable (-32603)
                                an input request it cannot relay ──► DownstreamInputUnsupported

The downstream's input requests (elicitation, sampling, roots) are relayed to the client of
the calling request (downstream/relay.py); its `notifications/*/list_changed` (2025 era)
or its `subscriptions/listen` events (2026-07-28, downstream/watch.py) reach the
listeners of `on_list_changed` (a `DownstreamTools`, `DownstreamPrompts` or
`DownstreamResources` mounted on a server), and the updates of the resources kept
subscribed (`subscribe_resources`, downstream/updates.py) those of `on_resource_updated`.
`get_prompt` and `read_resource` are called like `call_tool`.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from typing import Any, Final

import anyio
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, StatusCode

from mcp_asgi._loggers import downstream_logger as logger
from mcp_asgi._version import __version__
from mcp_asgi.downstream.relay import DownstreamInputUnsupported, InputRelay
from mcp_asgi.downstream.updates import ResourceUpdates
from mcp_asgi.downstream.watch import follow, until_lost
from mcp_asgi.protocol.jsonrpc import INTERNAL_ERROR, JsonObject, McpError
from mcp_asgi.server.context import Context
from mcp_asgi.telemetry import names as a

_CONNECTION_CLOSED: Final = -32000  # the SDK's code for a connection that went away
_NOT_RUNNING: Final = "not running: enter it (async with) in the app's lifespan"
_KINDS: Final = ("tools", "prompts", "resources")
_LISTED: Final = {  # a list method: the SDK client's method, the result's attribute, the family
    "tools/list": ("list_tools", "tools", "tools"),
    "prompts/list": ("list_prompts", "prompts", "prompts"),
    "resources/list": ("list_resources", "resources", "resources"),
    "resources/templates/list": ("list_resource_templates", "resource_templates", "resources"),
}
_SUBJECT: Final = {
    "tools/call": a.GEN_AI_TOOL_NAME,
    "prompts/get": a.GEN_AI_PROMPT_NAME,
    "resources/read": a.MCP_RESOURCE_URI,
}
_MAX_PAGES: Final = 1000  # a downstream whose cursors never end is read this far


class DownstreamUnavailable(McpError):
    """The downstream server cannot answer: it is not connected (its process exited, it is
    restarting after a failure, it cannot be reached), the connection broke mid-call, or
    it was never entered (`async with`: logged). Raised from every call and list;
    a handler that lets it through answers -32603 with `data.downstream` naming the
    server."""

    def __init__(self, name: str, detail: str) -> None:
        super().__init__(
            INTERNAL_ERROR,
            f"downstream server {name!r} is unavailable: {detail}",
            {"downstream": name},
        )


class Downstream:
    """One downstream MCP server. Enter it (`async with`) where it should live, usually the
    app's lifespan (or around `serve_stdio`): the connection is made there, kept, and made
    again with exponential backoff (`backoff` seconds, doubling up to `max_backoff`) after
    it fails or breaks. Leaving it closes the connection (a child process gets EOF, then
    SIGTERM and SIGKILL to its process tree, by the SDK).

    - `name`: how logs, errors and spans name it.
    - `timeout`: seconds a call may take (waiting for the connection included); then it is
      cancelled downstream and raises `TimeoutError`. Default: none (the inbound request's
      own deadline still applies: its cancellation reaches the call).
    - `mode`: the SDK client's era choice: `"auto"` (probe with `server/discover`, fall back
      to `initialize`), `"legacy"` (2025 `initialize`), or `"2026-07-28"`.
    - `tracer_provider`: for the CLIENT spans (default: the global one).
    - `relay_input`: relay the downstream's elicitation, sampling and roots requests to
      the calling request's client (default); False: the SDK declines them.
    - `ping_interval`: seconds between checks of the connection while connected (default
      5: `ping`, or `server/discover` on a 2026-07-28 connection), so a child that died is
      restarted before the next call needs it; None: no checks (a broken connection is
      then seen by the next call).

    The inbound caller's credentials are never forwarded: an HTTP downstream gets only the
    `headers` configured here.
    """

    def __init__(
        self,
        name: str,
        target: Any,
        *,
        timeout: float | None = None,
        mode: str = "auto",
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        tracer_provider: trace.TracerProvider | None = None,
        relay_input: bool = True,
        ping_interval: float | None = 5.0,
    ) -> None:
        if not name:
            raise ValueError("a downstream needs a name")
        if timeout is not None and timeout <= 0:
            raise ValueError("timeout must be positive")
        if backoff <= 0 or max_backoff < backoff:
            raise ValueError("backoff must be positive and at most max_backoff")
        if ping_interval is not None and ping_interval <= 0:
            raise ValueError("ping_interval must be positive (or None)")
        self.name = name
        self.timeout = timeout
        self._target = target
        self._mode = mode
        self._backoff = backoff
        self._max_backoff = max_backoff
        self._tracer = trace.get_tracer(
            "mcp_asgi", __version__, tracer_provider, schema_url=a.SCHEMA_URL
        )
        self._client: Any = None
        self._ping_interval = ping_interval
        self._relay = InputRelay(name)
        self._relay_input = relay_input
        self._listeners: dict[str, list[Callable[[], None]]] = {kind: [] for kind in _KINDS}
        self._updates = ResourceUpdates(name, backoff)
        self._ready = anyio.Event()
        self._lost = anyio.Event()
        self._entered = False

    @classmethod
    def stdio(
        cls,
        name: str,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        **options: Any,
    ) -> Downstream:
        """A server started as a child process speaking MCP on its stdin/stdout. `env`
        replaces the child's environment when given (the SDK's default otherwise: a few safe
        variables such as PATH and HOME, never the parent's secrets)."""
        from mcp.client.stdio import StdioServerParameters

        parameters = StdioServerParameters(
            command=command, args=list(args), env=dict(env) if env is not None else None, cwd=cwd
        )
        return cls(name, parameters, **options)

    @classmethod
    def http(
        cls, name: str, url: str, *, headers: Mapping[str, str] | None = None, **options: Any
    ) -> Downstream:
        """A Streamable HTTP server at `url`, with its own `headers` (e.g. its credentials);
        2026-07-28 or a 2025-era session, as `mode` chooses."""
        return cls(name, _HttpTarget(url, dict(headers or {})), **options)

    # -- the connection ------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """Whether it has been entered (`async with`) and not left yet."""
        return self._entered

    def on_list_changed(self, kind: str, listener: Callable[[], None]) -> None:
        """Call `listener` when the downstream says its list of `kind` (`"tools"`,
        `"prompts"`, `"resources"`: resources and templates) changed, and after every
        reconnection."""
        if kind not in self._listeners:
            raise ValueError(f"kind must be one of {_KINDS}, not {kind!r}")
        self._listeners[kind].append(listener)

    def on_resource_updated(self, listener: Callable[[str], None]) -> None:
        """Call `listener` with the URI of each update of a resource subscribed with
        `subscribe_resources` (`notifications/resources/updated`, or a listen event)."""
        self._updates.on_updated(listener)

    async def subscribe_resources(self, uris: Sequence[str]) -> None:
        """Keep the downstream subscribed to `uris` (its own) for as long as it runs,
        again after every reconnection; nothing if it offers no resource subscriptions.
        Raises `DownstreamUnavailable` as a call does."""
        client = await self._connected()
        try:
            await self._updates.subscribe(client, uris)
        except Exception as exc:
            raise self._failure(exc) from exc

    async def __aenter__(self) -> Downstream:
        if self._entered:
            raise RuntimeError(f"downstream {self.name!r} is already running")
        self._entered = True
        self._group = anyio.create_task_group()
        await self._group.__aenter__()
        self._group.start_soon(self._supervise)
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        self._group.cancel_scope.cancel()
        await self._group.__aexit__(None, None, None)
        self._entered = False

    async def _supervise(self) -> None:
        failures = 0
        connected_before = False
        while True:
            try:
                async with self._connect() as client:
                    failures = 0
                    self._client = client
                    self._ready.set()
                    if connected_before:  # a restarted server may offer other tools
                        for kind in _KINDS:
                            self._changed(kind)
                    connected_before = True
                    await self._until_lost(client)
                    logger.warning("downstream %r: connection lost; reconnecting", self.name)
            except Exception:
                logger.warning("downstream %r: cannot connect", self.name, exc_info=True)
            finally:
                self._client = None
                self._ready = anyio.Event()
                self._lost = anyio.Event()
            failures += 1
            await anyio.sleep(min(self._max_backoff, self._backoff * 2 ** (failures - 1)))

    async def _until_lost(self, client: Any) -> None:
        """While connected: the connection checks, and (2026-07-28) its list changes."""
        async with anyio.create_task_group() as watching:
            kinds = [kind for kind, listeners in self._listeners.items() if listeners]
            watching.start_soon(follow, client, kinds, self._changed, self._backoff, self.name)
            self._updates.connected(client, watching)
            try:
                await until_lost(client, self._lost, self._ping_interval, self.name)
            finally:
                self._updates.connected(client, None)
            watching.cancel_scope.cancel()

    def _connect(self) -> AbstractAsyncContextManager[Any]:
        from mcp import Client

        target = self._target
        if isinstance(target, _HttpTarget):
            target = target.transport()
        callbacks = self._relay.callbacks() if self._relay_input else {}
        return Client(
            target, mode=self._mode, cache=None, message_handler=self._on_message, **callbacks
        )

    async def _on_message(self, message: Any) -> None:
        from mcp import types

        if isinstance(message, types.ToolListChangedNotification):
            self._changed("tools")
        elif isinstance(message, types.PromptListChangedNotification):
            self._changed("prompts")
        elif isinstance(message, types.ResourceListChangedNotification):
            self._changed("resources")
        elif isinstance(message, types.ResourceUpdatedNotification):
            self._updates.updated(str(message.params.uri))

    def _changed(self, kind: str) -> None:
        for listener in list(self._listeners[kind]):
            try:
                listener()
            except Exception:
                logger.warning(
                    "downstream %r: a %s listener failed", self.name, kind, exc_info=True
                )

    # -- calls ----------------------------------------------------------------------------

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        ctx: Context | None = None,
    ) -> JsonObject:
        """Call the downstream tool `name` and return its `tools/call` result (a dict, as
        the downstream sent it; `isError` results are returned, not raised). With `ctx`
        (the calling handler's context) its progress is relayed upstream with the inbound
        request's progress token, and the downstream's input requests are asked of its
        client. Raises `DownstreamUnavailable`, `TimeoutError`, `DownstreamInputUnsupported`
        (a question the inbound request cannot hold open), or the downstream's JSON-RPC
        error as an `McpError`."""
        progress = _relay(ctx) if ctx is not None else None
        return await self._request(
            "tools/call",
            name,
            ctx,
            lambda client, meta: client.call_tool(
                name, dict(arguments or {}), progress_callback=progress, meta=meta
            ),
        )

    async def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, str] | None = None,
        ctx: Context | None = None,
    ) -> JsonObject:
        """The downstream prompt `name` (its `prompts/get` result), as `call_tool` calls:
        in the calling task, cancelled downstream with it, its input requests relayed."""
        return await self._request(
            "prompts/get",
            name,
            ctx,
            lambda client, meta: client.get_prompt(name, dict(arguments or {}), meta=meta),
        )

    async def read_resource(self, uri: str, ctx: Context | None = None) -> JsonObject:
        """The downstream's `resources/read` result for `uri`, as `call_tool` calls."""
        return await self._request(
            "resources/read", uri, ctx, lambda client, meta: client.read_resource(uri, meta=meta)
        )

    async def _request(
        self,
        method: str,
        subject: str,
        ctx: Context | None,
        send: Callable[[Any, dict[str, str]], Awaitable[Any]],
    ) -> JsonObject:
        """One request of a handler's: the CLIENT span `<method> <subject>`, its trace
        context in `_meta`, the timeout, the input relay, the errors mapped."""
        limit = self.timeout
        with self._tracer.start_as_current_span(
            f"{method} {subject}", kind=SpanKind.CLIENT, record_exception=False
        ) as span:
            span.set_attribute(a.MCP_METHOD_NAME, method)
            span.set_attribute(_SUBJECT[method], subject)
            span.set_attribute("server.address", self.name)
            meta: dict[str, str] = {}
            propagate.inject(meta)  # traceparent (and tracestate, baggage) of this span
            try:
                with (
                    anyio.fail_after(limit if limit is not None else math.inf),
                    self._relay.call(ctx) as call,
                ):
                    with call.scope:
                        result = await send(await self._connected(), meta)
                    if call.refused is not None:
                        span.set_status(StatusCode.ERROR)
                        raise DownstreamInputUnsupported(self.name, call.refused)
            except anyio.get_cancelled_exc_class():
                if ctx is not None and ctx.cancel_reason is not None:
                    span.set_attribute(a.CANCELLATION_REASON, ctx.cancel_reason.value)
                raise
            except (McpError, TimeoutError) as exc:  # its timeout: cancelled, still connected;
                # not running (never entered): DownstreamUnavailable, logged
                span.set_status(StatusCode.ERROR, type(exc).__name__)
                raise
            except Exception as exc:
                span.set_status(StatusCode.ERROR)
                raise self._failure(exc) from exc
        dumped: JsonObject = result.model_dump(by_alias=True, exclude_none=True, mode="json")
        return dumped

    async def list_tools(self) -> list[JsonObject]:
        """The downstream's tools, as it lists them (every page)."""
        return await self._listed("tools/list")

    async def list_prompts(self) -> list[JsonObject]:
        """The downstream's prompts (every page); none if it has no prompts capability."""
        return await self._listed("prompts/list")

    async def list_resources(self) -> list[JsonObject]:
        """The downstream's resources (every page); none if it has no resources."""
        return await self._listed("resources/list")

    async def list_resource_templates(self) -> list[JsonObject]:
        """The downstream's resource templates (every page); none if it has no resources."""
        return await self._listed("resources/templates/list")

    async def _listed(self, method: str) -> list[JsonObject]:
        fetch, attribute, family = _LISTED[method]
        client = await self._connected()
        listed: list[JsonObject] = []
        try:
            if getattr(client.server_capabilities, family) is None:
                return listed  # (a server without the capability answers -32601)
            cursor: str | None = None
            for _ in range(_MAX_PAGES):
                page = await getattr(client, fetch)(cursor=cursor)
                listed += (
                    item.model_dump(by_alias=True, exclude_none=True, mode="json")
                    for item in getattr(page, attribute)
                )
                cursor = page.next_cursor
                if not cursor:
                    break
        except Exception as exc:
            raise self._failure(exc) from exc
        return listed

    async def _connected(self) -> Any:
        if not self._entered:  # a mistake in the app: said to the caller and logged
            error = DownstreamUnavailable(self.name, _NOT_RUNNING)
            logger.error("%s", error.message)
            raise error
        await self._ready.wait()
        return self._client

    def _failure(self, exc: Exception) -> McpError:
        code = getattr(getattr(exc, "error", None), "code", None)
        if code is not None and code != _CONNECTION_CLOSED:
            error = exc.error  # type: ignore[attr-defined]
            return McpError(int(code), str(error.message), getattr(error, "data", None))
        self._lost.set()
        return DownstreamUnavailable(self.name, f"the connection broke ({type(exc).__name__})")


class _HttpTarget:
    def __init__(self, url: str, headers: dict[str, str]) -> None:
        self.url = url
        self.headers = headers

    def transport(self) -> Any:
        if not self.headers:
            return self.url
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        return _HeaderTransport(self.url, self.headers, streamable_http_client, httpx2)


class _HeaderTransport:
    """A Streamable HTTP transport with fixed headers (the SDK takes an httpx client,
    which it does not close: this does)."""

    def __init__(self, url: str, headers: dict[str, str], factory: Any, httpx2: Any) -> None:
        self._url, self._headers, self._factory, self._httpx2 = url, headers, factory, httpx2
        self._stack = AsyncExitStack()

    async def __aenter__(self) -> Any:
        http = await self._stack.enter_async_context(
            self._httpx2.AsyncClient(headers=self._headers)
        )
        return await self._stack.enter_async_context(self._factory(self._url, http_client=http))

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        return await self._stack.__aexit__(*exc_info)


def _relay(ctx: Context) -> Any:
    async def relay(progress: float, total: float | None, message: str | None) -> None:
        await ctx.report_progress(progress, total, message)

    return relay
