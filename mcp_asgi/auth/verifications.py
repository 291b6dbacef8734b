"""`Verifications`: each bearer token verified once however many requests carry it at once,
within the client's budget of refused tokens (`FailureBudget`).

The rule (`auth_failure_rate`, `auth_failure_burst`):

- a token is charged to its client's address only when it is **refused** (`InvalidToken`,
  or a verification that never finished: the client went away); a token that passes, or
  that cannot be verified now (`VerifierUnavailable`, a 503), costs nothing;
- an address whose budget is spent gets 429 before its token is verified;
- the tokens of one address being verified at once are at most the units its budget has
  left, so refusals can never overrun it: each verification holds a unit until it ends
  (given back when the token passed, spent when it was refused); a request that finds all
  its address's units held waits for one of them to end (it is never refused for it);
- concurrent requests with the same token share one verification (single flight, keyed by
  the token while it is being verified, never kept after): a thousand requests of one
  client at a cold start (keys not fetched yet, a JWKS refetch, an uncached
  introspection) make one verification and hold one unit.

A token the verifier has cached costs one dict look-up and the budget's `reserve` and
`release` (no await, nothing stored for a client with nothing refused).
"""

from __future__ import annotations

from typing import Protocol

import anyio
from starlette.types import Scope

from mcp_asgi.auth.principal import Principal
from mcp_asgi.auth.verifier import InvalidToken, TokenVerifier, VerifierUnavailable

Outcome = Principal | InvalidToken | VerifierUnavailable
"""What a verification ended with: the principal, or why the token was not accepted."""


class FailureBudget(Protocol):
    """How many tokens a client may have refused, and how many it may have being verified
    at once (as many as it may still have refused)."""

    def client(self, asgi_scope: Scope) -> str:
        """The request's client key (its address), which the other methods take."""

    def reserve(self, client: str) -> bool:
        """Hold a unit for one verification: False when every unit left is held by a
        verification in progress (`wait`, then try again); 429 when the budget is spent."""

    async def wait(self, client: str) -> None:
        """Until one of `client`'s verifications in progress ends."""

    def release(self, client: str, *, refused: bool) -> None:
        """A verification of `client` ended: its unit is spent if the token was refused,
        given back otherwise."""


class _Flight:
    """One verification in progress, which the requests with the same token await."""

    __slots__ = ("ended", "outcome")

    def __init__(self) -> None:
        self.ended: anyio.Event | None = None  # made by the first request that waits
        self.outcome: Outcome | None = None  # None: it never finished (cancelled, failed)


class Verifications:
    """Verifies the tokens of one endpoint with `verifier`, charging `failures` (or None
    for no budget) by the rule above."""

    def __init__(self, verifier: TokenVerifier, failures: FailureBudget | None) -> None:
        self._verifier = verifier
        self._failures = failures
        self._flights: dict[str, _Flight] = {}  # token -> its verification in progress

    async def verify(self, token: str, asgi_scope: Scope) -> Outcome:
        """The outcome of `token`'s verification (shared with the concurrent requests that
        carry it); raises the budget's 429."""
        flight = self._flights.get(token)
        while flight is not None:  # another request is verifying this token: await it
            if flight.ended is None:
                flight.ended = anyio.Event()
            await flight.ended.wait()
            if flight.outcome is not None:
                return flight.outcome
            flight = self._flights.get(token)  # it never finished: verify it (again)
        flight = self._flights[token] = _Flight()
        try:
            flight.outcome = outcome = await self._verify(token, asgi_scope)
        finally:
            del self._flights[token]
            if flight.ended is not None:
                flight.ended.set()
        return outcome

    async def _verify(self, token: str, asgi_scope: Scope) -> Outcome:
        failures = self._failures
        if failures is None:
            return await self._outcome(token)
        client = failures.client(asgi_scope)
        while not failures.reserve(client):
            await failures.wait(client)
        refused = True  # until it ended otherwise: a cancelled verification is charged
        try:
            outcome = await self._outcome(token)
            refused = isinstance(outcome, InvalidToken)
        finally:
            failures.release(client, refused=refused)
        return outcome

    async def _outcome(self, token: str) -> Outcome:
        try:
            return await self._verifier.verify(token)
        except (InvalidToken, VerifierUnavailable) as exc:
            return exc
