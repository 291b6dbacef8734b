"""`Verifications` and `AuthFailures` together, on a fixed clock: what a verification holds,
what it spends, and what happens to the requests sharing one that never finished."""

from __future__ import annotations

import anyio
import pytest

from mcp_asgi.auth import InvalidToken, Principal
from mcp_asgi.auth.verifications import Verifications
from mcp_asgi.limits import AuthFailures, TooManyRequests

from ..helpers import Clock

SCOPE = {"type": "http", "client": ("192.0.2.7", 4000), "headers": []}


def failures(burst: int) -> AuthFailures:
    return AuthFailures(rate=0.5, burst=burst, clock=Clock(0.0))


def test_each_verification_in_progress_holds_a_unit_of_what_is_left() -> None:
    """A unit is held per verification; given back when the token passed, spent when it was
    refused; with every unit left held the next one waits (False); spent, 429."""
    budget = failures(2)
    client = budget.client(SCOPE)
    assert budget.reserve(client)
    assert budget.reserve(client)
    assert not budget.reserve(client)  # both units held: wait, not 429
    budget.release(client, refused=False)
    assert budget.reserve(client)
    budget.release(client, refused=True)  # one left, held by the other verification
    assert not budget.reserve(client)
    budget.release(client, refused=True)
    with pytest.raises(TooManyRequests) as refused:
        budget.reserve(client)
    assert refused.value.headers == [(b"retry-after", b"2")]  # one unit at 0.5 a second
    assert budget.reserve(budget.client({**SCOPE, "client": ("198.51.100.1", 1)}))


class Held:
    """A verifier whose verifications wait for `go`; only "good" passes."""

    def __init__(self) -> None:
        self.calls = 0
        self.go = anyio.Event()

    async def verify(self, token: str) -> Principal:
        self.calls += 1
        await self.go.wait()
        if token != "good":
            raise InvalidToken("unknown", "Not a token of ours")
        return Principal("carol", frozenset(), {"sub": "carol"}, None, None)


async def test_requests_with_one_token_share_its_verification() -> None:
    """Three requests with one token: one verification, one unit held, one outcome."""
    verifier, budget = Held(), failures(1)
    verifications = Verifications(verifier, budget)
    outcomes: list[object] = []

    async def one(token: str) -> None:
        outcomes.append(await verifications.verify(token, SCOPE))

    async with anyio.create_task_group() as group:
        for _ in range(3):
            group.start_soon(one, "good")
        await anyio.wait_all_tasks_blocked()
        verifier.go.set()
    assert verifier.calls == 1
    assert len({id(outcome) for outcome in outcomes}) == 1
    assert isinstance(outcomes[0], Principal)
    assert budget.reserve(budget.client(SCOPE))  # nothing spent


async def test_a_verification_that_never_ended_is_charged_and_its_sharers_verify_again() -> None:
    """The request verifying a token goes away (cancelled): its unit is spent (a client
    cannot escape the budget by leaving), and a request that shared it verifies the token
    itself."""
    verifier, budget = Held(), failures(2)
    verifications = Verifications(verifier, budget)
    outcomes: list[object] = []

    async def one(token: str) -> None:
        outcomes.append(await verifications.verify(token, SCOPE))

    first = anyio.CancelScope()

    async def leaving() -> None:
        with first:
            await one("bad")

    async with anyio.create_task_group() as group:
        group.start_soon(leaving)
        await anyio.wait_all_tasks_blocked()
        group.start_soon(one, "bad")
        await anyio.wait_all_tasks_blocked()
        first.cancel()
        await anyio.wait_all_tasks_blocked()
        assert verifier.calls == 2
        verifier.go.set()
    assert [type(outcome) for outcome in outcomes] == [InvalidToken]
    with pytest.raises(TooManyRequests):  # two refusals: the cancelled one and the other
        budget.reserve(budget.client(SCOPE))
