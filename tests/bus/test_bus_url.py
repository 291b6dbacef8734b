"""`McpSettings.bus_url`: the middleware makes the Redis bus when it is built, and attaches
it to the server only when the app runs — building a middleware never changes its server."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_asgi import McpServer, McpSettings
from mcp_asgi.bus import InProcessBus
from mcp_asgi.bus.redis import RedisBus

from ..helpers import mcp_app

URL = "redis://127.0.0.1:1/0"  # never connected to: these tests do not publish


async def lifespan_startup(app: Any) -> None:
    """Run the app's lifespan up to its startup, then shut it down."""
    messages = iter([{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}])
    sent: list[str] = []

    async def receive() -> dict[str, str]:
        return next(messages)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message["type"])

    await app({"type": "lifespan", "asgi": {"version": "3.0"}}, receive, send)
    assert sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]


def test_building_the_middleware_leaves_the_server_alone() -> None:
    """A middleware with `bus_url` is built without touching the server's bus."""
    server = McpServer("bus-url")
    before = server.bus
    mcp_app(server, bus_url=URL)
    assert server.bus is before
    assert isinstance(server.bus, InProcessBus)


async def test_the_bus_is_attached_when_the_app_starts() -> None:
    """The lifespan startup attaches the Redis bus the settings name."""
    server = McpServer("bus-url")
    app = mcp_app(server, bus_url=URL, bus_channel="ours")
    await lifespan_startup(app)
    assert isinstance(server.bus, RedisBus)
    assert (server.bus.url, server.bus.channel) == (URL, "ours")


async def test_a_second_middleware_on_the_same_url_keeps_the_bus() -> None:
    """Two middlewares of one server with the same bus settings share the first bus."""
    server = McpServer("bus-url")
    first, second = mcp_app(server, bus_url=URL), mcp_app(server, bus_url=URL)
    await lifespan_startup(first)
    attached = server.bus
    await lifespan_startup(second)
    assert server.bus is attached


def test_a_server_given_its_own_bus_refuses_bus_url() -> None:
    """`McpServer(bus=...)` and `McpSettings.bus_url` together are a configuration error,
    raised when the middleware is built."""
    server = McpServer("bus-url", bus=InProcessBus())
    with pytest.raises(ValueError, match="both"):
        mcp_app(server, bus_url=URL)


def test_settings_are_read_once() -> None:
    """The middleware keeps the settings it was built with (a copy when `path` is given)."""
    settings = McpSettings(bus_url=URL)
    server = McpServer("bus-url")
    from mcp_asgi import McpMiddleware

    from ..helpers import host_app

    middleware = McpMiddleware(host_app(), server=server, settings=settings, path="/other")
    assert middleware.settings.path == "/other"
    assert settings.path == "/mcp"


def test_redis_timeout_must_be_shorter_than_the_request_deadline() -> None:
    """A request would time out before Redis were found unreachable: refused at start-up,
    naming both settings."""
    with pytest.raises(ValueError, match=r"redis_timeout .* max_request_duration"):
        McpSettings(bus_url=URL, redis_timeout=2.0, max_request_duration=2.0)
    McpSettings(bus_url=URL, redis_timeout=1.0, max_request_duration=2.0)


@pytest.mark.parametrize(
    "setting", [{"redis_timeout": 1.0}, {"redis_retry_max": 1.0}, {"bus_channel": "mine"}]
)
def test_a_redis_setting_without_bus_url_is_refused(setting: dict[str, object]) -> None:
    """Without bus_url nothing reads the Redis settings: one given is a mistake, refused
    naming it, never ignored."""
    (name,) = setting
    with pytest.raises(ValueError, match=rf"{name} set, but .* needs bus_url"):
        McpSettings(**setting)  # type: ignore[arg-type]


async def test_health_is_ok_without_redis_and_degraded_when_it_is_out_of_reach() -> None:
    """`health()`: all local without `bus_url`; with a Redis nobody listens on, degraded
    (the store's PING is refused) and the bus not connected; the bus gets the timeouts."""
    alone = mcp_app(McpServer("health"))
    assert await alone.health() == {"status": "ok", "store": "local", "bus": "local"}
    server = McpServer("health")
    app = mcp_app(server, bus_url=URL, redis_timeout=0.3, redis_retry_max=0.7)
    report = await app.health()
    assert report == {"status": "degraded", "store": "unreachable", "bus": "reconnecting"}
    await lifespan_startup(app)
    assert isinstance(server.bus, RedisBus)
    assert server.bus.timeout == 0.3
