"""Where a burst's cancels go, stage by stage, in lines of Python run (a trace):

    python -m bench.cancel_lines                  # the floors and mcp_asgi, bursts of 20
    python -m bench.cancel_lines --burst 50 --top 40

The burst is `bench.inprocess_cancel`'s (calls waiting in `slow`, every client gone at
once, in process), traced with `sys.settrace`; each line run counts for the function it is
in and for the stage it runs in:

* *woken*: the loop's callbacks of the disconnects (ours: the request scope records the
  signal and cancels the handler; the floor: its task's wake-up and all of its call);
* *to the handler*: from there until a handler has logged its cancel (the cancellation
  thrown into it, and whatever the loop runs in between);
* *out of the handler*: the rest of the loop callback that logged it (ours: the
  handler's scope left, up to the first checkpoint);
* *after*: everything once the last handler has logged (the 499s, the ends).

Woken, to and out of the handler are what the last handler of `bench.cancel_latency`'s 200
in flight waits for. Lines are not instructions (`bench.inprocess_cancel --counts` counts
those), but they say which function each stage's cost is in. The bench's own lines (its
tool's log, its driver) are counted apart, as `bench`; of the rest, each stage's total
says how many are mcp_asgi's own (the others are asyncio's, anyio's and the standard
library's, which the floors run too).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections import Counter
from types import FrameType
from typing import Any

import mcp_asgi

from . import inprocess, inprocess_cancel, targets

STAGES = ("woken", "to the handler", "out of the handler", "after")
_BENCH = os.path.dirname(os.path.abspath(__file__))
_LIBRARY = os.path.dirname(os.path.abspath(mcp_asgi.__file__))


class _Trace(targets.ExitLog):
    """The tracer: the burst's exit log (a handler's cancel ends its stage) and its phases
    (`inprocess_cancel.Phases`: tracing from the burst's start to its end)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.stage: str | None = None  # None: not tracing
        self.logged = 0
        self.lines = {stage: Counter[str]() for stage in STAGES}
        self.bench = Counter[str]()
        self.library = Counter[str]()  # the lines of each stage that are mcp_asgi's own
        self._run = asyncio.events.Handle._run

    def __call__(self, kind: str, request_id: object) -> None:  # the tools' exit log
        if kind == "cancel" and self.stage is not None:
            self.logged += 1
            self.stage = "out of the handler"

    def later(self, kind: str, request_id: object) -> None:
        pass

    def start(self) -> None:
        run = self._run

        def traced_run(handle: asyncio.Handle) -> None:
            if self.stage == "out of the handler":  # a loop callback begins: its stage ends
                self.stage = "after" if self.logged >= self.size else "to the handler"
            run(handle)

        asyncio.events.Handle._run = traced_run  # type: ignore[method-assign]
        _trace_suspended(self.trace)
        self.stage = "woken"
        sys.settrace(self.trace)

    def woken(self) -> None:
        self.stage = "to the handler"

    def settled(self) -> None:
        sys.settrace(None)
        self.stage = None
        asyncio.events.Handle._run = self._run  # type: ignore[method-assign]

    def trace(self, frame: FrameType, event: str, arg: Any) -> Any:
        stage = self.stage
        if stage is not None and event == "line":
            code = frame.f_code
            where = f"{os.path.basename(code.co_filename)}:{code.co_name}"
            if code.co_filename.startswith(_BENCH):
                self.bench[stage] += 1
            else:
                self.lines[stage][where] += 1
                if code.co_filename.startswith(_LIBRARY):
                    self.library[stage] += 1
        return self.trace


def _trace_suspended(trace: Any) -> None:
    """Trace the frames already suspended in every task (settrace reaches new ones only)."""
    for task in asyncio.all_tasks():
        awaited: Any = task.get_coro()
        while awaited is not None:
            frame = getattr(awaited, "cr_frame", None) or getattr(awaited, "gi_frame", None)
            if frame is not None:
                frame.f_trace = trace
            awaited = getattr(awaited, "cr_await", None) or getattr(awaited, "gi_yieldfrom", None)


async def _traced(target: str, size: int) -> _Trace:
    trace = _Trace(size)
    app = inprocess_cancel.build(target, trace)
    stop = await inprocess._lifespan(app)
    scope, payload = inprocess_cancel.request()
    try:
        await inprocess_cancel.burst(app, scope, payload, size)  # the warm-up
        await inprocess_cancel.burst(app, scope, payload, size, trace)
    finally:
        trace.settled()  # (again, if the burst failed: tracing off, the loop as it was)
        await stop()
    return trace


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A burst's cancels, by stage, in lines.")
    parser.add_argument("--burst", type=int, default=20, help="calls in flight, then cancelled")
    parser.add_argument("--top", type=int, default=15, help="functions shown a stage")
    args = parser.parse_args(argv)
    for target in (*inprocess_cancel.FLOORS, "mcp_asgi"):
        trace = asyncio.run(_traced(target, args.burst))
        print(f"## {target}: lines a cancelled call, by stage")
        for stage in STAGES:
            lines = trace.lines[stage]
            own = sum(lines.values()) / args.burst
            bench = trace.bench[stage] / args.burst
            library = trace.library[stage] / args.burst
            of_them = f"; mcp_asgi's: {library:.0f}" if library else ""
            print(f"\n{stage}: {own:.0f}{of_them} (and the bench's own: {bench:.0f})")
            for where, n in lines.most_common(args.top):
                print(f"  {n / args.burst:7.1f}  {where}")
        print()


if __name__ == "__main__":
    main()
