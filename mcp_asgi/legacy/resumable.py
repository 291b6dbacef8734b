"""Resumable streams of 2025-era sessions (2025-11-25 Streamable HTTP, SEP-1699).

Every SSE event on a session's streams (a request's POST stream, the GET stream) is first
appended to that stream's log in the shared-state store, then written with its id::

    id: r3f9c2a1d0b4e6f7:5         <stream id>:<position in the store's stream>
    event: message
    data: {"jsonrpc": "2.0", ...}

A POST stream that becomes an event stream opens with a priming event (an id, an empty
`data` and the `retry` field: 2025-11-25 clients only, older ones reject empty data). When
the connection is gone (the client was cut off and `legacy_disconnect_cancels` is False,
or the handler closed it early with `ctx.close_stream()` so that the client polls), the
request runs on and its events are still logged; a GET with `Last-Event-ID` (on any
replica, with a shared store) replays what followed that event, in order and once, then
follows the log until the request's final response (`serve_resumed`). The log of a stream
is `events:<session id>:<stream id>`, bounded (`legacy_resume_events`) and expiring
(`legacy_resume_ttl` after its last event); a request's log is marked finished
(`events:…:done`) with its last event, so a GET resuming from that event ends at once. A
stream id starting with `r` is a request's, with `g` a GET stream's (whose log has no end:
the next GET stream of the session goes on with it). A GET stream's log also says who
writes to it: a notification names its bus event (`ChangeEvent.id`), and a stream that
stops logging ends its turn with a mark, one that resumes it opens its turn with another
(`take_over`, legacy.handover).

While the store is out of reach (`StoreUnavailable`), events are still written, without
ids (and a stream opens without its priming event): the client gets them live, but cannot
resume from them.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Final, Literal, cast

import anyio

from mcp_asgi.http.accept import ResponseMode
from mcp_asgi.http.reply import ReplyState, ReplyWriter, dump, encode_reply, sse_event
from mcp_asgi.store import START, StateStore, StoreUnavailable, slot_tag

Kind = Literal["r", "g"]
_START: Final = b"s"  # the stream's first entry: its id is the priming event's
_MESSAGE: Final = b"m"
_FINAL: Final = b"f"  # the request's response: a follower stops after it
_END: Final = b"e"  # the request ended without one (cancelled): a follower stops
_NOTE: Final = b"n"  # a GET stream's notification: the bus event's id, a newline, the message
_OPENED: Final = b"o"  # a GET stream goes on logging here (it resumed the log)
_STOPPED: Final = b"x"  # the GET stream that logged here stopped (handed over, or gone)


@dataclass(frozen=True, slots=True)
class LogSettings:
    """How long and how much of a stream is kept, and the `retry` the client is told."""

    max_events: int = 1000
    ttl: float = 300.0
    retry_ms: int = 1000


class EventLog:
    """The log of one stream of one session in the store."""

    def __init__(
        self, store: StateStore, session_id: str, stream_id: str, settings: LogSettings
    ) -> None:
        self.stream_id = stream_id
        self.settings = settings
        self._store = store
        self._name = f"events:{slot_tag(session_id)}:{stream_id}"  # the session's slot
        self._done = f"{self._name}:done"  # set with the request's last event

    @classmethod
    def new(cls, store: StateStore, session_id: str, kind: Kind, settings: LogSettings) -> EventLog:
        return cls(store, session_id, kind + secrets.token_hex(8), settings)

    @classmethod
    def of(
        cls, store: StateStore, session_id: str, event_id: str, settings: LogSettings
    ) -> tuple[EventLog, str] | None:
        """The log an event id (`Last-Event-ID`) belongs to and the position after which
        to read; None when it is not one of ours."""
        stream_id, sep, position = event_id.strip().partition(":")
        if not sep or not position or stream_id[:1] not in ("r", "g") or len(stream_id) != 17:
            return None
        if not all(c in "0123456789abcdef" for c in stream_id[1:]):
            return None
        return cls(store, session_id, stream_id, settings), position

    @property
    def kind(self) -> Kind:
        return "g" if self.stream_id.startswith("g") else "r"

    def event_id(self, position: str) -> str:
        return f"{self.stream_id}:{position}"

    async def start(self) -> str:
        """Begin the log; the id the priming event carries."""
        return self.event_id(await self._append(_START))

    async def append(self, body: bytes, *, final: bool = False, note: str | None = None) -> str:
        """Log one message (the request's response when `final`; the notification of the
        bus event whose id is `note`); its event id."""
        if note is not None:
            position = await self._append(_NOTE + note.encode() + b"\n" + body)
        else:
            position = await self._append((_FINAL if final else _MESSAGE) + body)
        if final:
            await self._finished()
        return self.event_id(position)

    async def end(self) -> None:
        """Mark the end of a request that has no response (a follower stops)."""
        await self._append(_END)
        await self._finished()

    async def mark_opened(self) -> None:
        """A GET stream that resumed this log logs here from now on."""
        await self._append(_OPENED)

    async def mark_stopped(self) -> None:
        """The GET stream that logged here has stopped (nothing more from it)."""
        await self._append(_STOPPED)

    async def take_over(
        self, after: str, *, wait: float
    ) -> AsyncGenerator[tuple[str, bytes, str | None]]:
        """The notifications after `after` (event id, the message, its bus event's id), up
        to the point where the stream that logged them has stopped (its mark, with none
        opened after it): waiting for it at most `wait` seconds in all, then
        `TimeoutError`. The stream `after` came from counts as logging until it stops."""
        logging, deadline = True, anyio.current_time() + wait
        while True:
            left = deadline - anyio.current_time()
            if logging and left <= 0:
                raise TimeoutError(f"the stream logging here did not stop within {wait:g}s")
            entries = await self._store.read(self._name, after, wait=left if logging else 0)
            for entry in entries:
                after = entry.position
                kind, body = entry.data[:1], entry.data[1:]
                if kind in (_OPENED, _STOPPED):
                    logging = kind == _OPENED
                elif kind == _NOTE:
                    note, _, message = body.partition(b"\n")
                    yield self.event_id(after), message, note.decode()
                elif kind == _MESSAGE:
                    yield self.event_id(after), body, None
            if not logging and len(entries) < 100:  # read to the end: nobody logs here
                return

    async def exists(self) -> bool:
        """Whether the log holds anything (not expired, and once written)."""
        return bool(await self._store.read(self._name, START, limit=1))

    async def finished(self) -> bool:
        """Whether the request's last event (its response, or the end of a cancelled
        request) is in the log."""
        return await self._store.get(self._done) is not None

    async def follow(
        self, after: str, *, wait: float
    ) -> AsyncIterator[tuple[str, bytes | None, bool]]:
        """The events after `after`, then each new one as it comes: (event id, the message,
        whether it is the last of a request's stream). Yields (.., None, False) when
        nothing came within `wait` seconds (time for a keep-alive). When nothing follows
        `after` in a request's log that is finished (`after` is its last event), the
        request's end at once."""
        if not await self._store.read(self._name, after, limit=1) and await self.finished():
            yield self.event_id(after), b"", True
            return
        while True:
            entries = await self._store.read(self._name, after, wait=wait)
            if not entries:
                yield "", None, False
            for entry in entries:
                after = entry.position
                kind, body = entry.data[:1], entry.data[1:]
                if kind == _END:
                    yield self.event_id(after), b"", True
                    return
                if kind == _NOTE:
                    yield self.event_id(after), body.partition(b"\n")[2], False
                if kind in (_MESSAGE, _FINAL):
                    yield self.event_id(after), body, kind == _FINAL
                    if kind == _FINAL:
                        return

    async def _append(self, data: bytes) -> str:
        s = self.settings
        return await self._store.append(self._name, data, max_len=s.max_events, ttl=s.ttl)

    async def _finished(self) -> None:
        await self._store.set(self._done, b"1", ttl=self.settings.ttl)


def priming(event_id: str, retry_ms: int) -> bytes:
    """The event a resumable stream opens with: its id, `retry`, and empty data."""
    return f"id: {event_id}\nretry: {retry_ms}\ndata: \n\n".encode()


class ResumableWriter(ReplyWriter):
    """A `ReplyWriter` whose SSE events are logged first, so they can be resumed.

    While the connection is live, each event is logged then written with its id. Once it is
    gone (`abandon`, a failed send, or `close_early`), events are only logged, and a write
    reports success when the request outlives its connection (the client may resume),
    failure otherwise (so the scope cancels it, as for any reply).
    """

    __slots__ = (
        "_final",
        "_live",
        "_log",
        "_new_log",
        "_order",
        "_outlives",
        "_prime",
        "_started_log",
        "closed_early",
    )

    def __init__(
        self,
        send: Any,
        mode: ResponseMode,
        log: EventLog | Callable[[], EventLog],
        *,
        prime: bool,
        outlives: bool,
    ) -> None:
        """`log`: the stream's log, or what makes it at the first event (a reply that logs
        nothing, most of them, never has one)."""
        super().__init__(send, mode)
        if isinstance(log, EventLog):
            self._log: EventLog | None = log
            self._new_log: Callable[[], EventLog] | None = None
        else:
            self._log, self._new_log = None, log
        self._prime = prime
        self._outlives = outlives
        self._live = True
        self._final = False
        self._started_log = False
        self._order: anyio.Lock | None = None  # made by the first event (most have none)
        self.closed_early = False
        """`close_early` ended the HTTP response: the client polls, the request goes on."""

    @classmethod
    def reader(cls, send: Any, log: EventLog) -> ResumableWriter:
        """A writer of events read back from `log` (`replay`), which never writes to it."""
        writer = cls(send, "sse", log, prime=False, outlives=False)
        writer._started_log = writer._final = True
        return writer

    @classmethod
    def continuing(cls, send: Any, log: EventLog) -> ResumableWriter:
        """A writer that goes on logging to an existing `log` (a resumed GET stream)."""
        writer = cls(send, "sse", log, prime=False, outlives=False)
        writer._started_log = True
        return writer

    async def notify(self, message: Any, *, note: str | None = None) -> bool:
        """Log and write a notification (`note`: the id of the bus event it tells of)."""
        if self._mode == "json":
            return True
        return await self._emit(dump(message), final=False, note=note)

    async def keepalive(self) -> bool:
        if not self._live:
            return True  # nothing to keep alive; the request goes on
        if self.state is ReplyState.PENDING:
            await self._open_log()
        return await super().keepalive()

    async def finish(self, message: Any, status: int = 200) -> bool:
        if self._final:
            return False
        if (
            self.state is ReplyState.PENDING
            and self._live
            and (self._mode != "sse" or status != 200)
        ):
            return await super().finish(message, status)  # one JSON body: nothing to resume
        body, self.replaced_by = encode_reply(message)
        return await self._emit(body, final=True)

    async def close_early(self) -> bool:
        """End the HTTP response with a `retry` hint; the request goes on, logged."""
        async with self._ordered():
            if self._mode == "json" or not self._live or self.state is ReplyState.DONE:
                return False
            await self._open_log()
            retry = f"retry: {self._event_log().settings.retry_ms}\n\n".encode()
            self._live = False
            self._outlives = self.closed_early = True
            await self._write(retry, final=True)
            return True

    async def replay(self, event_id: str, body: bytes, *, final: bool = False) -> bool:
        """Write an event read back from a log (a resumed stream), without logging it."""
        return await self._write(sse_event(body, event_id), final=final)

    def abandon(self) -> None:
        self._live = False
        super().abandon()

    async def close(self) -> None:
        """End a cancelled request's reply (client still there): its log ends too."""
        await self._end_log()
        if self._live:
            await super().close()

    def end_at_once(self) -> bool:
        return False  # its event log ends too: callers always `await end()`

    async def end(self) -> None:
        await self._end_log()
        await super().end()

    async def _emit(self, body: bytes, *, final: bool, note: str | None = None) -> bool:
        async with self._ordered():
            if self._final:
                return False
            await self._open_log()
            try:
                event_id: str | None = await self._event_log().append(body, final=final, note=note)
            except StoreUnavailable:  # logged once by the store: sent live, not resumable
                event_id = None
            self._final = final
            if self._live:
                if await self._write(sse_event(body, event_id), final=final):
                    return True
                self._live = False
            return self._outlives

    def _event_log(self) -> EventLog:
        """The stream's log, made by its first use."""
        log = self._log
        if log is None:
            log = self._log = cast("Callable[[], EventLog]", self._new_log)()
        return log

    def _ordered(self) -> anyio.Lock:
        """The lock that keeps the events in order (logged, then written)."""
        order = self._order
        if order is None:
            order = self._order = anyio.Lock()
        return order

    async def _open_log(self) -> None:
        """Start the log before the first event; prime a 2025-11-25 client."""
        if self._started_log:
            return
        self._started_log = True
        log = self._event_log()
        try:
            first = await log.start()
        except StoreUnavailable:
            return  # no priming event: nothing to resume from
        if self._prime:
            self._preamble = priming(first, log.settings.retry_ms)

    async def _end_log(self) -> None:
        order = self._order
        if self._final or (not self._started_log and (order is None or not order.locked())):
            return  # ended, or nothing logged and nothing about to be (most: a JSON reply)
        with anyio.CancelScope(shield=True), anyio.move_on_after(1.0):
            async with self._ordered():
                if self._started_log and not self._final and self._event_log().kind == "r":
                    self._final = True
                    with contextlib.suppress(StoreUnavailable):  # a follower then times out
                        await self._event_log().end()
