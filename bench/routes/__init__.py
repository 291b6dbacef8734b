"""Routes as tools, compared (docs/routes-as-tools.md): the same FastAPI app exposed by
mcp_asgi's `AppRoutes`, fastapi-mcp and `FastMCP.from_fastapi`, each in its own virtual
environment (fastapi-mcp needs `mcp` 1.x), probed by the official MCP Python SDK client.

    app       the shop app every peer exposes (runs in every venv: FastAPI only)
    peer      serve one peer's MCP endpoint for the app (run in the peer's venv)
    compare   make the venvs, serve each peer, probe it, write the table

Not part of `make test`: `python -m bench.routes.compare` (needs the package registries
once, for the peers' venvs).
"""
