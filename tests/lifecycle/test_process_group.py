"""Telling when a process group is gone: zombies do not count, and the /proc scan that tells
them from live members is shared by every group being waited on."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import pytest

from mcp_asgi.lifecycle import process_group as _process_group
from mcp_asgi.lifecycle.process_group import Child, group_alive, wait_group_gone

from ..helpers import group_gone


class Owner:
    def own(self, resource: object) -> None: ...
    def disown(self, resource: object) -> None: ...


def write_stat(proc: Path, pid: int, comm: str, state: str, pgid: int) -> None:
    (proc / str(pid)).mkdir()
    (proc / str(pid) / "stat").write_text(f"{pid} ({comm}) {state} 1 {pgid} {pgid} 0 -1 0\n")


def test_scan_counts_zombies_as_dead(tmp_path: Path) -> None:
    """A group whose members are all zombies (or dead) has no live member; one live member
    is enough. A command name with spaces and parentheses does not confuse the parser."""
    write_stat(tmp_path, 100, "sh", "Z", 100)
    write_stat(tmp_path, 101, "sleep", "X", 100)
    write_stat(tmp_path, 200, "sh", "Z", 200)
    write_stat(tmp_path, 201, "a) S 1 100 (b", "S", 200)
    (tmp_path / "300").mkdir()  # exited between the listing and the read
    (tmp_path / "self").mkdir()
    assert _process_group._scan_live_groups(str(tmp_path)) == frozenset({200})
    assert _process_group._scan_live_groups(str(tmp_path / "missing")) is None


@dataclass
class FakeGroups:
    pgids: list[int]
    scans: list[int] = field(default_factory=list)  # the thread of each /proc scan


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeGroups:
    """50 groups that `killpg(pgid, 0)` finds (as if zombies held them), alive in the first
    three /proc scans and dead from the fourth."""
    groups = FakeGroups(list(range(4_000_000, 4_000_050)))
    real_killpg = os.killpg

    def killpg(pgid: int, sig: int) -> None:
        if pgid not in groups.pgids:
            real_killpg(pgid, sig)

    def scan(proc: str = "/proc") -> frozenset[int]:
        groups.scans.append(threading.get_ident())
        return frozenset(groups.pgids) if len(groups.scans) <= 3 else frozenset()

    monkeypatch.setattr(os, "killpg", killpg)
    monkeypatch.setattr(_process_group, "_scan_live_groups", scan)
    monkeypatch.setattr(_process_group, "_SCANS", _process_group._SharedScan())
    return groups


@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_groups_waited_on_together_share_each_scan(fake: FakeGroups) -> None:
    """50 groups waited on at once cost one /proc scan per poll, not one per group: three
    scans that find them alive, and the one that finds them dead."""
    since = time.monotonic_ns()
    async with anyio.create_task_group() as waiters:
        for pgid in fake.pgids:
            waiters.start_soon(wait_group_gone, pgid, since)
    assert len(fake.scans) == 4


def test_event_loops_in_threads_share_the_scans(fake: FakeGroups) -> None:
    """The scans are shared across threads too: an asyncio and a trio event loop, each in
    its own thread and waiting on half of the groups, together need four scans."""
    since = time.monotonic_ns()

    async def wait_all(pgids: list[int]) -> None:
        async with anyio.create_task_group() as waiters:
            for pgid in pgids:
                waiters.start_soon(wait_group_gone, pgid, since)

    halves = {"asyncio": fake.pgids[::2], "trio": fake.pgids[1::2]}
    threads = [
        threading.Thread(target=anyio.run, args=(wait_all, pgids), kwargs={"backend": backend})
        for backend, pgids in halves.items()
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert not any(thread.is_alive() for thread in threads)
    assert len(fake.scans) == 4


# The leader leaves a member in its group that is a zombie nobody will reap: its parent, a
# helper in another group of the session, is alive and never waits for it.
ZOMBIE_IN_GROUP = """
import os, time
leader = os.getpid()
r, w = os.pipe()
helper = os.fork()
if helper == 0:
    os.setpgid(0, 0)
    zombie = os.fork()
    if zombie == 0:
        os.setpgid(0, leader)
        os._exit(0)
    os.waitid(os.P_PID, zombie, os.WEXITED | os.WNOWAIT)
    os.write(w, f"{os.getpid()} {zombie}\\n".encode())
    time.sleep(60)
    os._exit(0)
print(os.read(r, 100).decode(), end="", flush=True)
"""


@pytest.mark.usefixtures("subreaper")
async def test_a_group_left_with_only_a_zombie_is_gone(monkeypatch: pytest.MonkeyPatch) -> None:
    """A zombie that nobody reaps still holds its group (`killpg` finds it), but it is dead:
    the group counts as gone, and closing the child sends no signal."""
    sent: list[signal.Signals] = []
    monkeypatch.setattr(_process_group, "signal_group", lambda _process, sig: sent.append(sig))
    child = await Child.start(
        [sys.executable, "-c", ZOMBIE_IN_GROUP],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=None,
        cwd=None,
        env=None,
        kill_grace=0.5,  # if it did signal, the test would not wait long to fail
        owner=Owner(),
    )
    assert child.process.stdout is not None
    helper, zombie = map(int, (await child.process.stdout.receive()).split())
    try:
        assert await child.process.wait() == 0
        state, parent, pgid = member_stat(zombie)
        assert (state, parent, pgid) == ("Z", helper, child.pgid)
        assert not group_gone(child.pgid)
        assert not group_alive(child.pgid, child._started)
        await child.aclose()
        assert sent == []
    finally:
        await child.aclose()
        kill_and_reap(helper, zombie)


def member_stat(pid: int) -> tuple[str, int, int]:
    """(state, parent, process group) of a process, from /proc."""
    stat = Path(f"/proc/{pid}/stat").read_bytes()
    state, parent, pgid = stat[stat.rfind(b")") + 2 :].split()[:3]
    return state.decode(), int(parent), int(pgid)


def kill_and_reap(helper: int, zombie: int) -> None:
    """Both were adopted by this test process (the subreaper): the helper when the leader
    exited, its zombie when the helper is killed."""
    os.kill(helper, signal.SIGKILL)
    os.waitpid(helper, 0)
    os.waitpid(zombie, 0)
