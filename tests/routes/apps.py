"""The FastAPI app whose routes the tests expose as tools: path, query, header and body
parameters, a response model, a recursive model, an auth dependency, a streaming answer,
a slow route that records its cancellation (and its `yield` dependency's close), a route
that watches for a disconnect as it works (for tasks), a form route, a route at the MCP
path; and a token verifier for the MCP endpoint."""

import threading
from collections.abc import AsyncIterator
from typing import Annotated, Any

import anyio
import anyio.lowlevel
from fastapi import Depends, FastAPI, Form, Header, HTTPException, Query, Request
from fastapi.responses import PlainTextResponse, Response, StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel

from mcp_asgi import McpMiddleware, McpServer, McpSettings
from mcp_asgi.auth import InvalidToken, Principal
from mcp_asgi.routes import AppRoutes

from ..helpers import Otel

RESOURCE = "http://127.0.0.1/mcp"
ISSUER = "http://issuer.test"
TOKENS = {
    "alice-token": Principal("alice", frozenset({"items:read", "items:admin"}), {}, None, ISSUER),
    "bob-token": Principal("bob", frozenset({"items:read"}), {}, None, ISSUER),
}


class Item(BaseModel):
    name: str
    price: float
    tags: list[str] = []


class Node(BaseModel):
    label: str
    children: list["Node"] = []


class Record:
    """What the routes saw; set on the server's thread, read on the test's."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.exited = threading.Event()
        self.closed = threading.Event()
        self.stream_closed = threading.Event()
        self.watching = threading.Event()
        self.events: list[str] = []
        self.headers: dict[str, str | None] = {}
        self.state: Any = None


class StaticVerifier:
    """The MCP endpoint's token verifier: the tokens of `TOKENS`."""

    async def verify(self, token: str) -> Principal:
        principal = TOKENS.get(token)
        if principal is None:
            raise InvalidToken("unknown", "Not a token of ours")
        return principal


bearer = HTTPBearer(auto_error=False)


