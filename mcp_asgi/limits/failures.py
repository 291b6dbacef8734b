"""`AuthFailures`: how many refused access tokens a client may send (`auth_failure_rate`),
and so how many of its tokens may be verified at once."""

from __future__ import annotations

import time
from collections.abc import Callable

import anyio
from starlette.types import Scope

from mcp_asgi.limits.bucket import Buckets
from mcp_asgi.limits.clients import TooManyRequests, client_key


class AuthFailures:
    """A token bucket per client (its network, as `client_key` keys an anonymous client: a
    request whose token is being verified has no principal yet), spent by each refused
    token; the `FailureBudget` of `Authenticator` (its rule: `mcp_asgi.auth.verifications`).

    Each verification in progress holds one of the units the bucket has left, given back
    when it ends unless the token was refused: a client may have at most as many tokens
    being verified as it may still have refused, so its refusals never overrun the budget;
    once it is spent, its requests get 429 before their tokens reach the authorization
    server. The bucket of a client is stored only once a token of it was refused."""

    def __init__(
        self,
        *,
        rate: float,
        burst: int,
        ipv4_prefix: int = 32,
        ipv6_prefix: int = 64,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._buckets = Buckets(rate=rate, burst=burst, clock=clock)
        self._rate = rate
        self._ipv4_prefix = ipv4_prefix
        self._ipv6_prefix = ipv6_prefix
        self._held: dict[str, int] = {}  # client -> its verifications in progress
        self._ended: dict[str, anyio.Event] = {}  # client -> set when one of them ends

    def client(self, asgi_scope: Scope) -> str:
        """The request's client key (its network)."""
        return client_key(asgi_scope, ipv4_prefix=self._ipv4_prefix, ipv6_prefix=self._ipv6_prefix)

    def reserve(self, client: str) -> bool:
        """Hold a unit for a verification: False when all the units left are held (`wait`);
        429 when the bucket has less than one."""
        level = self._buckets.level(client)
        if level < 1.0:
            wait = (1.0 - level) / self._rate
            raise TooManyRequests("too many refused access tokens", wait, "auth_failure_rate")
        held = self._held.get(client, 0)
        if level - held < 1.0:
            return False
        self._held[client] = held + 1
        return True

    async def wait(self, client: str) -> None:
        """Until one of `client`'s verifications in progress ends."""
        ended = self._ended.get(client)
        if ended is None:
            ended = self._ended[client] = anyio.Event()
        await ended.wait()

    def release(self, client: str, *, refused: bool) -> None:
        """A verification of `client` ended: its unit is spent if the token was refused,
        given back otherwise; the requests waiting for a unit try again."""
        held = self._held[client] - 1
        if held:
            self._held[client] = held
        else:
            del self._held[client]
        if refused:
            self._buckets.charge(client, 1.0)
        ended = self._ended.pop(client, None)
        if ended is not None:
            ended.set()
