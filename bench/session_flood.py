"""The cost of `initialize` when the 2025-era session table is full (not a test):
`python -m bench.session_flood`.

In process, on `SessionStore` alone: the time per refused `initialize` with every session
in real use (must not grow with the table: no scan), and per accepted one that evicts the
oldest fresh session (a flood of bare `initialize` calls). Issue 14 measured 1.2 ms per
refusal at 10,000 sessions before the change (a sweep of the whole table each time).

    python -m bench.session_flood                  # 10,000 and 100,000 sessions
"""

from __future__ import annotations

import argparse
import time

from mcp_asgi.legacy.sessions import SessionStore

VERSION = "2025-11-25"


def per_call(fn: object, count: int) -> float:
    assert callable(fn)
    started = time.perf_counter()
    for _ in range(count):
        fn()
    return (time.perf_counter() - started) / count


def measure(size: int, count: int) -> tuple[float, float]:
    """(seconds per refusal with all sessions in use, seconds per create evicting a fresh
    session) with `size` sessions held."""
    in_use = SessionStore(ttl=1800, max_sessions=size)
    for _ in range(size):
        session = in_use.create(protocol_version=VERSION, capabilities={}, client_info=None)
        assert session is not None
        in_use.prove(session)
    refused = per_call(
        lambda: in_use.create(protocol_version=VERSION, capabilities={}, client_info=None),
        count,
    )
    fresh = SessionStore(ttl=1800, max_sessions=size)
    for _ in range(size):
        fresh.create(protocol_version=VERSION, capabilities={}, client_info=None)
    evicting = per_call(
        lambda: fresh.create(protocol_version=VERSION, capabilities={}, client_info=None),
        count,
    )
    return refused, evicting


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--count", type=int, default=20_000)
    args = parser.parse_args()
    print(f"{'sessions':>10} {'refused (us)':>14} {'evicting (us)':>14}")
    for size in args.sizes:
        refused, evicting = measure(size, args.count)
        print(f"{size:>10} {refused * 1e6:>14.2f} {evicting * 1e6:>14.2f}")


if __name__ == "__main__":
    main()
