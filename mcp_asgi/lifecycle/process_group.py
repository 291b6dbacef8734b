"""A request's child process in its own process group: started, signalled, and waited on
until no member of the group is alive.

Stopping a group (`Child.aclose`)::

    SIGTERM to the group ──► wait up to kill_grace for every member to exit ──► SIGKILL

Grandchildren are in the same group, so they get the signals too. "Exited" means no live
member is left: a zombie (dead, waiting to be reaped) does not count, and members the server
process has adopted (it is PID 1 or a subreaper) are reaped here.

A group id stays taken while any member exists, zombies included, so `killpg(pgid, 0)`
answering "no such group" is cheap and final. "Exists" can still mean that only zombies
are left: members re-parented to an init that never reaps (e.g. in a container) are dead
but keep the group. Telling those apart takes reading `/proc/PID/stat` of every process
on the machine, so that scan is shared: one scan says which groups have a live member, for
every group being waited on in this process (any thread, any event loop). A waiter uses
the newest scan if it started after the waiter last looked and scans itself only if none
did, so N groups stopped together cost one scan per poll interval, not N.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import IO, Any, Final, Protocol

import anyio
from anyio.abc import Process

_POLL: Final = 0.005  # seconds between checks that a signalled group is empty
_AFTER_KILL: Final = 1.0  # how long to wait for SIGKILLed members to be gone
_PROC: Final = "/proc"
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
        self._started = time.monotonic_ns()  # a /proc scan from before cannot see the group
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

    async def stop_leftovers(self) -> None:
        """Once the leader has exited: stop what is left in its group (as `aclose` does,
        without closing the pipes, so what is in them can still be read)."""
        await self._stop_group()

    async def _stop_group(self) -> None:
        if not self._alive():
            return
        try:
            signal_group(self.process, signal.SIGTERM)
            with anyio.move_on_after(self._kill_grace):
                await self._wait_gone()
            if self._alive():
                signal_group(self.process, signal.SIGKILL)
                with anyio.move_on_after(_AFTER_KILL):
                    await self._wait_gone()
        except BaseException:  # cancelled from outside the shield: do not leave it running
            signal_group(self.process, signal.SIGKILL)
            raise

    def _alive(self) -> bool:
        return self.process.returncode is None or group_alive(self.pgid, self._started)

    async def _wait_gone(self) -> None:
        await self.process.wait()
        await wait_group_gone(self.pgid, self._started)


def signal_group(process: Process, sig: signal.Signals) -> None:
    """Send `sig` to the process group the process leads (ignoring a group already gone)."""
    if sys.platform == "win32":  # pragma: no cover - no process groups to signal
        if sig == signal.SIGTERM:
            process.terminate()
        else:
            process.kill()
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, sig)


def group_alive(pgid: int, since: int) -> bool:
    """Whether any live (non-zombie) member is left in the group; reaps adopted ones.

    Only once the group leader has been reaped. `since` is a `time.monotonic_ns()` taken
    after the leader was started: a `/proc` scan older than that cannot answer."""
    return _check(pgid, since)[0]


async def wait_group_gone(pgid: int, since: int) -> None:
    """Return once no live member is left in the group (see `group_alive`)."""
    while True:
        alive, since = _check(pgid, since)
        if not alive:
            return
        await anyio.sleep(_SCANS.interval)


def _check(pgid: int, since: int) -> tuple[bool, int]:
    """(alive?, the start of the scan that answered, or `since` if none was needed)."""
    if sys.platform == "win32":  # pragma: no cover
        return False, since
    _reap_adopted(pgid)
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False, since
    except PermissionError:
        return True, since
    started, live = _SCANS.after(since)
    if live is None or pgid in live:
        return True, started
    _reap_adopted(pgid)  # members that died since the first pass: zombies stay dead
    return False, started


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


class _SharedScan:
    """The newest `/proc` scan, shared by all threads: the groups with a live member."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._started = -1  # time.monotonic_ns() when the newest scan began
        self._live: frozenset[int] | None = frozenset()
        self.interval: float = _POLL  # between polls: at least twice as long as a scan

    def after(self, since: int) -> tuple[int, frozenset[int] | None]:
        """(start, live groups) of a scan that started after `since`: the newest one if it
        did, else a new one. None for the groups: `/proc` could not be read."""
        with self._lock:
            if self._started <= since:
                started = time.monotonic_ns()
                self._live = _scan_live_groups()
                self._started = started
                self.interval = max(_POLL, 2 * (time.monotonic_ns() - started) / 1e9)
            return self._started, self._live


_SCANS: Final = _SharedScan()


def _scan_live_groups(proc: str = _PROC) -> frozenset[int] | None:
    """The process groups with at least one member that is not a zombie, from `proc`'s
    `PID/stat` files; None if `proc` cannot be listed (then zombies cannot be told from
    live members, and every group that `killpg` still finds counts as alive)."""
    try:
        names = os.listdir(proc)
    except OSError:
        return None
    live: set[int] = set()
    for name in names:
        if not name.isdigit():
            continue
        try:
            fd = os.open(f"{proc}/{name}/stat", os.O_RDONLY)
        except OSError:
            continue  # exited since the listing
        try:
            stat = os.read(fd, 4096)
        except OSError:
            continue
        finally:
            os.close(fd)
        # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses
        fields = stat[stat.rfind(b")") + 2 :].split(maxsplit=3)
        if len(fields) > 2 and fields[0] not in (b"Z", b"X"):
            live.add(int(fields[2]))
    return frozenset(live)
