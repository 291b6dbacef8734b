"""The host app's own routes as tools (`AppRoutes`, a tool source), called in process.

    source    AppRoutes: which routes (selectors, methods), read from the app's OpenAPI
              document; a call: validate, make the request, run the app, read the answer
    openapi   an OpenAPI operation -> the tool's arguments, inputSchema, outputSchema,
              description and annotations (or why it cannot be one)
    refs      $refs resolved: a self-contained JSON Schema
    request   the ASGI scope and JSON body of a call; the caller's identity (the token
              forwarded, or the principal handed over); the re-entry mark
    target    the route a call must reach: values that could lead elsewhere refused,
              the request matched against the app's router before it is sent
    call      the app run on it in the caller's task: answer collected and capped,
              http.disconnect, cancellation
    result    the HTTP answer -> the tools/call result

Owns everything route-specific; the parts every tool source shares (selection, naming,
list-change relay, the catalog) are `mcp_asgi.server.sources` and `catalogs`. Sits above
the server (it imports `server`, `auth`, `protocol`); only the middleware imports it
(the re-entry mark). Never imports settings, inflight, the endpoints, legacy,
telemetry, lifecycle internals or the middleware.
"""

from mcp_asgi.routes.source import AppRoutes

__all__ = ["AppRoutes"]
