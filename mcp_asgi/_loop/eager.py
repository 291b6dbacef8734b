"""An awaitable's first step taken at once, in the running task: its value if it needed
no wait, else the wait it began, to await later (`Begun`).

The body read takes `receive()`'s first step this way: servers hand over a body that has
already arrived without waiting (uvicorn, Hypercorn, Granian), and then the read needs no
time limit, whose setting up costs more than the read itself. Only where `receive()` does
wait is the rest awaited under the limit. A request's handler is called this way too: one
that answers without waiting needs no watcher beside it.

::

    first = at_once(receive())
    if isinstance(first, Begun):
        message = await first          # the rest of the same awaitable, in the same task
"""

from __future__ import annotations

import asyncio
import enum
import logging
import types
from collections.abc import Awaitable, Generator
from typing import Any, Final, Generic, Protocol, TypeVar

T = TypeVar("T")


class Thrown(Protocol):
    """Who hears first of what the task throws into a `Begun` (`Begun.tell`)."""

    def thrown(self, exc: BaseException) -> None: ...


class Begun(Generic[T]):
    """An awaitable whose first step has been taken and waits: awaiting this goes on with
    it, as a plain `await` would have (what the task sends or throws in is passed on).

    It is its own iterator (no generator of its own around the awaitable's steps: a
    coroutine is sent to directly, an iterator stepped with `next`, as `yield from`
    does; one without `throw` or `close` gets none)."""

    __slots__ = ("_coroutine", "_pending", "_steps", "_told")

    def __init__(self, steps: Any, pending: Any, coroutine: bool) -> None:
        self._steps = steps
        self._pending = pending  # what its first step yielded, handed out first
        self._coroutine = coroutine  # `steps` has send/throw/close (a coroutine)
        self._told: Thrown | None = None

    def tell(self, listener: Thrown) -> Begun[T]:
        """Have `listener.thrown(exc)` called with what the task throws in (a
        cancellation, most likely) before the awaitable hears of it: a request's scope
        records a cancellation from outside this way before its handler sees it."""
        self._told = listener
        return self

    def __await__(self) -> Generator[Any, Any, T]:
        return self  # an iterator with send and throw

    def __iter__(self) -> Begun[T]:
        return self

    def send(self, value: Any = None) -> Any:
        pending = self._pending
        if pending is not _TAKEN:  # the first step's yield, handed to the task now
            self._pending = _TAKEN
            # (`woken`, written out: every resumed wait passes here)
            if not (isinstance(pending, asyncio.Future) and pending.done()):
                return pending
            value = None  # a wait over already: gone on with at once, no turn of the loop
        if self._coroutine:
            return self._steps.send(value)
        return next(self._steps) if value is None else self._steps.send(value)

    __next__ = send  # a task resumes with `next`: no second frame for it

    def throw(self, exc: Any, *rest: Any) -> Any:
        """`exc`: an exception (what asyncio's tasks throw), or its type with the value
        and traceback after it (the older form, passed on as it came)."""
        try:
            if self._told is not None:
                told = exc if isinstance(exc, BaseException) or not rest else rest[0]
                if isinstance(told, BaseException):
                    try:
                        self._told.thrown(told)
                    except Exception:  # the listener's failure never keeps it from the awaitable
                        _logger.exception("a listener of a thrown exception failed")
                del told
            # `_throw_in`, written out: a cancellation unwinds through one frame less
            self._pending = _TAKEN
            if self._coroutine:
                return self._steps.throw(exc, *rest)
            throw = getattr(self._steps, "throw", None)
            if throw is None:
                raise exc if isinstance(exc, BaseException) else exc(*rest[:1])
            return throw(exc, *rest)
        finally:  # what comes back out holds this frame in its traceback: no cycle
            del exc, rest

    def _throw_in(self, exc: Any, *rest: Any) -> Any:
        try:
            self._pending = _TAKEN
            throw = getattr(self._steps, "throw", None)
            if throw is None:
                raise exc if isinstance(exc, BaseException) else exc(*rest[:1])
            return throw(exc, *rest)
        finally:  # what comes back out holds this frame in its traceback: no cycle
            del exc, rest

    def close(self) -> None:
        close = getattr(self._steps, "close", None)
        if close is not None:
            close()

    @classmethod
    def raising(cls, exc: BaseException) -> Begun[Any]:
        """One that raises `exc` when it is gone on with (where a step taken elsewhere
        failed, to be raised in the task that goes on with it)."""
        return cls(_Raises(exc), _TAKEN, True)

    @property
    def woken(self) -> bool:
        """Whether what it waits for is over already (an asyncio future that is done): its
        next step goes on at once."""
        pending = self._pending
        return isinstance(pending, asyncio.Future) and pending.done()

    @property
    def pending(self) -> Any:
        """What it waits for, not yet handed to a task (`_TAKEN` once handed out)."""
        return self._pending

    def step(self) -> T | Waiting:
        """Take its next step now, in the running task, instead of awaiting it (what it
        waited for is over): its value if it ends there, else `WAITING` (it waits again:
        `pending`). Its exceptions are raised."""
        self._pending = _TAKEN
        steps = self._steps
        try:  # (the end caught here: a `StopIteration` through no frame of the caller's)
            self._pending = steps.send(None) if self._coroutine else next(steps)
        except StopIteration as ended:
            value: T = ended.value
            return value
        return WAITING

    def abandon(self) -> None:
        """Give it up, in the running task: what it waits for is cancelled (an asyncio
        future) and a `CancelledError` is thrown in, as a task's cancellation would; closed
        if it waits on regardless. Its other exceptions are raised."""
        pending, self._pending = self._pending, _TAKEN
        if isinstance(pending, asyncio.Future):
            pending.cancel()
        try:  # (not through `throw`: no listener hears a cancellation of our own)
            self._throw_in(asyncio.CancelledError())
        except (asyncio.CancelledError, StopIteration):
            return
        self.close()


