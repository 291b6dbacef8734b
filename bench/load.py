"""The client side of the benchmark: requests as the official client sends them, `wrk`
(or a Python fallback) for throughput, and raw sockets for cancellation and memory.

Everything here runs in the driver's process or in `wrk`, never in a server's process.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import random
import re
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PROTOCOL_VERSION = "2026-07-28"
ECHO_TEXT = "hello, benchmark"
CONCURRENCY = 32
CLOSE_AFTER = 0.300  # seconds between sending a slow call and closing its connection
# Plus a random 0-10 ms, so that the close lands at a random phase of a thread tool's
# 10 ms polling (300 ms is a multiple of it: without jitter every sample would land at the
# same phase and measure one point of the distribution).
CLOSE_JITTER = 0.010


# -- requests --------------------------------------------------------------------------


def body(method: str, params: dict[str, Any], request_id: int, *, progress: bool = False) -> bytes:
    """A 2026-07-28 request body with the `_meta` envelope of mcp 2.3.0's client."""
    meta: dict[str, Any] = {
        "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
        "io.modelcontextprotocol/clientInfo": {"name": "mcp", "version": "0.1.0"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    if progress:
        meta["progressToken"] = request_id
    payload = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": method,
        "params": {**params, "_meta": meta},
    }
    return json.dumps(payload, separators=(",", ":")).encode()


def headers(method: str, name: str | None, port: int) -> dict[str, str]:
    """The HTTP headers of mcp 2.3.0's client on the 2026-07-28 path."""
    result = {
        "Host": f"127.0.0.1:{port}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": PROTOCOL_VERSION,
        "Mcp-Method": method,
    }
    if name is not None:
        result["Mcp-Name"] = name
    return result


def tool_call(tool: str, arguments: dict[str, Any], request_id: int, port: int, **kw: Any) -> bytes:
    """A whole HTTP/1.1 `tools/call` request, ready for a socket."""
    payload = body("tools/call", {"name": tool, "arguments": arguments}, request_id, **kw)
    head = headers("tools/call", tool, port)
    head["Content-Length"] = str(len(payload))
    lines = "".join(f"{k}: {v}\r\n" for k, v in head.items())
    return f"POST /mcp HTTP/1.1\r\n{lines}\r\n".encode() + payload


def echo_response(port: int, request_id: int = 1, tool: str = "echo") -> tuple[int, str, bytes]:
    """One echo call: status, content type and body (to check a target before loading it)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        payload = body("tools/call", {"name": tool, "arguments": {"text": ECHO_TEXT}}, request_id)
        conn.request("POST", "/mcp", payload, headers("tools/call", tool, port))
        response = conn.getresponse()
        return response.status, response.getheader("content-type") or "", response.read()
    finally:
        conn.close()


def check_echo(port: int, tool: str = "echo") -> str:
    """Raise unless the target answers `tool` (an echo) correctly; returns the response
    content type."""
    status, content_type, data = echo_response(port, tool=tool)
    if status != 200 or ECHO_TEXT.encode() not in data or b'"result"' not in data:
        raise RuntimeError(f"echo check failed: {status} {content_type} {data[:300]!r}")
    return content_type.split(";")[0]


def wait_until_up(port: int, deadline: float) -> None:
    """Poll until the server answers an echo call."""
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            check_echo(port)
            return
        except (OSError, http.client.HTTPException, RuntimeError) as exc:
            last = exc
            time.sleep(0.05)
    raise RuntimeError(f"server on port {port} did not answer in time: {last}")


# -- statistics ------------------------------------------------------------------------


def percentile(values: Iterable[float], q: float) -> float:
    """The q-th percentile (0-100), linear interpolation between closest ranks."""
    data = sorted(values)
    if not data:
        return float("nan")
    if len(data) == 1:
        return data[0]
    position = (len(data) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(data) - 1)
    return data[low] + (data[high] - data[low]) * (position - low)


def median(values: Iterable[float]) -> float:
    data = [v for v in values if v == v]
    return statistics.median(data) if data else float("nan")


# -- throughput: wrk ---------------------------------------------------------------------

_LUA = """
wrk.method = "POST"
wrk.body = [==[{body}]==]
{headers}
function done(summary, latency, requests)
  io.write(string.format(
    "WRKJSON {{\\"requests\\":%d,\\"duration_us\\":%d,\\"bytes\\":%d," ..
    "\\"connect_errors\\":%d,\\"read_errors\\":%d,\\"write_errors\\":%d," ..
    "\\"status_errors\\":%d,\\"timeouts\\":%d,\\"p50_us\\":%d,\\"p90_us\\":%d," ..
    "\\"p99_us\\":%d,\\"mean_us\\":%.1f,\\"max_us\\":%d}}\\n",
    summary.requests, summary.duration, summary.bytes,
    summary.errors.connect, summary.errors.read, summary.errors.write,
    summary.errors.status, summary.errors.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99),
    latency.mean, latency.max))
