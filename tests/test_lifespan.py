"""The middleware's side of a lifespan (`pass_lifespan`, `fail_startup`), with scripted
receive and send."""

from __future__ import annotations

from typing import Any

from starlette.types import Message, Receive, Scope, Send

from mcp_asgi.lifespan import fail_startup, pass_lifespan

LIFESPAN: Scope = {"type": "lifespan", "asgi": {"version": "3.0"}}


class Script:
    """The ASGI server's side: it sends startup then shutdown, and records every message
    and event in `log`."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self._incoming: list[Message] = [
            {"type": "lifespan.startup"},
            {"type": "lifespan.shutdown"},
        ]

    async def receive(self) -> Message:
        message = self._incoming.pop(0)
        self.log.append("server sent " + message["type"])
        return message

    async def send(self, message: Message) -> None:
        self.log.append("server got " + message["type"])

    def started(self) -> None:
        self.log.append("started")

    async def shutting_down(self) -> None:
        self.log.append("shutting down")


async def test_an_app_that_ignores_the_lifespan_is_stood_in_for() -> None:
    """An app that returns at once: startup completes, the shutdown is still seen (before
    it completes)."""
    script = Script()

    async def ignoring(scope: Scope, receive: Receive, send: Send) -> None:
        return None

    await pass_lifespan(
        ignoring,
        LIFESPAN,
        script.receive,
        script.send,
        started=script.started,
        shutting_down=script.shutting_down,
    )
    assert script.log == [
        "server sent lifespan.startup",
        "started",
        "server got lifespan.startup.complete",
        "server sent lifespan.shutdown",
        "shutting down",
        "server got lifespan.shutdown.complete",
    ]


async def test_an_app_that_takes_part_hears_the_shutdown_after_the_middleware() -> None:
    """The app answers the lifespan itself; the middleware learns of its startup and is
    told of the shutdown before the app."""
    script = Script()

    async def taking_part(scope: Scope, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            script.log.append("app got " + message["type"])
            await send({"type": message["type"] + ".complete"})
            if message["type"] == "lifespan.shutdown":
                return

    await pass_lifespan(
        taking_part,
        LIFESPAN,
        script.receive,
        script.send,
        started=script.started,
        shutting_down=script.shutting_down,
    )
    assert script.log == [
        "server sent lifespan.startup",
        "app got lifespan.startup",
        "started",
        "server got lifespan.startup.complete",
        "server sent lifespan.shutdown",
        "shutting down",
        "app got lifespan.shutdown",
        "server got lifespan.shutdown.complete",
    ]


async def test_a_failed_startup_says_why() -> None:
    """`fail_startup` takes the startup and answers it failed, with the reason."""
    script = Script()
    sent: list[dict[str, Any]] = []

    async def send(message: Message) -> None:
        sent.append(dict(message))

    await fail_startup("a name already taken", script.receive, send)
    assert sent == [{"type": "lifespan.startup.failed", "message": "a name already taken"}]
