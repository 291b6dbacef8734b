"""Lines in and out of a pipe, and the reply writer of one request on it.

    LineReader   one task (`run`) reads stdin into a buffer, ahead of the lines taken only
                 up to `read_ahead` bytes (then the client's writes wait), and sees EOF at
                 once even while the connection takes no lines
    LineWriter   lines are queued (a writer waits only while `max_queued` bytes wait) and
                 one task (`run`) writes what is queued in a worker thread, many lines a
                 write, so a client slow to read never blocks the loop; `close()` writes
                 what is queued and nothing after, `abort()` drops it too

Reading waits on the event loop for the pipe to be readable (no thread is left blocked in a
read when the server stops). A line is never cut by another.
"""

from __future__ import annotations

import os
import select
from collections import deque
from collections.abc import Callable
from typing import Any, Final

import anyio
import anyio.to_thread

from mcp_asgi.http.reply import ReplyState, ReplyWriter, dump, encode_reply

_CHUNK: Final = 1 << 16
READ_AHEAD: Final = 1 << 20
"""Bytes of stdin read ahead of the lines taken (beyond one line being read)."""
MAX_QUEUED: Final = 1 << 20
"""Bytes of replies queued for stdout before a writer waits for the pipe."""


class LineReader:
    """The lines of a file descriptor, without their end of line; None once EOF is seen
    (lines read but not taken by then are dropped: the client is gone)."""

    def __init__(self, fd: int, *, max_line: int, read_ahead: int = READ_AHEAD) -> None:
        self._fd = fd
        self._max_line = max_line
        self._read_ahead = read_ahead
        self._buffer = bytearray()
        self._discarding = False  # the rest of an over-long line is being skipped
        self._wanted = False  # readline() waits for more than the buffer holds
        self._filled = anyio.Event()  # more bytes, or EOF
        self._taken = anyio.Event()  # readline() took a line or wants more
        self._pollable = True
        self.eof = anyio.Event()

    async def run(self) -> None:
        """Read the descriptor until EOF: while a line is wanted or fewer than
        `read_ahead` bytes wait in the buffer."""
        while True:
            if not self._wanted and len(self._buffer) >= self._read_ahead:
                self._taken = anyio.Event()
                await self._taken.wait()
                continue
            chunk = await self._read()
            if not chunk:
                break
            if self._discarding:
                end = chunk.find(b"\n")
                if end < 0:
                    continue
                self._discarding = False
                chunk = chunk[end + 1 :]
            self._buffer += chunk
            self._wanted = False
            self._filled.set()
        self.eof.set()
        self._filled.set()

    async def readline(self) -> bytes | None:
        """The next line (an over-long one raises `ValueError`, and is skipped), or None."""
        while not self.eof.is_set():
            end = self._buffer.find(b"\n")
            if end >= 0:
                line = bytes(self._buffer[:end])
                del self._buffer[: end + 1]
                self._taken.set()
                if len(line) > self._max_line:
                    raise ValueError("line too long")
                return line.rstrip(b"\r")
            if len(self._buffer) > self._max_line:
                self._buffer.clear()
                self._discarding = True
                self._taken.set()
                raise ValueError("line too long")
            self._wanted = True
            self._filled = anyio.Event()
            self._taken.set()
            await self._filled.wait()
        return None

    async def _read(self) -> bytes:
        """Wait on the event loop until the pipe is readable, then read what is there (a
        pipe's read does not block then); a descriptor the loop cannot watch (a regular
        file) is read in a worker thread."""
        while self._pollable:
            try:
                await anyio.wait_readable(self._fd)
            except (OSError, NotImplementedError, ValueError):
                self._pollable = False
                break
            try:
                return os.read(self._fd, _CHUNK)
            except BlockingIOError:  # a non-blocking descriptor another reader emptied
                continue
        return await anyio.to_thread.run_sync(os.read, self._fd, _CHUNK, abandon_on_cancel=True)


def _always() -> bool:
    return True


class LineWriter:
    """Whole lines to a file descriptor, in the order written; `broken` once the pipe broke."""

    def __init__(self, fd: int, *, max_queued: int = MAX_QUEUED) -> None:
        self._fd = fd
        self._max_queued = max_queued
        self._queue: deque[tuple[bytes, Callable[[], bool]]] = deque()
        self._queued = 0  # bytes
        self._writing = False
        self._closed = False
        self._queued_event = anyio.Event()  # a line was queued, or closed
        self._room = anyio.Event()  # the queue was taken, or closed
        self.broken = False

    async def write(self, line: bytes, still: Callable[[], bool] = _always) -> bool:
        """Queue `line` and a newline, to be written if `still()` holds when its turn
        comes; False once closed or broken."""
        while self._queued >= self._max_queued and not self._done:
            room = self._room
            await room.wait()
        if self._done:
            return False
        self._queue.append((line, still))
        self._queued += len(line) + 1
        self._queued_event.set()
        return True

    @property
    def _done(self) -> bool:
        return self._closed or self.broken

    def close(self) -> None:
        """Queue nothing more: what is queued is still written, then `run` returns."""
        self._closed = True
        self._queued_event.set()
        self._room.set()

    def abort(self) -> None:
        """`close()`, and drop what is queued (the reader is gone)."""
        self.close()
        self._queue.clear()
        self._queued = 0

    async def flushed(self) -> None:
        """Wait until nothing is queued or being written."""
        while self._queue or self._writing:
            room = self._room
            await room.wait()

    async def run(self) -> None:
        """Write what is queued, many lines a write, until closed and empty (or broken)."""
        while not self.broken:
            if not self._queue:
                if self._closed:
                    return
                self._queued_event = anyio.Event()
                await self._queued_event.wait()
                continue
            data = b"".join(line + b"\n" for line, still in self._queue if still())
            self._queue.clear()
            self._queued = 0
            self._writing = True
            try:
                if data:
                    await anyio.to_thread.run_sync(_write_all, self._fd, data)
            except OSError:
                self.broken = True
            finally:
                self._writing = False
                room, self._room = self._room, anyio.Event()
                room.set()
        self._room.set()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:  # a non-blocking descriptor: wait until it takes more
            select.select([], [fd], [])


async def _no_send(message: Any) -> None:  # pragma: no cover - never called
    raise RuntimeError("a stdio reply has no ASGI send")


class StdioWriter(ReplyWriter):
    """One request's replies on the pipe: each notification and the final response is one
    line. There is nothing to open or close, and no keep-alive. Once `abandon()`ed (the
    request was cancelled) nothing more is written, also a line already queued."""

    __slots__ = ("_abandoned", "_out")

    def __init__(self, out: LineWriter) -> None:
        super().__init__(_no_send, "sse")
        self._out = out
        self._abandoned = False

    def _open(self) -> bool:
        return self.state is not ReplyState.DONE

    def _wanted(self) -> bool:
        return not self._abandoned

    def abandon(self) -> None:
        self._abandoned = True
        super().abandon()

    async def notify(self, message: Any) -> bool:
        if not self._open():
            return False
        return await self._out.write(dump(message), self._wanted)

    async def keepalive(self) -> bool:
        return self._open() and not self._out.broken

    async def finish(self, message: Any, status: int = 200) -> bool:
        if not self._open():
            return False
        body, self.replaced_by = encode_reply(message)
        written = await self._out.write(body, self._wanted)
        self.state = ReplyState.DONE
        return written

    async def end(self) -> None:
        self.state = ReplyState.DONE

    async def close(self) -> None:
        self.state = ReplyState.DONE
