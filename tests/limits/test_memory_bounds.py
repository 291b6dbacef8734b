"""What a request or a 2025-era session may hold in memory is bounded by what it sent
(docs/deployment.md, "Limits and abuse"): counted with tracemalloc, the parse alone and on
a live uvicorn (a call, a listen stream, a task, a session's client info)."""

from __future__ import annotations

import json
import threading
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import pytest

from mcp_asgi import Context, McpServer, McpSettings
from mcp_asgi.protocol.message import TooManyValues, load
from mcp_asgi.protocol.sizes import PER_VALUE, held_bytes, json_held, json_values
from mcp_asgi.testing import McpTestClient, serve

from ..helpers import Probe, mcp_app
from ..servers import LegacyClient, legacy_app
from ..tasks.apps import TASKS
from .test_session_bounds import initialize

pytestmark = pytest.mark.anyio

SLACK = 64 * 1024
"""What one request holds besides its JSON: its connection, scope, span, task."""


def _key(n: int) -> str:
    return f"k{n:x}"


SHAPES: dict[str, Any] = {
    "empty objects": [{}] * 20_000,
    "empty arrays in arrays": [[[]]] * 10_000,
    "one-key objects": [{"a": 0}] * 10_000,
    "one-key objects in one-key objects, distinct keys": [
        {_key(2 * n): {_key(2 * n + 1): 0}} for n in range(4_000)
    ],
    "distinct short strings": [_key(n) for n in range(20_000)],
    "floats and large integers": [n + 0.5 for n in range(10_000)]
    + [10**12 + n for n in range(10_000)],
    "ASCII next to an emoji": ["\U0001f600" + "a" * 100_000],
}


def _values(value: Any) -> int:
    """Values and keys of a parsed value, an empty array or object counted twice."""
    if isinstance(value, dict):
        return 1 + (not value) + sum(1 + _values(v) for v in value.values())
    if isinstance(value, list):
        return 1 + (not value) + sum(_values(v) for v in value)
    return 1


@pytest.mark.parametrize("shape", SHAPES, ids=list(SHAPES))
def test_parsed_json_takes_at_most_its_bound(shape: str) -> None:
    """Each costly shape, parsed: what it holds is at most `held_bytes` (4 bytes per byte of
    text plus PER_VALUE per value), and `json_values` counts its values exactly."""
    text = json.dumps(SHAPES[shape], separators=(",", ":"), ensure_ascii=False).encode()
    values = json_values(text)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        parsed = load(text, values)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert values == _values(parsed)
    assert held <= held_bytes(len(text), values), (held, len(text), values)


@pytest.mark.parametrize(
    ("text", "values"),
    [
        (b"0", 1),
        (b'"[{,:"', 1),
        (b'{"a,":"b:[","c\\"{":["\\\\",{}]}', 8),
        (b'["\\\\\\"[", "\\u005b,"]', 3),
    ],
)
def test_marks_in_strings_are_not_values(text: bytes, values: int) -> None:
    """`[`, `{`, `,` and `:` inside strings, escaped quotes and backslashes included, are
    not counted; one value more than the limit is refused before it is parsed."""
    assert json_values(text) == values == _values(json.loads(text))
    assert load(text, values) == json.loads(text)
    with pytest.raises(TooManyValues):
        load(text, values - 1)


def test_too_many_strings_are_refused_without_splitting_them() -> None:
    """More strings than the limit: known from the quotes alone."""
    assert json_values(b'["a","b","c"]', limit=2) > 2


# -- live -----------------------------------------------------------------------------------

MAX_VALUES = 20_000


