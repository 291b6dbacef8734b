"""Multi round-trip requests over a real server: asking, retrying, and the sealed state."""

from __future__ import annotations

import itertools
from typing import Any

import anyio
import pytest
from pydantic import BaseModel
from starlette.authentication import AuthCredentials, AuthenticationBackend, SimpleUser
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import HTTPConnection

from mcp_asgi import Context, McpMiddleware, McpServer
from mcp_asgi.testing import McpResponse, McpTestClient, serve

from ..helpers import mcp_app, serving

KEY = "a-shared-secret-of-the-replicas"
ASK = {"type": "object", "properties": {"seats": {"type": "integer"}}, "required": ["seats"]}
ELICIT: dict[str, Any] = {"elicitation": {}}
EVERYTHING: dict[str, Any] = {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}}


class Seats(BaseModel):
    seats: int


def build_server(runs: list[str] | None = None) -> McpServer:
    """Handlers that ask in every way the API allows."""
    server = McpServer("mrtr")
    runs = runs if runs is not None else []

    @server.tool()
    async def book(city: str, ctx: Context) -> str:
        """Ask how many seats, then book."""
        runs.append("book")
        answer = await ctx.elicit(f"How many seats in {city}?", ASK)
        if not answer.accepted or answer.content is None:
            return f"not booked: {answer.action}"
        return f"{city}: {answer.content['seats']} seats"

    @server.tool()
    async def typed(ctx: Context) -> int:
        """Ask with a pydantic model."""
        answer = await ctx.elicit("Seats?", Seats)
        return answer.content.seats if answer.content else 0

    @server.tool()
    async def steps(ctx: Context) -> str:
        """Two questions in turn: one round each."""
        runs.append("steps")
        name = await ctx.elicit("Name?", {"type": "object", "properties": {}})
        reply = await ctx.sample(f"Greet {name.content}", max_tokens=20)
        return str(reply["content"]["text"])

    @server.tool()
    async def together(ctx: Context) -> str:
        """Two questions in one round."""
        answer, roots = await ctx.gather(ctx.elicit("OK?", ASK), ctx.list_roots())
        return f"{answer.action} {[r['uri'] for r in roots]}"

    @server.tool()
    async def login(ctx: Context) -> str:
        """URL mode."""
        answer = await ctx.elicit_url("Sign in", "https://example.com/login")
        return answer.action

    @server.resource("res://secret", mime_type="text/plain")
    async def secret(ctx: Context) -> str:
        """A resource that needs a confirmation."""
        answer = await ctx.elicit("Reveal?", ASK)
        return "revealed" if answer.accepted else "hidden"

    @server.prompt()
    async def greeting(ctx: Context) -> str:
        """A prompt that asks for a name."""
        answer = await ctx.elicit("Name?", ASK)
        return f"Hello {answer.content}"

    return server


def build_app(server: McpServer, **settings: Any) -> McpMiddleware:
    settings.setdefault("request_state_key", KEY)
    return mcp_app(server, **settings)


_ids = itertools.count(100)


async def call(
    client: McpTestClient, method: str, params: dict[str, Any], **retry: Any
) -> McpResponse:
    """One request (a retry when `retry` holds inputResponses/requestState), fresh id."""
    return await client.request(method, {**params, **retry}, id=next(_ids))


