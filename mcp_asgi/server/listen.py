"""`subscriptions/listen`: the long-lived SSE stream of change notifications.

A listen request is served by an ordinary `RequestScope`, so its stream is cancelled and
cleaned up like any other request. The stream::

    notifications/subscriptions/acknowledged      (the honoured subset of the filter)
    notifications/{tools,prompts,resources}/list_changed, notifications/resources/updated,
    notifications/tasks (a watched task's DetailedTask, at each status change)
    ...                                           (only the opted-in kinds, each tagged)
    the subscriptions/listen result               (only when the server ends the stream)

How it ends:
- the client closes it: the request is cancelled (`client_disconnect`), nothing more is
  written, and the bus subscription is released as the handler unwinds;
- the server ends it (`McpServer.close_subscriptions()`, the optional
  `listen_max_duration`, or shutdown): the final `subscriptions/listen` result is the last
  SSE event, then the stream closes.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Final, Protocol

import anyio

from mcp_asgi._loggers import subscriptions_logger as logger
from mcp_asgi.bus.in_process import ChangeEvent, ChangeKind, InProcessBus, NotificationBus
from mcp_asgi.http.accept import negotiate
from mcp_asgi.lifecycle.cancel import CancelReason
from mcp_asgi.protocol import jsonrpc
from mcp_asgi.protocol.headers import RequestHeaders
from mcp_asgi.protocol.jsonrpc import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    JsonObject,
    ProtocolError,
    RequestId,
)
from mcp_asgi.protocol.request import McpRequest
from mcp_asgi.server.context import Context, request_scope_of

LISTEN: Final = "subscriptions/listen"
SUBSCRIPTION_ID: Final = "io.modelcontextprotocol/subscriptionId"
MAX_RESOURCE_SUBSCRIPTIONS: Final = 1000
_FLAGS: Final = {
    "toolsListChanged": "tools",
    "promptsListChanged": "prompts",
    "resourcesListChanged": "resources",
}
_METHODS: Final[dict[ChangeKind, str]] = {
    "tools_list_changed": "notifications/tools/list_changed",
    "prompts_list_changed": "notifications/prompts/list_changed",
    "resources_list_changed": "notifications/resources/list_changed",
    "resource_updated": "notifications/resources/updated",
    "task_status": "notifications/tasks",
}


class TaskWatch(Protocol):
    """What a listen stream needs of the Tasks extension to watch tasks."""

    async def accept(self, task_ids: tuple[str, ...]) -> tuple[str, ...]:
        """The ids of `task_ids` the listener may watch (its own tasks)."""
        ...

    async def detailed(self, task_id: str) -> JsonObject | None:
        """The task's `DetailedTask`, as `tasks/get` answers it (None: gone)."""
        ...


