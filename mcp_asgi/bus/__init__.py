"""The notification bus: how "something changed" reaches every listening stream.

    in_process   ChangeEvent, NotificationBus (the protocol), InProcessBus (the default)
    redis        RedisBus: the same protocol across processes and replicas (needs `redis`)

Imports only the telemetry names (for the Redis bus's metrics); never a request's
lifecycle, the server, http, input, legacy or the middleware.
"""

from mcp_asgi.bus.in_process import ChangeEvent, InProcessBus, NotificationBus

__all__ = ["ChangeEvent", "InProcessBus", "NotificationBus"]