def caller(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Principal:
    """The app's own authentication: a bearer token of its own, or (in process) the MCP
    request's principal; 401 without either."""
    if credentials is not None:
        principal = TOKENS.get(credentials.credentials)
        if principal is None:
            raise HTTPException(401, "Invalid token")
        return principal
    principal = Principal.of(request)
    if principal is None:
        raise HTTPException(401, "Not authenticated")
    return principal


def admin(principal: Annotated[Principal, Depends(caller)]) -> Principal:
    if "items:admin" not in principal.scopes:
        raise HTTPException(403, "Needs the items:admin scope")
    return principal


def build_app(record: Record) -> FastAPI:
    """The app, without the MCP endpoint."""
    app = FastAPI(title="shop")
    app.state.shop = "open"
    items: dict[int, Item] = {1: Item(name="kettle", price=25.0, tags=["kitchen"])}

    async def held(request: Request) -> AsyncIterator[str]:
        """A `yield` dependency of the slow route: records how it was closed."""
        record.events.append("open")
        try:
            yield "resource"
        except BaseException as exc:
            record.events.append(f"closed by {type(exc).__name__}")
            raise
        finally:
            record.closed.set()

    @app.get("/items/{item_id}", tags=["items"], summary="Read an item")
    async def read_item(
        item_id: int,
        request: Request,
        q: str | None = None,
        x_shop_tag: Annotated[str | None, Header()] = None,
    ) -> Item:
        """Read one item by its id."""
        record.headers = {k: request.headers.get(k) for k in ("authorization", "accept-language")}
        record.state = (request.app.state.shop, getattr(request.state, "lifespan", None))
        if item_id not in items:
            raise HTTPException(404, f"Item {item_id} not found")
        item = items[item_id]
        suffix = "".join(f" {p}" for p in (q, x_shop_tag) if p)
        return Item(name=item.name + suffix, price=item.price, tags=item.tags)

    @app.get("/things/{id}", tags=["items"], operation_id="get_thing")
    async def get_thing(id: str, other: Annotated[str, Query(alias="id")] = "") -> dict[str, str]:
        """A path and a query parameter of the same name."""
        return {"path": id, "query": other}

    @app.post("/items", tags=["items"], status_code=201, operation_id="create_item")
    async def create_item(item: Item, notify: bool = False) -> Item:
        """Create an item."""
        items[len(items) + 1] = item
        return item

    @app.put("/items/{item_id}", tags=["items"], operation_id="replace_item")
    async def replace_item(item_id: int, item: Item) -> Item:
        items[item_id] = item
        return item

    @app.delete("/items/{item_id}", tags=["admin"], status_code=204, operation_id="delete_item")
    async def delete_item(item_id: int, who: Annotated[Principal, Depends(admin)]) -> Response:
        items.pop(item_id, None)
        return Response(status_code=204)

    @app.get("/tree", tags=["items"], operation_id="tree")
    async def tree() -> Node:
        return Node(label="root", children=[Node(label="leaf")])

    @app.get("/me", tags=["auth"], operation_id="whoami")
    async def whoami(
        request: Request, who: Annotated[Principal, Depends(caller)]
    ) -> dict[str, Any]:
        return {
            "subject": who.subject,
            "authorization": request.headers.get("authorization"),
            "user": request.user.display_name if "user" in request.scope else None,
        }

    @app.get("/admin/stats", tags=["admin"], operation_id="stats")
    async def stats(who: Annotated[Principal, Depends(admin)]) -> dict[str, int]:
        return {"items": len(items)}

    @app.get("/stream", tags=["stream"], operation_id="stream")
    async def stream(lines: int = 5) -> StreamingResponse:
        async def produce() -> AsyncIterator[str]:
            try:
                for n in range(lines):
                    yield f"line {n}\n"
                    await anyio.lowlevel.checkpoint()
            finally:
                record.stream_closed.set()

        return StreamingResponse(produce(), media_type="text/plain")

    @app.get("/slow", tags=["slow"], operation_id="slow")
    async def slow(resource: Annotated[str, Depends(held)]) -> dict[str, str]:
        record.started.set()
        try:
            await anyio.sleep(30)
        except BaseException as exc:
            record.events.append(f"route {type(exc).__name__}")
            raise
        finally:
            record.exited.set()
        return {"done": resource}

    @app.get("/watch", tags=["tasks"], operation_id="watch")
    async def watch(
        request: Request, resource: Annotated[str, Depends(held)], seconds: float = 30
    ) -> dict[str, Any]:
        """Works for `seconds`, looking for a disconnect as it goes; cancelled, it asks
        `receive()` (shielded) what happened to its client."""
        record.watching.set()
        polls = 0
        try:
            with anyio.move_on_after(seconds):
                while not await request.is_disconnected():
                    polls += 1
                    await anyio.sleep(0.02)
        except BaseException as exc:
            record.events.append(f"route {type(exc).__name__}")
            with anyio.CancelScope(shield=True):
                record.events.append(f"heard {(await request.receive())['type']}")
            raise
        finally:
            record.exited.set()
        return {"done": resource, "disconnected": await request.is_disconnected(), "polls": polls}

    @app.get("/broken", tags=["slow"], operation_id="broken")
    async def broken() -> dict[str, str]:
        raise RuntimeError("secret internals")

    @app.get("/text", tags=["misc"], operation_id="text")
    async def text() -> PlainTextResponse:
        return PlainTextResponse("plain words")

    @app.post("/upload", tags=["items"], operation_id="upload")
    async def upload(name: Annotated[str, Form()]) -> dict[str, str]:
        return {"name": name}

    @app.get("/mcp", tags=["loop"], operation_id="loop")
    async def loop() -> dict[str, str]:
        return {"never": "reached"}

    return app


def mcp_routes_app(
    record: Record,
    *,
    otel: Otel | None = None,
    protected: bool = False,
    routes: AppRoutes | None = None,
    extra: tuple[AppRoutes, ...] = (),
    **settings: Any,
) -> tuple[FastAPI, McpServer, AppRoutes]:
    """The app with McpMiddleware at /mcp serving its routes (default: every GET and
    HEAD, and POST, PUT and DELETE); `protected`: the endpoint verifies bearer tokens."""
    app = build_app(record)
    server = McpServer("shop")

    @server.tool()
    async def ping() -> str:
        """A decorated tool beside the routes."""
        return "pong"

    source = routes or AppRoutes(methods=["GET", "HEAD", "POST", "PUT", "DELETE"])
    server.add_source(source)
    for more in extra:
        server.add_source(more)
    if protected:
        settings.update(auth_resource=RESOURCE, auth_issuers=(ISSUER,))
    app.add_middleware(
        McpMiddleware,
        server=server,
        settings=McpSettings(**settings),
        token_verifier=StaticVerifier() if protected else None,
        tracer_provider=otel.tracer_provider if otel else None,
        meter_provider=otel.meter_provider if otel else None,
    )
    return app, server, source


def lifespan_state(app: FastAPI) -> None:
    """Give `app` a lifespan whose state carries `lifespan="yes"`."""
    from contextlib import asynccontextmanager

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[dict[str, str]]:
        yield {"lifespan": "yes"}

    app.router.lifespan_context = lifespan
