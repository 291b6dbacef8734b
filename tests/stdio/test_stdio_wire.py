"""The stdio transport on the wire: a real child process, lines on real pipes."""

from __future__ import annotations

from pathlib import Path

import anyio

from ..helpers import eventually
from .pipe import META, call, cancelled, probe_lines, stdio_server


async def test_cancel_by_notification_writes_nothing(tmp_path: Path) -> None:
    """`notifications/cancelled` cancels the named request (client_notification): nothing is
    written for it, and the pipe goes on serving the next requests."""
    probe = tmp_path / "probe"
    async with stdio_server(probe) as pipe:
        await pipe.send(call(5, "wait", label="five"))
        await eventually(lambda: "started five" in probe_lines(probe), what="the tool to start")
        await pipe.send(cancelled(5))
        await eventually(lambda: "cancelled five client_notification" in probe_lines(probe))
        await pipe.send(call(6, "echo", text="after"))
        reply = await pipe.until_reply(6)
        assert reply["result"]["content"] == [{"type": "text", "text": "after"}]
        await pipe.send(call(7, "echo", text="again"))
        await pipe.until_reply(7)
        assert all(message.get("id") != 5 for message in pipe.seen)


async def test_unknown_or_finished_ids_are_ignored(tmp_path: Path) -> None:
    """A cancel for an id never seen, or for a request already answered, gets no reply and
    changes nothing."""
    async with stdio_server(tmp_path / "probe") as pipe:
        await pipe.send(call(1, "echo", text="one"))
        await pipe.until_reply(1)
        await pipe.send(cancelled(1))
        await pipe.send(cancelled("never-sent"))
        await pipe.send(cancelled({"not": "an id"}))
        await pipe.send(call(2, "echo", text="two"))
        reply = await pipe.until_reply(2)
        assert "result" in reply
        assert [m.get("id") for m in pipe.seen] == [1, 2]


async def test_eof_cancels_everything_in_flight(tmp_path: Path) -> None:
    """Closing stdin cancels every request in flight (client_disconnect) and the server
    exits once their handlers have."""
    probe = tmp_path / "probe"
    async with stdio_server(probe) as pipe:
        for label in ("a", "b", "c"):
            await pipe.send(call(label, "wait", label=label))
        await eventually(lambda: len(probe_lines(probe)) == 3, what="three tools to start")
        await pipe.close_stdin()
        with anyio.fail_after(10):
            assert await pipe.process.wait() == 0
    assert sorted(line for line in probe_lines(probe) if line.startswith("cancelled")) == [
        f"cancelled {label} client_disconnect" for label in ("a", "b", "c")
    ]


async def test_shutdown_answers_what_is_in_flight(tmp_path: Path) -> None:
    """SIGTERM cancels the requests in flight with server_shutdown, each answered with its
    error (the client is still there to read it), and the server exits."""
    probe = tmp_path / "probe"
    async with stdio_server(probe) as pipe:
        await pipe.send(call(1, "wait", label="one"))
        await eventually(lambda: "started one" in probe_lines(probe), what="the tool to start")
        pipe.terminate()
        reply = await pipe.until_reply(1)
        assert reply["error"]["data"] == {"reason": "server_shutdown"}
        with anyio.fail_after(10):
            await pipe.process.wait()
    assert "cancelled one server_shutdown" in probe_lines(probe)


async def test_errors_are_lines_never_tracebacks(tmp_path: Path) -> None:
    """A line that is not JSON, one of more than max_json_values values (not parsed), a
    request without `_meta`, an id already in flight and an unknown method are each
    answered with a JSON-RPC error; a response sent to the server (it sends no requests)
    is ignored; a stray print() goes to stderr, not the protocol."""
    probe = tmp_path / "probe"
    async with stdio_server(probe) as pipe:
        await pipe.send(b"this is not json")
        assert (await pipe.receive())["error"]["code"] == -32700
        await pipe.send(call(1, "echo", text="x", junk=[{}] * 100_000))
        too_many = (await pipe.receive())["error"]
        assert (too_many["code"], too_many["message"]) == (
            -32600,
            "Request body holds more than 100000 JSON values",
        )
        await pipe.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}})
        assert (await pipe.until_reply(2))["error"]["code"] == -32602
        await pipe.send(call(3, "wait", label="three"))
        await pipe.send(call(3, "echo", text="same id"))
        assert (await pipe.until_reply(3))["error"]["code"] == -32600
        await pipe.send({"jsonrpc": "2.0", "id": 4, "method": "nope", "params": {"_meta": META}})
        assert (await pipe.until_reply(4))["error"]["code"] == -32601
        await pipe.send({"jsonrpc": "2.0", "id": 99, "result": {}})
        await pipe.send(call(5, "shout", text="loud"))
        assert (await pipe.until_reply(5))["result"]["content"][0]["text"] == "LOUD"
        await pipe.send(cancelled(3))


async def test_progress_and_logs_are_lines_of_their_request(tmp_path: Path) -> None:
    """Progress (with the request's token) and log messages (at the request's level) come
    before the result, on the same pipe."""
    async with stdio_server(tmp_path / "probe") as pipe:
        meta = {"progressToken": "tok", "io.modelcontextprotocol/logLevel": "info"}
        await pipe.send(call(1, "count", meta, n=2))
        await pipe.until_reply(1)
        methods = [m.get("method") for m in pipe.seen]
        assert methods == [
            "notifications/message",
            "notifications/progress",
            "notifications/progress",
            None,
        ]
        assert pipe.seen[1]["params"]["progressToken"] == "tok"


async def test_max_threads_holds_and_an_abandoned_thread_keeps_its_slot(tmp_path: Path) -> None:
    """max_threads=1 on stdio: a `def` call cancelled while its thread blocks is abandoned
    but keeps the one slot, so the next `def` call's thread starts only once it returns."""
    probe = tmp_path / "probe"
    grace = {"max_threads": "1", "cancel_grace": "0.1", "process_kill_grace": "0.1"}
    async with stdio_server(probe, **grace) as pipe:
        await pipe.send(call(1, "hold", label="a", seconds=2.0))
        await eventually(lambda: "thread a started" in probe_lines(probe))
        await pipe.send(cancelled(1))
        await pipe.send(call(2, "hold", label="b", seconds=0.0))
        reply = await pipe.until_reply(2, limit=15.0)
        assert "result" in reply
        assert all(message.get("id") != 1 for message in pipe.seen)
    threads = [line for line in probe_lines(probe) if line.startswith("thread")]
    assert threads == [
        "thread a started",
        "thread a returned",
        "thread b started",
        "thread b returned",
    ]
