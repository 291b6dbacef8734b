"""What one echo costs a real server, counted: instructions, cache misses and mispredicted
branches per request, by callgrind's simulation of the machine's caches and branch
predictor (issue 27, point 5: why the CPU ratio of `bench.stacks` is larger than the
instruction ratio of `bench.instructions`).

    python -m bench.server_counts                       # httptools and h11: floor, mcp_asgi
    python -m bench.server_counts --http h11 --targets starlette-floor,mcp_asgi
    python -m bench.server_counts --write               # and rewrite docs/benchmarks.md's table
    python -m bench.server_counts --keep /tmp/dumps     # keep the dumps: callgrind_annotate

Each target is served by uvicorn in a process of its own under
`valgrind --tool=callgrind --cache-sim=yes --branch-sim=yes` (uvicorn started in that
process: `--serve`), the two targets at once; the load comes from this process, `--clients`
keep-alive connections each sending the echo and reading its answer before the next. The
server dumps its counts after `--warm-up` requests and again after `--requests` more
(`features.mark`); the second dump over `--requests` is one request's share of the whole
process: uvicorn's parsing and writing, the event loop, the app.

The counts are callgrind's model (its first-level caches are the host's sizes where it can
read them), not the hardware's: a ratio between two targets of one run is what they are for.
Results: ``bench/results/server-counts-<timestamp>.json``; the table is printed (and with
`--write` replaces the generated block of docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
from functools import partial
from pathlib import Path
from typing import Any

from . import features, load, report, run, targets
from .env import import_path

ROOT, RESULTS = report.ROOT, report.RESULTS
_EVENTS = re.compile(r"^events: (.+)$", re.MULTILINE)
_TOTALS = re.compile(r"^totals: (.+)$", re.MULTILINE)
# what the table shows, from callgrind's events: (label, events summed)
COLUMNS = (
    ("instructions", ("Ir",)),
    ("L1 data misses", ("D1mr", "D1mw")),
    ("L1 instruction misses", ("I1mr",)),
    ("mispredicted branches", ("Bcm", "Bim")),
    ("of them indirect (the interpreter's dispatch)", ("Bim",)),
)


def serve(target: str, http: str, port: int, warm_up: int, requests: int) -> None:
    """Be the server (under callgrind): uvicorn serving `target`, with a dump of the counts
    after the warm-up's requests and after the measured ones."""
    import uvicorn

    inner = targets.BUILDERS[target](targets.ExitLog(os.devnull))
    marks = {warm_up: "warm-up", warm_up + requests: f"{requests} requests"}
    served = 0

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        nonlocal served
        if scope["type"] == "http":
            served += 1
            label = marks.get(served)
            if label is not None:
                features.mark(label)
        await inner(scope, receive, send)

    loop = "uvloop" if http == "httptools" else "asyncio"
    uvicorn.run(
        app, host="127.0.0.1", port=port, http=http, loop=loop, log_level="warning",
        access_log=False, lifespan="on",
    )  # fmt: skip


def _client(port: int, calls: int) -> None:
    """`calls` echoes, one after another, on one keep-alive connection."""
    request = load.tool_call("echo", {"text": load.ECHO_TEXT}, 1, port)
    with socket.create_connection(("127.0.0.1", port), timeout=120) as sock:
        for _ in range(calls):
            sock.sendall(request)
            data = b""
            while True:
                data += sock.recv(65536)
                head, found, body = data.partition(b"\r\n\r\n")
                if found:
                    fields = dict(
                        line.split(b":", 1) for line in head.split(b"\r\n")[1:] if b":" in line
                    )
                    length = int(fields.get(b"content-length", fields.get(b"Content-Length", 0)))
                    if len(body) >= length:
                        break
            if not head.startswith(b"HTTP/1.1 200"):
                raise RuntimeError(f"the echo failed: {data[:300]!r}")


def _wait_listening(port: int, process: subprocess.Popen[bytes]) -> None:
    for _ in range(600):
        if process.poll() is not None:
            raise RuntimeError(f"the server exited: {process.stderr.read()[-2000:]!r}")  # type: ignore[union-attr]
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("the server did not start")


