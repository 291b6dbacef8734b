"""The cost of a cancelled call, in process: `--burst` calls of `slow` in flight, then every
client gone at once (`http.disconnect`), `--rounds` times.

    python -m bench.inprocess_cancel                       # µs of CPU per cancelled call
    valgrind --tool=callgrind python -m bench.inprocess_cancel --rounds 1   # and --rounds 4:
        # (the difference of the two counts) / (3 * burst) = instructions per cancelled call

Each call is driven as `bench.inprocess` drives a request (a `receive` that hands over the
body, then waits; here until the burst's disconnect), so the figure is mcp_asgi's own work
for a call that starts, waits in its handler, and is cancelled by its client: the request,
the signal, the handler's unwinding, the scope's end and the 499 that closes the exchange.
A development tool like `bench.inprocess`; the verdicts come from `bench.cancel_latency`.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from . import inprocess, load, targets


async def _burst(app: Any, scope: dict[str, Any], payload: bytes, size: int) -> None:
    gone = asyncio.Event()
    calls = [
        asyncio.create_task(inprocess._one_call(app, scope, payload, gone)) for _ in range(size)
    ]
    await asyncio.sleep(0.2)  # every handler is waiting in its tool
    gone.set()
    await asyncio.gather(*calls)


async def _run(rounds: int, size: int) -> list[float]:
    app = targets.BUILDERS["mcp_asgi"](targets.ExitLog("/dev/null"))
    stop = await inprocess._lifespan(app)
    request = load.tool_call("slow", {"seconds": 30}, 1, inprocess.PORT)
    scope = inprocess._scope_of(request)
    payload = request.partition(b"\r\n\r\n")[2]
    cpu: list[float] = []
    try:
        for _ in range(rounds):
            started = time.process_time()
            await _burst(app, scope, payload, size)
            cpu.append((time.process_time() - started) / size * 1e6)
    finally:
        await stop()
    return cpu


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="In-process cost of a cancelled call.")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--burst", type=int, default=200, help="calls in flight, then cancelled")
    args = parser.parse_args(argv)
    cpu = asyncio.run(_run(args.rounds, args.burst))
    print("CPU µs per cancelled call (the whole call), by round:", [round(c, 1) for c in cpu])


if __name__ == "__main__":
    main()
