"""Server-to-client requests of a 2025-era request, and the answers its client POSTs.

::

    handler: await ctx.elicit(...)             (input.live.LiveInput)
      Outbound.send(method, params)
        Replies.expect(session, id)            subscribed before the request is sent
        RequestScope.write({"id": id, ...})    on the request's own stream
        ... waits (timeout: legacy_input_timeout) ...
    client: POST {"id": id, "result": ...}     to the session, on any replica
      LegacyEndpoint.serve_reply ─► Replies.deliver ─► the store's channel ─► the waiter

The answers travel through the shared-state store's channels (`mcp_asgi.store`): in this
process with the memory store, across replicas with Redis, so an answer POSTed to a replica
that does not run the handler still reaches it. A channel is named by the session and the
request id, so a session can only answer its own requests. An answer nobody waits for (a
request that ended, timed out, or was never sent) is dropped. The store out of reach, the
handler gets an `McpError` (reason `store_unavailable`) instead of an answer.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio

from mcp_asgi.lifecycle.scope import RequestScope
from mcp_asgi.protocol import jsonrpc
from mcp_asgi.protocol.jsonrpc import INTERNAL_ERROR, JsonObject, McpError, RequestId
from mcp_asgi.protocol.message import IncomingReply
from mcp_asgi.store import StateStore, StoreUnavailable, slot_tag

REQUEST_TIMEOUT = -32001
"""The code of the error a handler gets when the client did not answer in time (the
SDKs' "request timed out")."""


class Replies:
    """Delivers the answers to server-to-client requests to the handler waiting for them."""

    def __init__(self, store: StateStore) -> None:
        self._store = store

    @asynccontextmanager
    async def expect(
        self, session_id: str, request_id: RequestId
    ) -> AsyncIterator[Callable[[], Awaitable[JsonObject]]]:
        """While open, the answer to `request_id` can be awaited (subscribed on entry)."""
        async with self._store.subscribe(_channel(session_id, request_id)) as messages:

            async def answer() -> JsonObject:
                async for data in messages:
                    reply = json.loads(data)
                    if isinstance(reply, dict):
                        return reply
                raise McpError(INTERNAL_ERROR, "the answer's channel closed")  # pragma: no cover

            yield answer

    async def deliver(self, session_id: str, reply: IncomingReply) -> None:
        """Hand a POSTed answer to whoever waits for it (nobody: dropped)."""
        body = {"result": reply.result} if reply.error is None else {"error": reply.error}
        await self._store.publish(_channel(session_id, reply.id), json.dumps(body).encode())


class Outbound:
    """Sends the server-to-client requests of one 2025-era request (see the module)."""

    def __init__(
        self, session_id: str, replies: Replies, *, streams: bool, timeout: float | None
    ) -> None:
        self._session_id = session_id
        self._replies = replies
        self._streams = streams
        self._timeout = timeout
        self._scope: RequestScope | None = None

    def bind(self, request_scope: RequestScope) -> None:
        """The request whose stream carries the requests (once its scope is open)."""
        self._scope = request_scope

    async def send(self, method: str, params: JsonObject) -> Any:
        """Send one request to the client and return its result; `McpError` for an error
        answer, no answer within the timeout, or a reply that cannot carry the request."""
        request_scope = self._scope
        if request_scope is None or not self._streams:
            raise McpError(
                INTERNAL_ERROR,
                f"cannot send {method} to the client: this request's response is a single JSON "
                "body (the client must accept text/event-stream, and response_mode not be json)",
            )
        request_id = f"mcp-asgi-{secrets.token_urlsafe(12)}"
        message: JsonObject = {
            "jsonrpc": jsonrpc.JSONRPC_VERSION,
            "id": request_id,
            "method": method,
            "params": params,
        }
        try:
            async with self._replies.expect(self._session_id, request_id) as answer:
                if not await request_scope.write(message):
                    await anyio.lowlevel.checkpoint()  # the request was cancelled: raised here
                    raise McpError(INTERNAL_ERROR, f"cannot send {method}: the client is gone")
                with anyio.move_on_after(self._timeout if self._timeout else float("inf")):
                    reply = await answer()
                    return _result(reply)
        except StoreUnavailable:  # logged once by the store
            raise McpError(
                INTERNAL_ERROR,
                f"cannot send {method}: the shared store (Redis) that carries the client's "
                "answer cannot be reached; retry shortly",
                {"reason": "store_unavailable"},
            ) from None
        cancel = {"requestId": request_id, "reason": "timed out"}
        await request_scope.write(jsonrpc.notification("notifications/cancelled", cancel))
        raise McpError(
            REQUEST_TIMEOUT,
            f"Request timed out: the client did not answer {method} within "
            f"{self._timeout:g} seconds",
            {"reason": "timeout", "method": method},
        )


def _result(reply: JsonObject) -> Any:
    error = reply.get("error")
    if isinstance(error, dict):
        code = error.get("code")
        message = error.get("message")
        raise McpError(
            code if isinstance(code, int) else INTERNAL_ERROR,
            message if isinstance(message, str) else "the client answered with an error",
            error.get("data"),
        )
    return reply.get("result")


def _channel(session_id: str, request_id: RequestId) -> str:
    return f"reply:{slot_tag(session_id)}:{request_id!r}"  # the session's slot
