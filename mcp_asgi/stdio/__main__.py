"""`python -m mcp_asgi.stdio module:server`: serve an `McpServer` over stdio."""

from __future__ import annotations

import argparse
import logging
import sys

from mcp_asgi.stdio.serve import load_server, run_stdio


def main(argv: list[str] | None = None) -> int:
    """The command line: the server to serve, and the level of the logs (on stderr)."""
    parser = argparse.ArgumentParser(
        prog="python -m mcp_asgi.stdio",
        description="Serve an McpServer over stdio (MCP 2026-07-28 and 2025-era clients).",
    )
    parser.add_argument("server", help="module:attribute naming an McpServer (or a factory)")
    parser.add_argument("--log-level", default="WARNING", help="default: WARNING")
    args = parser.parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=args.log_level.upper())
    sys.path.insert(0, "")
    try:
        server = load_server(args.server)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        run_stdio(server)
    except ValueError as exc:  # it cannot start: a tool source refused a name already taken
        print(f"error: the server cannot start: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
