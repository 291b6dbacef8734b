"""A route's HTTP answer as a `tools/call` result.

    2xx JSON                 structuredContent, and the same JSON as text: an object as
                             it is, anything else (or any answer of a route whose
                             output schema is not an object's) in {"result": ...}, as
                             a decorated tool's
    2xx text/*, SSE          text
    2xx image/*, audio/*     an image or audio block
    2xx anything else        an embedded resource (the route's URL, its bytes)
    2xx without a body       text: the status
    3xx, 4xx, 5xx            isError: the status and the body's detail (FastAPI's
                             `detail`, each problem of a 422), so a model can correct
                             itself; a redirect's Location

An answer cut at `max_response_bytes` says so in a last text block; cut JSON cannot be
read, so it is an `isError` result.
"""

from __future__ import annotations

import base64
import json
from http import HTTPStatus
from typing import Any, Final

from mcp_asgi.protocol.jsonrpc import JsonObject
from mcp_asgi.routes.call import Answer

_DETAIL_LIMIT: Final = 2000


def tool_result(answer: Answer, url: str, max_bytes: int, *, wrap: bool = False) -> JsonObject:
    """The `tools/call` result of `answer`, the route at `url` having answered it; `wrap`:
    its JSON goes in `{"result": ...}` (the route's output schema is not an object's)."""
    media = (answer.header(b"content-type") or "").split(";", 1)[0].strip().lower()
    charset = _charset(answer.header(b"content-type"))
    note = f"[the answer was cut at {max_bytes} bytes (max_response_bytes)]"
    if not 200 <= answer.status < 300:
        return _error(answer, media, charset, note)
    body = answer.body
    if _is_json(media):
        if answer.cut:
            text = body.decode(charset, errors="replace")
            return _text_result([text, note], is_error=True)
        try:
            value = json.loads(body) if body else None
        except ValueError:
            return _text_result([body.decode(charset, errors="replace")])
        structured = {"result": value} if wrap or not isinstance(value, dict) else value
        result = _text_result([json.dumps(structured, ensure_ascii=False)])
        result["structuredContent"] = structured
        return result
    if not body:
        return _text_result([_status(answer.status)])
    blocks: list[JsonObject]
    if media.startswith("text/") or media in ("", "application/x-ndjson"):
        blocks = [{"type": "text", "text": body.decode(charset, errors="replace")}]
    elif media.startswith(("image/", "audio/")):
        kind = "image" if media.startswith("image/") else "audio"
        blocks = [{"type": kind, "data": _b64(body), "mimeType": media}]
    else:
        resource = {"uri": url, "mimeType": media, "blob": _b64(body)}
        blocks = [{"type": "resource", "resource": resource}]
    if answer.cut:
        blocks.append({"type": "text", "text": note})
    return {"content": blocks}


def _error(answer: Answer, media: str, charset: str, note: str) -> JsonObject:
    text = answer.body.decode(charset, errors="replace")
    detail: Any = text
    if _is_json(media) and not answer.cut:
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        if isinstance(value, dict) and "detail" in value:
            detail = _detail(value["detail"])
        elif isinstance(value, dict) and isinstance(value.get("error"), dict):
            detail = str(value["error"].get("message", ""))  # a JSON-RPC error
        elif value is not None:
            detail = json.dumps(value, ensure_ascii=False)
    detail = str(detail).strip()
    phrase = _status(answer.status).split(" ", 2)[-1] + ": "
    detail = detail.removeprefix(phrase)  # "Not Found: ..." after "HTTP 404 Not Found"
    if len(detail) > _DETAIL_LIMIT:
        detail = detail[:_DETAIL_LIMIT] + " ..."
    lines = [_status(answer.status) + (f": {detail}" if detail else "")]
    location = answer.header(b"location")
    if 300 <= answer.status < 400 and location:
        lines.append(f"Location: {location}")
    if answer.cut:
        lines.append(note)
    return _text_result(["\n".join(lines)], is_error=True)


def _detail(detail: Any) -> str:
    """FastAPI's `detail`: a message, or a 422's list of problems (`loc`, `msg`)."""
    if isinstance(detail, str):
        return detail
    if isinstance(detail, list) and all(isinstance(d, dict) for d in detail):
        problems = []
        for item in detail:
            where = ".".join(str(p) for p in item.get("loc", ()))
            problems.append(f"{where}: {item.get('msg', '')}" if where else str(item.get("msg")))
        return "; ".join(problems)
    return json.dumps(detail, ensure_ascii=False)


def _status(status: int) -> str:
    try:
        return f"HTTP {status} {HTTPStatus(status).phrase}"
    except ValueError:
        return f"HTTP {status}"


def _text_result(texts: list[str], *, is_error: bool = False) -> JsonObject:
    result: JsonObject = {"content": [{"type": "text", "text": t} for t in texts]}
    if is_error:
        result["isError"] = True
    return result


def _charset(content_type: str | None) -> str:
    for part in (content_type or "").split(";")[1:]:
        key, _, value = part.strip().partition("=")
        if key.lower() == "charset" and value:
            candidate = value.strip('"')
            try:
                "".encode(candidate)
            except LookupError:
                return "utf-8"
            return candidate
    return "utf-8"


def _is_json(media: str) -> bool:
    return media == "application/json" or media.endswith("+json")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
