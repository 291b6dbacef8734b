"""Limits per client on a live uvicorn: requests per second, requests in flight, listen
streams, sessions; refused with 429, `Retry-After` and a JSON-RPC error."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from pydantic import ValidationError
from starlette.authentication import SimpleUser
from starlette.types import Scope

from mcp_asgi import McpSettings
from mcp_asgi.limits import ClientLimits, TooManyRequests, client_key
from mcp_asgi.limits.bucket import Buckets
from mcp_asgi.telemetry import names as a
from mcp_asgi.testing import McpResponse, McpTestClient, serve

from ..auth.apps import Ran
from ..auth.test_host_identity import host_authenticated
from ..helpers import Clock, Otel, Probe
from ..servers import LATEST, LegacyClient, legacy_app
from .apps import Seen, limits_app, read_all, status_of

pytestmark = pytest.mark.anyio


def assert_refused(response: McpResponse, limit: str) -> None:
    assert response.status == 429
    assert int(response.headers["retry-after"]) >= 1
    error = response.final["error"]
    assert error["code"] == -32603
    assert error["data"]["reason"] == "rate_limited"
    assert error["data"]["limit"] == limit


async def test_a_client_over_its_rate_is_told_when_to_come_back(otel: Otel) -> None:
    """rate_limit=1, burst 3: three calls pass, the fourth is 429 with Retry-After, counted
    by `mcp_asgi.limits.refused` under the limit's setting."""
    with serve(limits_app(Seen(), otel, rate_limit=1.0, rate_limit_burst=3)) as live:
        client = McpTestClient(live.url + "/mcp")
        for _ in range(3):
            assert await client.call_tool("echo", {"text": "hi"}) is not None
        response = await client.request("tools/call", {"name": "echo", "arguments": {"text": "x"}})
    assert_refused(response, "rate_limit")
    assert response.final["id"] is None  # refused before the body was read
    assert otel.total(a.LIMITS_REFUSED) == 1
    assert otel.total(a.LIMITS_REFUSED, {a.LIMIT: "rate_limit"}) == 1


@pytest.mark.parametrize("mode", ["json", "sse"])
async def test_requests_in_flight_are_bounded_per_client(mode: str) -> None:
    """max_requests_per_client=2: a third concurrent call is 429; once one ends (its
    client gone, the disconnect seen in either response mode), a new call passes."""
    seen = Seen()
    with serve(limits_app(seen, max_requests_per_client=2, response_mode=mode)) as live:
        client = McpTestClient(live.url + "/mcp")
        async with (
            client.stream("tools/call", {"name": "slow", "arguments": {"seconds": 30}}) as one,
            client.stream("tools/call", {"name": "slow", "arguments": {"seconds": 30}}),
        ):
            with anyio.fail_after(5):
                while seen.slow_started < 2:  # noqa: ASYNC110 - the server's thread
                    await anyio.sleep(0.01)
            third = await client.request("tools/call", {"name": "echo", "arguments": {"text": "x"}})
            await one.drop()
            with anyio.fail_after(5):
                while seen.slow_cancelled < 1:  # noqa: ASYNC110
                    await anyio.sleep(0.01)
            fourth = await client.call_tool("echo", {"text": "y"})
    assert_refused(third, "max_requests_per_client")
    assert fourth["content"][0]["text"] == "y"


async def test_listen_streams_are_bounded_per_client() -> None:
    """max_listen_streams_per_client=2: a third GET stream (2025 era) is 429."""
    with serve(legacy_app(Probe(), max_listen_streams_per_client=2)) as live:
        clients = [LegacyClient(live.url + "/mcp") for _ in range(3)]
        for client in clients:
            await client.initialize()
        async with clients[0].get_stream(), clients[1].get_stream():
            headers = {**clients[2].session_headers(), "accept": "text/event-stream"}
            del headers["content-type"]
            third = await clients[2].post(b"", headers, http_method="GET")
    assert_refused(third, "max_listen_streams_per_client")


