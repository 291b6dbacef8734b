"""The example app (examples/fastapi_app) as `make run` starts it: under
`opentelemetry-instrument`, configured only by `OTEL_*` variables, on 127.0.0.1."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import httpx

from .servers import ROOT, free_port, wait_ready

BIN = Path(sys.executable).parent

MAKE_RUN_DEFAULTS = {
    "OTEL_SERVICE_NAME": "library",
    "OTEL_TRACES_EXPORTER": "console",
    "OTEL_METRICS_EXPORTER": "none",
    "OTEL_LOGS_EXPORTER": "none",
    "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
}
"""What `make run` sets when the variables are unset and no OTLP endpoint is given."""


class ExampleApp:
    """`opentelemetry-instrument uvicorn examples.fastapi_app.main:app` with `env` (over
    `make run`'s defaults); stdout and stderr are kept in files under `out`."""

    def __init__(self, out: Path, env: Mapping[str, str]) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.stdout_path = out / "example.stdout"
        self.stderr_path = out / "example.stderr"
        base = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        argv = [
            str(BIN / "opentelemetry-instrument"),
            str(BIN / "uvicorn"),
            "examples.fastapi_app.main:app",
            *("--host", "127.0.0.1", "--port", str(self.port)),
            *("--timeout-graceful-shutdown", "1", "--http", "h11", "--loop", "asyncio"),
        ]
        with self.stdout_path.open("wb") as stdout, self.stderr_path.open("wb") as stderr:
            self.process = subprocess.Popen(
                argv,
                cwd=ROOT,
                env={**base, **MAKE_RUN_DEFAULTS, "PYTHONPATH": str(ROOT), **env},
                stdout=stdout,
                stderr=stderr,
            )
        wait_ready(self._healthy, "the example app", timeout=30)

    def _healthy(self) -> bool:
        assert self.process.poll() is None, self.stderr()
        try:
            return httpx.get(self.url + "/books", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> int:
        """Signal the server and wait for it to exit; its return code."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
        return self.process.wait(30)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def stdout(self) -> str:
        return self.stdout_path.read_text(errors="replace")

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")