end
"""


def wrk_available() -> bool:
    return shutil.which("wrk") is not None


def wrk_version() -> str:
    exe = shutil.which("wrk")
    if exe is None:
        return "not installed"
    out = subprocess.run([exe, "-v"], capture_output=True, text=True, check=False)
    first = (out.stdout or out.stderr).strip().splitlines()
    return first[0] if first else "unknown"


def wrk_script(port: int, tool: str = "echo") -> str:
    payload = body("tools/call", {"name": tool, "arguments": {"text": ECHO_TEXT}}, 1).decode()
    head = headers("tools/call", tool, port)
    head.pop("Host")
    lines = "\n".join(f'wrk.headers["{k}"] = "{v}"' for k, v in head.items())
    return _LUA.format(body=payload, headers=lines)


def run_wrk(
    port: int, seconds: float, connections: int = CONCURRENCY, tool: str = "echo"
) -> dict[str, Any]:
    """Load `tool` (an echo) for `seconds` with `wrk -t1 -c{connections}`; requests/s and
    latencies."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(wrk_script(port, tool))
    try:
        command = [
            "wrk",
            "-t1",
            f"-c{connections}",
            f"-d{max(1, round(seconds))}s",
            "--timeout",
            "10s",
            "-s",
            script.name,
            f"http://127.0.0.1:{port}/mcp",
        ]
        out = subprocess.run(command, capture_output=True, text=True, check=True, timeout=120)
    finally:
        os.unlink(script.name)
    match = re.search(r"^WRKJSON (\{.*\})$", out.stdout, re.MULTILINE)
    if match is None:
        raise RuntimeError(f"wrk printed no summary: {out.stdout} {out.stderr}")
    raw = json.loads(match.group(1))
    errors = sum(raw[k] for k in ("read_errors", "write_errors", "status_errors", "timeouts"))
    errors += raw["connect_errors"]
    return {
        "tool": "wrk",
        "rps": raw["requests"] / (raw["duration_us"] / 1e6),
        "requests": raw["requests"],
        "errors": errors,
        "p50_ms": raw["p50_us"] / 1000,
        "p90_ms": raw["p90_us"] / 1000,
        "p99_ms": raw["p99_us"] / 1000,
        "mean_ms": raw["mean_us"] / 1000,
        "max_ms": raw["max_us"] / 1000,
        "raw": raw,
    }


# -- throughput: the Python fallback -------------------------------------------------------


async def _read_response(reader: asyncio.StreamReader) -> int:
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    lowered = head.lower()
    match = re.search(rb"content-length:\s*(\d+)", lowered)
    if match:
        await reader.readexactly(int(match.group(1)))
    elif b"transfer-encoding: chunked" in lowered:
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            await reader.readexactly(size + 2)
            if size == 0:
                break
    return status


