"""Per-request CPU cost of each ASGI app, in process: no sockets, no uvicorn, no load
generator — only the app's own work for one `tools/call echo`, in microseconds.

    python -m bench.inprocess                      # every target, interleaved rounds
    python -m bench.inprocess --targets mcp_asgi,starlette-floor --profile mcp_asgi

Each request is driven as uvicorn drives it (a `receive` that hands over the body, then
waits for a disconnect; a `send` that collects the messages), `--concurrency` at a time in
one event loop. Targets run in interleaved rounds and the report gives the median µs per
request and the ratio to the Starlette floor of the same round. A development tool for
finding where mcp_asgi's time goes (`--profile` writes a cProfile); the verdicts come from
`bench.run`, which measures whole servers under `wrk`.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import pstats
import statistics
import time
from collections.abc import Callable
from typing import Any

from mcp_asgi.lifecycle.armed import ANYWHERE

from . import load, targets

PORT = 8000  # only in the Host header
DEFAULT_TARGETS = ("starlette-floor", "mcp_asgi", "mcp_asgi-notel", "mcp_asgi-otel")


class _NullLog(targets.ExitLog):
    """The echo tool logs nothing: no exits file is needed."""

    def __init__(self) -> None:
        pass


def http_scope(headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    """The ASGI scope uvicorn would give a `POST /mcp` with `headers` (lower-case names)."""
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "root_path": "",
        "query_string": b"",
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", PORT),
        "state": {},
    }


def _scope_of(request: bytes) -> dict[str, Any]:
    """The scope of a whole HTTP/1.1 request as `load.tool_call` writes it."""
    head, _, _ = request.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")[1:]
    return http_scope(
        [
            (name.strip().lower(), value.strip())
            for name, _, value in (line.partition(b":") for line in lines)
        ]
    )


async def exchange(
    app: Any, scope: dict[str, Any], payload: bytes, gone: asyncio.Event | None = None
) -> list[dict[str, Any]]:
    """One request, driven as uvicorn drives it; its client leaves once the reply is
    complete, or when `gone` is set. Returns every message the app sent."""
    sent: list[dict[str, Any]] = []
    body_given = False
    done = asyncio.Event()

    async def receive() -> dict[str, Any]:
        nonlocal body_given
        if not body_given:
            body_given = True
            return {"type": "http.request", "body": payload, "more_body": False}
        await (gone or done).wait()
        return {"type": "http.disconnect"}

    # as uvicorn's, it only waits on an asyncio.Event and makes the message: mcp_asgi
    # begins it in the request's own task and finishes it where it wakes, as it does
    # uvicorn's (`mcp_asgi.lifecycle.armed`, `ANYWHERE`); other apps ignore this
    receive.plain_receive = ANYWHERE  # type: ignore[attr-defined]

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            done.set()

    await app(dict(scope), receive, send)
    return sent


def body_of(messages: list[dict[str, Any]]) -> bytes:
    """The response body of an `exchange`'s messages."""
    return b"".join(m.get("body", b"") for m in messages if m["type"] == "http.response.body")


async def _one_call(
    app: Any, scope: dict[str, Any], payload: bytes, gone: asyncio.Event | None = None
) -> bytes:
    """One request's response body (see `exchange`)."""
    return body_of(await exchange(app, scope, payload, gone))


async def _measure(
    app: Any,
    calls: int,
    concurrency: int,
    tool: str = "echo",
    clock: Callable[[], float] = time.perf_counter,
) -> float:
    """µs per request over `calls` calls of `tool` (an echo), `concurrency` in flight, on
    `clock` (wall clock, or the process's CPU time: all its threads)."""
    request = load.tool_call(tool, {"text": load.ECHO_TEXT}, 1, PORT)
    scope = _scope_of(request)
    payload = request.partition(b"\r\n\r\n")[2]
    reply = await _one_call(app, scope, payload)
    if load.ECHO_TEXT.encode() not in reply:
        raise RuntimeError(f"echo failed: {reply[:300]!r}")

    async def worker(n: int) -> None:
        for _ in range(n):
            await _one_call(app, scope, payload)

    started = clock()
    await asyncio.gather(*(worker(calls // concurrency) for _ in range(concurrency)))
    return (clock() - started) / (calls // concurrency * concurrency) * 1e6


async def _lifespan(app: Any) -> Callable[[], Any]:
    """Start the app's lifespan; returns the coroutine function that stops it."""
    queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    started = asyncio.Event()

    async def receive() -> dict[str, Any]:
        return await queue.get()

    async def send(message: dict[str, Any]) -> None:
        if message["type"].startswith("lifespan.startup"):
            started.set()

    task = asyncio.create_task(app({"type": "lifespan", "state": {}}, receive, send))
    await queue.put({"type": "lifespan.startup"})
    await started.wait()

    async def stop() -> None:
        await queue.put({"type": "lifespan.shutdown"})
        await task

    return stop


async def _run(args: argparse.Namespace) -> dict[str, list[float]]:
    names = args.targets.split(",")
    apps = {name: targets.BUILDERS[name](_NullLog()) for name in names}
    stops = [await _lifespan(app) for app in apps.values()]
    results: dict[str, list[float]] = {name: [] for name in names}
    try:
        clock = time.process_time if args.cpu else time.perf_counter
        for app in apps.values():  # warm up
            await _measure(app, args.calls // 4, args.concurrency, args.tool)
        for round_no in range(args.rounds):
            order = names[::-1] if round_no % 2 else names
            for name in order:
                results[name].append(
                    await _measure(apps[name], args.calls, args.concurrency, args.tool, clock)
                )
        if args.profile:
            profiler = cProfile.Profile()
            profiler.enable()
            await _measure(apps[args.profile], args.calls, args.concurrency, args.tool)
            profiler.disable()
            profiler.dump_stats(args.profile_out)
            stats = pstats.Stats(args.profile_out)
            stats.sort_stats("tottime").print_stats(args.profile_lines)
    finally:
        for stop in stops:
            await stop()
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="In-process µs per echo request.")
    parser.add_argument("--targets", default=",".join(DEFAULT_TARGETS))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=4000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--profile", help="also cProfile this target")
    parser.add_argument("--profile-out", default="/tmp/mcp-asgi-inprocess.prof")
    parser.add_argument("--profile-lines", type=int, default=40)
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument(
        "--tool",
        default="echo",
        help="echo, echo_sync (a def tool), echo_awaiting (mcp_asgi only: awaits once)",
    )
    parser.add_argument("--cpu", action="store_true", help="CPU time of all threads, not wall")
    args = parser.parse_args(argv)
    results = asyncio.run(_run(args))
    floor = results.get("starlette-floor")
    rows = {}
    for name, values in results.items():
        ratios = [f / v for f, v in zip(floor, values, strict=True)] if floor else []
        rows[name] = {
            "us_per_request": round(statistics.median(values), 1),
            "x_floor": round(statistics.median(ratios), 3) if ratios else None,
        }
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"{'target':<22} {'µs/request':>11} {'x floor (speed)':>16}")
    for name, row in rows.items():
        ratio = "" if row["x_floor"] is None else f"{row['x_floor']:.3f}"
        print(f"{name:<22} {row['us_per_request']:>11} {ratio:>16}")


if __name__ == "__main__":
    main()
