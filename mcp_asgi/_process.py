"""Subprocesses bound to a request: started in their own process group, and stopped with it.

Stopping a group (`Child.aclose`)::

    SIGTERM to the group ──► wait up to kill_grace for every member to exit ──► SIGKILL

Grandchildren are in the same group, so they get the signals too. "Exited" means no live
member is left: a zombie (dead, waiting to be reaped) does not count, and members the server
process has adopted (it is PID 1 or a subreaper) are reaped here.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import IO, Any, Final, Protocol

import anyio
from anyio.abc import ByteReceiveStream, Process

_POLL: Final = 0.005  # seconds between checks that a signalled group is empty
_AFTER_KILL: Final = 1.0  # how long to wait for SIGKILLed members to be gone
_CHUNK: Final = 65536
Argv = Sequence[str | os.PathLike[str]]


class Owner(Protocol):
    """The request that owns the processes (see `RunningWork.own`)."""

    def own(self, resource: Child) -> None: ...

    def disown(self, resource: Child) -> None: ...


class Child:
    """A process started in a new session (its own process group), owned by a request."""

    def __init__(self, process: Process, kill_grace: float, owner: Owner) -> None:
        self.process = process
        self.pgid = process.pid  # start_new_session: the child leads its own group
        self._kill_grace = kill_grace
        self._owner = owner
        self._closed = False
        owner.own(self)

    @classmethod
    async def start(
        cls,
        argv: Argv,
        *,
        stdin: int | IO[Any] | None,
        stdout: int | IO[Any] | None,
        stderr: int | IO[Any] | None,
        cwd: str | os.PathLike[str] | None,
        env: Mapping[str, str] | None,
        kill_grace: float,
        owner: Owner,
    ) -> Child:
        if isinstance(argv, (str, bytes)):
            raise TypeError("argv must be a sequence of arguments, not a string")
        # shielded: a cancel landing mid-spawn would leave a child no one owns (asyncio
        # then kills only the leader); once owned, the cancel lands at the next checkpoint
        with anyio.CancelScope(shield=True):
            process = await anyio.open_process(
                list(argv),
                stdin=stdin,
                stdout=stdout,
                stderr=stderr,
                cwd=cwd,
                env=env,
                start_new_session=True,
            )
            child = cls(process, kill_grace, owner)
        return child

    async def aclose(self) -> None:
        """Stop whatever is left of the group (SIGTERM, grace, SIGKILL) and close the pipes.
        Shielded from cancellation; idempotent."""
        if self._closed:
            return
        self._closed = True
        self._owner.disown(self)
        with anyio.CancelScope(shield=True):
            try:
                await self._stop_group()
            finally:
                await self.process.aclose()

    async def _stop_group(self) -> None:
        if not self._alive():
            return
        try:
            _signal_group(self.process, signal.SIGTERM)
            with anyio.move_on_after(self._kill_grace):
                await self._wait_gone()
            if self._alive():
                _signal_group(self.process, signal.SIGKILL)
                with anyio.move_on_after(_AFTER_KILL):
                    await self._wait_gone()
        except BaseException:  # cancelled from outside the shield: do not leave it running
            _signal_group(self.process, signal.SIGKILL)
            raise

    def _alive(self) -> bool:
        return self.process.returncode is None or _group_alive(self.pgid)

    async def _wait_gone(self) -> None:
        await self.process.wait()
        while _group_alive(self.pgid):  # noqa: ASYNC110 - nothing to wait on but the kernel
            await anyio.sleep(_POLL)


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


def _signal_group(process: Process, sig: signal.Signals) -> None:
    if sys.platform == "win32":  # pragma: no cover - no process groups to signal
        if sig == signal.SIGTERM:
            process.terminate()
        else:
            process.kill()
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, sig)


def _group_alive(pgid: int) -> bool:
    """Whether any live (non-zombie) process is left in the group; reaps adopted ones."""
    if sys.platform == "win32":  # pragma: no cover
        return False
    _reap_adopted(pgid)
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if _has_live_member(pgid):
        return True
    _reap_adopted(pgid)  # members that died since the first pass: zombies stay dead
    return False


def _reap_adopted(pgid: int) -> None:
    """Reap members of the group that are this process's children (it adopted them as PID 1
    or as a subreaper). Only called once the group leader has been reaped."""
    while True:
        try:
            pid, _ = os.waitpid(-pgid, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _has_live_member(pgid: int) -> bool:
    """Read /proc: a group can outlive its members as zombies when nobody reaps them (an
    init that does not reap, e.g. in a container); those are not alive."""
    try:
        pids = [name for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return True  # cannot tell: assume the worst
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as file:
                stat = file.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            return True
    return False
