"""The soak replica's opt-in memory diagnostics (SOAK_DIAG=1 in the replica's environment;
off, none of this runs): what its RSS is made of, to tell Python objects that grow from
memory the allocator holds after they are freed.

- GET /soak/diag: `sys.getallocatedblocks()` (pymalloc's live blocks) and the totals of
  `sys._debugmallocstats()` (its arenas, and the bytes used and free in them), the
  resident KB of the heap, the other anonymous mappings and the files, the objects the
  collector tracks and the types whose count grew most since the first call, glibc's
  `mallinfo2()` (`arena`: bytes of the main heap got with brk; `hblkhd`: bytes in mmapped
  chunks; `uordblks`: bytes in use; `fordblks`: bytes free but kept), and, with
  SOAK_TRACEMALLOC=<frames>, tracemalloc's traced and peak bytes (?collect=1: after
  `gc.collect()`).
- GET /soak/diag/baseline: a tracemalloc snapshot to compare against (after the warm-up).
- GET /soak/diag/top?n=25: the n tracebacks whose traced size grew most since it.
- GET /soak/diag/referrers?type=socket&n=3: what refers to the newest n objects of a type.
- GET /soak/diag/trim: `malloc_trim(0)`, and RSS and mallinfo2 before and after it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import json
import os
import sys
import tempfile
import tracemalloc
import types
from collections import Counter
from typing import Any

from starlette.types import Receive, Scope, Send

PREFIX = "/soak/diag"
ENABLED = os.environ.get("SOAK_DIAG", "") not in ("", "0")
FRAMES = int(os.environ.get("SOAK_TRACEMALLOC", "0") or "0")


class _Mallinfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
_mallinfo2 = getattr(_libc, "mallinfo2", None)
if _mallinfo2 is not None:
    _mallinfo2.restype = _Mallinfo2
_first_types: Counter[str] | None = None
_baseline: tracemalloc.Snapshot | None = None

if ENABLED and FRAMES:
    tracemalloc.start(FRAMES)


def rss_kb() -> int:
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("VmRSS"))
    return int(line.split()[1])


def mallinfo() -> dict[str, int] | None:
    """glibc's mallinfo2() as a dict (None where the libc has none)."""
    if _mallinfo2 is None:
        return None
    info = _mallinfo2()
    return {field[0]: int(getattr(info, field[0])) for field in _Mallinfo2._fields_}


def pymalloc() -> dict[str, int]:
    """sys._debugmallocstats()'s totals (it writes them to fd 2): pymalloc's arenas (1 MiB
    each, mmapped) and the bytes in their blocks, used and free, and in their unused
    pools."""
    with tempfile.TemporaryFile("w+") as out:
        sys.stderr.flush()
        saved = os.dup(2)
        try:
            os.dup2(out.fileno(), 2)
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        out.seek(0)
        text = out.read()
    totals = {}
    for line in text.splitlines():
        if line.startswith("# ") and "=" in line:
            name, value = line[2:].split("=")
            totals[name.strip().replace(" ", "_")] = int(value.strip().replace(",", ""))
        elif "unused pools" in line:
            totals["unused_pool_bytes"] = int(line.split("=")[1].strip().replace(",", ""))
    return totals


def maps() -> dict[str, int]:
    """The resident KB of this process's mappings (/proc/self/smaps): the brk heap (glibc's
    main arena), other anonymous mappings (pymalloc's arenas, glibc's mmapped chunks,
    stacks) and files (the interpreter, the extension modules)."""
    kb = {"heap_kb": 0, "anon_kb": 0, "file_kb": 0}
    kind = "anon_kb"
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            first = line.split(maxsplit=6)
            if "-" in first[0] and len(first) >= 5 and ":" not in first[0]:
                name = first[5].strip() if len(first) > 5 else ""
                kind = "heap_kb" if name == "[heap]" else "file_kb" if "/" in name else "anon_kb"
            elif first[0] == "Rss:":
                kb[kind] += int(first[1])
    return kb


def _types() -> Counter[str]:
    return Counter(type(o).__qualname__ for o in gc.get_objects())


