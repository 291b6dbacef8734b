"""The shared-state store: small pieces of state every process and replica can reach.

    base     StateStore (the protocol every store implements), Entry, START,
             StoreUnavailable (what every operation raises when the store is out of reach),
             slot_tag (names that live together on a Redis Cluster)
    memory   MemoryStore: in this process (the default)
    redis    RedisStore: shared through Redis or a Redis Cluster (`pip install
             'mcp-asgi[redis]'`)
    outage   Outage: an unreachable Redis logged once, retried with a capped backoff
    url      store_from_url: the store a URL names

Used by the 2025-era sessions (their records, the event streams they resume from, the
answers to server-to-client requests) and meant for the Tasks extension too. Imports
nothing from the rest of the package: never protocol, lifecycle, server, http, input, bus,
legacy or the middleware.
"""

from mcp_asgi.store.base import START, Entry, StateStore, StoreUnavailable, slot_tag
from mcp_asgi.store.memory import MemoryStore
from mcp_asgi.store.url import store_from_url

__all__ = [
    "START",
    "Entry",
    "MemoryStore",
    "StateStore",
    "StoreUnavailable",
    "slot_tag",
    "store_from_url",
]