class Waiting(enum.Enum):
    """`Begun.step`'s answer when the awaitable waits again."""

    WAITING = "waiting"


WAITING: Final = Waiting.WAITING

_logger = logging.getLogger("mcp_asgi")  # (_loop imports nothing else of mcp_asgi)
_TAKEN: Any = object()  # `Begun._pending` once its first yield was handed out


class _Raises:
    """The steps of `Begun.raising`: `exc` at the first, whether sent or thrown into (a
    cancellation thrown in to give it up raises `exc` all the same: never lost)."""

    __slots__ = ("_exc",)

    def __init__(self, exc: BaseException) -> None:
        self._exc: BaseException | None = exc

    def send(self, _: Any) -> Any:
        exc, self._exc = self._exc, None
        if exc is None:
            raise StopIteration
        raise exc

    def throw(self, *_: Any) -> Any:
        return self.send(None)

    def close(self) -> None:
        self._exc = None


def given(awaitable: Awaitable[T]) -> Awaitable[T]:
    """`awaitable` itself: for a call that takes a function making what it awaits (`within`,
    `Waits.run`) when the awaitable is already made (a `Begun`)."""
    return awaitable


async def ready(value: T) -> T:
    """`value`, as an awaitable (where an awaitable is handed back and the answer is known)."""
    return value


def at_once(awaitable: Awaitable[T]) -> T | Begun[T]:
    """Take `awaitable`'s first step now: its value if it ended there, else a `Begun` to
    await (in the same task). Its exceptions are raised here or from the `Begun`."""
    if isinstance(awaitable, types.CoroutineType):  # most: `async def` (send, no __next__)
        try:
            pending = awaitable.send(None)
        except StopIteration as ended:
            value: T = ended.value
            return value
        return Begun(awaitable, pending, True)
    steps = awaitable.__await__()  # any iterator: a generator, or a bare one (Granian's)
    try:
        pending = next(steps)
    except StopIteration as ended:
        value = ended.value
        return value
    return Begun(steps, pending, False)
