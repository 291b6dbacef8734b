"""Bench set-up: the peers' venv (`bench/.venv-peers`), `wrk`, and what the machine is.

Needs only Python 3, make and the package registries: the peers' venv is created with the
standard `venv` module and filled from PyPI; `wrk` comes from Debian's packages when the
bench runs as root with apt-get, else the driver falls back to a Python load generator.
The peers live in their own venv so that installing FastMCP (latest) can never change
the project's `.venv`.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PEERS_VENV = ROOT / "bench" / ".venv-peers"
PEERS_PYTHON = PEERS_VENV / "bin" / "python"
PROJECT_PYTHON = Path(sys.executable)

# FastMCP unpinned on purpose ("latest"); the official SDK comes with it. The servers are
# pinned to the project's own versions so every target runs on the same server.
PEER_PACKAGES = ["fastmcp", "mcp>=2.3,<3", "matplotlib", "py-spy", "pyinstrument"]
# what every target runs on, in both venvs: the versions reported beside each result
_STACK_DISTS = [
    "starlette",
    "uvicorn",
    "h11",
    "anyio",
    "sse-starlette",
    "pydantic",
    "opentelemetry-api",
]
PROJECT_DISTS = ["mcp-asgi", *_STACK_DISTS, "opentelemetry-sdk"]
PEER_DISTS = [
    "mcp",
    "fastmcp",
    "fastmcp-slim",
    *_STACK_DISTS,
    "matplotlib",
    "py-spy",
    "pyinstrument",
]


def import_path(code: Path) -> str:
    """`PYTHONPATH` of a process run in `code` (its working directory, so first on its path)
    that imports `mcp_asgi` from there and `bench` from this tree: `code` is the tree
    itself, or a copy of its `mcp_asgi` (`bench.compiled`)."""
    return os.pathsep.join(dict.fromkeys([str(code), str(ROOT)]))


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


# the servers of the server dimension (`bench.servers`), at the project's own versions
SERVER_DISTS = ["uvicorn", "httptools", "uvloop", "hypercorn", "granian"]


def _server_pins() -> list[str]:
    pins = []
    for dist in SERVER_DISTS:
        try:
            pins.append(f"{dist}=={importlib.metadata.version(dist)}")
        except importlib.metadata.PackageNotFoundError:
            pins.append(dist)
    return pins


def ensure_peers(*, upgrade: bool = False) -> None:
    """Create `bench/.venv-peers` and install the peers into it (once, or on `upgrade`)."""
    requirements = [*PEER_PACKAGES, *_server_pins()]
    stamp = PEERS_VENV / ".bench-stamp"
    digest = hashlib.sha256("\n".join(requirements).encode()).hexdigest()
    if not upgrade and stamp.exists() and stamp.read_text() == digest and PEERS_PYTHON.exists():
        return
    if not PEERS_PYTHON.exists():
        log(f"creating {PEERS_VENV.relative_to(ROOT)}")
        subprocess.run([sys.executable, "-m", "venv", str(PEERS_VENV)], check=True)
    log(f"installing peers into {PEERS_VENV.relative_to(ROOT)}: {' '.join(requirements)}")
    pip = [str(PEERS_PYTHON), "-m", "pip", "install", "--quiet"]
    subprocess.run([*pip, "--upgrade", "pip"], check=True)
    subprocess.run([*pip, "--upgrade", *requirements], check=True)
    stamp.write_text(digest)


def ensure_wrk() -> bool:
    """Install wrk from Debian's packages if missing (root + apt-get only); True if present."""
    if shutil.which("wrk"):
        return True
    apt = shutil.which("apt-get")
    if apt is None or os.geteuid() != 0:
        log("wrk is missing and cannot be installed here: falling back to Python load")
        return False
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for step in ([apt, "install", "-y", "wrk"], [apt, "update"], [apt, "install", "-y", "wrk"]):
        log(" ".join(step))
        done = subprocess.run(step, env=env, capture_output=True, text=True, check=False)
        if step[1] == "install" and done.returncode == 0:
            break
    if shutil.which("wrk"):
        return True
    log("wrk could not be installed: falling back to Python load")
    return False


def versions(python: Path, dists: list[str]) -> dict[str, str]:
    """Installed versions of `dists` in the venv of `python`."""
    code = (
        "import importlib.metadata as m, json, sys\n"
        "out = {'python': sys.version.split()[0]}\n"
        f"for d in {dists!r}:\n"
        "    try: out[d] = m.version(d)\n"
        "    except m.PackageNotFoundError: out[d] = None\n"
        "print(json.dumps(out))\n"
    )
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True)
    result: dict[str, str] = json.loads(done.stdout)
    return result


def machine() -> dict[str, Any]:
    """nproc, CPU model, memory, kernel, load."""
    cpu = "unknown"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem_kib = 0
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            mem_kib = int(line.split()[1])
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "memory_gib": round(mem_kib / 1024 / 1024, 1),
        "kernel": platform.release(),
        "loadavg": loadavg(),
    }


def loadavg() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