async def _python_load(
    port: int, seconds: float, connections: int, tool: str = "echo"
) -> dict[str, Any]:
    request = tool_call(tool, {"text": ECHO_TEXT}, 1, port)
    latencies: list[float] = []
    errors = 0
    stop_at = time.monotonic() + seconds

    async def worker() -> None:
        nonlocal errors
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            while time.monotonic() < stop_at:
                started = time.monotonic()
                writer.write(request)
                status = await _read_response(reader)
                latencies.append(time.monotonic() - started)
                if status != 200:
                    errors += 1
        finally:
            writer.close()

    started = time.monotonic()
    await asyncio.gather(*(worker() for _ in range(connections)))
    elapsed = time.monotonic() - started
    return {
        "tool": "python",
        "rps": len(latencies) / elapsed,
        "requests": len(latencies),
        "errors": errors,
        "p50_ms": percentile(latencies, 50) * 1000,
        "p90_ms": percentile(latencies, 90) * 1000,
        "p99_ms": percentile(latencies, 99) * 1000,
        "mean_ms": statistics.fmean(latencies) * 1000 if latencies else float("nan"),
        "max_ms": max(latencies, default=float("nan")) * 1000,
    }


def run_python_load(
    port: int, seconds: float, connections: int = CONCURRENCY, tool: str = "echo"
) -> dict[str, Any]:
    """Fallback load generator (asyncio, keep-alive); far weaker than wrk, and it shares
    the two cores with the server, so its figures are a lower bound."""
    return asyncio.run(_python_load(port, seconds, connections, tool))


# -- exit times ----------------------------------------------------------------------------


@dataclass
class ExitTimes:
    """Reads the `start|cancel|done ID T` lines a target's tools append to its exits file."""

    path: Path
    offset: int = 0
    events: dict[str, dict[str, float]] = field(default_factory=dict)

    def poll(self) -> None:
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = f.read()
        complete = data.rfind(b"\n") + 1
        self.offset += complete
        for line in data[:complete].decode().splitlines():
            kind, request_id, stamp = line.split()
            self.events.setdefault(request_id, {})[kind] = float(stamp)

    def get(self, request_id: int, kind: str) -> float | None:
        return self.events.get(str(request_id), {}).get(kind)

    def wait_for(self, ids: list[int], kinds: tuple[str, ...], timeout: float) -> bool:
        """Wait until every id has one of `kinds`; False on timeout."""
        deadline = time.monotonic() + timeout
        pending = set(ids)
        while True:
            self.poll()
            pending = {i for i in pending if not any(self.get(i, k) for k in kinds)}
            if not pending:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.002)


