"""The Topology page as each node sees it: NODE_STATUS ``brokers`` from real gateways,
the node x broker matrix (known, expiring, past timeout, absent, no answer) and the
picture's per-node marks."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.test import Client

from namesrv_app import gateway_client
from namesrv_app.agreement import (
    ABSENT,
    ALIVE,
    EXPIRING,
    LATE,
    MATRIX_ROWS_MAX,
    NO_ANSWER,
    broker_matrix,
)
from namesrv_app.web import reads
from tests.web.conftest import BROKERS, RunningGateway, log_in


def _view(name: str | None, broker_id: int | None, addr: str, age: int | None) -> dict[str, Any]:
    return {
        "cluster": "C",
        "broker_name": name,
        "broker_id": broker_id,
        "addr": addr,
        "age_ms": age,
        "timeout_ms": None if age is None else 3_000,
    }


def _panel(node_id: str, brokers: list[dict[str, Any]] | None) -> dict[str, Any]:
    panel: dict[str, Any] = {"node_id": node_id, "reachable": brokers is not None}
    if brokers is not None:
        panel["brokers"] = brokers
    return panel


def test_each_cell_is_what_that_node_holds_and_rows_it_differs_on_are_flagged() -> None:
    panels = [
        _panel("n1", [_view("b", 0, "h:1", 100), _view("b", 1, "h:2", 2_500)]),
        _panel("n2", [_view("b", 0, "h:1", 4_000), _view(None, None, "h:9", None)]),
        _panel("n3", None),
    ]
    matrix = broker_matrix(panels, lambda timeout: timeout // 2)
    states = {
        (r["broker_name"], r["addr"]): [c["state"] for c in r["cells"]] for r in matrix["rows"]
    }
    assert states == {
        ("b", "h:1"): [ALIVE, LATE, NO_ANSWER],
        ("b", "h:2"): [EXPIRING, ABSENT, NO_ANSWER],
        (None, "h:9"): [ABSENT, LATE, NO_ANSWER],
    }
    flagged = {r["addr"] for r in matrix["rows"] if r["disagrees"]}
    assert flagged == {"h:2", "h:9"}
    assert (matrix["total"], matrix["disagreeing"], matrix["answered"]) == (3, 2, 2)
    # The page's filters apply: the broker name, and the cluster.
    assert [r["addr"] for r in broker_matrix(panels, lambda t: t, search="B")["rows"]] == [
        "h:1",
        "h:2",
    ]
    assert broker_matrix(panels, lambda t: t, cluster="other")["rows"] == []


def test_past_the_row_bound_the_rows_the_nodes_disagree_on_come_first() -> None:
    many = [_view("g", i, f"h:{i}", 10) for i in range(MATRIX_ROWS_MAX + 5)]
    panels = [_panel("n1", many), _panel("n2", many[:-1])]
    matrix = broker_matrix(panels, lambda t: t)
    assert matrix["total"] == MATRIX_ROWS_MAX + 5 and len(matrix["rows"]) == MATRIX_ROWS_MAX
    assert (
        matrix["rows"][0]["addr"] == f"h:{MATRIX_ROWS_MAX + 4}" and matrix["rows"][0]["disagrees"]
    )


def test_a_gateway_reports_its_brokers_with_ages_by_its_own_clock(
    second_node: RunningGateway, cast: Any
) -> None:
    status = gateway_client.node_status(brokers=True)
    views = {v["addr"]: v for v in status["brokers"]}
    for broker in BROKERS:
        view = views[broker.addr]
        assert (view["broker_name"], view["broker_id"]) == (broker.broker_name, broker.broker_id)
        assert 0 <= view["age_ms"] <= view["timeout_ms"]
    assert "brokers" not in gateway_client.node_status()  # only when asked


def test_the_topology_page_shows_what_each_node_holds(
    second_node: RunningGateway, cast: Any, viewer: User
) -> None:
    client = Client()
    assert log_in(client, "vera")
    html = client.get("/topology/").content.decode()
    table = html.split('id="broker-matrix"', 1)[1].split("</table>", 1)[0]
    assert "<th>n1</th><th>n2</th><th>n3</th>" in table
    rows = {row.split("<code>", 1)[1].split("</code>", 1)[0]: row for row in table.split("<tr")[2:]}
    assert set(rows) == {b.addr for b in BROKERS}
    master_a = rows[BROKERS[0].addr]
    assert 'class="cell-alive"' in master_a and 'class="cell-no-answer"' in master_a
    assert "absent" not in master_a and 'class="warn"' not in master_a
    for broker in BROKERS[1:]:  # n2 heard broker-a's master only
        row = rows[broker.addr]
        cells = row.split('<td class="cell-')[1:]
        assert [c.split('"', 1)[0] for c in cells] == ["alive", "absent", "no-answer"]
        assert row.startswith(' class="warn"')
    summary = html.split('id="matrix-summary">', 1)[1].split("</p>", 1)[0]
    assert "4 replicas across the 2 of 3 nodes that answered" in summary
    assert "3 not known to every node" in summary
    # The picture: cluster frame, M/S, and one mark per node on each replica.
    svg = html.split('<svg class="topology"', 1)[1].split("</svg>", 1)[0]
    assert "cluster DefaultCluster" in svg
    assert svg.count('<tspan class="role">M</tspan>') == 2
    assert svg.count('<rect class="mark ') == 3 * len(BROKERS)
    assert "<title>n2: absent</title>" in svg and "<title>n3: no answer</title>" in svg
    assert reads.node_panels()[0].get("brokers") is None  # the other pages do not pay for it
