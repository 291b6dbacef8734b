"""The benchmark driver: `python -m bench.run --rounds 3` (`make bench`) or `--quick`.

Each round starts every target in its own process (uvicorn, one worker, 127.0.0.1, a free
port), waits until it answers, loads it from other processes (`wrk`, and this driver's
raw sockets), stops it, and goes on to the next; the order rotates from round to round so
that drifting machine load spreads over all targets. Results go to `bench/results/` as
JSON; `bench.report` turns them into tables and plots.

    python -m bench.run --quick                    # a few minutes, one round
    python -m bench.run --rounds 3                 # the full run; updates docs/benchmarks.md
    python -m bench.run --targets mcp_asgi,starlette-floor --rounds 1   # a part: partial-*.json,
                                                   # its tables beside it, the page untouched
    python -m bench.run --profile mcp_asgi         # py-spy while wrk loads echo
    python -m bench.run --profile mcp_asgi --profile-phase mass
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import io
import itertools
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol, TypeVar

from . import env, load, servers

T = TypeVar("T")

RESULTS = env.ROOT / "bench" / "results"


@dataclass(frozen=True)
class Target:
    name: str
    label: str
    peer: bool  # lives in bench/.venv-peers
    mode: str  # "sse" | "json" | "-" (the response mode its cancel figures are in)
    figures: frozenset[str]

    @property
    def python(self) -> Path:
        return env.PEERS_PYTHON if self.peer else env.PROJECT_PYTHON


ALL = frozenset({"throughput", "cancel", "mass"})
STREAMS = 500  # the mass cancel's open streams
TARGETS = [
    Target("starlette-floor", "Starlette route (floor)", False, "-", frozenset({"throughput"})),
    Target("mcp_asgi", "mcp_asgi (defaults)", False, "sse", ALL),
    Target("mcp_asgi-json", "mcp_asgi response_mode=json", False, "json", ALL),
    Target("mcp_asgi-otel", "mcp_asgi + OTel SDK (batch, no-op)", False, "sse", ALL),
    Target("mcp_asgi-notel", "mcp_asgi telemetry off", False, "sse", frozenset({"throughput"})),
    Target(
        "mcp_asgi-limits",
        "mcp_asgi, per-client limits far above the load",
        False,
        "sse",
        frozenset({"throughput"}),
    ),
    Target(
        "mcp_asgi-core",
        "mcp_asgi, everything optional off, telemetry observer removed",
        False,
        "sse",
        frozenset({"throughput"}),
    ),
    Target("sdk-sse", "mcp SDK MCPServer (SSE)", True, "sse", ALL),
    Target("sdk-json", "mcp SDK MCPServer (json_response)", True, "json", ALL),
    Target("fastmcp-sse", "FastMCP stateless (SSE)", True, "sse", ALL),
    Target("fastmcp-json", "FastMCP stateless (json_response)", True, "json", ALL),
]
BY_NAME = {t.name: t for t in TARGETS}


@dataclass(frozen=True)
class Plan:
    rounds: int
    warmup: float
    duration: float
    cancel_samples: int
    mass_streams: int
    loadgen: str


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Server:
    """One target's server process (uvicorn h11 unless `server` names another), importing
    `mcp_asgi` from `code` (`env.import_path`)."""

    def __init__(
        self,
        target: Target,
        workdir: Path,
        cprofile: Path | None = None,
        server: str = servers.DEFAULT,
        code: Path = env.ROOT,
    ) -> None:
        self.target = target
        self.code = code
        self.cprofile = cprofile
        self.server = server
        self.port = free_port()
        self.exits_path = workdir / f"{target.name}-{self.port}.exits"
        self.exits_path.touch()
        self.log_path = workdir / f"{target.name}-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> float:
        command = [
            str(self.target.python),
            "-m",
            "bench.targets",
            self.target.name,
            "--port",
            str(self.port),
            "--exits",
            str(self.exits_path),
            "--server",
            self.server,
        ]
        if self.cprofile is not None:
            command += ["--cprofile", str(self.cprofile)]
        started = time.monotonic()
        self.spawn(command)
        try:
            load.wait_until_up(self.port, time.monotonic() + 60)
        except RuntimeError:
            self.stop()
            raise RuntimeError(
                f"{self.target.name} did not start: {self.log_path.read_text()[-2000:]}"
            ) from None
        return time.monotonic() - started

    def spawn(self, command: list[str]) -> None:
        """Start the server's `command` (its output to the log) in a process group of its
        own, importing `mcp_asgi` from `code`."""
        with open(self.log_path, "wb") as out:
            self.proc = subprocess.Popen(
                command,
                cwd=self.code,
                env={**os.environ, "PYTHONPATH": env.import_path(self.code)},
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a group: a server's workers go with it
            )

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def throughput(port: int, plan: Plan) -> dict[str, Any]:
    run = load.run_wrk if plan.loadgen == "wrk" else load.run_python_load
    run(port, plan.warmup)
    result = run(port, plan.duration)
    return result


class _Stoppable(Protocol):
    def stop(self) -> None: ...


def side_by_side(names: list[str], measure: Callable[[str], T], where: str) -> dict[str, T]:
    """`measure(name)` for every name at once, each in a thread of its own (callgrind's
    runs, one process each); the results in `names`' order. A measure that raised has
    printed its error: say which are missing, and stop."""
    found: dict[str, T] = {}

    def one(name: str) -> None:
        found[name] = measure(name)

    threads = [threading.Thread(target=one, args=(name,)) for name in names]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    missing = [name for name in names if name not in found]
    if missing:
        raise SystemExit(f"no counts for {missing} on {where} (see the error above)")
    return {name: found[name] for name in names}


@contextlib.contextmanager
def recording(server: _Stoppable, record: dict[str, Any]) -> Iterator[None]:
    """Around one server's measurements: a failure is noted in `record` and logged (the
    run goes on with the next server), the server is always stopped, and the load average
    after it is noted."""
    try:
        yield
    except Exception as exc:
        record["error"] = f"{type(exc).__name__}: {exc}"
        env.log(f"  ERROR {record['error']}")
    finally:
        server.stop()
        record["loadavg_after"] = env.loadavg()


def measure(target: Target, plan: Plan, ids: itertools.count[int], workdir: Path) -> dict[str, Any]:
    server = Server(target, workdir)
    record: dict[str, Any] = {"target": target.name, "loadavg_before": env.loadavg()}
    with recording(server, record):
        record["startup_s"] = server.start()
        record["content_type"] = load.check_echo(server.port)
        exits = load.ExitTimes(server.exits_path)
        if "throughput" in target.figures:
            record["throughput"] = throughput(server.port, plan)
            log_throughput(target, record["throughput"])
        if "cancel" in target.figures:
            record["cancel"] = {}
            for tool in ("slow", "slow_sync"):
                result = load.cancel_samples(
                    server.port, exits, tool, ids, samples=plan.cancel_samples
                )
                record["cancel"][tool] = result
                env.log(f"  cancel {tool:9s} {fmt_latency(result)}")
        if "mass" in target.figures:
            request_ids = [next(ids) for _ in range(plan.mass_streams)]
            result = load.mass_cancel(server.port, server.pid, exits, request_ids)
            record["mass"] = result
            env.log(
                f"  mass cancel of {plan.mass_streams}: {fmt_latency(result)}; "
                f"{result['rss_per_stream_kib']:.1f} KiB/stream"
            )
    return record


def log_throughput(target: Target, result: dict[str, Any]) -> None:
    env.log(
        f"  echo {result['rps']:8.0f} req/s  p50 {result['p50_ms']:.2f} ms  "
        f"p99 {result['p99_ms']:.2f} ms  errors {result['errors']}"
    )


def fmt_latency(result: dict[str, Any]) -> str:
    if not result["cancelled"]:
        return f"never ({result['never']}/{result['samples']} not cancelled)"
    text = f"p50 {result['p50_ms']:.2f} ms p99 {result['p99_ms']:.2f} ms (n={result['cancelled']}"
    if result["never"]:
        text += f", {result['never']} never"
    return text + ")"


def run_rounds(targets: list[Target], plan: Plan) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    ids = itertools.count(1000)
    with tempfile.TemporaryDirectory(prefix="mcp-asgi-bench-") as tmp:
        workdir = Path(tmp)
        for round_no in range(plan.rounds):
            shift = round_no % len(targets)
            order = targets[shift:] + targets[:shift]
            if round_no % 2:
                order.reverse()
            env.log(f"round {round_no + 1}/{plan.rounds}: {', '.join(t.name for t in order)}")
            for target in order:
                env.log(f"- {target.name}")
                record = measure(target, plan, ids, workdir)
                record["round"] = round_no
                records.append(record)
    return records


# -- profiling -------------------------------------------------------------------------


def profile(target: Target, plan: Plan, phase: str, seconds: float) -> Path:
    """py-spy (from the peers' venv) on the target while it is loaded; writes a summary."""
    py_spy = env.PEERS_VENV / "bin" / "py-spy"
    RESULTS.mkdir(parents=True, exist_ok=True)
    if phase == "mass":
        return profile_mass(target, plan)
    with tempfile.TemporaryDirectory(prefix="mcp-asgi-profile-") as tmp:
        server = Server(target, Path(tmp))
        try:
            server.start()
            raw = Path(tmp) / "stacks.txt"
            command = [str(py_spy), "record", "-p", str(server.pid), "-r", "250"]
            command += ["--nonblocking", "-f", "raw", "-o", str(raw)]
            ids = itertools.count(1000)
            exits = load.ExitTimes(server.exits_path)
            if phase == "throughput":
                load.run_wrk(server.port, plan.warmup)
                spy = subprocess.Popen([*command, "-d", str(int(seconds))])
                time.sleep(0.5)
                result = load.run_wrk(server.port, seconds - 1)
                note = f"echo under wrk -c32: {result['rps']:.0f} req/s while sampled"
            else:
                spy = subprocess.Popen([*command, "-d", str(int(seconds))])
                result = load.cancel_samples(server.port, exits, phase, ids, samples=20)
                note = f"cancel {phase} while sampled: {fmt_latency(result)}"
            spy.wait(timeout=seconds + 30)
            out = RESULTS / f"profile-{target.name}-{phase}.txt"
            out.write_text(summarise_stacks(raw.read_text(), note))
        finally:
            server.stop()
    return out


def profile_mass(target: Target, plan: Plan) -> Path:
    """cProfile (deterministic) of the server from just before the mass close until every
    handler has exited: the whole cost of noticing and unwinding `mass_streams` cancels."""
    import pstats

    with tempfile.TemporaryDirectory(prefix="mcp-asgi-profile-") as tmp:
        stats_path = Path(tmp) / "mass.pstats"
        server = Server(target, Path(tmp), cprofile=stats_path)
        try:
            server.start()
            exits = load.ExitTimes(server.exits_path)
            request_ids = list(range(1000, 1000 + plan.mass_streams))
            hooks = (
                lambda: os.kill(server.pid, signal.SIGUSR1),
                lambda: os.kill(server.pid, signal.SIGUSR2),
            )
            result = load.mass_cancel(
                server.port, server.pid, exits, request_ids, around_close=hooks
            )
            deadline = time.monotonic() + 10
            while not stats_path.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.2)
            out = RESULTS / f"profile-{target.name}-mass.txt"
            buffer = io.StringIO()
            buffer.write(
                f"cProfile of the mass cancel of {plan.mass_streams} (close to last exit): "
                f"{fmt_latency(result)}\n"
                "(cProfile inflates the cost of small functions: read the shares, not the "
                "absolute times)\n"
            )
            stats = pstats.Stats(str(stats_path), stream=buffer)
            stats.sort_stats("tottime").print_stats(35)
            stats.sort_stats("cumulative").print_stats(90)
            out.write_text(buffer.getvalue())
        finally:
            server.stop()
    return out


