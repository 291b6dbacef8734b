"""Asking the client for input mid-request (MRTR): `ctx.elicit`, `sample`, `list_roots`.

    asking          Asking: the questions and their answers, in either era
    form            Form: a form's answer checked against the JSON Schema asked
    rounds          InputRounds / InputRound: 2026-07-28 rounds, InputRequiredResult
    live            LiveInput: 2025-era questions sent as requests, answered by POSTs
    request_state   sealing `requestState` (HMAC, expiry, bindings)

Imports only `mcp_asgi.protocol`; never lifecycle, server, http, bus, telemetry, legacy
or the middleware.
"""

from mcp_asgi.input.asking import ElicitResult
from mcp_asgi.input.rounds import InputRequired

__all__ = ["ElicitResult", "InputRequired"]
