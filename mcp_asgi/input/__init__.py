"""Asking the client for input mid-request (MRTR): `ctx.elicit`, `sample`, `list_roots`.

    rounds          InputRounds / InputRound: questions, answers, InputRequiredResult
    request_state   sealing `requestState` (HMAC, expiry, bindings)

Imports only `mcp_asgi.protocol`; never lifecycle, server, http, bus, telemetry, legacy
or the middleware.
"""

from mcp_asgi.input.rounds import ElicitResult, InputRequired

__all__ = ["ElicitResult", "InputRequired"]