@dataclass(frozen=True, slots=True)
class SubscriptionFilter:
    """What a listen stream opted into (the wire's `notifications` object)."""

    tools: bool = False
    prompts: bool = False
    resources: bool = False
    uris: tuple[str, ...] = ()
    task_ids: tuple[str, ...] = ()

    @classmethod
    def parse(cls, params: Mapping[str, Any], request_id: RequestId) -> SubscriptionFilter:
        """Read `params.notifications`; unknown keys (extensions) are not honoured."""
        raw = params.get("notifications")
        if not isinstance(raw, dict):
            raise _invalid(request_id, "'notifications' must be an object")
        flags: dict[str, bool] = {}
        for key, family in _FLAGS.items():
            value = raw.get(key, False)
            if not isinstance(value, bool):
                raise _invalid(request_id, f"notifications.{key} must be a boolean")
            flags[family] = value
        uris = raw.get("resourceSubscriptions", [])
        if not isinstance(uris, list) or not all(isinstance(u, str) and u for u in uris):
            raise _invalid(request_id, "notifications.resourceSubscriptions must be URI strings")
        unique = tuple(dict.fromkeys(uris))[:MAX_RESOURCE_SUBSCRIPTIONS]
        task_ids = raw.get("taskIds", [])
        if not isinstance(task_ids, list) or not all(isinstance(t, str) and t for t in task_ids):
            raise _invalid(request_id, "notifications.taskIds must be task id strings")
        tasks = tuple(dict.fromkeys(task_ids))[:MAX_RESOURCE_SUBSCRIPTIONS]
        return cls(uris=unique, task_ids=tasks, **flags)

    def honoured(self, capabilities: Mapping[str, Any]) -> SubscriptionFilter:
        """The subset this server delivers: families it advertises with listChanged, and
        resource updates when it advertises `resources.subscribe` (task ids: none; the
        Tasks extension accepts them, `TaskWatch.accept`)."""

        def flag(family: str, key: str) -> bool:
            cap = capabilities.get(family)
            return isinstance(cap, dict) and cap.get(key) is True

        return SubscriptionFilter(
            tools=self.tools and flag("tools", "listChanged"),
            prompts=self.prompts and flag("prompts", "listChanged"),
            resources=self.resources and flag("resources", "listChanged"),
            uris=self.uris if flag("resources", "subscribe") else (),
        )

    async def watching(self, tasks: TaskWatch | None, asked: tuple[str, ...]) -> SubscriptionFilter:
        """This filter with the task ids of `asked` that `tasks` accepts."""
        return replace(self, task_ids=await tasks.accept(asked) if tasks and asked else ())

    def to_json(self) -> JsonObject:
        """The filter as the acknowledgment carries it (only what is honoured)."""
        out: JsonObject = {}
        for key, family in _FLAGS.items():
            if getattr(self, family):
                out[key] = True
        if self.uris:
            out["resourceSubscriptions"] = list(self.uris)
        if self.task_ids:
            out["taskIds"] = list(self.task_ids)
        return out

    def wants(self, event: ChangeEvent) -> bool:
        """Whether `event` is one of the opted-in kinds (a resource update of a subscribed
        URI or of a sub-resource of one)."""
        if event.kind == "resource_updated":
            uri = event.uri or ""
            return any(uri == s or uri.startswith(s.rstrip("/") + "/") for s in self.uris)
        if event.kind == "task_status":
            return event.uri in self.task_ids
        return bool(getattr(self, event.kind.split("_", 1)[0]))


def notification(event: ChangeEvent, subscription_id: RequestId) -> JsonObject:
    """The notification for `event`, tagged with the listen request's id."""
    params: JsonObject = {"_meta": {SUBSCRIPTION_ID: subscription_id}}
    if event.kind == "resource_updated":
        params["uri"] = event.uri
    return jsonrpc.notification(_METHODS[event.kind], params)


async def _message(
    event: ChangeEvent, subscription_id: RequestId, tasks: TaskWatch | None
) -> JsonObject | None:
    """The notification for a wanted `event`: a task's carries its DetailedTask, read
    now (the latest status; None when the task is gone)."""
    if event.kind != "task_status":
        return notification(event, subscription_id)
    detailed = None if tasks is None or event.uri is None else await tasks.detailed(event.uri)
    if detailed is None:
        return None
    detailed["_meta"] = {SUBSCRIPTION_ID: subscription_id}
    return jsonrpc.notification(_METHODS[event.kind], detailed)


def final_result(subscription_id: RequestId) -> JsonObject:
    """The `subscriptions/listen` result that ends a stream gracefully."""
    return {"resultType": "complete", "_meta": {SUBSCRIPTION_ID: subscription_id}}


def check_listen(headers: RequestHeaders, request: McpRequest) -> None:
    """Reject, before any stream opens, a listen request that cannot be served: a client
    that accepts no SSE (406), or a malformed filter (400, -32602)."""
    if request.method != LISTEN:
        return
    if negotiate(headers, "sse") != "sse":
        raise ProtocolError(
            406,
            INVALID_REQUEST,
            "Not Acceptable: subscriptions/listen answers with an SSE stream; "
            "Accept must admit text/event-stream",
            request_id=request.id,
        )
    SubscriptionFilter.parse(request.params, request.id)


def _invalid(request_id: RequestId, detail: str) -> ProtocolError:
    return ProtocolError(400, INVALID_PARAMS, f"Invalid params: {detail}", request_id=request_id)


