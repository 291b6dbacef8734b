"""The ASGI servers the bench runs its targets on: the server dimension of `make bench`.

Every server is started from its own command line, as docs/deployment.md recommends it,
serving an app *factory* given as an import string (the target's name and the exits file
travel in environment variables, so the factory also works in Granian's worker process):

| name | command |
|---|---|
| `uvicorn-h11` | `uvicorn --factory --http h11 --loop asyncio` (the reference stack) |
| `uvicorn-httptools` | `uvicorn --factory --http httptools --loop uvloop` (`uvicorn[standard]`) |
| `hypercorn` | `hypercorn 'asgi:module:factory()'` (HTTP/1.1, asyncio worker) |
| `granian` | `granian --interface asgi --factory --workers 1` (Rust; its own loop choice) |

All bind 127.0.0.1 on the port given, one worker, access log off. The process the driver
starts is the server itself (Granian's worker is its child: `process_cpu` sums the tree).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

DEFAULT = "uvicorn-h11"
# what the goals are stated on (and `make bench` runs): at least these four
MATRIX = ("uvicorn-h11", "uvicorn-httptools", "granian", "hypercorn")
LABELS = {
    "uvicorn-h11": "uvicorn h11/asyncio",
    "uvicorn-httptools": "uvicorn httptools/uvloop",
    "hypercorn": "Hypercorn (HTTP/1.1, asyncio)",
    "granian": "Granian (ASGI, 1 worker)",
}
# the distributions each server needs (pinned to the project's versions in the peers' venv)
DISTS = {
    "uvicorn-h11": ("uvicorn", "h11"),
    "uvicorn-httptools": ("uvicorn", "httptools", "uvloop"),
    "hypercorn": ("hypercorn", "h11"),
    "granian": ("granian",),
}


def _uvicorn(http: str, loop: str) -> Callable[[str, int], list[str]]:
    def argv(factory: str, port: int) -> list[str]:
        return [
            *("-m", "uvicorn", factory, "--factory", "--host", "127.0.0.1", "--port", str(port)),
            *("--http", http, "--loop", loop, "--workers", "1", "--lifespan", "on"),
            *("--log-level", "warning", "--no-access-log", "--timeout-graceful-shutdown", "1"),
        ]

    return argv


def _hypercorn(factory: str, port: int) -> list[str]:
    return [
        *("-m", "hypercorn", f"asgi:{factory}()", "--bind", f"127.0.0.1:{port}"),
        *("--workers", "1", "--graceful-timeout", "1", "--log-level", "warning"),
    ]


def _granian(factory: str, port: int) -> list[str]:
    return [
        *("-m", "granian", "--interface", "asgi", "--factory", "--host", "127.0.0.1"),
        *("--port", str(port), "--workers", "1", "--workers-kill-timeout", "2"),
        *("--log-level", "warning", "--no-access-log", factory),
    ]


COMMANDS: dict[str, Callable[[str, int], list[str]]] = {
    "uvicorn-h11": _uvicorn("h11", "asyncio"),
    "uvicorn-httptools": _uvicorn("httptools", "uvloop"),
    "hypercorn": _hypercorn,
    "granian": _granian,
}


def parse(text: str | None) -> tuple[str, ...]:
    """`--servers a,b` (or `all`) as a tuple of known names."""
    if not text:
        return (DEFAULT,)
    names = MATRIX if text == "all" else tuple(text.split(","))
    unknown = set(names) - set(COMMANDS)
    if unknown:
        raise SystemExit(f"unknown server(s) {sorted(unknown)}; known: {', '.join(COMMANDS)}")
    return names


def exec_server(server: str, factory: str, port: int, environ: dict[str, str]) -> None:
    """Replace this process by `server` serving `factory` (an import string) on `port`."""
    os.environ.update(environ)
    argv = [sys.executable, *COMMANDS[server](factory, port)]
    os.execv(sys.executable, argv)


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) used so far by `pid` and its live descendants."""
    ticks = os.sysconf("SC_CLK_TCK")
    parents: dict[int, list[int]] = {}
    stats: dict[int, list[bytes]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            raw = Path(f"/proc/{name}/stat").read_bytes()
        except OSError:
            continue
        fields = raw[raw.rfind(b")") + 2 :].split()
        stats[int(name)] = fields
        parents.setdefault(int(fields[1]), []).append(int(name))
    total = 0
    todo = [pid]
    while todo:
        current = todo.pop()
        stat = stats.get(current)
        if stat is not None:
            total += int(stat[11]) + int(stat[12])  # utime, stime (fields 14 and 15)
        todo += parents.get(current, [])
    return total / ticks
