"""Why a request was cancelled, and the token that tells thread code about it."""

from __future__ import annotations

import enum
import threading


class CancelReason(str, enum.Enum):
    """The cause of a request's cancellation.

    The values are also the values of the `mcp_asgi.cancellation.reason` span attribute
    and of the `reason` field of the cancellation log record.
    """

    CLIENT_DISCONNECT = "client_disconnect"
    """The client closed the response stream or dropped the connection."""
    TIMEOUT = "timeout"
    """The server's own maximum request duration ran out."""
    SERVER_SHUTDOWN = "server_shutdown"
    """The application is shutting down."""
    CLIENT_NOTIFICATION = "client_notification"
    """A `notifications/cancelled` named the request (stdio, legacy sessions)."""
    SESSION_CLOSED = "session_closed"
    """A legacy 2025-era session ended with the request in flight."""
    TASK_CANCELLED = "task_cancelled"
    """A `tasks/cancel` named the task whose work this scope runs (Tasks extension)."""

    @property
    def client_initiated(self) -> bool:
        """Whether the client asked for this cancellation (then it is not an error)."""
        return self in _CLIENT_INITIATED

    def __str__(self) -> str:
        return self.value


_CLIENT_INITIATED = frozenset(
    {
        CancelReason.CLIENT_DISCONNECT,
        CancelReason.CLIENT_NOTIFICATION,
        CancelReason.SESSION_CLOSED,
        CancelReason.TASK_CANCELLED,
    }
)


class RequestCancelled(Exception):
    """Raised by `CancelToken.raise_if_cancelled()` in thread code of a cancelled request."""

    def __init__(self, reason: CancelReason) -> None:
        super().__init__(f"request cancelled: {reason.value}")
        self.reason = reason
        """Why the request was cancelled."""


class CancelToken:
    """A thread-safe flag that worker-thread code polls to learn it should stop.

    Threads cannot be interrupted: a sync handler receives the token by annotating a
    parameter `token: CancelToken` and checks it between steps. The `threading.Event` that
    `wait()` blocks on is made by the first thread that waits (most requests never do).
    """

    __slots__ = ("_event", "_lock", "_reason")

    def __init__(self) -> None:
        self._reason: CancelReason | None = None
        self._event: threading.Event | None = None
        self._lock = threading.Lock()  # the event is made, or the token set, not both at once

    @property
    def cancelled(self) -> bool:
        """Whether the request has been cancelled."""
        return self._reason is not None

    @property
    def reason(self) -> CancelReason | None:
        """Why the request was cancelled, or None."""
        return self._reason

    def raise_if_cancelled(self) -> None:
        """Raise `RequestCancelled` if the request has been cancelled."""
        if self._reason is not None:
            raise RequestCancelled(self._reason)

    def wait(self, timeout: float | None = None) -> bool:
        """Block up to `timeout` seconds for cancellation; True if cancelled.

        Use it instead of `time.sleep` in thread code so a cancel wakes the thread at once.
        """
        with self._lock:
            if self._reason is not None:
                return True
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        return event.wait(timeout)


def signal_token(token: CancelToken, reason: CancelReason) -> None:
    """Set `token` (the request scope does, once, when its request is cancelled)."""
    with token._lock:
        token._reason = reason
        event = token._event
    if event is not None:
        event.set()
