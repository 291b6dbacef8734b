"""A resource's contents, text or binary: what a resource handler may return (one or
several), and what an `EmbeddedResource` block carries."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

from mcp_asgi.protocol.jsonrpc import JsonObject
from mcp_asgi.server.content._fields import (
    base64_text,
    guess_type,
    need_bytes,
    need_optional_str,
    need_str,
    need_uri,
)
from mcp_asgi.server.metadata import check_meta


@dataclass(frozen=True, slots=True)
class TextResource:
    """Text contents of a resource: `TextResource("a,b\\n1,2", mime_type="text/csv")`.

    From a resource handler, `uri` defaults to the URI that was read and `mime_type` to the
    resource's `mime_type=`; inside an `EmbeddedResource`, `uri` is required.
    """

    text: str
    """The text."""
    uri: str | None = field(default=None, kw_only=True)
    """The URI of these contents (with a scheme)."""
    mime_type: str | None = field(default=None, kw_only=True)
    """Their MIME type, if known."""
    meta: Mapping[str, Any] | None = field(default=None, kw_only=True)
    """Their `_meta`."""

    def __post_init__(self) -> None:
        need_str(self, "text", self.text)
        _check(self)

    def to_json(self, *, uri: str | None = None, mime_type: str | None = None) -> JsonObject:
        """MCP's `TextResourceContents`; `uri` and `mime_type` stand in for the ones not
        given."""
        return _contents(self, {"text": self.text}, uri, mime_type)


@dataclass(frozen=True, slots=True)
class BlobResource:
    """Binary contents of a resource, sent base64-encoded as `blob`:
    `BlobResource(pdf_bytes, mime_type="application/pdf")`, or
    `BlobResource.from_file("report.pdf")`.

    From a resource handler, `uri` defaults to the URI that was read and `mime_type` to the
    resource's `mime_type=`; inside an `EmbeddedResource`, `uri` is required.
    """

    blob: bytes
    """The raw bytes (not base64: they are encoded when sent)."""
    uri: str | None = field(default=None, kw_only=True)
    """The URI of these contents (with a scheme)."""
    mime_type: str | None = field(default=None, kw_only=True)
    """Their MIME type, if known."""
    meta: Mapping[str, Any] | None = field(default=None, kw_only=True)
    """Their `_meta`."""

    def __post_init__(self) -> None:
        need_bytes(self, "blob", self.blob)
        _check(self)

    @classmethod
    def from_file(
        cls,
        path: str | os.PathLike[str],
        *,
        uri: str | None = None,
        mime_type: str | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> BlobResource:
        """The bytes of the file at `path`. `uri` defaults to the file's `file://` URI and
        `mime_type` to the type its suffix suggests, if any."""
        file = Path(path)
        return cls(
            file.read_bytes(),
            uri=uri or file.resolve().as_uri(),
            mime_type=mime_type or guess_type(file),
            meta=meta,
        )

    def to_json(self, *, uri: str | None = None, mime_type: str | None = None) -> JsonObject:
        """MCP's `BlobResourceContents`; `uri` and `mime_type` stand in for the ones not
        given."""
        return _contents(self, {"blob": base64_text(self.blob)}, uri, mime_type)


ResourceContents: TypeAlias = TextResource | BlobResource


def _check(contents: ResourceContents) -> None:
    if contents.uri is not None:
        need_uri(contents, contents.uri)
    need_optional_str(contents, "mime_type", contents.mime_type)
    check_meta(contents.meta, owner=type(contents).__name__)


def _contents(
    contents: ResourceContents, body: JsonObject, uri: str | None, mime_type: str | None
) -> JsonObject:
    where = contents.uri or uri
    if where is None:
        raise ValueError(f"{type(contents).__name__} needs a uri here")
    entry: JsonObject = {"uri": where}
    if contents.mime_type or mime_type:
        entry["mimeType"] = contents.mime_type or mime_type
    entry.update(body)
    meta = check_meta(contents.meta, owner=type(contents).__name__)
    if meta is not None:
        entry["_meta"] = meta
    return entry
