"""A TCP proxy on 127.0.0.1 that a test can sever: every connection through it is closed at
once on both sides (real sockets, as a network cut looks to the client and the server), and
the next connections may go to another upstream (a second replica); or held: what the
upstream sends waits in the proxy until it is released (a slow link, in one direction)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from anyio.abc import SocketStream


class CutProxy:
    """`async with CutProxy.running(port) as proxy:` then `proxy.url`, `await proxy.cut()`."""

    def __init__(self, target: int) -> None:
        self.target = target
        """The upstream port new connections go to."""
        self.port = 0
        self.connections = 0
        """How many connections came through so far."""
        self._open: dict[anyio.CancelScope, anyio.Event] = {}  # each one's end
        self._flowing = anyio.Event()
        self._flowing.set()

    def hold(self) -> None:
        """From now on, what the upstream sends waits here (the client's side still goes)."""
        if self._flowing.is_set():
            self._flowing = anyio.Event()

    def release(self) -> None:
        """Let what the upstream sent through, in order."""
        self._flowing.set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @classmethod
    @asynccontextmanager
    async def running(cls, target: int) -> AsyncIterator[CutProxy]:
        proxy = cls(target)
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        proxy.port = listener.extra(anyio.abc.SocketAttribute.local_port)
        async with listener, anyio.create_task_group() as tg:
            tg.start_soon(listener.serve, proxy._relay)
            try:
                yield proxy
            finally:
                tg.cancel_scope.cancel()

    async def cut(self) -> None:
        """Close every open connection, client side and server side."""
        ends = list(self._open.items())
        for scope, _ in ends:
            scope.cancel()
        with anyio.fail_after(5):
            for _, ended in ends:
                await ended.wait()

    async def _relay(self, client: SocketStream) -> None:
        self.connections += 1
        async with client:
            try:
                upstream = await anyio.connect_tcp("127.0.0.1", self.target)
            except OSError:
                return
            async with upstream:
                ended = anyio.Event()
                with anyio.CancelScope() as scope:
                    self._open[scope] = ended
                    try:
                        async with anyio.create_task_group() as tg:
                            tg.start_soon(_pipe, client, upstream, tg.cancel_scope)
                            tg.start_soon(_pipe, upstream, client, tg.cancel_scope, self)
                    finally:
                        del self._open[scope]
        ended.set()  # both sockets closed


async def _pipe(
    source: SocketStream,
    sink: SocketStream,
    done: anyio.CancelScope,
    gate: CutProxy | None = None,
) -> None:
    try:
        async for chunk in source:
            if gate is not None:
                await gate._flowing.wait()
            await sink.send(chunk)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        pass
    done.cancel()


async def lines(stream: Any) -> AsyncIterator[str]:
    """The lines a child process writes (its stdout, as anyio gives it), as they come."""
    buffer = b""
    async for chunk in stream:
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            yield line.decode()
