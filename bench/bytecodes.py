"""Bytecodes and Python calls per in-process request, by where they run (issue 27, point
5): what the interpreter's dispatch and the cache lines of a request follow more closely
than its instructions (`bench.server_counts`).

    python -m bench.bytecodes                   # floor and `async` echo, by package
    python -m bench.bytecodes --cases async,cancelled --top 30

Each case of `bench.features` is driven as `bench.instructions` drives it (the same
warm-up, 32 requests at a time); over `--requests` requests after the warm-up a
`sys.settrace` hook counts every bytecode executed (`f_trace_opcodes`) and every Python
frame entered or resumed, each charged to its code's file. Deterministic for a tree; the
hook makes the run slow, not the counts different.

`--keywords N` also lists the N call sites that pass the most arguments by keyword a
request (Python 3.11's `KW_NAMES`): a call with keywords takes the interpreter's general
path, which matches each name, where a positional call to a Python function is
specialised — about 400 instructions a keyword (see docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import dis
import sys
from pathlib import Path
from types import FrameType
from typing import Any

from . import features

ROOT = Path(__file__).resolve().parent.parent


def _where(filename: str) -> str:
    """The package (or standard-library module) a code object belongs to."""
    path = Path(filename)
    try:
        parts = path.resolve().relative_to(ROOT).parts
    except ValueError:
        parts = path.parts
    if "site-packages" in parts:
        return parts[parts.index("site-packages") + 1].split(".")[0]
    if parts and parts[0] in ("mcp_asgi", "bench"):
        return "/".join(parts[:2]) if parts[0] == "mcp_asgi" and len(parts) > 2 else parts[0]
    return "stdlib:" + path.stem if "python3" in filename else filename


def _site(filename: str) -> str:
    """A file as a call site is named: relative to the checkout, else its `_where`."""
    try:
        return str(Path(filename).resolve().relative_to(ROOT))
    except ValueError:
        return _where(filename)


def count(case: str, requests: int) -> dict[str, Any]:
    """Bytecodes and calls per request of `case`, by place, and by function."""
    # by code object: (file, first line, qualified name)
    bytecodes: collections.Counter[tuple[str, int, str]] = collections.Counter()
    calls: collections.Counter[tuple[str, int, str]] = collections.Counter()
    # keyword names passed, by call site: (file, line)
    keywords: collections.Counter[tuple[str, int]] = collections.Counter()

    def trace(frame: FrameType, event: str, _: Any) -> Any:
        code = frame.f_code
        key = (code.co_filename, code.co_firstlineno, getattr(code, "co_qualname", code.co_name))
        if event == "call":
            frame.f_trace_opcodes = True
            frame.f_trace_lines = False
            calls[key] += 1
        elif event == "opcode":
            bytecodes[key] += 1
            at = frame.f_lasti
            if _KW_NAMES is not None and code.co_code[at] == _KW_NAMES:
                names = code.co_consts[code.co_code[at + 1]]
                keywords[(code.co_filename, frame.f_lineno)] += len(names)
        return trace

    measured: list[int] = []

    def mark(label: str) -> None:  # `features.mark`, counting instead of callgrind's dumps
        if label == "warm-up":
            sys.settrace(trace)
        else:
            sys.settrace(None)
            measured.append(int(label.split()[0]))

    features.mark = mark
    asyncio.run(features.drive(case, [requests]))
    n = measured[0]
    places: collections.Counter[str] = collections.Counter()
    place_calls: collections.Counter[str] = collections.Counter()
    for (filename, _, _), c in bytecodes.items():
        places[_where(filename)] += c
    for (filename, _, _), c in calls.items():
        place_calls[_where(filename)] += c
    functions = {
        f"{_where(f)}:{line}:{name}": [round(c / n, 1), round(calls[(f, line, name)] / n, 2)]
        for (f, line, name), c in bytecodes.most_common()
    }
    return {
        "bytecodes": round(sum(bytecodes.values()) / n),
        "calls": round(sum(calls.values()) / n, 1),
        "places": {
            p: [round(c / n), round(place_calls[p] / n, 1)] for p, c in places.most_common()
        },
        "functions": functions,
        "keywords": {
            f"{_site(f)}:{line}": round(c / n, 2)
            for (f, line), c in keywords.most_common()
            if c >= n / 100
        },
    }


_KW_NAMES = dis.opmap.get("KW_NAMES")  # (3.11 and 3.12; 3.13 has CALL_KW instead)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Bytecodes per in-process request.")
    parser.add_argument("--cases", default="floor,async")
    parser.add_argument("--requests", type=int, default=256, help="a multiple of 32")
    parser.add_argument("--top", type=int, default=15, help="functions listed per case")
    parser.add_argument(
        "--keywords", type=int, default=0, help="call sites listed by keyword arguments"
    )
    args = parser.parse_args(argv)
    for case in args.cases.split(","):
        if case not in features.CASES:
            raise SystemExit(f"unknown case {case!r}; known: {', '.join(features.CASES)}")
        result = count(case, args.requests)
        print(f"\n{case}: {result['bytecodes']:,} bytecodes, {result['calls']} calls per request")
        print("| where | bytecodes | calls |\n|---|---:|---:|")
        for place, (n, c) in result["places"].items():
            print(f"| {place} | {n:,} | {c} |")
        print("\n| function | bytecodes | calls |\n|---|---:|---:|")
        for name, (n, c) in list(result["functions"].items())[: args.top]:
            print(f"| {name} | {n:,} | {c} |")
        if args.keywords:
            total = sum(result["keywords"].values())
            print(f"\n{total:g} arguments passed by keyword a request")
            print("| call site | keyword arguments |\n|---|---:|")
            for site, k in list(result["keywords"].items())[: args.keywords]:
                print(f"| {site} | {k:g} |")


if __name__ == "__main__":
    main()
