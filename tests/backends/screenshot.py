"""Take docs/img/phoenix-cancelled-call.png once: Phoenix and the example app on 127.0.0.1,
a call dropped after its first progress notification, and headless Chromium (Debian's
`chromium`) on Phoenix's trace view of that call.

    .venv/bin/python -m tests.backends.screenshot
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import httpx

from mcp_asgi.testing import McpTestClient

from ..example_app import ExampleApp
from ..servers import ROOT, free_port, wait_ready
from .conftest import PHOENIX, Backend

OUT = ROOT / "docs" / "img" / "phoenix-cancelled-call.png"


async def drop_a_call(url: str) -> None:
    params = {"name": "search_books", "arguments": {"query": "dune", "delay": 0.3}}
    async with McpTestClient(url).stream("tools/call", params, progress=True) as stream:
        assert await stream.next_message() is not None
    await anyio.sleep(1)


def main() -> None:
    workdir = Path(tempfile.mkdtemp())
    port = free_port()
    env = {
        **os.environ,
        "PHOENIX_WORKING_DIR": str(workdir),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(free_port()),
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    url = f"http://127.0.0.1:{port}"
    phoenix = Backend([str(PHOENIX), "serve"], env, workdir / "phoenix.log", url)
    try:
        wait_ready(lambda: phoenix.ready("/healthz"), "Arize Phoenix", timeout=120)
        example = ExampleApp(
            workdir,
            {
                "OTEL_TRACES_EXPORTER": "otlp",
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{url}/v1/traces",
            },
        )
        try:
            anyio.run(drop_a_call, example.url + "/mcp")
        finally:
            example.stop()
        time.sleep(2)
        spans = httpx.get(
            f"{url}/v1/projects/default/spans",
            params={"attribute": "mcp_asgi.cancellation.reason:client_disconnect"},
        ).json()["data"]
        span = spans[0]
        project = httpx.get(f"{url}/v1/projects/default").json()["data"]["id"]
        view = (
            f"{url}/projects/{project}/traces/{span['context']['trace_id']}"
            f"?selectedSpanNodeId={span['id']}"
        )
        subprocess.run(
            [
                "chromium",
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                "--window-size=1600,1000",
                "--virtual-time-budget=15000",
                f"--screenshot={OUT}",
                view,
            ],
            check=True,
            timeout=120,
        )
        print(f"{OUT} <- {view}", file=sys.stderr)
    finally:
        phoenix.stop()


if __name__ == "__main__":
    main()
