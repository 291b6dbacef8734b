"""What one cancel costs a real server, counted: instructions per call closed by its client
in a burst, for the floor and mcp_asgi (issue 27, point 4: the 200-in-flight goal, whose
time figures move more between runs on a shared machine than its margin).

    python -m bench.cancel_counts                   # uvicorn h11: both floors, json, sse
    python -m bench.cancel_counts --http httptools --modes json
    python -m bench.cancel_counts --http h11,httptools --write   # and docs/benchmarks.md's table

Each server is `bench.cancel_latency`'s (`--serve MODE`: its floor, its least stop — the
tool in a task, cancelled on the disconnect —, or mcp_asgi in `json` or `sse` mode) on
uvicorn, in a process of its own under `valgrind --tool=callgrind --trace-children=yes`
(the serve command becomes uvicorn by `exec`), the modes at once. The load comes from this
process over raw sockets: a warm-up burst, then `--small` calls of the async `slow` tool
opened, every one started, callgrind's counting switched on (`callgrind_control`), every
socket closed in one loop, every cancel logged, a pause, a dump. Two servers, one burst of
`--small` and one of `--large`, differenced: one cancel's share of the whole server
process (uvicorn's connection loss, the event loop, the app's wake-up, the handler's
unwinding, the accounts after it), with start-up and the pause's idle turns taken out.

Results: ``bench/results/cancel-counts-<timestamp>.json``; the table is printed (and with
`--write` replaces the generated block of docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

from . import cancel_latency, load, report, run

ROOT, RESULTS = report.ROOT, report.RESULTS
_TOTALS = re.compile(r"^totals: (\d+)", re.MULTILINE)
SERVERS = {"h11": "uvicorn-h11", "httptools": "uvicorn-httptools"}
WARM_UP = 10  # calls of the uncounted burst
OPEN_PAUSE = 2.0  # seconds between every call started and the closes (the server settles)
AFTER_PAUSE = 2.0  # seconds between the last cancel logged and the dump (the accounts)


def _control(pid: int, *options: str) -> None:
    for option in options:
        subprocess.run(["callgrind_control", option, str(pid)], check=True, capture_output=True)


def _burst(port: int, pid: int, exits: load.ExitTimes, ids: list[int], counted: bool) -> None:
    """Open `ids` calls of the async tool, wait until each runs, close them all at once,
    wait until each has logged its cancel; counted: between `--instr=on` and a dump."""
    tool = cancel_latency.TOOLS["async"]
    socks = []
    try:
        for request_id in ids:
            sock = load._connect(port)
            socks.append(sock)
            sock.sendall(load.tool_call(tool, {"seconds": 600}, request_id, port, progress=True))
        if not exits.wait_for(ids, ("start",), 300.0):
            raise RuntimeError("the calls did not all start")
        time.sleep(OPEN_PAUSE)
        if counted:
            _control(pid, "--instr=on")
    finally:
        for sock in socks:
            sock.close()
    if not exits.wait_for(ids, ("cancel",), 300.0):
        raise RuntimeError("the calls were not all cancelled")
    time.sleep(AFTER_PAUSE)
    if counted:
        _control(pid, "--dump=burst")


def _wait_up(port: int, server: subprocess.Popen[bytes], log: Path) -> None:
    """Wait until the server answers an echo (slow under valgrind); its log if it died."""
    deadline = time.monotonic() + 300
    while True:
        try:
            load.wait_until_up(port, time.monotonic() + 1)
            return
        except RuntimeError:
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the server did not start: {log.read_text()[-2000:]}") from None


def count(mode: str, http: str, size: int) -> int:
    """The instructions of a counted burst of `size` cancels on a fresh server in `mode`."""
    port = run.free_port()
    with tempfile.TemporaryDirectory() as tmp:
        exits_path = Path(tmp) / "exits"
        exits_path.touch()
        command = [
            "valgrind",
            "--tool=callgrind",
            "--instr-atstart=no",
            "--trace-children=yes",  # the serve command becomes uvicorn by exec
            f"--callgrind-out-file={tmp}/out",
            sys.executable,
            "-m",
            "bench.cancel_latency",
            "--serve",
            mode,
            "--port",
            str(port),
            "--exits",
            str(exits_path),
            "--server",
            SERVERS[http],
        ]
        env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(ROOT)}
        log = Path(tmp) / "log"
        with log.open("wb") as out:
            server = subprocess.Popen(
                command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT
            )
        try:
            _wait_up(port, server, log)
            exits = load.ExitTimes(exits_path)
            _burst(port, server.pid, exits, list(range(1, WARM_UP + 1)), counted=False)
            _burst(port, server.pid, exits, list(range(1000, 1000 + size)), counted=True)
        finally:
            server.terminate()
            server.wait(120)
        dumps = sorted(Path(tmp).glob("out.*"))
        if len(dumps) != 1:
            raise RuntimeError(f"{mode} on {http}: expected one dump, found {len(dumps)}")
        return int(_TOTALS.search(dumps[0].read_text()).group(1))  # type: ignore[union-attr]


def per_cancel(mode: str, http: str, small: int, large: int) -> int:
    """One cancel's instructions: the two bursts' difference over their sizes' difference."""
    low, high = count(mode, http, small), count(mode, http, large)
    return round((high - low) / (large - small))


