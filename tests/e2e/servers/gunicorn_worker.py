"""The gunicorn worker docs/deployment.md recommends: uvicorn-worker's, with a graceful
shutdown timeout.

`uvicorn_worker.UvicornWorker` gives uvicorn no `timeout_graceful_shutdown`, so on SIGTERM
uvicorn waits for every request in flight (a listen stream never ends) until gunicorn's
`--graceful-timeout` runs out and the master SIGKILLs the worker: nothing is cancelled,
no reply ends, a request's subprocesses are left running. With a timeout, uvicorn cancels
what is still open when it runs out (reason `server_shutdown`) and runs the lifespan
shutdown. Keep `--graceful-timeout` above it plus `cancel_grace`.
"""

from __future__ import annotations

from typing import Any

from uvicorn_worker import UvicornWorker


class McpUvicornWorker(UvicornWorker):  # type: ignore[misc]  # untyped package
    CONFIG_KWARGS: dict[str, Any] = {**UvicornWorker.CONFIG_KWARGS, "timeout_graceful_shutdown": 1}
