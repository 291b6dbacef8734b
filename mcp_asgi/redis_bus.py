"""`mcp_asgi.redis_bus`: the public import path of the Redis bus (`pip install mcp-asgi[redis]`);
defined in `mcp_asgi.bus.redis`."""

from mcp_asgi.bus.redis import (
    DEFAULT_CHANNEL,
    RedisBus,
    bus_from_url,
)

__all__ = [
    "DEFAULT_CHANNEL",
    "RedisBus",
    "bus_from_url",
]
