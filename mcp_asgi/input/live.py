"""`LiveInput`: a 2025-era request asks the client while it runs.

`ctx.elicit(...)` sends `elicitation/create` (`sampling/createMessage`, `roots/list`) as a
JSON-RPC request on the request's own response stream, and waits, right where it asked,
until the client POSTs the response to its session. The way there and back is the
caller's `send` (mcp_asgi.legacy.outbound): it returns the response's `result`, or raises
`McpError` for an error response, for a missing answer (timeout) or a stream that cannot
carry the request. `ctx.ping()` travels the same way (`ping`, answered with an empty
result). A cancel of the request ends the wait with that cancel.

The capabilities checked are the session's (`initialize`), with the same -32021 error as a
2026-07-28 request gets (in-band for a 2025-era client), before anything is sent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final

from mcp_asgi.input.asking import Asking, ask_all
from mcp_asgi.protocol.jsonrpc import INVALID_PARAMS, JsonObject, McpError
from mcp_asgi.protocol.request import McpRequest

PING: Final = "ping"

Send = Callable[[str, JsonObject], Awaitable[Any]]
"""Sends one server-to-client request (method, params) and returns its result."""


class LiveInput(Asking):
    """The questions of one 2025-era request, asked while it runs."""

    def __init__(self, request: McpRequest, send: Send) -> None:
        self._request = request
        self._send = send

    @property
    def waits_in_place(self) -> bool:
        """Always: the question travels on the request's own stream while it waits."""
        return True

    async def ping(self) -> bool:
        """Send `ping` on the request's stream and wait for the client's (empty) answer."""
        result = await self._send(PING, {})
        if not isinstance(result, dict):
            raise self._bad_response(None, "to ping must be an object")
        return True

    async def gather(self, *questions: Awaitable[Any]) -> list[Any]:
        """Ask several questions at once (each is sent as soon as it is asked): the answers
        in order. The first failure cancels the other questions and is raised."""
        return await ask_all(questions)

    async def _ask(self, key: str | None, method: str, params: JsonObject, need: JsonObject) -> Any:
        self._require(need)
        result = await self._send(method, params)
        return self._check(key or method, method, result)

    def _bad_response(self, key: str | None, detail: str) -> McpError:
        return McpError(INVALID_PARAMS, f"Invalid params: the client's answer {detail}")
