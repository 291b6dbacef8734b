"""The old import path of `mcp_asgi.bus.redis`, kept for code that names it."""

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
