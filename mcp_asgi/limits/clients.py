"""`ClientLimits`: the per-client limits of one endpoint.

::

    key(asgi_scope)              the principal's key, else "addr:<the client's network>"
                                 (its address; for IPv6 its /64, settings client_ipv*_prefix)
    check_rate(key)              a token from the client's bucket, or 429
    admit(asgi_scope)            a POST let in: `check_rate`, then one more request held, or
                                 429; its key when one is held, which `leave(key)` gives back
    charge(key, requests)        take `requests` more tokens after the fact (a large answer
                                 served): the bucket may go into debt, paid back at the rate
    hold(kind, key)              one more request / listen stream / session / task held, or
                                 429; the returned `Hold` gives it back (idempotent)
    check(kind, key)             429 if `hold` would refuse now (nothing is held)

Counts live in one dict per kind, keyed by client; a client holding nothing is not in it,
so the tables are bounded by what is held. Everything runs on the event loop: no locks.
"""

from __future__ import annotations

import functools
import ipaddress
import math
import time
from collections.abc import Callable
from typing import Final, Literal

from starlette.types import Scope

from mcp_asgi.auth.principal import PRINCIPAL_KEY, principal_key
from mcp_asgi.limits.bucket import Buckets
from mcp_asgi.protocol.jsonrpc import INTERNAL_ERROR, ProtocolError

Kind = Literal["requests", "listen_streams", "sessions", "tasks"]
_SETTING: Final[dict[Kind, str]] = {
    "requests": "max_requests_per_client",
    "listen_streams": "max_listen_streams_per_client",
    "sessions": "max_sessions_per_client",
    "tasks": "max_tasks_per_client",
}


class TooManyRequests(ProtocolError):
    """429 with `Retry-After`: a client went over one of its limits."""

    def __init__(self, detail: str, retry_after: float, limit: str) -> None:
        seconds = max(1, math.ceil(retry_after))
        super().__init__(
            429,
            INTERNAL_ERROR,
            f"Too Many Requests: {detail} ({limit})",
            {"reason": "rate_limited", "limit": limit, "retryAfter": seconds},
            headers=[(b"retry-after", str(seconds).encode())],
        )
        self.limit = limit
        """The setting whose limit was reached (`rate_limit`, `max_requests_per_client`, ...)."""


def client_key(asgi_scope: Scope, *, ipv4_prefix: int = 32, ipv6_prefix: int = 64) -> str:
    """Who a request is, for its limits: the verified (or host app's) principal, else the
    client's network: its IPv4 address's first `ipv4_prefix` bits, its IPv6 address's
    first `ipv6_prefix` bits (one host is commonly given a whole /64). Behind a proxy, the
    server must be told to trust its forwarded headers (e.g. uvicorn's
    `--forwarded-allow-ips`), or every client is the proxy."""
    # an identity is only where the endpoint or the host app put one (`principal_key`)
    if PRINCIPAL_KEY in asgi_scope or "user" in asgi_scope or "auth" in asgi_scope:
        principal = principal_key(asgi_scope)
        if principal is not None:
            return "principal:" + principal
    client = asgi_scope.get("client")
    if not client:
        return "addr:unknown"
    host = str(client[0])
    if ipv4_prefix == 32 and ":" not in host:  # the common case, without parsing
        return "addr:" + host
    return "addr:" + network_of(host, ipv4_prefix, ipv6_prefix)


