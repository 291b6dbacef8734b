"""An ordinary FastAPI service that also serves its tools over MCP at /mcp.

Run it with `make run`, then point an MCP client (2026-07-28) at http://127.0.0.1:8000/mcp.
Its telemetry is configured by the standard `OTEL_*` variables (see telemetry.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from fastapi import FastAPI
from pydantic import BaseModel, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from mcp_asgi import Context, McpError, McpMiddleware, McpServer, McpSettings

from .telemetry import show_library_logs, shutdown_providers


class AppSettings(BaseSettings):
    """The service's own settings, with the MCP endpoint's nested under `mcp`."""

    model_config = SettingsConfigDict(env_prefix="APP_", env_nested_delimiter="__")
    title: str = "Library service"
    mcp: McpSettings = McpSettings()


class Book(BaseModel):
    id: str
    title: str
    author: str
    year: int


BOOKS = {
    book.id: book
    for book in (
        Book(id="dune", title="Dune", author="Frank Herbert", year=1965),
        Book(id="neuromancer", title="Neuromancer", author="William Gibson", year=1984),
        Book(id="snow-crash", title="Snow Crash", author="Neal Stephenson", year=1992),
        Book(id="hyperion", title="Hyperion", author="Dan Simmons", year=1989),
    )
}


class SearchResult(BaseModel):
    query: str
    books: list[Book] = Field(description="Matching books, best first.")


mcp = McpServer("library", version="1.0.0", instructions="Search and read the library catalogue.")


@mcp.tool(annotations={"readOnlyHint": True})
async def search_books(query: str, ctx: Context, delay: float = 0.5) -> SearchResult:
    """Search the catalogue, slowly, reporting progress; stops as soon as the client gives up.

    Args:
        query: words to look for in titles and authors.
        delay: seconds spent on each shelf (to make cancellation visible).
    """
    found: list[Book] = []
    shelves = list(BOOKS.values())
    for index, book in enumerate(shelves, start=1):
        await anyio.sleep(delay)  # a cancelled request stops here
        if query.lower() in f"{book.title} {book.author}".lower():
            found.append(book)
        await ctx.report_progress(index, total=len(shelves), message=f"shelf {index}")
    return SearchResult(query=query, books=found)


@mcp.tool()
def count_words(text: str) -> int:
    """Count the words in a text (a plain `def` tool: it runs in a worker thread)."""
    return len(text.split())


@mcp.resource("library://books/{book_id}", mime_type="application/json")
def book(book_id: str) -> Book:
    """One book of the catalogue."""
    if book_id not in BOOKS:
        raise McpError(-32602, f"Resource not found: library://books/{book_id}")
    return BOOKS[book_id]


@mcp.prompt()
def recommend(genre: str, mood: str = "curious") -> str:
    """Ask for a book recommendation."""
    return f"Recommend a {genre} book from the library for a {mood} reader."


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """At exit, after McpMiddleware has cancelled the calls in flight: flush the telemetry."""
    yield
    shutdown_providers()


settings = AppSettings()
show_library_logs()
app = FastAPI(title=settings.title, lifespan=lifespan)
app.add_middleware(McpMiddleware, server=mcp, settings=settings.mcp)  # the global providers


@app.get("/books")
async def list_books() -> list[Book]:
    """An ordinary REST route, served beside the MCP endpoint."""
    return list(BOOKS.values())