async def ask(client: McpTestClient, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """The result of a first round."""
    result: dict[str, Any] = (await call(client, method, params)).final["result"]
    return result


async def answer(
    client: McpTestClient,
    method: str,
    params: dict[str, Any],
    state: str,
    answers: dict[str, Any] | None = None,
) -> McpResponse:
    """The retry of a round: the same request (fresh id), its answers and sealed state."""
    if answers is None:
        return await call(client, method, params, requestState=state)
    return await call(client, method, params, inputResponses=answers, requestState=state)


async def test_elicitation_round_trip() -> None:
    """Round one ends with input_required; the retry (new id) re-runs the handler, answered."""
    runs: list[str] = []
    with serving(build_app(build_server(runs)), capabilities=ELICIT) as client:
        params = {"name": "book", "arguments": {"city": "Oslo"}}
        first = await call(client, "tools/call", params)
        result = first.final["result"]
        assert first.status == 200
        assert result["resultType"] == "input_required"
        assert result["inputRequests"] == {
            "elicitation-1": {
                "method": "elicitation/create",
                "params": {
                    "mode": "form",
                    "message": "How many seats in Oslo?",
                    "requestedSchema": ASK,
                },
            }
        }
        assert isinstance(result["requestState"], str)
        seats = {"elicitation-1": {"action": "accept", "content": {"seats": 2}}}
        second = await answer(client, "tools/call", params, result["requestState"], seats)
    assert second.final["result"]["content"] == [{"type": "text", "text": "Oslo: 2 seats"}]
    assert second.final["result"]["resultType"] == "complete"
    assert runs == ["book", "book"]


async def test_declined_and_typed_answers() -> None:
    """A decline reaches the handler as such; a model schema yields a model instance."""
    with serving(build_app(build_server()), capabilities=ELICIT) as client:
        params = {"name": "book", "arguments": {"city": "Rome"}}
        state = (await ask(client, "tools/call", params))["requestState"]
        decline = {"elicitation-1": {"action": "decline"}}
        declined = await answer(client, "tools/call", params, state, decline)
        typed = {"name": "typed", "arguments": {}}
        first = await ask(client, "tools/call", typed)
        schema = first["inputRequests"]["elicitation-1"]["params"]["requestedSchema"]
        seats = {"elicitation-1": {"action": "accept", "content": {"seats": 4}}}
        done = await answer(client, "tools/call", typed, first["requestState"], seats)
    assert declined.final["result"]["content"][0]["text"] == "not booked: decline"
    assert schema["properties"]["seats"]["type"] == "integer"
    assert done.final["result"]["structuredContent"] == {"result": 4}


async def test_questions_in_turn_take_one_round_each() -> None:
    """Earlier answers travel in the sealed state; the handler runs once per round."""
    runs: list[str] = []
    with serving(build_app(build_server(runs)), capabilities=EVERYTHING) as client:
        params = {"name": "steps", "arguments": {}}
        one = await ask(client, "tools/call", params)
        name = {"elicitation-1": {"action": "accept", "content": {"name": "Ada"}}}
        retried = await answer(client, "tools/call", params, one["requestState"], name)
        two = retried.final["result"]
        assert list(two["inputRequests"]) == ["sampling-2"]
        sampled = two["inputRequests"]["sampling-2"]["params"]
        assert sampled["maxTokens"] == 20
        reply = {"role": "assistant", "content": {"type": "text", "text": "Hi Ada"}, "model": "m"}
        sample = {"sampling-2": reply}
        three = await answer(client, "tools/call", params, two["requestState"], sample)
    assert three.final["result"]["content"][0]["text"] == "Hi Ada"
    assert runs == ["steps", "steps", "steps"]


async def test_gather_asks_several_questions_in_one_round() -> None:
    """ctx.gather returns one InputRequiredResult listing every unanswered question."""
    with serving(build_app(build_server()), capabilities=EVERYTHING) as client:
        params = {"name": "together", "arguments": {}}
        first = await ask(client, "tools/call", params)
        assert {k: v["method"] for k, v in first["inputRequests"].items()} == {
            "elicitation-1": "elicitation/create",
            "roots-2": "roots/list",
        }
        answers = {
            "elicitation-1": {"action": "cancel"},
            "roots-2": {"roots": [{"uri": "file:///w", "name": "w"}]},
            "unknown": {"ignored": True},
        }
        done = await answer(client, "tools/call", params, first["requestState"], answers)
    assert done.final["result"]["content"][0]["text"] == "cancel ['file:///w']"


async def test_answers_sent_before_being_asked_are_taken_by_key() -> None:
    """inputResponses without requestState (the client answered before this exchange
    asked) answer the question of the same key; unknown extra keys are ignored."""
    with serving(build_app(build_server()), capabilities=ELICIT) as client:
        seats = {
            "elicitation-1": {"action": "accept", "content": {"seats": 1}},
            "not-asked": {"anything": True},
        }
        params = {"name": "book", "arguments": {"city": "Oslo"}}
        done = await call(client, "tools/call", params, inputResponses=seats)
    assert done.final["result"]["resultType"] == "complete"


async def test_unsolicited_answers_with_other_keys_are_asked_for() -> None:
    """Unsealed answers that match no question change nothing: the question is asked."""
    with serving(build_app(build_server()), capabilities=ELICIT) as client:
        other = {"elicitation-9": {"action": "accept", "content": {"seats": 1}}}
        params = {"name": "book", "arguments": {"city": "Oslo"}}
        again = await call(client, "tools/call", params, inputResponses=other)
    assert again.final["result"]["resultType"] == "input_required"


async def test_an_unsealed_answer_of_the_wrong_shape_is_400() -> None:
    """An unsealed answer to a question asked is checked like any answer."""
    with serving(build_app(build_server()), capabilities=ELICIT) as client:
        bad = {"elicitation-1": {"action": "maybe"}}
        params = {"name": "book", "arguments": {"city": "Oslo"}}
        response = await call(client, "tools/call", params, inputResponses=bad)
    assert response.status == 400
    assert response.final["error"]["code"] == -32602


@pytest.mark.parametrize(
    ("tool", "capabilities", "required"),
    [
        ("book", {}, {"elicitation": {}}),
        ("login", {"elicitation": {}}, {"elicitation": {"url": {}}}),
        ("steps", {"elicitation": {}}, {"sampling": {}}),
        ("together", {"elicitation": {}}, {"roots": {}}),
    ],
)
async def test_undeclared_capability_is_32021(
    tool: str, capabilities: dict[str, Any], required: dict[str, Any]
) -> None:
    """Asking for what the request did not declare: -32021, HTTP 400, requiredCapabilities."""
    with serving(build_app(build_server()), capabilities=capabilities) as client:
        params = {"name": tool, "arguments": {"city": "x"} if tool == "book" else {}}
        first = await call(client, "tools/call", params)
        if first.final.get("result", {}).get("resultType") == "input_required":
            state = first.final["result"]["requestState"]
            empty = {"elicitation-1": {"action": "accept", "content": {}}}
            first = await answer(client, "tools/call", params, state, empty)
    assert first.status == 400
    error = first.final["error"]
    assert error["code"] == -32021
    assert error["data"] == {"requiredCapabilities": required}


async def test_resources_read_and_prompts_get_can_ask_and_retries_are_not_cached() -> None:
    """MRTR on resources/read and prompts/get; no cache hints on input_required, ttlMs 0 on
    the retry's result."""
    with serving(build_app(build_server(), list_ttl=60), capabilities=ELICIT) as client:
        secret = {"uri": "res://secret"}
        first = await ask(client, "resources/read", secret)
        assert first["resultType"] == "input_required"
        assert "ttlMs" not in first
        assert "cacheScope" not in first
        seats = {"elicitation-1": {"action": "accept", "content": {"seats": 1}}}
        retried = await answer(client, "resources/read", secret, first["requestState"], seats)
        done = retried.final["result"]
        prompt = await ask(client, "prompts/get", {"name": "greeting"})
    assert done["contents"][0]["text"] == "revealed"
    assert done["ttlMs"] == 0
    assert prompt["resultType"] == "input_required"


async def rejected(response: McpResponse) -> str:
    assert response.status == 400, response.final
    error = response.final["error"]
    assert error["code"] == -32602
    return str(error["data"]["reason"])


async def test_tampered_foreign_and_mismatched_state_is_rejected() -> None:
    """Altered state, state sealed with another key, or state of another request: 400."""
    params = {"name": "book", "arguments": {"city": "Oslo"}}
    with (
        serving(build_app(build_server()), capabilities=ELICIT) as client,
        serving(build_app(build_server(), request_state_key="other"), capabilities=ELICIT) as b,
    ):
        state = (await ask(client, "tools/call", params))["requestState"]
        head, payload, mac = state.split(".")
        flipped = payload[:-2] + ("A" if payload[-2] != "A" else "B") + payload[-1]
        tampered = await answer(client, "tools/call", params, f"{head}.{flipped}.{mac}")
        garbage = await answer(client, "tools/call", params, "not-a-state")
        other = {"name": "book", "arguments": {"city": "Paris"}}
        mismatch = await answer(client, "tools/call", other, state)
        foreign = await answer(b, "tools/call", params, state)
    assert await rejected(tampered) == "tampered"
    assert await rejected(garbage) == "malformed"
    assert await rejected(mismatch) == "mismatch"
    assert await rejected(foreign) == "tampered"


async def test_a_replica_with_the_shared_key_completes_the_round() -> None:
    """State issued by one replica is accepted by another that shares request_state_key."""
    params = {"name": "book", "arguments": {"city": "Oslo"}}
    with (
        serving(build_app(build_server()), capabilities=ELICIT) as a,
        serving(build_app(build_server()), capabilities=ELICIT) as b,
    ):
        state = (await ask(a, "tools/call", params))["requestState"]
        seats = {"elicitation-1": {"action": "accept", "content": {"seats": 3}}}
        done = await answer(b, "tools/call", params, state, seats)
    assert done.final["result"]["content"][0]["text"] == "Oslo: 3 seats"


async def test_expired_state_is_rejected() -> None:
    """State presented after request_state_ttl: 400, reason expired."""
    params = {"name": "book", "arguments": {"city": "Oslo"}}
    app = build_app(build_server(), request_state_ttl=0.05)
    with serving(app, capabilities=ELICIT) as client:
        state = (await ask(client, "tools/call", params))["requestState"]
        await anyio.sleep(0.2)
        expired = await answer(client, "tools/call", params, state)
    assert await rejected(expired) == "expired"


async def test_malformed_answers_are_invalid_params() -> None:
    """An answer that is not an ElicitResult: -32602, HTTP 400."""
    params = {"name": "book", "arguments": {"city": "Oslo"}}
    with serving(build_app(build_server()), capabilities=ELICIT) as client:
        state = (await ask(client, "tools/call", params))["requestState"]
        maybe = {"elicitation-1": {"action": "maybe"}}
        bad = await answer(client, "tools/call", params, state, maybe)
    assert bad.status == 400
    assert bad.final["error"]["code"] == -32602
    assert "inputResponses.elicitation-1" in bad.final["error"]["message"]


class HeaderAuth(AuthenticationBackend):
    """Authenticates whoever the x-user header names (a stand-in for token checks)."""

    async def authenticate(self, conn: HTTPConnection) -> tuple[AuthCredentials, SimpleUser] | None:
        user = conn.headers.get("x-user")
        return (AuthCredentials(["authenticated"]), SimpleUser(user)) if user else None


async def test_state_is_bound_to_the_authenticated_principal() -> None:
    """State issued to alice is rejected for bob and for an anonymous caller."""
    app = AuthenticationMiddleware(build_app(build_server()), backend=HeaderAuth())
    params = {"name": "book", "arguments": {"city": "Oslo"}}
    seats = {"elicitation-1": {"action": "accept", "content": {"seats": 5}}}
    with serve(app) as live:
        url = live.url + "/mcp"
        alice = McpTestClient(url, capabilities=ELICIT, headers={"x-user": "alice"})
        bob = McpTestClient(url, capabilities=ELICIT, headers={"x-user": "bob"})
        anonymous = McpTestClient(url, capabilities=ELICIT)
        state = (await ask(alice, "tools/call", params))["requestState"]
        stolen = await answer(bob, "tools/call", params, state, seats)
        unsigned = await answer(anonymous, "tools/call", params, state, seats)
        done = await answer(alice, "tools/call", params, state, seats)
    assert await rejected(stolen) == "principal"
    assert await rejected(unsigned) == "principal"
    assert done.final["result"]["content"][0]["text"] == "Oslo: 5 seats"


FORM: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "color": {"type": "string", "enum": ["red", "green"]},
        "age": {"type": "integer", "minimum": 18},
        "email": {"type": "string", "format": "email"},
    },
    "required": ["name"],
}
WRONG_FORMS = [
    ({"name": 123}, "name: 123 is not of type 'string'"),
    ({}, "'name' is a required property"),
    (None, "'name' is a required property"),
    ({"name": "Ada", "color": "purple"}, "color: 'purple' is not one of ['red', 'green']"),
    ({"name": "Ada", "age": 12}, "age: 12 is less than the minimum of 18"),
    ({"name": "Ada", "email": "nope"}, "email: 'nope' is not a valid email"),
]


