"""glibc's heap under asyncio's reads: what the soak's remaining RSS rise is (issue 28).

    python -m bench.recv_heap                      # the heap, then the time a read takes
    MALLOC_MMAP_THRESHOLD_=131072 python -m bench.recv_heap

asyncio's socket transport reads with `sock.recv(256 KiB)` (`max_size`) and CPython shrinks
the bytes to what came. glibc serves 256 KiB from mmap while its mmap threshold is its
initial 128 KiB; but a read that returns nothing (a client closing its connection) frees
the whole 256 KiB mapping, and glibc then raises its threshold above that size, so every
later read buffer comes from the heap and is shrunk in place, around whatever else lives
there. This script does the same in one process, with no server: reads of 100 to 2,000
bytes over a socket pair while a few hundred allocations of 600 B to 4 KB live a while
(as a server's do), before and after one read at end of file, and prints glibc's
`mallinfo2()` (the heap's size, in use, free but kept). `MALLOC_MMAP_THRESHOLD_` set
fixes the threshold (and turns off its adjustment): the heap stays as it was, each read
paying an mmap instead.
"""

from __future__ import annotations

import ctypes
import os
import random
import socket
import time

READ = 256 * 1024
"""What asyncio's _SelectorSocketTransport asks of every recv (its max_size)."""


_FIELDS = "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost"


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in _FIELDS.split(" ")]


def heap_kb() -> tuple[int, int, int]:
    """glibc's main heap: its size, the bytes in use, the bytes free but kept (KB)."""
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = _Mallinfo2
    info = libc.mallinfo2()
    return info.arena // 1024, info.uordblks // 1024, info.fordblks // 1024


def reads(count: int, rng: random.Random, live: list[bytes]) -> None:
    """`count` small messages sent and read with recv(READ), allocations living a while."""
    a, b = socket.socketpair()
    with a, b:
        for _ in range(count):
            a.send(b"x" * rng.randint(100, 2000))
            b.recv(READ)
            if rng.random() < 0.3:
                live.append(bytes(rng.randint(600, 4000)))
            if len(live) > 300:
                live.pop(rng.randrange(len(live)))


def end_of_file() -> None:
    """One read that returns nothing: the peer has closed."""
    a, b = socket.socketpair()
    a.close()
    with b:
        assert b.recv(READ) == b""


def per_read_us(count: int = 100_000) -> float:
    a, b = socket.socketpair()
    payload = b"x" * 300
    with a, b:
        started = time.perf_counter()
        for _ in range(count):
            a.send(payload)
            b.recv(READ)
        return (time.perf_counter() - started) / count * 1e6


def main() -> None:
    threshold = os.environ.get("MALLOC_MMAP_THRESHOLD_", "glibc's default, adjusting")
    print(f"MALLOC_MMAP_THRESHOLD_: {threshold}")
    rng, live = random.Random(1), list[bytes]()
    print("heap KB (size, in use, free but kept) at the start:", heap_kb())
    reads(100_000, rng, live)
    print("after 100,000 reads:", heap_kb())
    end_of_file()
    for n in (1, 2):
        reads(100_000, rng, live)
        print(f"after one read at end of file, then {n * 100_000:,} reads:", heap_kb())
    print(f"a 300-byte send and its recv({READ}): {per_read_us():.2f} us")


if __name__ == "__main__":
    main()
