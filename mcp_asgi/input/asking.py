"""What a handler can ask the client, in either era: `Asking` holds the questions
(`elicit`, `elicit_url`, `sample`, `list_roots`, `gather`), what each needs of the client's
capabilities, and how an answer is checked. How a question travels is the subclass's:

    input.rounds.InputRound   2026-07-28: the request ends with an InputRequiredResult and
                              the handler runs again, from the top, with the answers
    input.live.LiveInput      2025 era: a JSON-RPC request on the request's own stream,
                              answered by a POST; the handler waits where it asked
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Generic, Literal, TypeVar, overload

import anyio
import pydantic

from mcp_asgi.input.form import Form
from mcp_asgi.protocol.jsonrpc import MISSING_CLIENT_CAPABILITY, JsonObject, McpError, ProtocolError
from mcp_asgi.protocol.request import McpRequest

INPUT_METHODS: Final = frozenset({"tools/call", "resources/read", "prompts/get"})
ELICIT: Final = "elicitation/create"
SAMPLE: Final = "sampling/createMessage"
ROOTS: Final = "roots/list"
_ACTIONS: Final = ("accept", "decline", "cancel")

T = TypeVar("T")
M = TypeVar("M", bound=pydantic.BaseModel)


@dataclass(frozen=True, slots=True)
class ElicitResult(Generic[T]):
    """The user's answer to `ctx.elicit(...)`: `content` is set only when accepted (form
    mode); a pydantic model given as the schema arrives as an instance of it."""

    action: Literal["accept", "decline", "cancel"]
    """`accept` (submitted, or consented), `decline` (refused) or `cancel` (dismissed
    without choosing)."""
    content: T | None = None
    """The submitted form when accepted (a dict, or an instance of the model given as the
    schema); None otherwise and for URL elicitation."""

    @property
    def accepted(self) -> bool:
        """Whether the user accepted (submitted the form, or consented to the URL)."""
        return self.action == "accept"


class Asking:
    """The questions a handler asks; subclasses say how they reach the client (`_ask`),
    how several are asked together (`gather`) and what a malformed answer raises."""

    _request: McpRequest

    @property
    def waits_in_place(self) -> bool:
        """Whether a question waits where it is asked for the client's answer (a 2025-era
        request, a task), rather than ending the request with an input round."""
        return False

    # -- the questions -------------------------------------------------------------------

    @overload
    async def elicit(
        self, message: str, schema: type[M], *, key: str | None = None
    ) -> ElicitResult[M]: ...

    @overload
    async def elicit(
        self, message: str, schema: Mapping[str, Any], *, key: str | None = None
    ) -> ElicitResult[dict[str, Any]]: ...

    async def elicit(
        self, message: str, schema: type[pydantic.BaseModel] | Mapping[str, Any], *, key: Any = None
    ) -> ElicitResult[Any]:
        """Ask the user to fill in a form (flat object schema of primitives). An accepted
        answer that does not fit the schema (or the model) is the client's error: -32602
        saying what is wrong where."""
        form: Form | type[pydantic.BaseModel]
        if isinstance(schema, type):
            form = schema
            requested = schema.model_json_schema()
            requested.pop("title", None)
        else:
            requested = dict(schema)
            form = Form(requested)
        params = {"mode": "form", "message": message, "requestedSchema": requested}
        answer = await self._ask(key, ELICIT, params, {"elicitation": {}})
        content = answer.get("content")
        if answer["action"] != "accept":
            return ElicitResult(answer["action"])
        if isinstance(form, Form):
            problem = form.problems({} if content is None else content)
            if problem is None:
                return ElicitResult("accept", content)
        else:
            try:
                return ElicitResult("accept", form.model_validate(content or {}))
            except pydantic.ValidationError as exc:
                problem = _problems(exc)
        raise self._bad_response(key, f"content does not match the requested schema: {problem}")

    async def elicit_url(
        self, message: str, url: str, *, key: str | None = None
    ) -> ElicitResult[dict[str, Any]]:
        """Send the user to `url` (for anything sensitive); `accepted` means they consented,
        not that the out-of-band step is finished."""
        params = {"mode": "url", "message": message, "url": url}
        answer = await self._ask(key, ELICIT, params, {"elicitation": {"url": {}}})
        return ElicitResult(answer["action"])

    async def sample(
        self,
        messages: str | Sequence[Mapping[str, Any]],
        *,
        max_tokens: int,
        system_prompt: str | None = None,
        key: str | None = None,
        **params: Any,
    ) -> JsonObject:
        """Ask the client's model for a completion; returns the `CreateMessageResult`
        (`role`, `content`, `model`, `stopReason`)."""
        if isinstance(messages, str):
            messages = [{"role": "user", "content": {"type": "text", "text": messages}}]
        body: JsonObject = {"messages": [dict(m) for m in messages], "maxTokens": max_tokens}
        if system_prompt is not None:
            body["systemPrompt"] = system_prompt
        body.update(params)
        need: JsonObject = {"sampling": {"tools": {}} if "tools" in body else {}}
        answer: JsonObject = await self._ask(key, SAMPLE, body, need)
        return answer

    async def list_roots(self, *, key: str | None = None) -> list[JsonObject]:
        """Ask the client for its roots (`uri`, `name`)."""
        answer = await self._ask(key, ROOTS, {}, {"roots": {}})
        return list(answer["roots"])

    async def ping(self) -> bool:
        """Check that the client answers; False where there is nobody to ping while the
        request runs (a 2026-07-28 request: ping no longer exists there)."""
        return False

    async def gather(self, *questions: Awaitable[Any]) -> list[Any]:
        """Ask several questions together: the answers in order."""
        raise NotImplementedError

    # -- what subclasses share ---------------------------------------------------------

    async def _ask(self, key: str | None, method: str, params: JsonObject, need: JsonObject) -> Any:
        """The checked answer to one question (`_check`'s shape)."""
        raise NotImplementedError

    def _bad_response(self, key: str | None, detail: str) -> McpError:
        raise NotImplementedError

    def _require(self, need: JsonObject) -> None:
        declared = self._request.client_capabilities
        for family, sub in need.items():
            have = declared.get(family)
            missing = not isinstance(have, dict) or any(k not in have for k in sub)
            if family == "elicitation" and not sub and isinstance(have, dict):
                missing = bool(have) and "form" not in have  # {} means form only
            if missing:
                raise ProtocolError(
                    400,
                    MISSING_CLIENT_CAPABILITY,
                    f"Missing required client capability: {family}"
                    + "".join(f".{k}" for k in sub)
                    + " (declare it in _meta io.modelcontextprotocol/clientCapabilities)",
                    {"requiredCapabilities": need},
                    request_id=self._request.id,
                )

    def _check(self, key: str, method: str, response: Any) -> Any:
        if not isinstance(response, dict):
            raise self._bad_response(key, "must be an object")
        if method == ELICIT:
            content = response.get("content")
            if response.get("action") not in _ACTIONS or not isinstance(
                content, (dict, type(None))
            ):
                raise self._bad_response(key, "is not an ElicitResult")
            return {"action": response["action"], "content": content}
        if method == ROOTS:
            roots = response.get("roots")
            if not isinstance(roots, list) or not all(isinstance(r, dict) for r in roots):
                raise self._bad_response(key, "is not a ListRootsResult")
            return {"roots": roots}
        if "role" not in response or not isinstance(response.get("content"), (dict, list)):
            raise self._bad_response(key, "is not a CreateMessageResult")
        return {k: v for k, v in response.items() if k not in ("resultType", "_meta")}


def _problems(exc: pydantic.ValidationError) -> str:
    """A model's validation errors, each with the field it is in."""
    said = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(part) for part in error["loc"])
        said.append(f"{where}: {error['msg']}" if where else error["msg"])
    return "; ".join(said)


async def ask_all(questions: Sequence[Awaitable[Any]]) -> list[Any]:
    """Await every question at once (each is sent as soon as it is asked): the answers in
    order. The first failure cancels the others and is raised."""
    answers: list[Any] = [None] * len(questions)

    async def answer(index: int, question: Awaitable[Any]) -> None:
        answers[index] = await question

    async with anyio.create_task_group() as tg:
        for index, question in enumerate(questions):
            tg.start_soon(answer, index, question)
    return answers