def summarise_stacks(raw: str, note: str, top: int = 30) -> str:
    """Self and inclusive time per function from py-spy's collapsed stacks."""
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [f for f in stack.split(";") if f and not f.startswith("process ")]
        if not frames:
            continue
        frames = [re.sub(r":\d+\)$", ")", f) for f in frames if not f.startswith("thread ")]
        total += count
        own[frames[-1]] += count
        for frame in set(frames):
            inclusive[frame] += count
    lines = [note, f"{total} samples", "", "self %   function"]
    lines += [f"{100 * n / total:6.2f}   {f}" for f, n in own.most_common(top)]
    lines += ["", "incl %   function"]
    lines += [f"{100 * n / total:6.2f}   {f}" for f, n in inclusive.most_common(top * 2)]
    return "\n".join(lines) + "\n"


def git_state() -> str:
    """The commit measured, and whether mcp_asgi/ had uncommitted changes."""

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=env.ROOT, capture_output=True, text=True)
        return done.stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--", "mcp_asgi")
    return f"{head}" + (" plus uncommitted changes in mcp_asgi/" if dirty else "")


# -- main ------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="mcp_asgi against its peers, side by side.")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one short round (a few minutes)")
    parser.add_argument("--targets", help="comma-separated subset of: " + ", ".join(BY_NAME))
    parser.add_argument("--loadgen", choices=["wrk", "python"], help="default: wrk if present")
    parser.add_argument("--duration", type=float, help="seconds of wrk load per measurement")
    parser.add_argument("--samples", type=int, help="cancel samples per tool per round")
    parser.add_argument("--streams", type=int, default=STREAMS, help="mass-cancel streams")
    parser.add_argument("--figures", help="comma-separated subset of: throughput, cancel, mass")
    parser.add_argument("--skip-setup", action="store_true", help="do not touch venvs or apt")
    parser.add_argument("--upgrade-peers", action="store_true", help="reinstall the peers")
    parser.add_argument("--no-report", action="store_true", help="JSON only, no tables/plots")
    parser.add_argument("--profile", metavar="TARGET", help="profile one target and exit")
    parser.add_argument(
        "--profile-phase", default="throughput", help="throughput | mass | slow | slow_sync"
    )
    args = parser.parse_args(argv)

    names = args.targets.split(",") if args.targets else [t.name for t in TARGETS]
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        parser.error(f"unknown targets: {', '.join(unknown)}")
    targets = [BY_NAME[n] for n in names]
    if args.figures:
        wanted = frozenset(args.figures.split(","))
        if wanted - ALL:
            parser.error(f"unknown figures: {', '.join(sorted(wanted - ALL))}")
        targets = [replace(t, figures=t.figures & wanted) for t in targets]

    has_wrk = True
    if not args.skip_setup:
        if any(t.peer for t in targets) or not args.no_report or args.profile:
            env.ensure_peers(upgrade=args.upgrade_peers)
        has_wrk = env.ensure_wrk()
    else:
        has_wrk = load.wrk_available()
    loadgen = args.loadgen or ("wrk" if has_wrk else "python")
    quick = args.quick
    # only the whole run (every target, figure and stream) is the page's: a part of it
    # would replace the page's tables with its few rows
    whole = not (args.targets or args.figures or args.streams != STREAMS)
    kind = "quick" if quick else "full" if whole else "partial"
    plan = Plan(
        rounds=1 if quick else args.rounds,
        warmup=1.0 if quick else 2.0,
        duration=args.duration or (4.0 if quick else 10.0),
        cancel_samples=args.samples or (10 if quick else 20),
        mass_streams=args.streams,
        loadgen=loadgen,
    )

    if args.profile:
        out = profile(BY_NAME[args.profile], plan, args.profile_phase, 15.0)
        print(out.read_text())
        env.log(f"wrote {out.relative_to(env.ROOT)}")
        return

    command = "python -m bench.run " + shlex.join(argv if argv is not None else sys.argv[1:])
    meta = {
        "command": command.strip(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "quick": quick,
        "plan": plan.__dict__,
        "machine": env.machine(),
        "load_generator": load.wrk_version() if loadgen == "wrk" else "python asyncio fallback",
        "versions": {
            "project": env.versions(env.PROJECT_PYTHON, env.PROJECT_DISTS),
            "peers": env.versions(env.PEERS_PYTHON, env.PEER_DISTS)
            if env.PEERS_PYTHON.exists()
            else {},
        },
        "git": git_state(),
        "concurrency": load.CONCURRENCY,
        "close_after_ms": load.CLOSE_AFTER * 1000,
        "targets": {t.name: {"label": t.label, "mode": t.mode, "peer": t.peer} for t in targets},
    }
    env.log(f"load generator: {meta['load_generator']}; plan: {plan}")
    started = time.monotonic()
    records = run_rounds(targets, plan)
    meta["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    meta["wall_s"] = round(time.monotonic() - started, 1)
    meta["machine"]["loadavg_end"] = env.loadavg()

    RESULTS.mkdir(parents=True, exist_ok=True)
    stem = f"{kind}-" + time.strftime("%Y%m%d-%H%M%S")
    path = RESULTS / f"{stem}.json"
    path.write_text(json.dumps({"meta": meta, "records": records}, indent=1) + "\n")
    if kind != "partial":
        (RESULTS / f"latest-{kind}.json").write_text(path.read_text())
    env.log(f"wrote {path.relative_to(env.ROOT)} ({meta['wall_s']} s)")

    if not args.no_report and env.PEERS_PYTHON.exists():
        report = [str(env.PEERS_PYTHON), "-m", "bench.report", str(path)]
        if kind == "full":  # a part's tables go beside its JSON, not into the page
            report.append("--docs")
        subprocess.run(report, cwd=env.ROOT, check=True)


if __name__ == "__main__":
    main()
