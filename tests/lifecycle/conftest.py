"""Fixtures for the lifecycle tests (the subreaper is global: tests/e2e uses it too)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def pgid_file(tmp_path: Path) -> Path:
    """Where a test's shell writes its pid (`echo $$ > file`), its process group id."""
    return tmp_path / "pgid"