def form_server() -> McpServer:
    server = McpServer("form")

    @server.tool()
    async def profile(ctx: Context) -> dict[str, Any]:
        """Asks for a form given as a plain JSON Schema."""
        answer = await ctx.elicit("Who are you?", FORM)
        return {"action": answer.action, "content": answer.content}

    return server


async def test_a_form_answer_is_checked_against_the_requested_schema() -> None:
    """An accepted answer that breaks the plain JSON Schema asked (a wrong type, a missing
    required field, a value outside the enum, below the minimum, not an email) is -32602
    with HTTP 400 saying what is wrong where, sealed or not; a fitting one reaches the
    handler."""
    params = {"name": "profile", "arguments": {}}
    with serving(build_app(form_server()), capabilities=ELICIT) as client:
        refused = []
        for content, _ in WRONG_FORMS:
            reply: dict[str, Any] = {"action": "accept"}
            if content is not None:
                reply["content"] = content
            refused.append(
                await call(client, "tools/call", params, inputResponses={"elicitation-1": reply})
            )
        state = (await ask(client, "tools/call", params))["requestState"]
        sealed = await answer(
            client, "tools/call", params, state, {"elicitation-1": {"action": "accept"}}
        )
        good = {"name": "Ada", "color": "red", "age": 36, "email": "ada@example.com"}
        fits = await answer(
            client,
            "tools/call",
            params,
            state,
            {"elicitation-1": {"action": "accept", "content": good}},
        )
    expected = [words for _, words in WRONG_FORMS] + [WRONG_FORMS[1][1]]
    for response, words in zip([*refused, sealed], expected, strict=True):
        assert response.status == 400
        error = response.final["error"]
        assert error["code"] == -32602
        assert "content does not match the requested schema" in error["message"]
        assert words in error["message"]
    assert fits.final["result"]["structuredContent"] == {"action": "accept", "content": good}
