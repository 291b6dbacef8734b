"""`call_app`, the in-process HTTP exchange, with scripted ASGI apps: what `receive` says
after the answer, after a cut and after a cancel."""

from __future__ import annotations

import anyio
from starlette.requests import Request
from starlette.types import Message, Receive, Scope, Send

from mcp_asgi.routes.call import call_app

SCOPE: Scope = {"type": "http", "method": "GET", "path": "/x", "headers": []}


async def test_receive_gives_the_body_then_disconnect_once_the_answer_is_complete() -> None:
    seen: list[Message] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append(await receive())
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})
        seen.append(await receive())  # as uvicorn: the response is complete

    answer = await call_app(app, SCOPE, b'{"a":1}', max_bytes=100)
    assert (answer.status, answer.body, answer.complete) == (200, b"ok", True)
    assert seen == [
        {"type": "http.request", "body": b'{"a":1}', "more_body": False},
        {"type": "http.disconnect"},
    ]


async def test_a_cut_answer_tells_the_app_and_cancels_its_work() -> None:
    """Past max_bytes: the app's listener hears http.disconnect, its work is cancelled."""
    heard: list[str] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await receive()

        async def listen() -> None:
            heard.append((await receive())["type"])

        async with anyio.create_task_group() as tg:
            tg.start_soon(listen)
            await send({"type": "http.response.start", "status": 200, "headers": []})
            try:
                while True:
                    await send({"type": "http.response.body", "body": b"x" * 7, "more_body": True})
            finally:
                heard.append("cancelled")

    with anyio.fail_after(5):
        answer = await call_app(app, SCOPE, b"", max_bytes=10)
    assert (answer.body, answer.cut, answer.complete) == (b"x" * 10, True, False)
    assert sorted(heard) == ["cancelled", "http.disconnect"]


async def test_after_a_cancel_receive_reports_the_disconnect() -> None:
    """The request cancelled: the route's shielded cleanup asking receive() hears that its
    client left."""
    heard: list[str] = []
    cancelled = False

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await receive()
        try:
            await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True):
                heard.append((await receive())["type"])

    with anyio.CancelScope() as request:

        async def cancel_soon() -> None:
            nonlocal cancelled
            await anyio.sleep(0.01)
            cancelled = True
            request.cancel()

        async with anyio.create_task_group() as tg:
            tg.start_soon(cancel_soon)
            await call_app(app, SCOPE, b"", max_bytes=10, cancelled=lambda: cancelled)
    assert heard == ["http.disconnect"]


async def test_a_probe_that_cancels_its_own_wait_is_not_a_disconnect() -> None:
    """Starlette's `Request.is_disconnected()` cancels its own wait on `receive()`: that
    is not the client leaving, and a listener after it still waits."""
    heard: list[str] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        await receive()
        assert not await request.is_disconnected()
        with anyio.move_on_after(0.05):
            heard.append((await receive())["type"])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})
        heard.append((await receive())["type"])  # the answer is complete: now it is

    answer = await call_app(app, SCOPE, b"", max_bytes=10)
    assert (answer.status, heard) == (200, ["http.disconnect"])


async def test_an_app_that_raises_before_answering_is_a_500() -> None:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        raise RuntimeError("internal detail")

    answer = await call_app(app, SCOPE, b"", max_bytes=10)
    assert (answer.status, answer.body) == (500, b"Internal Server Error")
