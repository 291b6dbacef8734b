"""The servers of the matrix, each a real process started by the tests (stacks.py): one
shared per server for a module's tests (`served`), or a fresh one to stop (`start`)."""

from __future__ import annotations

import ssl
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import trustme

from .stacks import STACKS, Certs, ServerProcess


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    """A CA made for this run, and a certificate it signed for 127.0.0.1."""
    folder = tmp_path_factory.mktemp("tls")
    ca = trustme.CA()
    leaf = ca.issue_cert("127.0.0.1")
    paths = Certs(ca=folder / "ca.pem", cert=folder / "cert.pem", key=folder / "key.pem")
    ca.cert_pem.write_to_path(str(paths.ca))
    leaf.cert_chain_pems[0].write_to_path(str(paths.cert))
    leaf.private_key_pem.write_to_path(str(paths.key))
    return paths


@pytest.fixture(scope="session")
def client_tls(certs: Certs) -> Callable[..., ssl.SSLContext]:
    """A client TLS context trusting the test CA (with ALPN `protocols`)."""

    def context(*protocols: str) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(certs.ca))
        if protocols:
            ctx.set_alpn_protocols(list(protocols))
        return ctx

    return context


@pytest.fixture(scope="module")
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, certs: Certs
) -> Iterator[ServerProcess]:
    """The server named by the test's parameter, started once for the module."""
    server = ServerProcess(STACKS[request.param], tmp_path_factory.mktemp("served"), certs)
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


@pytest.fixture
def start(tmp_path: Path, certs: Certs) -> Iterator[Callable[[str], ServerProcess]]:
    """Start a fresh server (for a test that stops it); stopped at the end in any case."""
    started: list[ServerProcess] = []

    def start(name: str) -> ServerProcess:
        server = ServerProcess(STACKS[name], tmp_path, certs)
        started.append(server)
        server.wait_ready()
        return server

    yield start
    for server in started:
        server.stop()