def count(
    target: str,
    http: str,
    warm_up: int,
    requests: int,
    clients: int,
    code: Path = ROOT,
    keep: Path | None = None,
) -> dict[str, float]:
    """Per request, every event callgrind counted in the server serving `target`, its
    `mcp_asgi` imported from `code` (`env.import_path`); the measured requests' dump kept
    in `keep` (as `<target>-<http>.callgrind`, for `callgrind_annotate`) if given."""
    port = run.free_port()
    with tempfile.TemporaryDirectory() as tmp:
        command = [
            "valgrind",
            "--tool=callgrind",
            "--cache-sim=yes",
            "--branch-sim=yes",
            "--instr-atstart=no",  # until the warm-up's end
            f"--callgrind-out-file={tmp}/out",
            sys.executable,
            "-m",
            "bench.server_counts",
            "--serve",
            target,
            "--http",
            http,
            "--port",
            str(port),
            "--warm-up",
            str(warm_up),
            "--requests",
            str(requests),
        ]
        env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": import_path(code)}
        env[features.MARKS_ENV] = "1"
        server = subprocess.Popen(
            command, cwd=code, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        try:
            _wait_listening(port, server)
            total = warm_up + requests + clients  # the last ones only end the window
            workers = [
                threading.Thread(target=_client, args=(port, total // clients + 1))
                for _ in range(clients)
            ]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
        finally:
            server.terminate()
            server.wait(60)
        dump = Path(f"{tmp}/out.2").read_text()  # out.1: up to the warm-up's end
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        (keep / f"{target}-{http}.callgrind").write_text(dump)
    names = _EVENTS.search(dump).group(1).split()  # type: ignore[union-attr]
    values = [int(v) for v in _TOTALS.search(dump).group(1).split()]  # type: ignore[union-attr]
    return {name: value / requests for name, value in zip(names, values, strict=False)}


def table(runs: dict[str, dict[str, dict[str, float]]], floor: str) -> str:
    """One table: a column per server and target, a row per count (its ratio to the floor's of the
    same server)."""
    columns = [(http, name) for http, rows in runs.items() for name in rows]
    lines = [
        "| per request | "
        + " | ".join(f"{_SERVERS[http]}: {_label(name)}" for http, name in columns)
        + " |",
        "|---|" + "---:|" * len(columns),
    ]
    for label, events in COLUMNS:
        cells = []
        for http, name in columns:
            counts, base = runs[http][name], runs[http].get(floor)
            n = sum(counts.get(e, 0.0) for e in events)
            cell = f"{n:,.0f}"
            if base is not None and counts is not base:
                ratio = n / max(1.0, sum(base.get(e, 0.0) for e in events))
                cell += f" (**{ratio:.2f}**)"
            cells.append(cell)
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


_SERVERS = {"httptools": "httptools/uvloop", "h11": "h11/asyncio"}
TARGETS = ("starlette-floor", "mcp_asgi")  # the page's table


def _label(target: str) -> str:
    return "floor" if target == "starlette-floor" else target


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Counts per request of a real server.")
    parser.add_argument("--targets", default=",".join(TARGETS))
    parser.add_argument("--http", default=",".join(_SERVERS), help="httptools, h11 or both")
    parser.add_argument("--warm-up", type=int, default=400)
    parser.add_argument("--requests", type=int, default=800)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--write", action="store_true", help="rewrite docs/benchmarks.md")
    parser.add_argument("--keep", type=Path, help="keep each server's dump in this folder")
    parser.add_argument("--serve", help=argparse.SUPPRESS)  # (in the server's process)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.serve, args.http, args.port, args.warm_up, args.requests)
        return
    names, kinds = args.targets.split(","), args.http.split(",")
    unknown = [n for n in names if n not in targets.BUILDERS]
    unknown += [k for k in kinds if k not in _SERVERS]
    if unknown:
        raise SystemExit(f"unknown targets or servers: {unknown}")
    report.whole_for_the_page(args.write, "target and server", (names, TARGETS), (kinds, _SERVERS))
    started = time.time()
    runs: dict[str, dict[str, dict[str, float]]] = {}
    for http in kinds:  # the targets of one server side by side, at once
        runs[http] = run.side_by_side(
            names,
            partial(
                count,
                http=http,
                warm_up=args.warm_up,
                requests=args.requests,
                clients=args.clients,
                keep=args.keep,
            ),
            http,
        )
    seconds = time.time() - started
    heading = (
        f"Run: `python -m bench.server_counts` — "
        f"{time.strftime('%Y-%m-%dT%H:%M:%S%z', time.gmtime(started))} ({seconds:.0f} s), "
        f"uvicorn ({', '.join(_SERVERS[k] for k in kinds)}) under callgrind's cache and "
        f"branch simulation; {args.requests} echoes after {args.warm_up}, "
        f"{args.clients} keep-alive connections; per request, the whole server process "
        "(the ratio to the floor's on the same server in bold).\n\n"
    )
    text = heading + table(runs, names[0])
    record = {
        "seconds": seconds,
        "warm_up": args.warm_up,
        "requests": args.requests,
        "clients": args.clients,
        "runs": runs,
    }
    report.publish("server-counts", "server_counts", started, record, text, args.write)


if __name__ == "__main__":
    main()
