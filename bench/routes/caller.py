"""A client process that calls the slow route and is then killed by the compare script:
its connection drops with no cancel notification, as when a client machine goes away.

    python -m bench.routes.caller URL
"""

import sys

import anyio
from mcp import Client


async def main(url: str) -> None:
    async with Client(url) as session:
        await session.call_tool("slow", {})


if __name__ == "__main__":
    anyio.run(main, sys.argv[1])
