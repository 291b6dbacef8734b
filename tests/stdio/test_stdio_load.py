"""The stdio transport under load: a burst written at once is answered, each request
exactly once, with a bounded number in flight; EOF and SIGTERM in the middle of a burst
stop the server, which writes nothing more than what it owes."""

from __future__ import annotations

from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from ..helpers import eventually
from .pipe import Pipe, call, probe_lines, stdio_server

IN_FLIGHT = 20  # stdio_max_in_flight in these tests
BURST = 1000


async def _answers(pipe: Pipe, count: int) -> list[dict[str, Any]]:
    """The next `count` responses (notifications skipped)."""
    replies: list[dict[str, Any]] = []
    while len(replies) < count:
        message = await pipe.receive(limit=30)
        if "method" not in message:
            replies.append(message)
    return replies


async def _send_burst(pipe: Pipe, requests: list[dict[str, Any]], close: bool = False) -> None:
    await pipe.send(*requests)
    if close:
        await pipe.close_stdin()


async def test_a_burst_is_answered_once_each_with_a_bounded_number_in_flight(
    tmp_path: Path,
) -> None:
    """BURST requests written at once: every id is answered exactly once, and no more than
    stdio_max_in_flight ran at once (the server read no further while that many ran)."""
    async with stdio_server(tmp_path / "probe", stdio_max_in_flight=str(IN_FLIGHT)) as pipe:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_send_burst, pipe, [call(i, "busy") for i in range(BURST)])
            replies = await _answers(pipe, BURST)
        answered = Counter(reply["id"] for reply in replies)
        assert answered == Counter(range(BURST))
        assert all("result" in reply for reply in replies)
        most_at_once = max(int(r["result"]["content"][0]["text"]) for r in replies)
        assert 1 <= most_at_once <= IN_FLIGHT


async def test_eof_mid_burst_stops_serving(tmp_path: Path) -> None:
    """The client closing stdin right after a burst is the spec's shutdown: the server
    exits, and the requests it had not started by then are not served (nor answered)."""
    probe = tmp_path / "probe"
    async with (
        stdio_server(probe, stdio_max_in_flight=str(IN_FLIGHT)) as pipe,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(_send_burst, pipe, [call(i, "busy") for i in range(BURST)], True)
        replies = await _until_exit(pipe)
    answered = Counter(reply["id"] for reply in replies)
    assert all(count == 1 for count in answered.values())
    assert len(answered) < BURST // 2


async def test_eof_and_sigterm_reach_only_what_was_started(tmp_path: Path) -> None:
    """With requests that never end waiting behind stdio_max_in_flight: SIGTERM answers
    exactly the started ones, with server_shutdown, and the server exits; EOF cancels
    exactly those (client_disconnect) and the server exits writing nothing."""
    for stop in ("sigterm", "eof"):
        probe = tmp_path / stop
        async with stdio_server(probe, stdio_max_in_flight=str(IN_FLIGHT)) as pipe:
            await pipe.send(*[call(f"{stop}{i}", "wait", label=f"{stop}{i}") for i in range(200)])
            await eventually(partial(_started, probe), limit=30)
            if stop == "sigterm":
                pipe.terminate()
            else:
                await pipe.close_stdin()
            replies = await _until_exit(pipe)
            started = {line.split()[1] for line in probe_lines(probe) if "started" in line}
        assert len(started) == IN_FLIGHT
        cancelled = [line.split()[1:] for line in probe_lines(probe) if "cancelled" in line]
        if stop == "sigterm":
            assert sorted(reply["id"] for reply in replies) == sorted(started)
            assert all(r["error"]["data"] == {"reason": "server_shutdown"} for r in replies)
            assert sorted(cancelled) == sorted([label, "server_shutdown"] for label in started)
        else:
            assert replies == []
            assert sorted(cancelled) == sorted([label, "client_disconnect"] for label in started)


def _started(probe: Path) -> bool:
    return len(probe_lines(probe)) >= IN_FLIGHT


async def _until_exit(pipe: Pipe) -> list[dict[str, Any]]:
    """Everything the server writes until it exits (with status 0)."""
    messages: list[dict[str, Any]] = []
    with anyio.fail_after(30):
        try:
            while True:
                messages.append(await pipe.receive(limit=30))
        except anyio.IncompleteRead:
            pass
        assert await pipe.process.wait() == 0
    return messages
