"""The app's own routes as MCP tools: a small order service whose `orders` routes an agent
may call, beside its REST clients (docs/routes-as-tools.md).

Run it from the repository root, then point an MCP client at http://127.0.0.1:8000/mcp:

    uvicorn examples.routes_as_tools.main:app --host 127.0.0.1 --port 8000

`tools/list` shows `list_orders`, `get_order` and `place_order` (the routes tagged
`orders`, GET and POST); `cancel_order` (a DELETE) and `/health` (untagged) stay HTTP only.
A tool call runs the route in process, through the app's middleware, dependencies and
validation, and is cancelled when the MCP client goes away.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import FastAPI, Header, HTTPException, Query
from pydantic import BaseModel, Field

from mcp_asgi import McpMiddleware, McpServer
from mcp_asgi.routes import AppRoutes


class NewOrder(BaseModel):
    item: str = Field(description="What to order.")
    quantity: int = Field(ge=1, le=100, description="How many.")


class Order(NewOrder):
    id: int
    status: str = "placed"
    channel: str = "web"


ORDERS: dict[int, Order] = {
    1: Order(id=1, item="keyboard", quantity=1),
    2: Order(id=2, item="cable", quantity=3, status="shipped"),
}

app = FastAPI(title="Orders")
mcp = McpServer("orders", version="1.0.0", instructions="Look up and place orders.")
mcp.add_source(AppRoutes(include=["tag:orders"], methods=["GET", "POST"]))
app.add_middleware(McpMiddleware, server=mcp)


@app.get("/orders", tags=["orders"], operation_id="list_orders")
async def list_orders(
    status: Annotated[str | None, Query(description="Only orders in this status.")] = None,
) -> list[Order]:
    """List the orders, optionally only those in one status."""
    return [order for order in ORDERS.values() if status in (None, order.status)]


@app.get("/orders/{order_id}", tags=["orders"], operation_id="get_order")
async def get_order(order_id: int) -> Order:
    """One order by its id."""
    if order_id not in ORDERS:
        raise HTTPException(404, f"Order {order_id} not found")
    return ORDERS[order_id]


@app.post("/orders", tags=["orders"], operation_id="place_order", status_code=201)
async def place_order(
    order: NewOrder,
    x_channel: Annotated[str, Header(description="Who places the order.")] = "web",
) -> Order:
    """Place an order."""
    placed = Order(id=max(ORDERS, default=0) + 1, channel=x_channel, **order.model_dump())
    ORDERS[placed.id] = placed
    return placed


@app.delete("/orders/{order_id}", tags=["orders"], operation_id="cancel_order")
async def cancel_order(order_id: int) -> None:
    """Cancel an order: not a tool (DELETE is not in `methods=`)."""
    ORDERS.pop(order_id, None)


@app.get("/health")
async def health() -> dict[str, str]:
    """Not a tool: it has no `orders` tag."""
    return {"status": "ok"}