def figures(collect: bool = False) -> dict[str, Any]:
    """What GET /soak/diag answers (?collect=1: after a full collection)."""
    global _first_types
    if collect:
        gc.collect()
    counts = _types()
    if _first_types is None:
        _first_types = counts
    grown = counts.copy()
    grown.subtract(_first_types)
    out: dict[str, Any] = {
        "rss_kb": rss_kb(),
        "blocks": sys.getallocatedblocks(),
        "gc_objects": sum(counts.values()),
        "gc_counts": gc.get_count(),
        "growers": dict(grown.most_common(12)),
        "mallinfo": mallinfo(),
        "pymalloc": pymalloc(),
        "maps": maps(),
    }
    if tracemalloc.is_tracing():
        out["traced"] = list(tracemalloc.get_traced_memory())
    return out


def top(n: int) -> dict[str, Any]:
    """The n tracebacks that grew most since the baseline."""
    global _baseline
    if not tracemalloc.is_tracing():
        return {"error": "SOAK_TRACEMALLOC is not set"}
    snapshot = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, __file__)]
    )
    if _baseline is None:
        _baseline = snapshot
    stats = snapshot.compare_to(_baseline, "traceback")
    return {
        "total_diff": sum(s.size_diff for s in stats),
        "count_diff": sum(s.count_diff for s in stats),
        "top": [
            {
                "size_diff": s.size_diff,
                "count_diff": s.count_diff,
                "size": s.size,
                "frames": [f"{f.filename}:{f.lineno}" for f in s.traceback][-FRAMES:],
            }
            for s in stats[:n]
        ],
    }


def referrers(name: str, n: int) -> dict[str, Any]:
    """For n live objects of the type named `name` (the newest the collector tracks), the
    chains of what refers to them, three steps back (types, with a dict's keys)."""
    gc.collect()
    found = [o for o in gc.get_objects() if type(o).__qualname__ == name][-n:]

    def describe(o: object) -> str:
        if isinstance(o, dict):
            return f"dict{sorted(map(str, o))[:8]}"
        if type(o).__qualname__ in ("frame", "function", "coroutine"):
            return f"{type(o).__qualname__} {getattr(o, '__qualname__', '')}{o!r:.120}"
        return f"{type(o).__module__}.{type(o).__qualname__}"

    def chains(o: object, depth: int, seen: set[int]) -> list[Any]:
        if depth == 0:
            return []
        out: list[Any] = []
        for r in gc.get_referrers(o):
            own = isinstance(r, types.FrameType) and r.f_code.co_name in ("chains", "referrers")
            if id(r) in seen or r is found or own or (isinstance(r, list) and len(r) > 1000):
                continue
            seen.add(id(r))
            out.append([describe(r), chains(r, depth - 1, seen)])
            if len(out) >= 6:
                break
        return out

    return {"count": len(found), "chains": [[describe(o), chains(o, 3, set())] for o in found]}


def baseline() -> dict[str, Any]:
    global _baseline
    _baseline = None
    gc.collect()
    result = top(0)
    return {"baseline": True, **figures(), "tracemalloc": "error" not in result}


def trim() -> dict[str, Any]:
    before = {"rss_kb": rss_kb(), "mallinfo": mallinfo()}
    gc.collect()
    collected = {"rss_kb": rss_kb(), "mallinfo": mallinfo()}
    released = int(_libc.malloc_trim(0))
    return {
        "before": before,
        "after_gc": collected,
        "released": released,
        "after": {"rss_kb": rss_kb(), "mallinfo": mallinfo()},
    }


async def route(scope: Scope, receive: Receive, send: Send) -> None:
    """Answers the routes under PREFIX (404 when SOAK_DIAG is off)."""
    path, status = scope["path"], 200
    query = dict(
        part.split("=", 1) for part in scope["query_string"].decode().split("&") if "=" in part
    )
    answer: dict[str, Any]
    if not ENABLED:
        status, answer = 404, {"error": "SOAK_DIAG is off"}
    elif path == PREFIX:
        answer = figures(query.get("collect") == "1")
    elif path == PREFIX + "/referrers":
        answer = referrers(query.get("type", ""), int(query.get("n", "3")))
    elif path == PREFIX + "/baseline":
        answer = baseline()
    elif path == PREFIX + "/top":
        answer = top(int(query.get("n", "25")))
    elif path == PREFIX + "/trim":
        answer = trim()
    else:
        status, answer = 404, {"error": "no such route"}
    body = json.dumps(answer).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
