"""`ctx.run_process` and `ctx.stream_process`: commands bound to a request, each started in
its own process group and stopped with it (`_process_group.Child`)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Final

import anyio
from anyio.abc import ByteReceiveStream, Process

from mcp_asgi.lifecycle.process_group import Argv, Child, Owner

__all__ = ["Argv", "ProcessLines", "run"]  # Argv: from `_process_group`, for `context`

_CHUNK: Final = 65536
_FIRST_POLL: Final = 0.001  # seconds: polling for the command's exit, doubling up to
_LAST_POLL: Final = 0.05  # this (only while its pipes outlive it)


async def run(
    argv: Argv,
    *,
    input: bytes | None,
    cwd: str | os.PathLike[str] | None,
    env: Mapping[str, str] | None,
    check: bool,
    kill_grace: float,
    owner: Owner,
) -> subprocess.CompletedProcess[bytes]:
    """Run a command to completion and collect its output (see `Context.run_process`)."""
    child = await Child.start(
        argv,
        stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=env,
        kill_grace=kill_grace,
        owner=owner,
    )
    process = child.process
    output: dict[str, bytes] = {}
    try:
        async with anyio.create_task_group() as readers:
            for name, stream in (("stdout", process.stdout), ("stderr", process.stderr)):
                if stream is not None:
                    readers.start_soon(_collect, stream, output, name)
            # what the command leaves in its group may hold its pipes open (a background
            # job's inherited stdout; on uvloop any job, which inherits the pipes' spare
            # descriptors): stopped when the command exits, so the readers see the end
            readers.start_soon(_stop_leftovers_on_exit, child)
            if process.stdin is not None:
                async with process.stdin:
                    if input:
                        await process.stdin.send(input)
        returncode = await process.wait()
    finally:
        await child.aclose()
    stdout, stderr = output.get("stdout", b""), output.get("stderr", b"")
    if check and returncode:
        raise subprocess.CalledProcessError(returncode, list(argv), stdout, stderr)
    return subprocess.CompletedProcess(list(argv), returncode, stdout, stderr)


async def _stop_leftovers_on_exit(child: Child) -> None:
    """Once the command itself has exited, stop what is left in its group."""
    await _exited(child.process)
    await child.stop_leftovers()


async def _exited(process: Process) -> None:
    """Return once the process has exited. `wait()` alone is not enough: on asyncio it
    also waits for the pipes to close, which a process left in the group may delay."""
    async with anyio.create_task_group() as either:

        async def poll() -> None:
            delay = _FIRST_POLL
            while process.returncode is None:
                await anyio.sleep(delay)
                delay = min(2 * delay, _LAST_POLL)
            either.cancel_scope.cancel()

        either.start_soon(poll)
        await process.wait()
        either.cancel_scope.cancel()


async def _collect(stream: ByteReceiveStream, output: dict[str, bytes], name: str) -> None:
    chunks = [chunk async for chunk in stream]
    output[name] = b"".join(chunks)


class ProcessLines:
    """The lines of a subprocess's standard output, as they come (see
    `Context.stream_process`). Use it with `async with` to stop the process as soon as
    the block ends; a bare `async for` also works: the process is stopped when the loop
    ends, is cancelled, or at the latest when the handler exits."""

    def __init__(
        self,
        argv: Argv,
        *,
        cwd: str | os.PathLike[str] | None,
        env: Mapping[str, str] | None,
        stderr: int | None,
        check: bool,
        encoding: str,
        kill_grace: float,
        owner: Owner,
    ) -> None:
        if isinstance(argv, (str, bytes)):
            raise TypeError("argv must be a sequence of arguments, not a string")
        self._argv = list(argv)
        self._options: dict[str, Any] = {"cwd": cwd, "env": env, "stderr": stderr}
        self._check = check
        self._encoding = encoding
        self._kill_grace = kill_grace
        self._owner = owner
        self._child: Child | None = None
        self._buffer = b""
        self._eof = False

    @property
    def pid(self) -> int | None:
        """The process id (also its process group id) once started."""
        return self._child.pgid if self._child else None

    @property
    def returncode(self) -> int | None:
        """The exit status once the process has exited."""
        return self._child.process.returncode if self._child else None

    async def __aenter__(self) -> ProcessLines:
        await self._start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __aiter__(self) -> ProcessLines:
        return self

    async def __anext__(self) -> str:
        child = await self._start()
        try:
            line = await self._next_line(child)
            if line is not None:
                return line
            returncode = await child.process.wait()
        except BaseException:
            await self.aclose()
            raise
        await self.aclose()
        if self._check and returncode:
            raise subprocess.CalledProcessError(returncode, self._argv)
        raise StopAsyncIteration

    async def aclose(self) -> None:
        """Stop the process group if it is still running, and close the pipes."""
        if self._child is not None:
            await self._child.aclose()

    async def _start(self) -> Child:
        if self._child is None:
            self._child = await Child.start(
                self._argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                kill_grace=self._kill_grace,
                owner=self._owner,
                **self._options,
            )
        return self._child

    async def _next_line(self, child: Child) -> str | None:
        stdout = child.process.stdout
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                line, self._buffer = self._buffer[:end], self._buffer[end + 1 :]
                return self._decode(line)
            if self._eof or stdout is None:
                if not self._buffer:
                    return None
                line, self._buffer = self._buffer, b""
                return self._decode(line)
            try:
                self._buffer += await stdout.receive(_CHUNK)
            except (anyio.EndOfStream, anyio.ClosedResourceError):
                self._eof = True

    def _decode(self, line: bytes) -> str:
        return line.removesuffix(b"\r").decode(self._encoding, errors="replace")
