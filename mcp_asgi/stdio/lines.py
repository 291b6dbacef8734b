"""Lines in and out of a pipe, and the reply writer of one request on it.

Reading waits on the event loop for the pipe to be readable (no thread is left blocked in a
read when the server stops); writing goes through a worker thread, so a client slow to
read never blocks the loop. Writes are serialised: a line is never cut by another.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import anyio
import anyio.to_thread

from mcp_asgi.http.reply import ReplyState, ReplyWriter, dump, encode_reply

_CHUNK = 1 << 16


class LineReader:
    """The lines of a file descriptor, without their end of line; None at EOF."""

    def __init__(self, fd: int, *, max_line: int) -> None:
        self._fd = fd
        self._max_line = max_line
        self._buffer = bytearray()
        self._eof = False
        self._pollable = True

    async def readline(self) -> bytes | None:
        """The next line (an over-long one raises `ValueError`, and is skipped), or None."""
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                line = bytes(self._buffer[:end])
                del self._buffer[: end + 1]
                if len(line) > self._max_line:
                    raise ValueError("line too long")
                return line.rstrip(b"\r")
            if self._eof:
                if not self._buffer:
                    return None
                line = bytes(self._buffer)
                self._buffer.clear()
                return line
            if len(self._buffer) > self._max_line:
                self._buffer.clear()
                await self._discard_line()
                raise ValueError("line too long")
            chunk = await self._read()
            if not chunk:
                self._eof = True
            self._buffer += chunk

    async def _read(self) -> bytes:
        """Wait on the event loop until the pipe is readable, then read what is there (a
        pipe's read does not block then); a descriptor the loop cannot watch (a regular
        file) is read in a worker thread."""
        if self._pollable:
            try:
                await anyio.wait_readable(self._fd)
            except (OSError, NotImplementedError, ValueError):
                self._pollable = False
            else:
                return os.read(self._fd, _CHUNK)
        return await anyio.to_thread.run_sync(os.read, self._fd, _CHUNK, abandon_on_cancel=True)

    async def _discard_line(self) -> None:
        while not self._eof:
            chunk = await self._read()
            if not chunk:
                self._eof = True
                return
            end = chunk.find(b"\n")
            if end >= 0:
                self._buffer += chunk[end + 1 :]
                return


class LineWriter:
    """Writes whole lines to a file descriptor, one at a time; False once the pipe broke."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._lock = anyio.Lock()
        self.broken = False

    async def write(self, line: bytes, still: Callable[[], bool] = lambda: True) -> bool:
        """Write `line` and a newline, if `still()` holds once it is our turn."""
        async with self._lock:
            if self.broken or not still():
                return False
            try:
                await anyio.to_thread.run_sync(_write_all, self._fd, line + b"\n")
            except OSError:
                self.broken = True
                return False
            return True


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


async def _no_send(message: Any) -> None:  # pragma: no cover - never called
    raise RuntimeError("a stdio reply has no ASGI send")


class StdioWriter(ReplyWriter):
    """One request's replies on the pipe: each notification and the final response is one
    line. There is nothing to open or close, and no keep-alive. Once `abandon()`ed (the
    request was cancelled) nothing more is written, also a line already waiting its turn."""

    __slots__ = ("_out",)

    def __init__(self, out: LineWriter) -> None:
        super().__init__(_no_send, "sse")
        self._out = out

    def _open(self) -> bool:
        return self.state is not ReplyState.DONE

    async def notify(self, message: Any) -> bool:
        if not self._open():
            return False
        return await self._out.write(dump(message), self._open)

    async def keepalive(self) -> bool:
        return self._open() and not self._out.broken

    async def finish(self, message: Any, status: int = 200) -> bool:
        if not self._open():
            return False
        body, self.replaced_by = encode_reply(message)
        written = await self._out.write(body, self._open)
        self.state = ReplyState.DONE
        return written

    async def end(self) -> None:
        self.state = ReplyState.DONE

    async def close(self) -> None:
        self.state = ReplyState.DONE
