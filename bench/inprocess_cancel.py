"""The cost of a cancelled call, in process: `--burst` calls of `slow` in flight, then every
client gone at once (`http.disconnect`), `--rounds` times.

    python -m bench.inprocess_cancel                       # µs of CPU per cancelled call
    python -m bench.inprocess_cancel --counts              # instructions, by phase (callgrind)

Each call is driven as `bench.inprocess` drives a request (a `receive` that hands over the
body, then waits; here until the burst's disconnect), so the figure is mcp_asgi's own work
for a call that starts, waits in its handler, and is cancelled by its client: the request,
the signal, the handler's unwinding, the scope's end and the 499. A development tool like
`bench.inprocess`; the verdicts come from `bench.cancel_latency`.

`--counts` splits one burst's instructions (callgrind, `PYTHONHASHSEED=0`; bursts of 100 and
300 differenced, so start-up and the dumps' own cost drop out) into the phases that decide
how long the burst's last handler waits (`bench.cancel_latency`'s 200 in flight):

* *woken*: the loop's callbacks of the disconnects (mcp_asgi: the request scope's, which
  records the signal and cancels the handler; the floor: its task's wake-up, and all of
  its call);
* *stopped*: from there until the last handler has logged its cancel (each handler's
  unwinding, in turn);
* *settled*: from there until every call has returned (the 499s, the accounts).

Apps beside it: the floor, a bare ASGI app that awaits `http.disconnect` and logs, as
the cancel-latency bench's floor does; the least stop, the `slow` tool's body stopped with
nothing else, either in a task that the request's task cancels on the disconnect
(`asyncio`, the cancel-latency bench's `floor-task`) or run by the request's task itself,
whose `receive()` is stepped by hand so that the disconnect cancels it (`callback`,
mcp_asgi's structure); and `anyio`, the plain anyio way to stop a handler (the tool's body
in a task group, beside a task that awaits the disconnect and cancels the group), which is
what a cancel costs before anything mcp_asgi adds or saves.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from . import features, inprocess, load, targets

ROOT = Path(__file__).resolve().parent.parent
_TOTALS = re.compile(r"^totals: (\d+)", re.MULTILINE)
PHASES = ("woken", "stopped", "settled")


class _Exits(targets.ExitLog):
    """Counts the handlers' cancels of the measured burst; marks its last one."""

    def __init__(self) -> None:
        self.expected = 0  # cancels still to come in the measured burst (0: not measuring)

    def __call__(self, kind: str, request_id: object) -> None:
        if kind == "cancel" and self.expected:
            self.expected -= 1
            if not self.expected:
                features.mark("stopped")

    def later(self, kind: str, request_id: object) -> None:
        pass


async def _lifespan(receive: Any, send: Any) -> None:
    while (await receive())["type"] != "lifespan.shutdown":
        await send({"type": "lifespan.startup.complete"})
    await send({"type": "lifespan.shutdown.complete"})