@functools.lru_cache(maxsize=4096)  # parsing costs microseconds; a client sends many requests
def network_of(host: str, ipv4_prefix: int, ipv6_prefix: int) -> str:
    """The network `host` belongs to, e.g. `2001:db8:1:2::/64`; an IPv4-mapped IPv6
    address counts as IPv4; a host that is no IP address (a Unix socket's) is itself."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    prefix = ipv6_prefix
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if isinstance(address, ipaddress.IPv4Address):
        prefix = ipv4_prefix
    if prefix == address.max_prefixlen:
        return str(address)
    return str(ipaddress.ip_network((address, prefix), strict=False))


class Hold:
    """One thing a client holds; `release()` gives it back (idempotent)."""

    __slots__ = ("_counts", "_key")

    def __init__(self, counts: dict[str, int] | None, key: str) -> None:
        self._counts = counts  # the counts of its kind it was counted in; None once given back
        self._key = key

    def release(self) -> None:
        counts, self._counts = self._counts, None
        if counts is not None:
            _give_back(counts, self._key)


def _rate_refused(wait: float) -> TooManyRequests:
    """The 429 of a client whose bucket has no token for `wait` seconds more."""
    return TooManyRequests("request rate limit reached", wait, "rate_limit")


def _give_back(counts: dict[str, int], key: str) -> None:
    left = counts[key] - 1
    if left:
        counts[key] = left
    else:
        del counts[key]


_NOTHING: Final = Hold(None, "")


class ClientLimits:
    """Rate and count limits per client; a limit of None is off."""

    def __init__(
        self,
        *,
        rate: float | None,
        burst: int,
        requests: int | None,
        listen_streams: int | None,
        sessions: int | None,
        tasks: int | None = None,
        retry_sessions_after: float = 60.0,
        ipv4_prefix: int = 32,
        ipv6_prefix: int = 64,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`ipv4_prefix`, `ipv6_prefix`: how many leading bits of an address name a client
        (`client_key`)."""
        self._buckets = Buckets(rate=rate, burst=burst, clock=clock) if rate else None
        self._limits: dict[Kind, int | None] = {
            "requests": requests,
            "listen_streams": listen_streams,
            "sessions": sessions,
            "tasks": tasks,
        }
        self._held: dict[Kind, dict[str, int]] = {kind: {} for kind in self._limits}
        # every POST's: its requests in flight, without a look-up by kind
        self._requests_limit = requests
        self._requests_held = self._held["requests"]
        self._retry_sessions_after = retry_sessions_after
        self._ipv4_prefix = ipv4_prefix
        self._ipv6_prefix = ipv6_prefix

    @property
    def limits_requests(self) -> bool:
        """Whether requests are limited (a rate, or how many in flight): else `check_rate`,
        `admit` and `hold("requests", ...)` ignore their key, which need not be worked out."""
        return self._buckets is not None or self._limits["requests"] is not None

    def key(self, asgi_scope: Scope) -> str:
        """The client a request counts against (`client_key`, with this endpoint's prefixes)."""
        # `client_key`'s common case inline (an address, no identity): no call for it
        client = asgi_scope.get("client")
        if (
            client
            and self._ipv4_prefix == 32
            and PRINCIPAL_KEY not in asgi_scope
            and "user" not in asgi_scope
            and "auth" not in asgi_scope
        ):
            host = client[0]
            if type(host) is str and ":" not in host:
                return "addr:" + host
        return client_key(asgi_scope, ipv4_prefix=self._ipv4_prefix, ipv6_prefix=self._ipv6_prefix)

    def held(self, kind: Kind, key: str) -> int:
        """How many of `kind` the client `key` holds now."""
        return self._held[kind].get(key, 0)

    def check_rate(self, key: str) -> None:
        """Take one request from the client's budget; 429 when it has none left."""
        buckets = self._buckets
        if buckets is not None and (wait := buckets.take(key)):
            raise _rate_refused(wait)

    def charge(self, key: str, requests: int) -> None:
        """Count `requests` more against the client's rate (what was just served weighed as
        much); its bucket may go below empty, and its next requests get 429 until the rate
        has paid the debt back."""
        if self._buckets is not None and requests > 0:
            self._buckets.charge(key, requests)

    def check(self, kind: Kind, key: str) -> None:
        """429 when client `key` already holds its limit of `kind` (nothing is held)."""
        self._refuse_if_full(kind, key)

    def hold(self, kind: Kind, key: str) -> Hold:
        """One more `kind` held by client `key`; 429 when it already holds its limit."""
        counts = self._count_in(kind, key)
        return _NOTHING if counts is None else Hold(counts, key)

    def admit(self, asgi_scope: Scope) -> str | None:
        """A POST let in: its client (`key`) takes a token from its bucket (`check_rate`),
        then holds one more request; 429 when either is at its limit. The client's key when
        a request is held (`leave(key)` gives it back once the request is over), None when
        requests in flight are not limited (`hold("requests")` without a `Hold`: every
        POST's)."""
        # `check_rate`, written out, and the count without the look-ups by kind: every POST's
        key = self.key(asgi_scope)
        buckets = self._buckets
        if buckets is not None and (wait := buckets.take(key)):
            raise _rate_refused(wait)
        limit = self._requests_limit
        if limit is None:
            return None
        self._count(self._requests_held, limit, "requests", key)
        return key

    def leave(self, key: str) -> None:
        """A request `admit` held is over."""
        _give_back(self._requests_held, key)

    def _count_in(self, kind: Kind, key: str) -> dict[str, int] | None:
        """Count one more `kind` for client `key` (429 at its limit): the counts it is in,
        or None when `kind` is not limited."""
        limit = self._limits[kind]
        if limit is None:
            return None
        counts = self._held[kind]
        self._count(counts, limit, kind, key)
        return counts

    def _count(self, counts: dict[str, int], limit: int, kind: Kind, key: str) -> None:
        """One more in `counts` (of `kind`) for client `key`; 429 at `limit`."""
        count = counts.get(key, 0)
        if count >= limit:  # `_refuse_if_full`'s refusal
            self._refuse_if_full(kind, key)
        counts[key] = count + 1

    def _refuse_if_full(self, kind: Kind, key: str) -> int:
        """How many of `kind` client `key` holds; 429 when that is its limit."""
        count = self._held[kind].get(key, 0)
        limit = self._limits[kind]
        if limit is not None and count >= limit:
            retry = self._retry_sessions_after if kind == "sessions" else 1.0
            raise TooManyRequests(
                f"at most {limit} {kind.replace('_', ' ')} per client", retry, _SETTING[kind]
            )
        return count
