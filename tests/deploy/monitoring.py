"""What the shipped alerting rules and Grafana dashboard ask Prometheus for.

Both test files of the monitoring files read them here: the rules' and the panels'
PromQL expressions, the metric names those expressions select, and the sample names
an exposition text holds (what Prometheus stores: ``_total``, ``_bucket``, ``_sum``
and ``_count`` included, so a name is checked exactly as a query spells it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.debian import ensure_package

ROOT = Path(__file__).resolve().parents[2]
PROMETHEUS = Path("/usr/bin/prometheus")
PROMTOOL = Path("/usr/bin/promtool")
RULES = ROOT / "deploy" / "prometheus" / "namesrv-alerts.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "namesrv-dashboard.json"
PROMETHEUS_OWN = frozenset({"up"})
"""Series Prometheus writes itself for every target, not exported by any node."""
WEB_PREFIX = "namesrv_web_"
"""The web process's metrics (the rest are the gateway's)."""

_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_GRAFANA_VARIABLES = re.compile(r"\$\{[^}]*\}|\$\w+")
_LABEL_LISTS = re.compile(
    r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)", re.IGNORECASE
)
_SELECTORS_AND_RANGES = re.compile(r"\{[^{}]*\}|\[[^\[\]]*\]")
_IDENTIFIER = re.compile(r"(?<![\w.])([A-Za-z_:][\w:]*)(\s*\()?")
_KEYWORDS = frozenset(
    {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring"}
    | {"group_left", "group_right", "inf", "nan", "atan2"}
)


def metric_names(promql: str) -> set[str]:
    """The metric names an expression selects: identifiers outside strings, label
    matchers, ranges and grouping lists that are neither a function call nor a keyword.
    Grafana's ``$variables`` (``$__rate_interval``, ``${job}``) are taken out first."""
    text = _STRINGS.sub('""', promql)
    text = _GRAFANA_VARIABLES.sub("", text)
    text = _LABEL_LISTS.sub(" ", text)
    previous = None
    while previous != text:  # a label matcher holds no nested braces, but be sure
        previous, text = text, _SELECTORS_AND_RANGES.sub(" ", text)
    return {
        match.group(1)
        for match in _IDENTIFIER.finditer(text)
        if match.group(2) is None and match.group(1).lower() not in _KEYWORDS
    }


def rules() -> list[dict[str, Any]]:
    """Every rule of the rule file, in file order."""
    loaded = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    return [rule for group in loaded["groups"] for rule in group["rules"]]


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return loaded


def panels(board: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel, those inside collapsed rows included (rows themselves left out)."""
    for panel in board["panels"]:
        if panel["type"] == "row":
            yield from panel.get("panels", [])
        else:
            yield panel


_LABEL_VALUES = re.compile(r"^\s*label_values\((?:(?P<selector>.*),)?\s*\w+\s*\)\s*$", re.DOTALL)


def variable_query(variable: dict[str, Any]) -> str:
    """A query variable's series selector: ``label_values(namesrv_node_info, job)``
    selects ``namesrv_node_info`` (its last argument is a label, not a metric)."""
    query = variable["query"]
    text = str(query["query"] if isinstance(query, dict) else query)
    match = _LABEL_VALUES.match(text)
    if match is None:
        return text
    return match.group("selector") or ""


def dashboard_expressions(board: dict[str, Any]) -> list[str]:
    """Every panel target's PromQL and every query variable's selector."""
    found = [target["expr"] for panel in panels(board) for target in panel["targets"]]
    for variable in board["templating"]["list"]:
        if variable["type"] == "query":
            found.append(variable_query(variable))
    return found


def used_metric_names() -> set[str]:
    """Every metric name the rules and the dashboard select."""
    expressions = [str(rule["expr"]) for rule in rules()]
    expressions += dashboard_expressions(dashboard())
    return {name for expression in expressions for name in metric_names(expression)}


def sample_names(exposition: str) -> set[str]:
    """The sample names of a text exposition (``namesrv_requests_total``,
    ``namesrv_request_seconds_bucket``, ...)."""
    return {
        sample.name
        for family in text_string_to_metric_families(exposition)
        for sample in family.samples
    }


def ensure_prometheus() -> None:
    """Debian's prometheus package (the server and ``promtool``), installed on first use
    (the service is not started: the tests start their own server), whichever test
    needs it first."""
    ensure_package(
        "prometheus",
        lambda: PROMETHEUS.exists() and PROMTOOL.exists(),
        f"{PROMETHEUS} or {PROMTOOL}",
    )