def floor_app(log: targets.ExitLog) -> Any:
    """A bare ASGI app that waits for the client to leave, logs, and answers."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        await receive()  # the body
        while (await receive())["type"] != "http.disconnect":
            pass
        log("cancel", None)
        await send({"type": "http.response.start", "status": 499, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    return app


def anyio_floor_app(log: targets.ExitLog) -> Any:
    """The plain anyio way to stop a handler when its client leaves: the `slow` tool's
    body in a task group, beside a task that awaits `http.disconnect` and cancels the
    group (`targets.stop_in_task_group`, as `bench.cancel_latency`'s anyio stop); then
    the 499."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        await receive()  # the body
        await targets.stop_in_task_group(log, None, receive, 30)
        await send({"type": "http.response.start", "status": 499, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    return app


def asyncio_floor_app(log: targets.ExitLog) -> Any:
    """The least any app can do to stop a handler when its client leaves: the `slow`
    tool's body in a task of its own, cancelled (`Task.cancel`) by the request's task once
    `http.disconnect` comes (`targets.stop_on_disconnect`, as `bench.cancel_latency`'s
    least stop); then the 499. No reason, no deadline, no anyio scope."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        await receive()  # the body
        await targets.stop_on_disconnect(log, None, receive, 30)
        await send({"type": "http.response.start", "status": 499, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    return app


def callback_floor_app(log: targets.ExitLog) -> Any:
    """The least any app can do to stop a handler when its client leaves, with no task
    beside it: the `slow` tool's body run by the request's task, whose `receive()` is
    stepped by hand so that the disconnect's wake-up cancels that task (`Task.cancel`)."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        await receive()  # the body
        task = asyncio.current_task()
        assert task is not None
        waiting = receive()
        future = waiting.send(None)  # the future it waits on (this bench's receive has one)

        def woke(_: object) -> None:
            try:
                waiting.send(None)
            except StopIteration as done:
                if done.value["type"] == "http.disconnect":
                    task.cancel()

        future.add_done_callback(woke)
        with contextlib.suppress(asyncio.CancelledError):
            await targets.slow_steps(log, None, 30, targets.no_progress)
        await asyncio.sleep(0)  # the 499 on a later turn, as mcp_asgi's (the next stop first)
        await send({"type": "http.response.start", "status": 499, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    return app


FLOORS: dict[str, Callable[[targets.ExitLog], Any]] = {
    "floor": floor_app,
    "asyncio": asyncio_floor_app,
    "callback": callback_floor_app,
    "anyio": anyio_floor_app,
}
"""The bare app, the least stops and the plain anyio app, beside mcp_asgi (each made with
its exit log)."""


def build(target: str, log: targets.ExitLog) -> Any:
    """A floor of `FLOORS`, or mcp_asgi, logging its handlers' exits to `log`."""
    return FLOORS.get(target, targets.BUILDERS["mcp_asgi"])(log)


class Phases(Protocol):
    """What a measured burst tells its observer, in order."""

    def start(self) -> None:
        """Every handler waits in its tool; the disconnects come next."""

    def woken(self) -> None:
        """The disconnects' loop callbacks have run."""

    def settled(self) -> None:
        """Every call has returned."""


class _Marks:
    """The phases as callgrind dumps (`features.mark`), the last cancel's by `_Exits`."""

    def __init__(self, exits: _Exits, size: int) -> None:
        self._exits = exits
        self._size = size

    def start(self) -> None:
        self._exits.expected = self._size
        features.mark("start")

    def woken(self) -> None:
        features.mark("woken")

    def settled(self) -> None:
        features.mark("settled")


async def burst(
    app: Any, scope: dict[str, Any], payload: bytes, size: int, phases: Phases | None = None
) -> None:
    """`size` calls of `slow` in flight, then every client gone at once."""
    gone = asyncio.Event()
    calls = [
        asyncio.create_task(inprocess._one_call(app, scope, payload, gone)) for _ in range(size)
    ]
    await asyncio.sleep(0.2)  # every handler is waiting in its tool
    if phases is not None:
        phases.start()
    gone.set()  # every disconnect's callback is queued now: this one runs after them
    if phases is not None:
        asyncio.get_running_loop().call_soon(phases.woken)
    await asyncio.gather(*calls)
    if phases is not None:
        phases.settled()


def request() -> tuple[dict[str, Any], bytes]:
    """The scope and body of a `slow` call of 30 s."""
    request = load.tool_call("slow", {"seconds": 30}, 1, inprocess.PORT)
    return inprocess._scope_of(request), request.partition(b"\r\n\r\n")[2]


async def _run(rounds: int, size: int) -> list[float]:
    app = targets.BUILDERS["mcp_asgi"](targets.ExitLog(os.devnull))
    stop = await inprocess._lifespan(app)
    scope, payload = request()
    cpu: list[float] = []
    try:
        for _ in range(rounds):
            started = time.process_time()
            await burst(app, scope, payload, size)
            cpu.append((time.process_time() - started) / size * 1e6)
    finally:
        await stop()
    return cpu


async def _counted(target: str, size: int) -> None:
    """One burst to warm up, then one counted (under callgrind, `features.MARKS_ENV`)."""
    exits = _Exits()
    app = build(target, exits)
    stop = await inprocess._lifespan(app)
    scope, payload = request()
    try:
        await burst(app, scope, payload, size)
        await burst(app, scope, payload, size, _Marks(exits, size))
    finally:
        await stop()


def _count(target: str, size: int) -> list[int]:
    """The instructions of each phase of a counted burst of `size`."""
    with tempfile.TemporaryDirectory() as tmp:
        command = [
            "valgrind",
            "--tool=callgrind",
            "--instr-atstart=no",
            f"--callgrind-out-file={tmp}/out",
            sys.executable,
            "-m",
            "bench.inprocess_cancel",
            "--counted",
            target,
            "--burst",
            str(size),
        ]
        env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(ROOT)}
        env[features.MARKS_ENV] = "1"
        done = subprocess.run(command, capture_output=True, cwd=ROOT, env=env, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{target} failed:\n{done.stderr.decode()[-3000:]}")
        # out.1: up to the burst's start; then one dump a phase
        dumps = [Path(f"{tmp}/out.{n}").read_text() for n in range(2, len(PHASES) + 2)]
    return [int(_TOTALS.search(dump).group(1)) for dump in dumps]  # type: ignore[union-attr]


def counts(small: int = 100, large: int = 300) -> dict[str, dict[str, int]]:
    """Instructions per cancelled call, by phase, for the floors and mcp_asgi."""
    rows: dict[str, dict[str, int]] = {}
    for target in (*FLOORS, "mcp_asgi"):
        low, high = _count(target, small), _count(target, large)
        per = [round((h - lo) / (large - small)) for lo, h in zip(low, high, strict=True)]
        rows[target] = dict(zip(PHASES, per, strict=True))
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="In-process cost of a cancelled call.")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--burst", type=int, default=200, help="calls in flight, then cancelled")
    parser.add_argument("--counts", action="store_true", help="instructions by phase")
    parser.add_argument("--counted", help=argparse.SUPPRESS)  # (under callgrind)
    args = parser.parse_args(argv)
    if args.counted:
        asyncio.run(_counted(args.counted, args.burst))
        return
    if args.counts:
        rows = counts()
        print("| per cancelled call | " + " | ".join(PHASES) + " | woken + stopped | all |")
        print("|---|" + "---:|" * (len(PHASES) + 2))
        for target, row in rows.items():
            cells = [f"{row[p]:,}" for p in PHASES]
            cells += [f"{row['woken'] + row['stopped']:,}", f"{sum(row.values()):,}"]
            print(f"| {target} | " + " | ".join(cells) + " |")
        return
    cpu = asyncio.run(_run(args.rounds, args.burst))
    print("CPU µs per cancelled call (the whole call), by round:", [round(c, 1) for c in cpu])


if __name__ == "__main__":
    main()
