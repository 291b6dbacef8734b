"""An awaitable's first step taken at once, in the running task: its value if it needed
no wait, else the wait it began, to await later (`Begun`).

The body read takes `receive()`'s first step this way: servers hand over a body that has
already arrived without waiting (uvicorn, Hypercorn, Granian), and then the read needs no
time limit, whose setting up costs more than the read itself. Only where `receive()` does
wait is the rest awaited under the limit.

::

    first = at_once(receive())
    if isinstance(first, Begun):
        message = await first          # the rest of the same awaitable, in the same task
"""

from __future__ import annotations

import types
from collections.abc import Awaitable, Generator, Iterator
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Begun(Generic[T]):
    """An awaitable whose first step has been taken and waits: awaiting this goes on with
    it, as a plain `await` would have (what the task sends or throws in is passed on)."""

    __slots__ = ("_pending", "_steps")

    def __init__(self, steps: Iterator[Any], pending: Any) -> None:
        self._steps = steps
        self._pending = pending

    def __await__(self) -> Generator[Any, Any, T]:
        return _go_on(self._steps, self._pending)


def at_once(awaitable: Awaitable[T]) -> T | Begun[T]:
    """Take `awaitable`'s first step now: its value if it ended there, else a `Begun` to
    await (in the same task). Its exceptions are raised here or from the `Begun`."""
    if isinstance(awaitable, types.CoroutineType):  # most: `async def` (send, no __next__)
        try:
            pending = awaitable.send(None)
        except StopIteration as ended:
            value: T = ended.value
            return value
        return Begun(awaitable.__await__(), pending)  # its iterator: __next__ as well
    steps = awaitable.__await__()  # any iterator: a generator, or a bare one (Granian's)
    try:
        pending = next(steps)
    except StopIteration as ended:
        value = ended.value
        return value
    return Begun(steps, pending)


def _go_on(steps: Any, pending: Any) -> Generator[Any, Any, Any]:
    """`yield from steps`, entered after its first step yielded `pending`: None is sent as
    `next()`, and an iterator without `throw` or `close` gets none (as `yield from` does)."""
    while True:
        try:
            sent = yield pending
        except GeneratorExit:
            close = getattr(steps, "close", None)
            if close is not None:
                close()
            raise
        except BaseException as thrown:  # a cancellation, most likely: theirs to handle
            throw = getattr(steps, "throw", None)
            if throw is None:
                raise
            try:
                pending = throw(thrown)
            except StopIteration as ended:
                return ended.value
        else:
            try:
                pending = next(steps) if sent is None else steps.send(sent)
            except StopIteration as ended:
                return ended.value
