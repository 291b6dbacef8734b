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
    steps: Any = awaitable if isinstance(awaitable, types.CoroutineType) else awaitable.__await__()
    try:
        pending = steps.send(None)
    except StopIteration as ended:
        value: T = ended.value
        return value
    return Begun(steps, pending)


def _go_on(steps: Any, pending: Any) -> Generator[Any, Any, Any]:
    """`yield from steps`, entered after its first step yielded `pending`."""
    while True:
        try:
            sent = yield pending
        except GeneratorExit:
            steps.close()
            raise
        except BaseException as thrown:  # a cancellation, most likely: theirs to handle
            try:
                pending = steps.throw(thrown)
            except StopIteration as ended:
                return ended.value
        else:
            try:
                pending = steps.send(sent)
            except StopIteration as ended:
                return ended.value
