"""`TaskInput`: `ctx.elicit` & co. in a task-capable call.

Until the call becomes a task, a question is an ordinary MRTR round of its request (the
request's `InputRound`: an `InputRequiredResult` ends it, and the client's retry runs the
handler again). Once it is a task, a question goes on the task (`input_required`, its
`inputRequests` in `tasks/get`) and the handler waits right where it asked: a task has no
connection to lose, so nothing runs twice. Capabilities are those the creating request
declared, checked before anything is asked (-32021, and the task fails with it).
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from mcp_asgi.input.asking import Asking, ask_all
from mcp_asgi.protocol.jsonrpc import INVALID_PARAMS, JsonObject, McpError
from mcp_asgi.protocol.request import McpRequest
from mcp_asgi.tasks.run import TaskRun


class TaskInput(Asking):
    """The questions of one task-capable call."""

    def __init__(self, request: McpRequest, round: Asking | None, run: TaskRun) -> None:
        self._request = request
        self._round = round
        self._run = run
        self._asked = 0

    @property
    def waits_in_place(self) -> bool:
        """Once the call is a task: the handler waits where it asked."""
        return self._run.promoted

    async def gather(self, *questions: Awaitable[Any]) -> list[Any]:
        """Ask several questions together: in one round before the call is a task, all
        pending at once on the task after (answered in any order, even one at a time)."""
        if not self._run.promoted and self._round is not None:
            return await self._round.gather(*questions)
        return await ask_all(questions)

    async def _ask(self, key: str | None, method: str, params: JsonObject, need: JsonObject) -> Any:
        if not self._run.promoted:
            if self._round is None:
                raise RuntimeError(f"this {self._request.method} request cannot ask for input")
            return await self._round._ask(key, method, params, need)
        self._require(need)
        self._asked += 1
        name = key if key is not None else f"{method.split('/', 1)[0]}-{self._asked}"
        response = await self._run.ask(name, {"method": method, "params": params})
        return self._check(name, method, response)

    def _bad_response(self, key: str | None, detail: str) -> McpError:
        where = "the answer" + (f" to {key!r}" if key else "")
        return McpError(INVALID_PARAMS, f"Invalid params: {where} {detail}")
