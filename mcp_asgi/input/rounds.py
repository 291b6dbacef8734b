"""Asking the client for input: multi round-trip requests (MRTR, protocol 2026-07-28).

A handler asks as if the answer were a function call away::

    @server.tool()
    async def deploy(env: str, ctx: Context) -> str:
        answer = await ctx.elicit(f"Deploy to {env}?", {"type": "object", "properties": {}})
        if not answer.accepted:
            return "cancelled"
        ...

The first time, `ctx.elicit` ends the request with an `InputRequiredResult` (the question
in `inputRequests`, a sealed `requestState`). The client asks its user and sends the same
request again, with a new id, carrying `inputResponses` and `requestState`. The handler runs
again from the top, and this time `ctx.elicit` returns the answer. Answers from earlier
rounds travel in the sealed state, so a handler can ask several questions in turn (one
round each), or several at once with `ctx.gather(...)`.

So code before a question runs once per round: keep side effects after the questions.
Questions are matched by key (explicit `key=`, or the order in which the handler asks) and
by content: a question whose text or schema changed is asked again.

Only `tools/call`, `resources/read` and `prompts/get` may ask, and only for capabilities the
request declared in `_meta` (else -32021 with `data.requiredCapabilities`, HTTP 400).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Mapping
from typing import Any

from starlette.types import Scope

from mcp_asgi.input.asking import INPUT_METHODS, Asking
from mcp_asgi.input.request_state import Sealer, StateError, digest, params_digest, principal_of
from mcp_asgi.protocol.jsonrpc import (
    INVALID_PARAMS,
    JsonObject,
    ProtocolError,
)
from mcp_asgi.protocol.request import McpRequest


class InputRequired(BaseException):
    """Ends the request with an `InputRequiredResult` (control flow, not an error).

    It derives from BaseException so that a handler's `except Exception` (and a tool's
    "exceptions become isError results" rule) lets it through. A handler never raises it
    itself; if it catches `BaseException` around `ctx.elicit` & co., it must re-raise it.
    """

    def __init__(self, result: JsonObject) -> None:
        super().__init__("input required")
        self.result = result
        """The `InputRequiredResult` the request ends with."""


class InputRounds:
    """Creates each request's `InputRound`; holds the `requestState` key."""

    def __init__(self, key: bytes | None = None, *, ttl: float = 600.0) -> None:
        self._sealer = Sealer(key, ttl=ttl)

    def begin(self, asgi_scope: Scope, request: McpRequest) -> InputRound | None:
        """The round of a request that may ask for input (verifying its `requestState`:
        raises `StateError` when it is tampered, expired, or not this request's)."""
        if request.method not in INPUT_METHODS:
            return None
        return InputRound(request, self._sealer, asgi_scope)


class InputRound(Asking):
    """What one request already knows (answers carried by its sealed `requestState` and
    its `inputResponses`) and what it asks for."""

    def __init__(self, request: McpRequest, sealer: Sealer, asgi_scope: Scope) -> None:
        self._request = request
        self._sealer = sealer
        self._asgi_scope = asgi_scope  # whose principal binds the state, read when needed
        self._answers: dict[str, list[Any]] = {}  # key -> [question digest, method, response]
        self._used: dict[str, list[Any]] = {}
        self._unsealed: dict[str, Any] = {}  # inputResponses that came without our state
        self._pending: dict[str, JsonObject] = {}
        self._asked = 0
        params = request.params
        if "requestState" in params or "inputResponses" in params:  # a later round
            self._load()

    async def gather(self, *questions: Awaitable[Any]) -> list[Any]:
        """Ask several questions in one round: the answers in order, or one
        `InputRequiredResult` listing every question still unanswered."""
        answers: list[Any] = []
        missing = False
        pending = list(questions)
        try:
            while pending:
                question = pending.pop(0)
                try:
                    answers.append(await question)
                except InputRequired:
                    missing = True
                    answers.append(None)
        finally:
            for question in pending:
                if inspect.iscoroutine(question):
                    question.close()
        if missing:
            raise self._interrupt()
        return answers

    # -- machinery -----------------------------------------------------------------------

    async def _ask(self, key: str | None, method: str, params: JsonObject, need: JsonObject) -> Any:
        self._asked += 1
        name = key if key is not None else f"{method.split('/', 1)[0]}-{self._asked}"
        self._require(need)
        question: JsonObject = {"method": method, "params": params}
        fingerprint = digest(question)
        known = self._answers.get(name)
        if known is not None and known[0] == fingerprint:
            self._used[name] = known
            return known[2]
        if known is None and name in self._unsealed:  # answered before being asked
            known = [fingerprint, method, self._check(name, method, self._unsealed.pop(name))]
            self._used[name] = known
            return known[2]
        if name in self._pending or name in self._used:
            raise ValueError(f"input key {name!r} is used twice in one request")
        self._pending[name] = question
        raise self._interrupt()

    def _principal(self) -> str | None:
        """The digest of who is asking (most requests never seal or open a state)."""
        principal = principal_of(self._asgi_scope)
        return digest(principal) if principal is not None else None

    def _interrupt(self) -> InputRequired:
        questions = {k: [digest(q), q["method"]] for k, q in self._pending.items()}
        state = self._sealer.seal(
            {
                "m": self._request.method,
                "d": params_digest(self._request.method, self._request.params),
                "p": self._principal(),
                "a": self._used,
                "q": questions,
            }
        )
        return InputRequired(
            {
                "resultType": "input_required",
                "inputRequests": dict(self._pending),
                "requestState": state,
            }
        )

    def _load(self) -> None:
        request = self._request
        token = request.params.get("requestState")
        if token is None:
            # Answers with no state of ours (the client answered before this exchange asked):
            # each is taken for the question of the same key, checked like any answer.
            # Only state carries answers across rounds; unknown keys are ignored.
            responses = request.params.get("inputResponses")
            if isinstance(responses, dict):
                self._unsealed = dict(responses)
            elif responses is not None:
                raise self._bad_response(None, "must be an object")
            return
        payload = self._sealer.open(token, request.id)
        if payload.get("m") != request.method or payload.get("d") != params_digest(
            request.method, request.params
        ):
            raise StateError("mismatch", "was issued for a different request", request.id)
        if payload.get("p") != self._principal():
            raise StateError("principal", "was issued to a different principal", request.id)
        answers = payload.get("a")
        questions = payload.get("q")
        if not isinstance(answers, dict) or not isinstance(questions, dict):
            raise StateError("malformed", "is malformed", request.id)
        self._answers = dict(answers)
        responses = request.params.get("inputResponses")
        if responses is None:
            return
        if not isinstance(responses, dict):
            raise self._bad_response(None, "must be an object")
        for key, (fingerprint, method) in questions.items():
            if key in responses:
                self._answers[key] = [fingerprint, method, self._check(key, method, responses[key])]

    def _bad_response(self, key: str | None, detail: str) -> ProtocolError:
        where = "inputResponses" + (f".{key}" if key else "")
        return ProtocolError(
            400, INVALID_PARAMS, f"Invalid params: {where} {detail}", request_id=self._request.id
        )


def is_retry(params: Mapping[str, Any]) -> bool:
    """Whether a request carries answers or state from an earlier round (its result must
    not be cached)."""
    return "inputResponses" in params or "requestState" in params
