"""Memory per request, in process: is a rise the soak sees (issue 28) the library's own?

    python -m bench.memory echo --rounds 10
    python -m bench.memory sessions --bus-url redis://127.0.0.1:6379/0

Drives `bench.features`' app with no server and no sockets: `echo` serves rounds of
`tools/call` at 2026-07-28; `sessions` opens 2025-era sessions, five calls in each, then
DELETE. After each round it collects the garbage and prints the process's RSS and the
number of objects the collector tracks. Flat figures here and a rise in the soak put the
rise outside the library's request path (the server, its sockets, the allocator).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import time
from typing import Any

from . import features, inprocess


def rss_mb() -> float:
    """This process's resident set, in MB."""
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("VmRSS"))
    return int(line.split()[1]) / 1024


async def _session(app: Any) -> None:
    """One 2025-era session: initialize, five calls, DELETE."""
    request = await features._session(app, "echo")
    for n in range(5):
        await features.call(app, request.headers, request.payload % n)
    scope = inprocess.http_scope(request.headers)
    scope["method"] = "DELETE"

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start" and message["status"] >= 300:
            raise RuntimeError(f"DELETE answered {message['status']}")

    await app(scope, receive, send)


async def run(kind: str, rounds: int, per_round: int, bus_url: str | None) -> None:
    settings = {**features.FAR_ABOVE_THE_LOAD, **({"bus_url": bus_url} if bus_url else {})}
    app = features.mcp_app(settings)
    stop = await inprocess._lifespan(app)
    started = time.monotonic()
    try:
        for n in range(rounds):
            if kind == "echo":
                request = features._modern("echo", {"text": "hi"})
                await features._echoes(app, request, per_round)
            else:
                for _ in range(per_round // 16):
                    await asyncio.gather(*(_session(app) for _ in range(16)))
            gc.collect()
            print(
                f"round {n}: rss {rss_mb():.1f} MB, objects {len(gc.get_objects())}, "
                f"{time.monotonic() - started:.0f} s",
                flush=True,
            )
    finally:
        await stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=["echo", "sessions"])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument(
        "--per-round", type=int, default=9984, help="requests (echo) or sessions per round"
    )
    parser.add_argument("--bus-url", help="a Redis for the bus and the shared store")
    args = parser.parse_args(argv)
    per_round = args.per_round if args.kind == "echo" else args.per_round // 6
    asyncio.run(run(args.kind, args.rounds, per_round, args.bus_url))


if __name__ == "__main__":
    main()
