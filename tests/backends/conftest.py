"""Real telemetry backends on 127.0.0.1, started by the tests: Arize Phoenix (an OTLP trace
backend with a query API, from PyPI, in its own venv under .backends/phoenix) and
Prometheus (Debian's `prometheus` package). `make backends` installs them; `make test` and
`make e2e` set MCP_ASGI_BACKENDS=required, so a missing backend fails there instead of
skipping."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import anyio
import httpx
import pytest

from ..servers import ROOT, free_port, wait_ready

PHOENIX = ROOT / ".backends" / "phoenix" / "bin" / "phoenix"
T = TypeVar("T")


def _missing(what: str) -> None:
    message = f"{what} is not installed: run `make backends`"
    if os.environ.get("MCP_ASGI_BACKENDS") == "required":
        pytest.fail(message)
    pytest.skip(message)


class Backend:
    """A backend process with its output in a file."""

    def __init__(self, argv: list[str], env: dict[str, str], log: Path, url: str) -> None:
        self.url = url
        self.log = log
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                argv, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=log.parent
            )

    def ready(self, path: str) -> bool:
        assert self.process.poll() is None, self.log.read_text(errors="replace")[-2000:]
        try:
            return httpx.get(self.url + path, timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


@pytest.fixture(scope="session")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backend]:
    """Arize Phoenix: OTLP/HTTP at `{url}/v1/traces`, spans at `{url}/v1/projects/…/spans`."""
    if not PHOENIX.exists():
        _missing("Arize Phoenix")
    workdir = tmp_path_factory.mktemp("phoenix")
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "PHOENIX_"))},
        "PHOENIX_WORKING_DIR": str(workdir),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(free_port()),
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    backend = Backend(
        [str(PHOENIX), "serve"], env, workdir / "phoenix.log", f"http://127.0.0.1:{port}"
    )
    try:
        wait_ready(lambda: backend.ready("/healthz"), "Arize Phoenix", timeout=90)
        yield backend
    finally:
        backend.stop()


async def poll(check: Callable[[], T | None], what: str, limit: float = 20) -> T:
    """Ask a backend until it has the answer (ingestion and scrapes are asynchronous)."""
    with anyio.move_on_after(limit):
        while (found := await anyio.to_thread.run_sync(check)) is None:  # noqa: ASYNC110
            await anyio.sleep(0.5)
        return found
    raise AssertionError(f"timed out waiting for {what}")


def executable(name: str) -> str:
    """The path of a backend's program (Debian's `prometheus` package ships `promtool`)."""
    found = shutil.which(name)
    if found is None:
        _missing(name)
    assert found is not None
    return found


class Prometheus(Backend):
    """Prometheus scraping one target every second."""

    def api(self, path: str, **params: str) -> Any:
        """The `data` of a Prometheus HTTP API answer; AssertionError with Prometheus's
        message if it is an error (a PromQL parse error is a 400)."""
        response = httpx.get(f"{self.url}/api/v1/{path}", params=params, timeout=5)
        body = response.json()
        assert body["status"] == "success", (params, body.get("error"))
        return body["data"]

    def query(self, promql: str) -> list[dict[str, Any]]:
        """An instant PromQL query's result rows."""
        rows: list[dict[str, Any]] = self.api("query", query=promql)["result"]
        return rows

    def by_reason(self, promql: str) -> dict[str, float]:
        """An instant PromQL query's values by `mcp_asgi_cancellation_reason`."""
        return {
            row["metric"]["mcp_asgi_cancellation_reason"]: float(row["value"][1])
            for row in self.query(promql)
        }


def start_prometheus(workdir: Path, target: str, rule_files: Sequence[Path] = ()) -> Prometheus:
    """Prometheus (Debian's package) scraping `target` (host:port) and evaluating the rules
    of `rule_files` every second."""
    config = workdir / "prometheus.yml"
    rules = "".join(f"  - '{path}'\n" for path in rule_files)
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        + (f"rule_files:\n{rules}" if rules else "")
        + f"scrape_configs:\n  - job_name: library\n    static_configs:\n"
        f"      - targets: ['{target}']\n"
    )
    port = free_port()
    argv = [
        executable("prometheus"),
        f"--config.file={config}",
        f"--storage.tsdb.path={workdir / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
    ]
    backend = Prometheus(
        argv, dict(os.environ), workdir / "prometheus.log", f"http://127.0.0.1:{port}"
    )
    wait_ready(lambda: backend.ready("/-/ready"), "Prometheus", timeout=30)
    return backend
