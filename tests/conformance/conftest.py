"""The conformance runs' summary lines, printed in pytest's terminal summary (so they appear
in `make test` output whether the runs passed or failed, with or without `-s`)."""

from __future__ import annotations

import pytest

REPORT = pytest.StashKey[list[str]]()


@pytest.fixture
def conformance_report(request: pytest.FixtureRequest) -> list[str]:
    """Where a conformance run appends its summary line."""
    return request.config.stash.setdefault(REPORT, [])


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    lines = config.stash.get(REPORT, [])
    if lines:
        terminalreporter.section("MCP conformance suite")
        for line in lines:
            terminalreporter.write_line(line)
