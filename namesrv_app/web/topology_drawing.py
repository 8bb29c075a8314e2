"""The Topology page's picture: cluster -> broker group -> master and slaves, each
replica marked with what every node's own table says of it.

Positions only; ``console/topology.html`` draws them. A cluster is a frame holding its
groups, :data:`GROUPS_PER_ROW` to a row; a group is a box with one line per replica:
a circle for this node's projection (what the table below it shows), ``M``/``S`` for
master/slave, the address, then one square per node of the matrix (left to right in
the matrix's column order), coloured by that node's state of the replica.
"""

from __future__ import annotations

from itertools import groupby
from typing import Any

GROUP_WIDTH = 240
ROW_HEIGHT = 26
GROUPS_PER_ROW = 4
CLUSTER_LABEL_HEIGHT = 26
MARK_SIZE = 9
MARK_STEP = 12
PAD = 10


def layout(groups: list[dict[str, Any]], matrix: dict[str, Any]) -> dict[str, Any]:
    """Positions for ``groups`` (the page's groups, ordered by cluster then name, with
    their replicas) and, when the matrix has more than one node, each replica's marks."""
    columns = matrix.get("columns", [])
    node_ids = [c["node_id"] for c in columns] if len(columns) > 1 else []
    cells_of = {(r["cluster"], r["addr"]): r["cells"] for r in matrix.get("rows", ())}
    box_width = GROUP_WIDTH - 14
    clusters: list[dict[str, Any]] = []
    y = PAD
    for cluster, grouped in groupby(groups, key=lambda g: g["cluster"]):
        members = list(grouped)
        frame_y = y
        y += CLUSTER_LABEL_HEIGHT
        boxes = []
        for start in range(0, len(members), GROUPS_PER_ROW):
            row = members[start : start + GROUPS_PER_ROW]
            row_height = max((len(g["replicas"]) + 2) * ROW_HEIGHT for g in row)
            for column, group in enumerate(row):
                x = PAD * 2 + column * GROUP_WIDTH
                replicas = [
                    _replica(
                        r,
                        cells_of.get((cluster, r["addr"]), []),
                        node_ids,
                        x + box_width,
                        y + (i + 2) * ROW_HEIGHT - 8,
                    )
                    for i, r in enumerate(group["replicas"])
                ]
                boxes.append(
                    {"group": group, "x": x, "y": y, "height": row_height - 6, "replicas": replicas}
                )
            y += row_height + PAD
        clusters.append(
            {"name": cluster, "x": PAD, "y": frame_y, "height": y - frame_y, "boxes": boxes}
        )
        y += PAD
    per_row = min(GROUPS_PER_ROW, max((len(c["boxes"]) for c in clusters), default=1))
    width = PAD * 3 + per_row * GROUP_WIDTH
    return {
        "clusters": clusters,
        "width": width,
        "frame_width": width - PAD * 2,
        "height": y,
        "box_width": box_width,
        "node_ids": node_ids,
    }


def _replica(
    replica: dict[str, Any], cells: list[dict[str, Any]], node_ids: list[str], right_x: int, cy: int
) -> dict[str, Any]:
    """One replica's line: its centre height and its marks (one per node of
    ``node_ids``, its matrix ``cells``), right-aligned in the box."""
    first_x = right_x - len(node_ids) * MARK_STEP - 2
    marks = [
        {"x": first_x + i * MARK_STEP, "y": cy - MARK_SIZE // 2, "node_id": node_id, **cell}
        for i, (node_id, cell) in enumerate(zip(node_ids, cells, strict=False))
    ]
    return {**replica, "cy": cy, "marks": marks}
