"""The official MCP conformance suite against the fixture server, in `make test`.

`@modelcontextprotocol/conformance` runs as a client against tests/conformance/everything_app.py
on a live uvicorn (127.0.0.1, a free port), from tests/node (installed by
`npm ci --prefix tests/node`, which `make test` runs):

- 0.2.0-alpha.12, `server --requirements 2026-07-28`: exactly the scenarios the revision
  requires, at its wire, scored, plus the scenarios of the extensions this server
  implements (`TASKS_SCENARIOS`: the requirement set runs them "not scored", reason
  extension; we score them as strictly); the rest (pending scenarios) run and are reported;
- the same, `server --scenario json-schema-2020-12 --spec-version 2026-07-28` (a pending
  scenario, so never scored above: run on its own to hold every check);
- 0.1.16 (installed as `conformance-2025`), `server`: the 2025 suite over 2025-era
  sessions (initialize, Mcp-Session-Id);
- 0.2.0-alpha.12, `server --spec-version 2025-11-25`: the same revision's active scenarios
  as the newer suite writes them.

The 0.2 suite needs Node >= 22 (`fs.globSync`); the `node` npm package in tests/node brings
one (node_modules/.bin/node). Each run takes an expected-failures file
(expected-failures-2026.yaml, expected-failures-2025.yaml): the suite's own baseline check
fails on any failure not listed and on a listed one that now passes. The summary lines go
to pytest's terminal summary (conftest.py).

By hand::

    uvicorn --factory tests.conformance.everything_app:app --port 3001 &
    tests/node/node_modules/.bin/node \\
        tests/node/node_modules/@modelcontextprotocol/conformance/dist/index.js \\
        server --url http://127.0.0.1:3001/mcp --requirements 2026-07-28
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mcp_asgi.testing import serve

from .everything_app import app

HERE = Path(__file__).parent
NODE_DIR = HERE.parent / "node"
MODULES = NODE_DIR / "node_modules"
NODE22 = MODULES / ".bin" / "node"  # the `node` npm package's Node 22 binary
RESULT_DIR = re.compile(r"^server-(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$")
ANSI = re.compile(r"\x1b\[[0-9;]*m")
ENTRY = re.compile(r"^\s*-\s+(\S+)\s*(#.*)?$")
NOT_PASSING = ("FAILURE", "WARNING")  # what the suite's baseline check counts as failing
# io.modelcontextprotocol/tasks (docs/tasks.md): the requirement set's `not_scored` entries
# with reason `extension` that this server implements, scored like required scenarios
TASKS_SCENARIOS = frozenset(
    {
        "tasks-lifecycle",
        "tasks-capability-negotiation",
        "tasks-wire-fields",
        "tasks-request-state-removal",
        "tasks-mrtr-input",
        "tasks-request-headers",
        "tasks-dispatch-and-envelope",
        "tasks-status-notifications",  # the suite skips it (its harness is pending)
        "tasks-required-task-error",
        "tasks-mrtr-composition",
    }
)


@dataclass(frozen=True)
class Run:
    """One invocation of the conformance CLI's `server` command."""

    name: str
    package: str  # the folder under node_modules
    args: tuple[str, ...]
    baseline: Path
    requirements: str | None = None  # the revision whose required scenarios are scored
    extensions: frozenset[str] = frozenset()  # extension scenarios scored as well

    @property
    def cli(self) -> Path:
        return MODULES / self.package / "dist" / "index.js"

    @property
    def version(self) -> str:
        manifest = json.loads((MODULES / self.package / "package.json").read_text())
        return str(manifest["version"])

    def scored(self) -> frozenset[str] | None:
        """The scenarios that count: the requirement set's, plus the extension scenarios we
        score (None: every scenario run counts)."""
        if self.requirements is None:
            return None
        text = (MODULES / self.package / "requirements" / f"{self.requirements}.yaml").read_text()
        return frozenset(_yaml_list(text, "server")) | self.extensions


RUNS = [
    Run(
        "2026-07-28",
        "@modelcontextprotocol/conformance",
        ("--requirements", "2026-07-28"),
        HERE / "expected-failures-2026.yaml",
        requirements="2026-07-28",
        extensions=TASKS_SCENARIOS,
    ),
    Run(
        "json-schema-2020-12",
        "@modelcontextprotocol/conformance",
        ("--scenario", "json-schema-2020-12", "--spec-version", "2026-07-28"),
        HERE / "expected-failures-2026.yaml",
    ),
    Run("2025", "conformance-2025", (), HERE / "expected-failures-2025.yaml"),
    Run(
        "2025-11-25",
        "@modelcontextprotocol/conformance",
        ("--spec-version", "2025-11-25"),
        HERE / "expected-failures-2025.yaml",
    ),
    # pending in both suites, so never run above: SSE polling and resumption (SEP-1699)
    Run(
        "2025-sse-polling",
        "conformance-2025",
        ("--scenario", "server-sse-polling"),
        HERE / "expected-failures-2025.yaml",
    ),
    Run(
        "2025-11-25-sse-polling",
        "@modelcontextprotocol/conformance",
        ("--scenario", "server-sse-polling", "--spec-version", "2025-11-25"),
        HERE / "expected-failures-2025.yaml",
    ),
]


def _yaml_list(text: str, key: str) -> list[str]:
    """The items of the top-level list `key` in a flat YAML file (the suite's requirement
    sets and our baselines: `key:` then `  - item` lines)."""
    items: list[str] = []
    inside = False
    for line in text.splitlines():
        if line and not line[0].isspace() and not line.startswith("#"):
            inside = line.rstrip() == f"{key}:"
            continue
        found = ENTRY.match(line)
        if inside and found:
            items.append(found.group(1))
    return items


