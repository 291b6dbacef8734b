"""OpenTelemetry: one SERVER span per JSON-RPC request, and the metrics of cancellation.

Uses only `opentelemetry-api`; providers are injected or taken from the globals. Never
configures the SDK. Without an SDK every call is the API's cheap no-op.

A telemetry failure never breaks a request: every entry point (`Telemetry.__init__`,
`begin`, `rejected`, each observer hook and `activate`) catches its own exceptions, reports
the first one at WARNING on the `mcp_asgi.telemetry` logger (later ones at DEBUG) and goes on.

    telemetry           Telemetry: the tracer and instruments of one middleware
    request_telemetry   RequestTelemetry: one request's span, start to end
    task_telemetry      TaskTelemetry: the span and metrics of a task's work
    status              the status rules: error or not, and `error.type`
    instruments         the instruments, and the attributes a request's metrics carry
    span_attributes     a span's name and attributes, read from the request
    trace_context       the parent context from `_meta`; activating a context
    noop                the no-SDK fast path
    names               every span, event, attribute and metric name mcp_asgi emits

Observes a request through `mcp_asgi.lifecycle`'s `ScopeObserver` and reads the protocol's
`McpRequest`; never imports the server, input, bus, legacy or the middleware.
"""

from mcp_asgi.telemetry.telemetry import Telemetry

__all__ = ["Telemetry"]
