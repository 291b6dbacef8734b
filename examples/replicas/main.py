"""Several replicas behind a load balancer, sharing Redis: any replica answers any request
(docs/deployment.md).

With `MCP_BUS_URL` set, tasks live in Redis (a task started on one replica is polled, or
cancelled, on another; a replica that dies leaves its tasks `failed`, not `working`), and
change notifications reach the listen streams of every replica. Each replica needs the same
`MCP_REQUEST_STATE_KEY`, which seals the state of multi-round-trip requests so that another
replica can take the retry. No sticky sessions are needed for 2026-07-28 clients.

Run two replicas from the repository root, with a Redis at localhost:6379, and put a load
balancer (nginx, a Kubernetes Service) in front of ports 8001 and 8002:

    export MCP_BUS_URL=redis://localhost:6379/0
    export MCP_BUS_CHANNEL=reports:changes              # one per application sharing Redis
    export MCP_REQUEST_STATE_KEY=<the same long random secret on every replica>
    uvicorn examples.replicas.main:app --host 127.0.0.1 --port 8001 --lifespan on &
    uvicorn examples.replicas.main:app --host 127.0.0.1 --port 8002 --lifespan on &

A client for the tasks is examples/tasks/client.py. `GET /` is the load balancer's health
check.
"""

from __future__ import annotations

import os
import socket

import anyio
from fastapi import FastAPI
from pydantic import BaseModel

from mcp_asgi import McpMiddleware, McpServer

REPLICA = f"{socket.gethostname()}:{os.getpid()}"
"""Which replica this process is (for the example: a real app rarely needs to know)."""


class Reindexed(BaseModel):
    index: str
    documents: int
    replica: str


mcp = McpServer("search-admin", version="1.0.0", instructions="Maintain the search indexes.")


@mcp.tool(task="required")
async def reindex(index: str, documents: int = 3) -> Reindexed:
    """Rebuild a search index (a task: poll it from any replica, or cancel it there)."""
    for _ in range(documents):
        await anyio.sleep(0.2)  # a tasks/cancel sent to any replica stops it here
    return Reindexed(index=index, documents=documents, replica=REPLICA)


@mcp.tool(annotations={"readOnlyHint": True})
async def replica() -> str:
    """Which replica answered."""
    return REPLICA


app = FastAPI(title="Search admin")
app.add_middleware(McpMiddleware, server=mcp)  # MCP_BUS_URL etc. from the environment


@app.get("/")
async def health() -> dict[str, str]:
    """The load balancer's health check."""
    return {"status": "ok"}