class Held:
    """Handlers that hold their request until released (set from the test's thread)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.started = 0
        self.finished = 0
        self._lock = threading.Lock()

    async def hold(self) -> None:
        with self._lock:
            self.started += 1
        while not self.release.is_set():  # noqa: ASYNC110 (set by the test's thread)
            await anyio.sleep(0.01)
        with self._lock:
            self.finished += 1

    async def settled(self) -> None:
        """Wait until every handler that started has finished."""
        with anyio.fail_after(10):
            while self.finished < self.started:  # noqa: ASYNC110 (counted on another thread)
                await anyio.sleep(0.01)


def holding_server(held: Held) -> McpServer:
    server = McpServer("memory")

    @server.tool()
    async def hold(items: list[Any]) -> int:
        """Holds its request until released."""
        await held.hold()
        return len(items)

    @server.tool(task="required")
    async def hold_task(items: list[Any], ctx: Context) -> int:
        """A task that holds its request until released."""
        await ctx.start_task()
        await held.hold()
        return len(items)

    return server


def call_body(client: McpTestClient, tool: str, count: int) -> tuple[bytes, dict[str, str]]:
    """A tools/call of `tool` with `count` empty objects (3 bytes and 2 values each)."""
    body = client.build("tools/call", {"name": tool, "arguments": {"items": [{}] * count}})
    return json.dumps(body, separators=(",", ":")).encode(), client.headers_for(body)


@contextmanager
def traced() -> Iterator[list[int]]:
    """[bytes held at the start, ...]: the caller appends what it measures."""
    tracemalloc.start()
    try:
        yield [tracemalloc.get_traced_memory()[0]]
    finally:
        tracemalloc.stop()


async def test_requests_in_flight_hold_at_most_their_bound() -> None:
    """Four calls, four tasks and four listen streams, each with 9,000 `{}` (18,000 values,
    27 KB): while they live, the process holds at most 5 x body + 100 B x max_json_values
    (+ 64 KiB) for each; the same with 100,000 `{}` (over max_json_values) is 413 and
    holds nothing (24 x its body before the bound)."""
    held = Held()
    app = mcp_app(holding_server(held), max_json_values=MAX_VALUES, rate_limit=None)
    with serve(app) as live:
        client = McpTestClient(live.url + "/mcp", capabilities=TASKS)
        held.release.set()
        await client.call_tool("hold_task", {"items": []})  # warm: the task machinery
        await held.settled()
        fits = [call_body(client, "hold", 9_000) for _ in range(4)]
        tasks = [call_body(client, "hold_task", 9_000) for _ in range(4)]
        too_many = [call_body(client, "hold", 100_000) for _ in range(4)]
        listen = {"notifications": {"toolsListChanged": True}, "junk": [{}] * 9_000}
        statuses: list[int] = []
        held.release.clear()
        held.started = 0
        with traced() as memory:

            async def post(body: bytes, headers: dict[str, str]) -> None:
                statuses.append((await client.post(body, headers)).status)

            async with anyio.create_task_group() as group:
                for body, headers in fits:
                    group.start_soon(post, body, headers)
                for body, headers in tasks:  # answered at once: the work holds the request
                    await post(body, headers)
                for body, headers in too_many:
                    group.start_soon(post, body, headers)
                async with (
                    client.stream("subscriptions/listen", listen) as a,
                    client.stream("subscriptions/listen", listen) as b,
                    client.stream("subscriptions/listen", listen) as c,
                    client.stream("subscriptions/listen", listen) as d,
                ):
                    for stream in (a, b, c, d):
                        assert (await stream.next_message()) is not None  # the ack
                    with anyio.fail_after(10):
                        while held.started < 8 or len(statuses) < 8:  # noqa: ASYNC110
                            await anyio.sleep(0.01)
                    memory.append(tracemalloc.get_traced_memory()[0])
                held.release.set()
    assert sorted(statuses) == [200] * 8 + [413] * 4
    bound = 12 * (5 * len(fits[0][0]) + PER_VALUE * MAX_VALUES + SLACK)
    grown = memory[1] - memory[0]
    assert grown <= bound, (grown, bound)


async def test_a_4_mib_body_of_empty_objects_is_refused_cheaply() -> None:
    """`[{},{},…]` of 4 MiB in a call's arguments, with the default settings: 413 -32600,
    and the server never holds more than a few copies of the body (101 MB parsed)."""
    body_size = 4 * 1024 * 1024
    with serve(mcp_app(holding_server(Held()))) as live:
        client = McpTestClient(live.url + "/mcp")
        body, headers = call_body(client, "hold", (body_size - 4096) // 3)
        assert len(body) <= body_size
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            response = await client.post(body, headers)
            peak = tracemalloc.get_traced_memory()[1] - before
        finally:
            tracemalloc.stop()
    assert response.status == 413
    assert response.final["error"]["code"] == -32600
    assert "JSON values" in response.final["error"]["message"]
    assert peak <= 8 * len(body), peak


async def test_a_session_holds_at_most_max_session_bytes() -> None:
    """48 KiB of `[{},…]` capabilities (it held 1.2 MB) is refused with 400; four 2025-era
    sessions whose capabilities are `[{},…]` up to max_client_info_bytes, then subscribed
    up to max_session_bytes (URIs with an emoji: 4 bytes a character) each hold at most
    max_session_bytes + 64 KiB."""
    settings = McpSettings()
    max_bytes, max_info = settings.max_session_bytes, settings.max_client_info_bytes
    count = max(n for n in range(1000) if json_held({"x": [{}] * n}) <= max_info)
    app = legacy_app(Probe(), rate_limit=None, max_requests_per_client=None)
    with serve(app) as live:
        clients = [LegacyClient(live.url + "/mcp") for _ in range(5)]
        refused = await initialize(clients.pop(), {"x": [{}] * (max_info // 4)})
        assert refused.status == 400
        assert refused.final["error"]["data"]["reason"] == "session_limit"
        with traced() as memory:
            for n, client in enumerate(clients):
                assert (await initialize(client, {"x": [{}] * count})).status == 200
                for m in range(1_000):
                    uri = f"note://{n}-{m}-\U0001f600" + "x" * 12_000
                    answer = await client.call("resources/subscribe", {"uri": uri})
                    if "error" in answer.final:
                        assert answer.final["error"]["data"]["reason"] == "session_limit"
                        break
                else:
                    raise AssertionError("max_session_bytes never refused a subscription")
            memory.append(tracemalloc.get_traced_memory()[0])
    grown = memory[1] - memory[0]
    assert grown <= 4 * (max_bytes + SLACK), grown