def _results(output_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """The checks of each scenario run, from the CLI's `-o` directory."""
    results: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(output_dir.glob("server-*/checks.json")):
        named = RESULT_DIR.match(path.parent.name)
        assert named, path
        results[named["scenario"]] = json.loads(path.read_text())
    return results


def _cli_lines(stdout: str) -> list[str]:
    """The CLI's own verdict: its `Total:` line and its baseline check's first line."""
    keep = ("Total:", "Passed:", "Baseline check passed", "Unexpected failures", "Baseline is")
    return [line.strip() for line in stdout.splitlines() if line.strip().startswith(keep)]


def _baseline_tail(stdout: str) -> str:
    """The CLI's report after its totals: expected, stale and unexpected entries."""
    _, _, tail = stdout.partition("\nTotal:")
    return "Total:" + tail if tail else stdout[-4000:]


def _judged(run: Run, results: dict[str, list[dict[str, Any]]]) -> dict[str, list[Any]]:
    scored = run.scored()
    return {s: checks for s, checks in results.items() if scored is None or s in scored}


def summary(run: Run, results: dict[str, list[dict[str, Any]]], stdout: str) -> str:
    """One line: what was judged, how it went, and the CLI's own totals and verdict."""
    judged = _judged(run, results)
    statuses = Counter(c["status"] for checks in judged.values() for c in checks)
    total = sum(statuses.values())
    listed = _yaml_list(run.baseline.read_text(), "server")
    failing = [
        (s, c["id"]) for s, checks in judged.items() for c in checks if c["status"] in NOT_PASSING
    ]
    expected = [f for f in failing if f[0] in listed or f"{f[0]}:{f[1]}" in listed]
    other = total - statuses["SUCCESS"] - statuses["FAILURE"] - statuses["WARNING"]
    what = "scored checks" if run.requirements else "checks"
    line = (
        f"conformance {run.version} server {' '.join(run.args) or '(2025 suite)'}: "
        f"{total} {what} in {len(judged)} scenarios: {statuses['SUCCESS']} passed, "
        f"{statuses['FAILURE']} failed, {statuses['WARNING']} warnings, {other} info/skipped "
        f"({len(expected)} failing or warning as expected in {run.baseline.name})"
    )
    unscored = len(results) - len(judged)
    if unscored:
        failing_unscored = sum(
            1
            for s, checks in results.items()
            if s not in judged and any(c["status"] == "FAILURE" for c in checks)
        )
        line += f"; not scored: {unscored} scenarios run, {failing_unscored} failing"
    return line + " | " + " | ".join(_cli_lines(stdout))


def unexpected(run: Run, results: dict[str, list[dict[str, Any]]]) -> list[str]:
    """The failing or warning checks the run scores that its baseline does not list (the
    CLI's own baseline check covers the requirement set's scenarios only)."""
    listed = _yaml_list(run.baseline.read_text(), "server")
    return [
        f"{scenario}:{check['id']}"
        for scenario, checks in _judged(run, results).items()
        for check in checks
        if check["status"] in NOT_PASSING
        and scenario not in listed
        and f"{scenario}:{check['id']}" not in listed
    ]


def failures(run: Run, results: dict[str, list[dict[str, Any]]]) -> str:
    """Every failing or warning check the run judged, with what the suite saw."""
    listed = _yaml_list(run.baseline.read_text(), "server")
    parts = []
    for scenario, checks in _judged(run, results).items():
        for check in checks:
            if check["status"] in NOT_PASSING:
                name = f"{scenario}:{check['id']}"
                known = "expected" if scenario in listed or name in listed else "UNEXPECTED"
                details = json.dumps(check.get("details"), ensure_ascii=False)
                parts.append(
                    f"- {name} {check['status']} ({known}): {check.get('errorMessage')}\n"
                    f"    details: {details[:1500]}"
                )
    return "\n".join(parts)


@pytest.fixture(scope="module")
def live_url() -> Iterator[str]:
    """The fixture server on a live uvicorn, shared by the runs."""
    with serve(app(), timeout_graceful_shutdown=1) as live:
        yield live.url + "/mcp"


@pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed")
@pytest.mark.timeout(120)
@pytest.mark.parametrize("run", RUNS, ids=[r.name for r in RUNS])
def test_conformance(
    run: Run, live_url: str, tmp_path: Path, conformance_report: list[str]
) -> None:
    """The run's baseline check passes: every failure is listed in its expected-failures
    file, and every entry there still fails; the extension scenarios it scores too."""
    install = "run `npm ci --prefix tests/node` (make test does)"
    assert NODE22.exists(), install
    assert run.cli.is_file(), install
    argv = [str(NODE22), str(run.cli), "server", "--url", live_url, *run.args]
    argv += ["--expected-failures", str(run.baseline), "--output-dir", str(tmp_path)]
    env = {**os.environ, "NO_COLOR": "1", "FORCE_COLOR": "0"}
    done = subprocess.run(
        argv, cwd=NODE_DIR, env=env, capture_output=True, text=True, timeout=100, check=False
    )
    stdout = ANSI.sub("", done.stdout)
    results = _results(tmp_path)
    assert results, f"the suite ran no scenario:\n{stdout[-4000:]}\n{done.stderr[-4000:]}"
    line = summary(run, results, stdout)
    conformance_report.append(line)
    report = (
        f"{line}\n\n{_baseline_tail(stdout)}\n\nFailing checks:\n{failures(run, results)}"
        f"\n\nstderr:\n{done.stderr[-2000:]}"
    )
    assert done.returncode == 0, report
    assert not unexpected(run, results), report
