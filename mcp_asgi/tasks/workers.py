"""`several_workers`: whether this process looks like one of several workers of its server.

What is seen: `WEB_CONCURRENCY` above 1 (the worker count uvicorn and gunicorn default to),
and `--workers N`, `--workers=N`, `-w N` or `-wN` with N above 1 on the command line
(uvicorn, gunicorn, Hypercorn and Granian workers keep their server's argv) or in
`GUNICORN_CMD_ARGS`. Not seen: `workers` in a gunicorn config file,
`uvicorn.run(..., workers=N)`, replicas behind a load balancer.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping, Sequence


def several_workers(
    argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None
) -> str | None:
    """What shows this process is one of several workers (e.g. `WEB_CONCURRENCY=4`), or
    None when nothing does; `argv` and `environ` default to this process's."""
    argv = sys.argv if argv is None else argv
    environ = os.environ if environ is None else environ
    concurrency = environ.get("WEB_CONCURRENCY", "")
    if _count(concurrency) > 1:
        return f"WEB_CONCURRENCY={concurrency}"
    try:
        gunicorn_args = shlex.split(environ.get("GUNICORN_CMD_ARGS", ""))
    except ValueError:  # unbalanced quotes: gunicorn refuses them itself
        gunicorn_args = []
    for where, args in (("on the command line", argv[1:]), ("in GUNICORN_CMD_ARGS", gunicorn_args)):
        workers = _workers_option(args)
        if workers > 1:
            return f"--workers {workers} {where}"
    return None


def _workers_option(args: Sequence[str]) -> int:
    for index, arg in enumerate(args):
        if arg in ("--workers", "-w") and index + 1 < len(args):
            return _count(args[index + 1])
        if arg.startswith("--workers="):
            return _count(arg.partition("=")[2])
        if arg.startswith("-w") and arg[2:].isdigit():
            return _count(arg[2:])
    return 0


def _count(text: str) -> int:
    return int(text) if text.strip().isdigit() else 0
