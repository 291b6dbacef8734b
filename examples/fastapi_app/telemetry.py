"""OpenTelemetry for the example: the SDK is configured the standard way, from the `OTEL_*`
variables, by `opentelemetry-instrument` (opentelemetry-distro) before the app is imported;
this module only shows the library's logs and shuts the providers down at exit.

`make run` runs `opentelemetry-instrument uvicorn examples.fastapi_app.main:app` with spans
on the console (`OTEL_TRACES_EXPORTER=console`) and no metrics, unless an OTLP endpoint is
set; then traces and metrics go there by OTLP/HTTP::

    OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4318 make run
    # a traces-only backend (Jaeger, Phoenix): no metrics, no logs
    OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:6006 OTEL_METRICS_EXPORTER=none make run
    # metrics for Prometheus to scrape, on http://localhost:9464/metrics
    OTEL_METRICS_EXPORTER=prometheus make run

The library itself uses only the OpenTelemetry API (the global providers here).
"""

from __future__ import annotations

import logging

from opentelemetry import metrics, trace

__all__ = ["show_library_logs", "shutdown_providers"]


def shutdown_providers() -> None:
    """Flush and shut down the SDK's global tracer and meter providers (and the logger
    provider, if one was set). Call it at the end of the app's lifespan: uvicorn re-raises
    SIGTERM once it has stopped, so the SDK's own exit hook never runs and spans still in
    the batch (those of the requests cancelled by the shutdown) would be lost."""
    from opentelemetry import _logs

    for provider in (
        trace.get_tracer_provider(),
        metrics.get_meter_provider(),
        _logs.get_logger_provider(),
    ):
        shutdown = getattr(provider, "shutdown", None)  # the API's no-op providers have none
        if callable(shutdown):
            shutdown()


def show_library_logs() -> None:
    """Print `mcp_asgi` log records at INFO and above on stderr (once)."""
    library = logging.getLogger("mcp_asgi")
    if library.handlers:
        return
    handler = logging.StreamHandler()
    handler.setFormatter(
        logging.Formatter("%(levelname)s %(name)s: %(message)s [request %(request_id)s]")
    )
    handler.addFilter(_with_request_id)
    library.addHandler(handler)
    library.setLevel(logging.INFO)


def _with_request_id(record: logging.LogRecord) -> bool:
    if not hasattr(record, "request_id"):
        record.request_id = "-"
    return True