def rss_kib(pid: int) -> int:
    """Resident set size of a process, in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


# -- cancel latency --------------------------------------------------------------------------


def _connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def cancel_samples(
    port: int,
    exits: ExitTimes,
    tool: str,
    ids: Iterable[int],
    *,
    samples: int,
    seconds: float = 2.0,
    give_up_after_never: int = 5,
) -> dict[str, Any]:
    """Close the connection 300 ms into `tool`; latency = tool exit - close, per sample.

    A sample whose tool ran to completion is "never". If the first `give_up_after_never`
    samples are all "never", the rest are skipped (the verdict cannot change, and each
    costs the tool's whole run).
    """
    latencies: list[float] = []
    closes: list[tuple[int, float]] = []
    never = not_started = 0
    id_iter = iter(ids)
    taken = 0
    for _ in range(samples):
        request_id = next(id_iter)
        sock = _connect(port)
        sock.sendall(tool_call(tool, {"seconds": seconds}, request_id, port, progress=True))
        time.sleep(CLOSE_AFTER + random.uniform(0, CLOSE_JITTER))
        closed_at = time.monotonic()
        sock.close()
        taken += 1
        if not exits.wait_for([request_id], ("start",), 1.0):
            not_started += 1
            continue
        exits.wait_for([request_id], ("cancel", "done"), seconds + 1.0)
        cancelled = exits.get(request_id, "cancel")
        if cancelled is None:
            never += 1
            if never == taken and taken >= give_up_after_never:
                break
            continue
        latencies.append(max(0.0, cancelled - closed_at))
        closes.append((request_id, closed_at))
        time.sleep(0.02)
    summary = _latency_summary(latencies, taken=taken, never=never, not_started=not_started)
    _add_noticed(summary, exits, closes)
    return summary


def _add_noticed(
    summary: dict[str, Any], exits: ExitTimes, closes: list[tuple[int, float]]
) -> None:
    """mcp_asgi targets also log when the request scope got the signal: split the latency
    into close -> signal (the server noticed) and signal -> exit (the handler unwound)."""
    time.sleep(0.12)  # "signal" lines are flushed by a background thread every 50 ms
    exits.poll()
    noticed, unwound = [], []
    for request_id, closed_at in closes:
        signalled = exits.get(request_id, "signal")
        cancelled = exits.get(request_id, "cancel")
        if signalled is not None and cancelled is not None:
            noticed.append(round(max(0.0, signalled - closed_at) * 1000, 3))
            unwound.append(round(max(0.0, cancelled - signalled) * 1000, 3))
    if noticed:
        summary["noticed_ms"] = noticed
        summary["unwound_ms"] = unwound


def closed_calls_summary(
    exits: ExitTimes, request_ids: Sequence[int], closed_at: Sequence[float], *, started: int
) -> dict[str, Any]:
    """Cancel latency (close -> the tool's recorded cancel) of calls closed at `closed_at`:
    percentiles, how many never stopped, and how long the server took to notice."""
    latencies: list[float] = []
    closes: list[tuple[int, float]] = []
    never = 0
    for request_id, closed in zip(request_ids, closed_at, strict=True):
        cancelled = exits.get(request_id, "cancel")
        if cancelled is None:
            if exits.get(request_id, "start") is not None:
                never += 1
            continue
        latencies.append(max(0.0, cancelled - closed))
        closes.append((request_id, closed))
    taken = len(request_ids)
    summary = _latency_summary(latencies, taken=taken, never=never, not_started=taken - started)
    _add_noticed(summary, exits, closes)
    return summary


def _latency_summary(
    latencies: list[float], *, taken: int, never: int, not_started: int
) -> dict[str, Any]:
    ms = [x * 1000 for x in latencies]
    return {
        "samples": taken,
        "cancelled": len(ms),
        "never": never,
        "not_started": not_started,
        "p50_ms": percentile(ms, 50) if ms else None,
        "p99_ms": percentile(ms, 99) if ms else None,
        "max_ms": max(ms) if ms else None,
        "latencies_ms": [round(x, 3) for x in ms],
    }


def mass_cancel(
    port: int,
    pid: int,
    exits: ExitTimes,
    request_ids: list[int],
    *,
    seconds: float = 20.0,
    around_close: tuple[Callable[[], None], Callable[[], None]] | None = None,
) -> dict[str, Any]:
    """Open `streams` slow calls, measure the server's RSS, close them all at once.

    Latency per call = its tool's exit - its own close. RSS per stream = (RSS with all
    open - RSS just before opening) / streams.
    """
    time.sleep(0.3)
    rss_before = rss_kib(pid)
    socks: list[socket.socket] = []
    for request_id in request_ids:
        sock = _connect(port)
        sock.sendall(tool_call("slow", {"seconds": seconds}, request_id, port, progress=True))
        socks.append(sock)
    all_started = exits.wait_for(request_ids, ("start",), 60.0)
    started = sum(1 for i in request_ids if exits.get(i, "start") is not None)
    time.sleep(0.5)  # let every stream send its first progress event
    rss_open = rss_kib(pid)
    closed_at: list[float] = []
    if around_close:
        around_close[0]()
    for sock in socks:
        closed_at.append(time.monotonic())
        sock.close()
    close_span = closed_at[-1] - closed_at[0]
    exits.wait_for(request_ids, ("cancel", "done"), 5.0)
    if around_close:
        time.sleep(0.2)  # let the request scopes finish after their handlers
        around_close[1]()
    summary = closed_calls_summary(exits, request_ids, closed_at, started=started)
    summary.update(
        {
            "all_started": all_started,
            "close_span_ms": close_span * 1000,
            "rss_before_kib": rss_before,
            "rss_open_kib": rss_open,
            "rss_per_stream_kib": (rss_open - rss_before) / max(1, started),
        }
    )
    return summary