async def test_sessions_are_bounded_per_client() -> None:
    """max_sessions_per_client=2: a third initialize from the same address is 429; ending
    a session makes room."""
    with serve(legacy_app(Probe(), max_sessions_per_client=2)) as live:
        first, second, third = (LegacyClient(live.url + "/mcp") for _ in range(3))
        await first.initialize()
        await second.initialize()
        refused = await third.post(
            third.body("initialize", {"protocolVersion": LATEST, "capabilities": {}}),
            {"content-type": "application/json"},
        )
        await first.delete()
        await third.initialize()
    assert_refused(refused, "max_sessions_per_client")


def test_the_client_is_its_principal_else_its_address() -> None:
    """Authenticated requests are counted by principal, wherever they come from."""
    user = SimpleUser("alice")
    assert client_key({"client": ("10.0.0.1", 5)}) == "addr:10.0.0.1"
    assert client_key({"client": None}) == "addr:unknown"
    one = client_key({"client": ("10.0.0.1", 5), "user": user})
    other = client_key({"client": ("10.0.0.2", 6), "user": user})
    assert one == other
    assert one.startswith("principal:")


def test_an_unauthenticated_client_is_its_network() -> None:
    """Without a principal, a client is its IPv6 /64 (client_ipv6_prefix) or its IPv4
    address (client_ipv4_prefix 32); an IPv4-mapped address counts as IPv4; a host that is
    no address (a Unix socket's) is itself."""

    def key(host: str, **prefixes: int) -> str:
        return client_key({"client": (host, 5)}, **prefixes)

    assert key("2001:db8:1:2:aaaa::1") == key("2001:db8:1:2:ffff:1:2:3")
    assert key("2001:db8:1:2::1") == "addr:2001:db8:1:2::/64"
    assert key("2001:db8:1:3::1") != key("2001:db8:1:2::1")
    assert key("2001:db8:1:2::1", ipv6_prefix=128) != key("2001:db8:1:2::2", ipv6_prefix=128)
    assert key("2001:db8:1:2::1", ipv6_prefix=48) == key("2001:db8:1:3::1", ipv6_prefix=48)
    assert key("::ffff:10.0.0.1") == key("10.0.0.1") == "addr:10.0.0.1"
    assert key("10.0.0.1", ipv4_prefix=24) == key("10.0.0.77", ipv4_prefix=24)
    assert key("10.0.0.1", ipv4_prefix=24) == "addr:10.0.0.0/24"
    assert key("/run/app.sock") == "addr:/run/app.sock"