def table(counts: dict[str, dict[str, int]]) -> str:
    """A row per server and mode, with its ratio to and excess over the floor's."""
    lines = [
        f"| server | app | instructions a cancel | {report.TIMES} floor | over the floor |",
        "|---|---|---:|---:|---:|",
    ]
    for http, modes in counts.items():
        floor = modes.get(cancel_latency.FLOOR)
        for mode, n in modes.items():
            label = _LABELS.get(mode, f"mcp_asgi, {mode}")
            ratio = report.fmt(n / floor if floor else None)
            over = f"{n - floor:+,}" if floor and mode != cancel_latency.FLOOR else report.DASH
            lines.append(f"| uvicorn {http} | {label} | {n:,} | {ratio} | {over} |")
    return "\n".join(lines) + "\n"


_LABELS = {
    cancel_latency.FLOOR: "floor",
    **{mode: f"{name}: {how}" for mode, (name, how) in cancel_latency.STOPS.items()},
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Instructions per cancel on a real server.")
    parser.add_argument("--http", default="h11", help="h11, httptools, or both")
    modes = (*cancel_latency.FLOOR_KINDS, *cancel_latency.MODES)
    parser.add_argument("--modes", default=",".join(modes), help=", ".join(modes))
    parser.add_argument("--small", type=int, default=20, help="cancels of the smaller burst")
    parser.add_argument("--large", type=int, default=60, help="cancels of the larger burst")
    parser.add_argument("--write", action="store_true", help="rewrite docs/benchmarks.md")
    args = parser.parse_args(argv)
    kinds, modes = args.http.split(","), args.modes.split(",")
    unknown = [k for k in kinds if k not in SERVERS]
    unknown += [m for m in modes if m not in (*cancel_latency.MODES, *cancel_latency.FLOOR_KINDS)]
    if unknown or args.large <= args.small:
        parser.error(f"unknown servers or modes: {unknown}, or --large not above --small")
    report.whole_for_the_page(
        args.write, "mode", (modes, (*cancel_latency.FLOOR_KINDS, *cancel_latency.MODES))
    )
    started = time.time()
    counts: dict[str, dict[str, int]] = {}
    for http in kinds:  # the modes of one server side by side, at once
        counts[http] = run.side_by_side(
            modes, partial(per_cancel, http=http, small=args.small, large=args.large), http
        )
    seconds = time.time() - started
    text = (
        f"Run: `python -m bench.cancel_counts` — "
        f"{time.strftime('%Y-%m-%dT%H:%M:%S%z', time.gmtime(started))} ({seconds:.0f} s); "
        f"bursts of {args.small} and {args.large} closed calls differenced, the whole "
        "server process under callgrind.\n\n" + table(counts)
    )
    record = {"seconds": seconds, "sizes": [args.small, args.large], "counts": counts}
    report.publish("cancel-counts", "cancel_counts", started, record, text, args.write)


if __name__ == "__main__":
    main()
