"""The app each peer exposes: a read, a create, a delete, a route behind a bearer token,
and a slow route that writes what happened to it to `$ROUTES_RECORD` (started, then
cancelled or finished, with the time since the start)."""

import os
import time
from typing import Annotated

import anyio
from fastapi import Depends, FastAPI, HTTPException
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel

TOKEN = "bench-token"
SLOW_SECONDS = 3.0


class Item(BaseModel):
    name: str
    price: float


def record(line: str) -> None:
    with open(os.environ["ROUTES_RECORD"], "a", encoding="utf-8") as out:
        out.write(line + "\n")


def user(
    credentials: Annotated[
        HTTPAuthorizationCredentials | None, Depends(HTTPBearer(auto_error=False))
    ],
) -> str:
    if credentials is None or credentials.credentials != TOKEN:
        raise HTTPException(401, "Not authenticated")
    return "alice"


def build() -> FastAPI:
    app = FastAPI(title="shop")

    @app.get("/items/{item_id}", operation_id="read_item")
    async def read_item(item_id: int, q: str | None = None) -> Item:
        return Item(name=f"item {item_id} {q or ''}".strip(), price=1.5)

    @app.post("/items", operation_id="create_item")
    async def create_item(item: Item) -> Item:
        return item

    @app.delete("/items/{item_id}", operation_id="delete_item")
    async def delete_item(item_id: int) -> dict[str, int]:
        return {"deleted": item_id}

    @app.get("/me", operation_id="whoami")
    async def whoami(who: Annotated[str, Depends(user)]) -> dict[str, str]:
        return {"user": who}

    @app.get("/slow", operation_id="slow")
    async def slow() -> dict[str, str]:
        start = time.monotonic()
        record("started")
        try:
            await anyio.sleep(SLOW_SECONDS)
        except BaseException:
            record(f"cancelled {time.monotonic() - start:.2f}")
            raise
        record(f"finished {time.monotonic() - start:.2f}")
        return {"slow": "done"}

    return app