async def initialize_from(port: int, local_host: str) -> int:
    """The status of an initialize sent to 127.0.0.1:`port` from the address `local_host`."""
    body = json.dumps(
        LegacyClient("http://x/mcp").body(
            "initialize", {"protocolVersion": LATEST, "capabilities": {}}
        )
    ).encode()
    head = (
        f"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\n"
        f"accept: application/json\r\ncontent-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    async with await anyio.connect_tcp("127.0.0.1", port, local_host=local_host) as sock:
        await sock.send(head.encode() + body)
        return status_of(await read_all(sock))


async def test_the_session_cap_counts_a_network_not_an_address() -> None:
    """client_ipv4_prefix=24, max_sessions_per_client=1 (live uvicorn): a session opened
    from 127.0.0.2 leaves none to 127.0.0.3, in the same /24; 127.0.1.2 gets one."""
    app = legacy_app(Probe(), max_sessions_per_client=1, client_ipv4_prefix=24)
    with serve(app) as live:
        statuses = [
            await initialize_from(live.port, host)
            for host in ("127.0.0.2", "127.0.0.3", "127.0.1.2")
        ]
    assert statuses == [200, 429, 200]


async def test_on_ipv6_the_client_is_its_64() -> None:
    """On a live uvicorn listening on [::1], the session of a client from ::1 counts
    against its /64."""
    app = legacy_app(Probe())
    with serve(app, host="::1") as live:
        client = LegacyClient(f"http://[::1]:{live.port}/mcp")
        await client.initialize()
        assert app._limits.held("sessions", "addr:::/64") == 1


@pytest.mark.parametrize(
    ("setting", "value"), [("client_ipv6_prefix", 129), ("client_ipv4_prefix", 0)]
)
def test_a_prefix_out_of_range_fails_at_start_up(setting: str, value: int) -> None:
    """A prefix no address has is refused when the settings are made, naming the setting."""
    with pytest.raises(ValidationError, match=setting):
        McpSettings.model_validate({setting: value})


async def test_behind_a_proxy_the_principal_is_limited_whatever_its_forwarded_address() -> None:
    """uvicorn trusting X-Forwarded-For from anyone (`--forwarded-allow-ips '*'`),
    rate_limit 1/s with a burst of 3: an anonymous client that writes a new address in the
    header each time gets a fresh budget each time (why the proxy must overwrite the
    header, docs/deployment.md); an authenticated one does not, its 4th call is 429."""

    async def four_calls(url: str, headers: dict[str, str]) -> list[int]:
        statuses = []
        for n in range(4):
            forwarded = {**headers, "x-forwarded-for": f"203.0.113.{n}"}
            client = McpTestClient(url + "/mcp", headers=forwarded)
            statuses.append((await client.request("tools/list")).status)
        return statuses

    limited: dict[str, Any] = {"rate_limit": 1.0, "rate_limit_burst": 3}
    with serve(limits_app(Seen(), **limited), forwarded_allow_ips="*") as live:
        anonymous = await four_calls(live.url, {})
    with serve(host_authenticated(Ran(), **limited), forwarded_allow_ips="*") as live:
        alice = await four_calls(live.url, {"x-user": "alice tools:read"})
    assert anonymous == [200, 200, 200, 200]
    assert alice == [200, 200, 200, 429]


def test_buckets_refill_and_idle_clients_are_forgotten() -> None:
    """A bucket refills at `rate`; many clients' full buckets do not pile up."""
    clock = Clock(0.0)
    limits = ClientLimits(
        rate=2.0, burst=1, requests=None, listen_streams=None, sessions=None, clock=clock
    )
    limits.check_rate("a")
    with pytest.raises(TooManyRequests) as refused:
        limits.check_rate("a")
    assert refused.value.headers == [(b"retry-after", b"1")]
    clock.now += 0.5
    limits.check_rate("a")
    for n in range(5000):
        limits.check_rate(f"c{n}")
    clock.now += 10
    limits.check_rate("last")
    assert len(limits._buckets or ()) < 10


def test_a_bucket_gives_its_burst_at_once_then_one_token_per_interval() -> None:
    """`burst` tokens at once; then a refusal says how long until the next (nothing taken);
    the level counts the tokens back at `rate`, never above `burst`."""
    clock = Clock(100.0)
    buckets = Buckets(rate=4.0, burst=3, clock=clock)
    assert buckets.level("a") == 3.0
    assert [buckets.take("a") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert buckets.level("a") == 0.0
    assert buckets.take("a") == 0.25  # refused: one token back in a quarter of a second
    assert buckets.take("a") == 0.25  # and the refusal took nothing
    clock.now += 0.5
    assert buckets.level("a") == 2.0
    assert buckets.take("a") == 0.0
    clock.now += 60
    assert buckets.level("a") == 3.0  # full, not more
    buckets.charge("a", 5)  # 3 - 5: two below empty, 0.75 s until one token is back
    assert buckets.take("a") == 0.75
    assert buckets.level("b") == 3.0  # another key's bucket is its own


@pytest.mark.parametrize("first", ["take", "charge"])
def test_the_client_that_sets_off_a_sweep_keeps_its_bucket(first: str) -> None:
    """A new client arriving when the table is large sets off the sweep of full buckets;
    what it takes (or is charged) is kept in the swept table, not lost with the old one."""
    clock = Clock(0.0)
    buckets = Buckets(rate=1.0, burst=2, clock=clock)
    for n in range(5000):
        buckets.take(f"c{n}")
    clock.now += 10  # every bucket full again: the next new client's arrival sweeps them
    if first == "take":
        assert buckets.take("new") == 0.0
        assert buckets.level("new") == 1.0
    else:
        buckets.charge("new", 1.5)
        assert buckets.level("new") == 0.5
    assert len(buckets) == 1


def test_a_bucket_without_rate_or_burst_is_refused() -> None:
    """A bucket that could never give a token is a mistake, not a silent refusal of all."""
    for rate, burst in ((0.0, 1), (-1.0, 1), (1.0, 0)):
        with pytest.raises(ValueError, match="positive rate"):
            Buckets(rate=rate, burst=burst, clock=Clock(0.0))


def test_a_charge_puts_the_bucket_in_debt_until_the_rate_pays_it_back() -> None:
    """`charge` takes tokens after the fact, below empty: the client waits until the rate
    has refilled the debt (Retry-After says how long), then gets its next token."""
    clock = Clock(0.0)
    limits = ClientLimits(
        rate=2.0, burst=4, requests=None, listen_streams=None, sessions=None, clock=clock
    )
    limits.check_rate("a")
    limits.charge("a", 9)  # 4 - 1 - 9 = -6 tokens: 3.5 s at 2 a second until one is back
    with pytest.raises(TooManyRequests) as refused:
        limits.check_rate("a")
    assert refused.value.headers == [(b"retry-after", b"4")]
    assert "(rate_limit)" in refused.value.message
    clock.now += 3.4
    with pytest.raises(TooManyRequests):
        limits.check_rate("a")
    clock.now += 0.1
    limits.check_rate("a")
    limits.check_rate("b")  # another client's bucket is its own


def test_holds_are_counted_and_given_back_once() -> None:
    """A hold counts until released; releasing twice changes nothing."""
    limits = ClientLimits(rate=None, burst=1, requests=1, listen_streams=None, sessions=None)
    hold = limits.hold("requests", "a")
    with pytest.raises(TooManyRequests):
        limits.hold("requests", "a")
    hold.release()
    hold.release()
    assert limits.held("requests", "a") == 0
    limits.hold("requests", "a")
    unlimited: Any = limits.hold("listen_streams", "a")
    unlimited.release()


def test_a_post_is_admitted_against_its_rate_then_its_requests_in_flight() -> None:
    """`admit` takes a token, then holds a request (each refusal a 429 naming its setting);
    `leave` gives the request back. `admit` answers the client's key (`key`) when it holds
    one. A refused request holds nothing; with neither limit on, nothing is held."""
    clock = Clock(0.0)
    a: Scope = {"type": "http", "client": ("10.0.0.1", 5000)}
    b: Scope = {"type": "http", "client": ("10.0.0.2", 5000)}
    limits = ClientLimits(
        rate=1.0, burst=2, requests=1, listen_streams=None, sessions=None, clock=clock
    )
    assert limits.admit(a) == "addr:10.0.0.1"
    assert limits.held("requests", "addr:10.0.0.1") == 1
    with pytest.raises(TooManyRequests) as full:
        limits.admit(a)  # a token left, but a request in flight already
    assert "(max_requests_per_client)" in full.value.message
    with pytest.raises(TooManyRequests) as rate:
        limits.admit(a)  # both tokens taken
    assert "(rate_limit)" in rate.value.message
    assert limits.held("requests", "addr:10.0.0.1") == 1
    limits.leave("addr:10.0.0.1")
    assert limits.held("requests", "addr:10.0.0.1") == 0
    clock.now += 1.0
    assert limits.admit(a) == "addr:10.0.0.1"
    assert limits.admit(b) == "addr:10.0.0.2"  # another client's count is its own
    off = ClientLimits(rate=None, burst=1, requests=None, listen_streams=None, sessions=None)
    assert off.admit(a) is None
    assert off.held("requests", "addr:10.0.0.1") == 0
