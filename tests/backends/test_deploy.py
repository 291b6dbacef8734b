"""The Grafana dashboard and the Prometheus alerting rules of deploy/: promtool checks the
rules and runs their unit tests; a real Prometheus scraping the example app loads the rules
and answers every query of the dashboard after real traffic (docs/observability.md,
"Dashboard and alerts")."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp_asgi.testing import McpTestClient

from ..example_app import ExampleApp
from ..servers import ROOT, free_port
from .conftest import Prometheus, executable, poll, start_prometheus

DASHBOARD = ROOT / "deploy" / "grafana" / "mcp_asgi.json"
RULES = ROOT / "deploy" / "prometheus" / "mcp_asgi-rules.yml"
RULES_TESTS = ROOT / "deploy" / "prometheus" / "mcp_asgi-rules.test.yml"

# What Grafana puts for the dashboard's variables: every job, windows that cover the test.
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$__range": "1h", "$job": ".+"}

# The targets (panel title, refId) that need traffic this test does not make: no auth,
# side effects, tasks, errors or Redis bus in the example app. Every other target must
# return data.
NEEDS_OTHER_TRAFFIC = {
    ("Cancels after side effect", "A"),
    ("Auth failures/s", "A"),
    ("Errors by type", "A"),
    ("Orphans by tool", "B"),
    ("Cancels after a side effect by tool", "A"),
    ("Auth failures by reason", "A"),
    ("Tasks running by tool", "B"),
    ("Tasks ended by status", "A"),
    ("Redis bus outages and dropped events", "A"),
    ("Redis bus outages and dropped events", "B"),
}


def dashboard_targets() -> dict[tuple[str, str], str]:
    """Every query of the dashboard's panels, by (panel title, refId), Grafana's variables
    replaced."""
    panels: list[dict[str, Any]] = json.loads(DASHBOARD.read_text())["panels"]
    found: dict[tuple[str, str], str] = {}
    for panel in panels:
        for target in panel.get("targets", []):
            expr: str = target["expr"]
            for variable, value in GRAFANA_VARIABLES.items():
                expr = expr.replace(variable, value)
            assert "$" not in expr, (panel["title"], expr)
            found[panel["title"], target["refId"]] = expr
    return found


def test_dashboard_is_importable_with_a_datasource_variable() -> None:
    """Every panel and query reads the `DS_PROMETHEUS` datasource variable, which the
    dashboard defines; the targets named above exist."""
    dashboard = json.loads(DASHBOARD.read_text())
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["DS_PROMETHEUS"]["type"] == "datasource"
    assert variables["DS_PROMETHEUS"]["query"] == "prometheus"
    datasource = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
    for panel in dashboard["panels"]:
        if panel["type"] != "row":
            assert panel["datasource"] == datasource, panel["title"]
            assert all(t["datasource"] == datasource for t in panel["targets"]), panel["title"]
    assert set(NEEDS_OTHER_TRAFFIC) < set(dashboard_targets())


def test_alert_rules_pass_promtool() -> None:
    """`promtool check rules` accepts the rules and `promtool test rules` passes, with a
    test in which each alert fires."""
    promtool = executable("promtool")
    for command in (["check", "rules", RULES.name], ["test", "rules", RULES_TESTS.name]):
        done = subprocess.run(
            [promtool, *command], cwd=RULES.parent, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stdout + done.stderr
    alerts = set(re.findall(r"^ *- alert: (\w+)$", RULES.read_text(), re.MULTILINE))
    cases = RULES_TESTS.read_text().split("- eval_time:")
    tested = {re.findall(r"alertname: (\w+)", case)[0] for case in cases if "exp_labels" in case}
    assert tested == alerts


def rules_evaluated(prometheus: Prometheus) -> list[dict[str, Any]] | None:
    """The loaded rules once Prometheus has evaluated each of them."""
    rules = [r for g in prometheus.api("rules")["groups"] for r in g["rules"]]
    return rules if rules and all(r["health"] != "unknown" for r in rules) else None


@pytest.mark.timeout(90)
async def test_dashboard_and_rules_in_prometheus(tmp_path: Path) -> None:
    """Prometheus scraping the example app: the up-down counters are 0 before any request;
    after a call dropped by its client while another is refused 429, every dashboard query
    parses and runs, each that this traffic feeds returns data, and every alerting rule
    evaluates without error."""
    metrics_port = free_port()
    env = {
        "OTEL_TRACES_EXPORTER": "none",
        "OTEL_METRICS_EXPORTER": "prometheus",
        "OTEL_EXPORTER_PROMETHEUS_HOST": "127.0.0.1",
        "OTEL_EXPORTER_PROMETHEUS_PORT": str(metrics_port),
        "APP_MCP__MAX_REQUESTS_PER_CLIENT": "1",
    }
    example = ExampleApp(tmp_path, env)
    prometheus = start_prometheus(tmp_path, f"127.0.0.1:{metrics_port}", [RULES])
    try:
        for gauge in (
            "mcp_asgi_requests_active",
            "mcp_asgi_orphans_active",
            "mcp_asgi_tasks_active",
        ):
            rows = await poll(lambda: prometheus.query(f"sum({gauge})") or None, gauge)  # noqa: B023
            assert float(rows[0]["value"][1]) == 0

        client = McpTestClient(example.url + "/mcp")
        for _ in range(2):  # two scrapes apart: the rates have two points
            params = {"name": "search_books", "arguments": {"query": "dune", "delay": 0.2}}
            async with client.stream("tools/call", params, progress=True) as stream:
                assert await stream.next_message() is not None
                refused = await client.request(
                    "tools/call", {"name": "count_words", "arguments": {"text": "a b"}}
                )
                assert refused.status == 429
            await anyio.sleep(1.5)

        targets = dashboard_targets()
        for key in NEEDS_OTHER_TRAFFIC:
            prometheus.query(targets.pop(key))  # parses and runs: an error answer fails here

        def without_data() -> bool | None:
            for key, expr in list(targets.items()):
                if prometheus.query(expr):
                    del targets[key]
            return not targets or None

        await poll(without_data, f"data for the dashboard queries {targets}")
        template = json.loads(DASHBOARD.read_text())["templating"]["list"][1]
        assert template["definition"] == (
            "label_values(mcp_server_operation_duration_seconds_count, job)"
        )
        jobs = prometheus.api(
            "label/job/values", **{"match[]": "mcp_server_operation_duration_seconds_count"}
        )
        assert jobs == ["library"]

        rules = await poll(lambda: rules_evaluated(prometheus), "the rules' evaluation")
        assert {r["name"]: r["health"] for r in rules} == {r["name"]: "ok" for r in rules}
        assert len(rules) == 10
    finally:
        example.kill()
        prometheus.stop()
