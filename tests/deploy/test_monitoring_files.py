"""The shipped alerting rules and Grafana dashboard (deploy/): Prometheus's own
``promtool`` accepts the rules and their unit tests pass, every alert says how bad it
is and where the runbook is, every panel has a unit, and the web metrics they name
exist in the web process's ``/metrics``.

The gateway metrics they name are checked against three running raft gateways by
tests/integration/test_prometheus.py, which also loads the rules into a real
Prometheus (one cluster run serves both).
"""

from __future__ import annotations

import re
import subprocess

import pytest
from django.test import Client

from tests.deploy.monitoring import (
    DASHBOARD,
    PROMETHEUS_OWN,
    PROMTOOL,
    ROOT,
    RULES,
    WEB_PREFIX,
    dashboard,
    ensure_prometheus,
    metric_names,
    panels,
    rules,
    sample_names,
    used_metric_names,
)

RULE_TESTS = RULES.with_name("namesrv-alerts-test.yml")
DEPLOY_DOC = ROOT / "docs" / "DEPLOY.md"
PROMTOOL_TIMEOUT_S = 60
REQUIRED_ALERTS = {
    "NameServerNodesDisagree",
    "NameServerRaftQuorumLost",
    "NameServerRaftPortNotListening",
    "NameServerRegistrationsRefused",
    "NameServerExpiriesSpiking",
    "NameServerNodeDown",
    "NameServerScanFallbackActive",
}
SEVERITIES = {"warning", "critical"}
MIN_SCHEMA_VERSION = 36
"""Grafana 9.x and later: timeseries panels, datasource objects with a uid."""


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    ensure_prometheus()
    return subprocess.run(
        [str(PROMTOOL), *args],
        capture_output=True,
        text=True,
        timeout=PROMTOOL_TIMEOUT_S,
        cwd=RULES.parent,
        check=False,
    )


def doc_anchors() -> set[str]:
    """The anchors GitHub gives docs/DEPLOY.md's headings."""
    anchors = set()
    for line in DEPLOY_DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            anchors.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return anchors


def test_promtool_accepts_the_rules_and_their_unit_tests_pass() -> None:
    checked = promtool("check", "rules", str(RULES))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(rules())} rules found" in checked.stdout
    # Synthetic series: each alert fires for the node it should, when it should.
    tested = promtool("test", "rules", RULE_TESTS.name)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout


def test_every_alert_has_a_duration_a_severity_and_a_runbook() -> None:
    loaded = rules()
    assert {rule["alert"] for rule in loaded} >= REQUIRED_ALERTS
    anchors = doc_anchors()
    for rule in loaded:
        name = rule["alert"]
        assert rule.get("for"), f"{name}: no `for:`, one bad scrape would page"
        assert rule["labels"]["severity"] in SEVERITIES, name
        annotations = rule["annotations"]
        assert annotations["summary"] and annotations["description"], name
        links = re.findall(r"docs/DEPLOY\.md#([\w-]+)", annotations["description"])
        assert links, f"{name}: the description points at no section of docs/DEPLOY.md"
        assert set(links) <= anchors, f"{name}: no such section {set(links) - anchors}"
    assert "alerts-and-dashboard" in anchors


def test_every_dashboard_panel_has_a_unit_and_the_datasource_input() -> None:
    board = dashboard()
    assert board["schemaVersion"] >= MIN_SCHEMA_VERSION
    assert [item["name"] for item in board["__inputs"]] == ["DS_PROMETHEUS"]
    variables = {item["name"]: item for item in board["templating"]["list"]}
    assert {"job", "instance"} <= set(variables)
    assert variables["instance"]["multi"] and variables["instance"]["includeAll"]
    shown = list(panels(board))
    assert len({panel["id"] for panel in board["panels"]}) == len(board["panels"])
    for panel in shown:
        title = panel["title"]
        assert panel["fieldConfig"]["defaults"]["unit"], f"{title}: no unit"
        assert panel["datasource"]["uid"] == "${DS_PROMETHEUS}", title
        assert panel["targets"], title
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${DS_PROMETHEUS}", title
            # Every gateway panel follows the node picker.
            if WEB_PREFIX not in target["expr"]:
                assert 'instance=~"$instance"' in target["expr"], title
    titles = {panel["title"] for panel in shown}
    assert {"Route reads", "Registrations by outcome", "Brokers expired"} <= titles
    assert any(
        "histogram_quantile" in target["expr"] and "_bucket" in target["expr"]
        for panel in shown
        for target in panel["targets"]
        if panel["fieldConfig"]["defaults"]["unit"] == "s"
    )
    assert DASHBOARD.read_text(encoding="utf-8").endswith("\n")


@pytest.mark.parametrize(
    ("promql", "names"),
    [
        ("up == 0", {"up"}),
        (
            'sum by (le, code) (rate(namesrv_request_seconds_bucket{code="103",'
            'instance=~"$instance"}[$__rate_interval]))',
            {"namesrv_request_seconds_bucket"},
        ),
        (
            "namesrv_live_brokers != on (job) group_left "
            "quantile by (job) (0.5, namesrv_live_brokers)",
            {"namesrv_live_brokers"},
        ),
        (
            "max by (job) (increase(a_total[5m])) > 2 and on (job) "
            "b_sum / ignoring(code) c_count offset 5m > 1e3",
            {"a_total", "b_sum", "c_count"},
        ),
        ('label_replace(x{a="by (b)"}, "d", "$1", "e", "(.*)")', {"x"}),
        ("sum without (instance) (rate(y[1m:15s])) unless bool z", {"y", "z"}),
    ],
)
def test_metric_names_are_read_out_of_promql(promql: str, names: set[str]) -> None:
    assert metric_names(promql) == names


@pytest.mark.django_db
def test_the_web_metrics_the_files_name_exist_in_the_web_process() -> None:
    web_names = {name for name in used_metric_names() if name.startswith(WEB_PREFIX)}
    assert web_names  # the dashboard has web panels
    client = Client()
    assert client.get("/healthz").status_code == 200  # a counted, timed request
    response = client.get("/metrics")  # a loopback peer may read it
    assert response.status_code == 200
    exposed = sample_names(response.content.decode("utf-8"))
    assert web_names <= exposed, sorted(web_names - exposed)
    assert not (used_metric_names() - PROMETHEUS_OWN) <= exposed  # gateway ones are elsewhere
