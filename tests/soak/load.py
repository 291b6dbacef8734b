"""The soak's load beyond the fleet's (tests/fleet/load.py: SDK calls in both eras, listen
streams, tasks): calls cancelled at random by a client that closes its socket mid-call
(2026-07-28 and 2025-era), 2025-era sessions that come and go (the SDK's, ended with
DELETE, and raw ones simply abandoned to expire), listen streams opened and closed, and
tools-changed announcements for the listeners to hear. Each driver loops until `stop`."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field

import anyio
from mcp import Client

from mcp_asgi.testing import McpTestClient

from ..helpers import trigger
from ..servers import MODERN, LegacyClient

PACED = {"name": "paced", "arguments": {"steps": 40, "delay": 0.05}}
"""A 2-second call streaming progress: long enough to be cut at a random moment."""


@dataclass
class Counts:
    """What the soak's own drivers did: `requests` sent, and outcomes by kind."""

    requests: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)

    def note(self, outcome: str, requests: int = 1) -> None:
        self.requests += requests
        self.outcomes[outcome] += 1


async def _pause(rng: random.Random) -> None:
    """A pause between iterations, so a failing driver does not spin."""
    await anyio.sleep(rng.uniform(0.0, 0.2))


async def cancels(url: str, counts: Counts, stop: anyio.Event, seed: int) -> None:
    """A 2026-07-28 call of `paced`, its socket closed after a random wait (0 to 2.5 s: the
    call may be cut before its first progress, mid-stream, or after it ended)."""
    rng, mcp = random.Random(seed), McpTestClient(url + "/mcp")
    while not stop.is_set():
        try:
            async with mcp.stream("tools/call", PACED, progress=True) as stream:
                await stream.read_head()
                await anyio.sleep(rng.uniform(0.0, 2.5))
                await stream.drop()
            counts.note("cancelled")
        except Exception as error:
            counts.note(f"cancel error: {type(error).__name__}: {error}")
        await _pause(rng)


async def legacy_cancels(url: str, counts: Counts, stop: anyio.Event, seed: int) -> None:
    """A 2025-era session per call: initialize, a `paced` call whose socket is closed at a
    random moment (legacy_disconnect_cancels), then DELETE every other time; the rest are
    left to expire."""
    rng = random.Random(seed)
    while not stop.is_set():
        client = LegacyClient(url + "/mcp")
        try:
            await client.initialize()
            async with client.open("tools/call", PACED, progress=True) as stream:
                await stream.read_head()
                await anyio.sleep(rng.uniform(0.0, 2.5))
                await stream.drop()
            requests = 3
            if rng.random() < 0.5:
                await client.delete()
                requests += 1
            counts.note("legacy cancelled", requests)
        except Exception as error:
            counts.note(f"legacy cancel error: {type(error).__name__}: {error}")
        await _pause(rng)


async def sessions(url: str, counts: Counts, stop: anyio.Event, seed: int) -> None:
    """2025-era sessions that come and go: the SDK's (initialize, a few calls, DELETE on
    close) and, one time in three, a raw one that calls once and is abandoned."""
    rng = random.Random(seed)
    while not stop.is_set():
        try:
            if rng.random() < 1 / 3:
                client = LegacyClient(url + "/mcp")
                await client.initialize()
                await client.call("tools/call", {"name": "echo", "arguments": {"text": "x"}})
                counts.note("session abandoned", 3)
            else:
                calls = rng.randint(1, 4)
                async with Client(url + "/mcp", mode="legacy", cache=None) as sdk:
                    for n in range(calls):
                        await sdk.call_tool("echo", {"text": f"s{n}"})
                counts.note("session closed", calls + 3)
        except Exception as error:
            counts.note(f"session error: {type(error).__name__}: {error}")
        await _pause(rng)


async def listens(url: str, counts: Counts, stop: anyio.Event, seed: int) -> None:
    """Listen streams opened and closed by the client after 0.5 to 4 seconds."""
    rng = random.Random(seed)
    async with Client(url + "/mcp", mode=MODERN, cache=None) as client:
        while not stop.is_set():
            try:
                async with client.listen(tools_list_changed=True) as subscription:
                    with anyio.move_on_after(rng.uniform(0.5, 4.0)):
                        async for _ in subscription:
                            counts.outcomes["listen event"] += 1
                counts.note("listen closed")
            except Exception as error:
                counts.note(f"listen error: {type(error).__name__}: {error}")
            await _pause(rng)


async def announcer(url: str, counts: Counts, stop: anyio.Event) -> None:
    """A tools-changed announcement every 2 seconds (through the Redis bus)."""
    while not stop.is_set():
        try:
            await trigger(url, "POST", "/notify")
            counts.note("announced")
        except Exception as error:
            counts.note(f"announce error: {type(error).__name__}: {error}")
        await anyio.sleep(2.0)
