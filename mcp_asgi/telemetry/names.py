"""Every telemetry name mcp_asgi emits, in one place.

Semantic-convention names follow the MCP conventions (GenAI semconv, Development status)
as of core semconv 1.44.0; ours live under `mcp_asgi.`.
"""

from __future__ import annotations

from typing import Final

SCHEMA_URL: Final = "https://opentelemetry.io/schemas/1.44.0"

# semantic conventions
MCP_METHOD_NAME: Final = "mcp.method.name"
MCP_PROTOCOL_VERSION: Final = "mcp.protocol.version"
MCP_RESOURCE_URI: Final = "mcp.resource.uri"
MCP_SESSION_ID: Final = "mcp.session.id"
JSONRPC_REQUEST_ID: Final = "jsonrpc.request.id"
RPC_RESPONSE_STATUS_CODE: Final = "rpc.response.status_code"
ERROR_TYPE: Final = "error.type"
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
GEN_AI_PROMPT_NAME: Final = "gen_ai.prompt.name"
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"
NETWORK_TRANSPORT: Final = "network.transport"
NETWORK_PROTOCOL_NAME: Final = "network.protocol.name"
NETWORK_PROTOCOL_VERSION: Final = "network.protocol.version"
CLIENT_ADDRESS: Final = "client.address"
CLIENT_PORT: Final = "client.port"
ENDUSER_ID: Final = "enduser.id"  # the principal's subject: only with record_principal

# ours
CANCELLATION_REASON: Final = "mcp_asgi.cancellation.reason"
CANCELLATION_ELAPSED: Final = "mcp_asgi.cancellation.elapsed"
CANCELLATION_LATENCY: Final = "mcp_asgi.cancellation.latency"
CANCELLATION_OUTCOME: Final = "mcp_asgi.cancellation.outcome"
CANCELLATION_AFTER_SIDE_EFFECT: Final = "mcp_asgi.cancellation.after_side_effect"
SIDE_EFFECT_NAME: Final = "mcp_asgi.side_effect.name"
AUTH_OUTCOME: Final = "mcp_asgi.auth.outcome"  # bearer | host, or why it was refused
AUTH_CLIENT_ID: Final = "mcp_asgi.auth.client_id"
AUTH_FAILURE_REASON: Final = "mcp_asgi.auth.failure.reason"
LIMIT: Final = "mcp_asgi.limit"  # the setting a 429 names (rate_limit, max_tasks_per_client, ...)
TASK_STATUS: Final = "mcp_asgi.task.status"  # a task's status (Tasks extension)
CANCELLATION_EVENT: Final = "mcp_asgi.cancellation"
TASK_STATUS_EVENT: Final = "mcp_asgi.task.status"  # a task's status changed
SIDE_EFFECT_EVENT: Final = "mcp_asgi.side_effect"

# metrics
OPERATION_DURATION: Final = "mcp.server.operation.duration"
CANCELLATION_LATENCY_METRIC: Final = "mcp_asgi.cancellation.latency"
CANCELLATIONS: Final = "mcp_asgi.cancellations"
ORPHANS_ACTIVE: Final = "mcp_asgi.orphans.active"
REQUESTS_ACTIVE: Final = "mcp_asgi.requests.active"
BUS_OUTAGES: Final = "mcp_asgi.bus.outages"
AUTH_FAILURES: Final = "mcp_asgi.auth.failures"
LIMITS_REFUSED: Final = "mcp_asgi.limits.refused"  # requests answered 429, by limit
BUS_DROPPED: Final = "mcp_asgi.bus.dropped"
TASKS_ACTIVE: Final = "mcp_asgi.tasks.active"  # tasks whose work runs in this process
TASKS_ENDED: Final = "mcp_asgi.tasks"  # tasks ended here, by final status

DURATION_BUCKETS: Final = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)
LATENCY_BUCKETS: Final = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1,
    2.5,
    5,
    10,
    30,
    60,
)

# `mcp.method.name` values we put on a span for a request we rejected; any other client-sent
# method is recorded as `_OTHER` (it is untrusted input: never a span name or metric key).
OTHER: Final = "_OTHER"
KNOWN_METHODS: Final = frozenset(
    {
        "completion/complete",
        "elicitation/create",
        "initialize",
        "logging/setLevel",
        "notifications/cancelled",
        "notifications/initialized",
        "notifications/message",
        "notifications/progress",
        "notifications/prompts/list_changed",
        "notifications/resources/list_changed",
        "notifications/resources/updated",
        "notifications/roots/list_changed",
        "notifications/subscriptions/acknowledged",
        "notifications/tools/list_changed",
        "ping",
        "prompts/get",
        "prompts/list",
        "resources/list",
        "resources/read",
        "resources/subscribe",
        "resources/templates/list",
        "resources/unsubscribe",
        "roots/list",
        "sampling/createMessage",
        "server/discover",
        "tasks/cancel",
        "tasks/get",
        "tasks/update",
        "subscriptions/listen",
        "tools/call",
        "tools/list",
    }
)

# JSON-RPC codes that are the caller's fault (semconv GenAI #404, plus the 2026-07-28 header,
# capability and version errors, and -32800 "request cancelled"): recorded as
# `rpc.response.status_code`, but not an error on a server span.
CALLER_FAULT_CODES: Final = frozenset(
    {-32700, -32600, -32601, -32602, -32002, -32800, -32020, -32021, -32022}
)