@dataclass(eq=False)
class _Stream:
    """One open listen stream, as the hub sees it."""

    closer: anyio.CancelScope = field(default_factory=anyio.CancelScope)


class Subscriptions:
    """The listen streams of one server, and the bus that feeds them."""

    def __init__(self, bus: NotificationBus | None, server_info: Callable[[], JsonObject]) -> None:
        self.bus: NotificationBus = bus if bus is not None else InProcessBus()
        self._explicit_bus = bus is not None
        self._server_info = server_info
        self._streams: set[_Stream] = set()

    @property
    def open_streams(self) -> int:
        """How many listen streams are open in this process."""
        return len(self._streams)

    @property
    def has_own_bus(self) -> bool:
        """Whether the server was given its bus (`McpServer(bus=...)`)."""
        return self._explicit_bus

    def attach(self, bus: NotificationBus) -> None:
        """Use `bus`, the one `McpSettings.bus_url` names (the middleware attaches it when
        the app starts). Attaching the same bus, or one on the same URL and channel, again
        changes nothing."""
        current = self.bus
        if current is bus or _same_redis(current, bus):
            return
        if self._explicit_bus:
            raise ValueError("both McpServer(bus=...) and McpSettings.bus_url are set")
        if self._streams:
            raise RuntimeError("cannot change the bus while listen streams are open")
        self.bus = bus

    def task_changed(self, task_id: str) -> None:
        """A task's status changed (its record is written): tell the listeners watching it,
        on every replica the bus reaches."""
        self.changed(ChangeEvent("task_status", task_id))

    def changed(self, event: ChangeEvent) -> None:
        """A registration changed (sync, any thread): announce it without waiting."""
        try:
            self.bus.publish_nowait(event)
        except Exception:
            logger.exception("change notification failed", extra={"kind": event.kind})

    async def close_all(self) -> int:
        """End every listen stream of this process gracefully; returns how many."""
        streams = list(self._streams)
        for stream in streams:
            stream.closer.cancel()
        return len(streams)

    def server_end(self, request: McpRequest) -> Callable[[CancelReason], JsonObject]:
        """The final message of a listen stream the server ends by cancelling its request."""

        def message(reason: CancelReason) -> JsonObject:
            result = final_result(request.id)
            result["_meta"]["io.modelcontextprotocol/serverInfo"] = self._server_info()
            return jsonrpc.response(request.id, result)

        return message

    async def serve(
        self,
        request: McpRequest,
        ctx: Context,
        capabilities: Mapping[str, Any],
        max_duration: float | None = None,
        tasks: TaskWatch | None = None,
    ) -> JsonObject:
        """Run one listen stream until the server ends it (the client ending it cancels
        this coroutine); `tasks` accepts and describes the tasks it may watch."""
        asked = SubscriptionFilter.parse(request.params, request.id)
        request_scope = request_scope_of(ctx)
        subscription_id = request.id
        async with self.bus.subscribe() as events, self._open() as stream:
            # accepted once subscribed: a status change meanwhile is heard
            wanted = await asked.honoured(capabilities).watching(tasks, asked.task_ids)
            ack: JsonObject = {"_meta": {SUBSCRIPTION_ID: subscription_id}}
            ack["notifications"] = wanted.to_json()
            await request_scope.write(
                jsonrpc.notification("notifications/subscriptions/acknowledged", ack)
            )
            limit = math.inf if max_duration is None else max_duration
            with stream.closer, anyio.move_on_after(limit):
                async for event in events:
                    if not wanted.wants(event):
                        continue
                    message = await _message(event, subscription_id, tasks)
                    if message is not None:
                        await request_scope.write(message)
        return final_result(subscription_id)

    @asynccontextmanager
    async def _open(self) -> AsyncIterator[_Stream]:
        stream = _Stream()
        self._streams.add(stream)
        try:
            yield stream
        finally:
            self._streams.discard(stream)


def _same_redis(a: NotificationBus, b: NotificationBus) -> bool:
    """Two Redis buses on the same URL and channel (two middlewares of one server)."""
    url = getattr(a, "url", None)
    return url is not None and (url, getattr(a, "channel", None)) == (
        getattr(b, "url", None),
        getattr(b, "channel", None),
    )
