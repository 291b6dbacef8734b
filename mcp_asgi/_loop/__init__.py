"""The event loop, below every layer: the only code that reaches into anyio's internals or
takes a fast path through asyncio's API (as anyio keeps its own in `_backends`), so an
upgrade breaks in one place. Everything else uses what this package exports, and plain
anyio (the one other asyncio use: the Redis bus' listener, started lazily without a
lifespan, asyncio only).

    switch      MCP_ASGI_PLAIN_ANYIO: force the plain-anyio path everywhere
    current     the running asyncio task (or None: trio, plain); cancel scopes made cheaply,
                cancelled from outside without anyio naming the task that cancels, and
                without anyio's re-delivery once left (drop_redelivery); who sent a
                cancellation (sent_from_within), how many are pending (cancelling)
    cheap_scope the handler's cancel scope: anyio's, entered, cancelled from outside and left
                for less (one loop callback for a turn's re-deliveries)
    eager       at_once: an awaitable's first step taken now (its value, or the wait it began,
                whose next step `step` takes now: its value or WAITING);
                given, ready: an awaitable handed on as it is, a value as an awaitable
    interrupt   within / Waits: waits ended by the task's own cancellation;
                within_after_first_step: no limit for what ends in its first step;
                add_deadline / discard_deadline: a call at a time, on the loop's one timer
    tasks       beside (a one-child task group), Task (an asyncio task of its own: a
                watcher beside its handler),
                checkpoint (anyio's, without its backend lookup on asyncio); one_turn (the
                same, for a caller that knows it runs on asyncio)
    threads     run_in_thread: the worker threads of sync handlers (a pool on asyncio)
    clock       loop_clock: the running loop's clock, callable from threads; task_clock:
                the clock of a task's loop (asked of the task)
    line        Line: places taken first come, first served (plain anyio)

Each fast path has a plain-anyio twin, taken on trio and wherever the switch is on; the
lifecycle tests run both ways. anyio is pinned below its next major (pyproject.toml): the
worker-thread pool (`threads`) and the cancel paths (`current`: its per-task scopes, a
scope's parents and pending re-delivery, the wording of its cancellation message) reach
into anyio 4's asyncio backend.

Imports nothing else from mcp_asgi.
"""

from mcp_asgi._loop.cheap_scope import cheap_scope
from mcp_asgi._loop.clock import Clock, loop_clock, task_clock
from mcp_asgi._loop.current import (
    asyncio_task,
    cancel_from_outside,
    cancelling,
    drop_redelivery,
    entered_cancelling,
    native_task,
    new_cancel_scope,
    on_asyncio,
    sent_from_within,
)
from mcp_asgi._loop.eager import WAITING, Begun, Waiting, at_once, given, ready
from mcp_asgi._loop.interrupt import (
    TIMED_OUT,
    Due,
    TimedOut,
    Waits,
    add_deadline,
    discard_deadline,
    within,
    within_after_first_step,
)
from mcp_asgi._loop.line import Line
from mcp_asgi._loop.switch import plain_anyio, use_plain_anyio
from mcp_asgi._loop.tasks import Beside, Task, beside, checkpoint, one_turn
from mcp_asgi._loop.threads import run_in_thread

__all__ = [
    "TIMED_OUT",
    "WAITING",
    "Begun",
    "Beside",
    "Clock",
    "Due",
    "Line",
    "Task",
    "TimedOut",
    "Waiting",
    "Waits",
    "add_deadline",
    "asyncio_task",
    "at_once",
    "beside",
    "cancel_from_outside",
    "cancelling",
    "cheap_scope",
    "checkpoint",
    "discard_deadline",
    "drop_redelivery",
    "entered_cancelling",
    "given",
    "loop_clock",
    "native_task",
    "new_cancel_scope",
    "on_asyncio",
    "one_turn",
    "plain_anyio",
    "ready",
    "run_in_thread",
    "sent_from_within",
    "task_clock",
    "use_plain_anyio",
    "within",
    "within_after_first_step",
]
