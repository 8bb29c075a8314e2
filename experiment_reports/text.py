"""Numbers of the report as a reader reads them: shares as percentages, and per mode a
paragraph on what the tables mean for a client (sends to a dead broker, queues owned by two
consumers, reads right after a write).

Every sentence is built from the report's tables; a measure without rows says that it was
not measured rather than a number. No Spark and no matplotlib here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from experiment_reports.seeds import SEED_INTERVALS, seeds_paragraph
from experiment_reports.t_buckets import MS_PER_S, t_bucket_label

Row = Mapping[str, Any]
PERCENT_DIGITS = 3
"""Significant digits of a percentage: 25 %, 62.5 %, 33.3 %, 0.04 %."""
SHARE_SUFFIXES = ("_share", "_fraction")
SHARE_NAMES = frozenset({"p_fresh", "p_within_k"})
"""Report measures that are shares without saying so in their suffix."""


def percent(share: float) -> str:
    """A share in [0, 1] as a percentage with its sign: ``0.25`` -> ``25 %``."""
    return f"{100 * share:.{PERCENT_DIGITS}g} %"


def is_share(column: str) -> bool:
    """Whether a report column (or measure) holds a share; a side-by-side column is
    ``<measure> <mode>``, so only its first word is looked at."""
    measure = column.split(" ", 1)[0]
    return measure in SHARE_NAMES or measure.endswith(SHARE_SUFFIXES)


def shares_as_percent(rows: Sequence[Row]) -> list[dict[str, Any]]:
    """The rows with every share (a share column, or a side-by-side row whose ``measure``
    is a share) as a percentage string; other values unchanged."""
    out = []
    for row in rows:
        share_row = is_share(str(row.get("measure", "")))
        out.append(
            {
                column: percent(float(value))
                if _is_number(value) and (share_row or is_share(column))
                else value
                for column, value in row.items()
            }
        )
    return out


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _seconds(ms: float) -> str:
    return f"{ms / MS_PER_S:.1f} s"


def _mode_rows(tables: Mapping[str, Sequence[Row]], name: str, mode: str) -> list[Row]:
    return [r for r in tables.get(name, ()) if r.get("mode") == mode]


def _of(part: int, whole: int) -> str:
    """``3 of 200 (1.5 %)``."""
    share = f" ({percent(part / whole)})" if whole else ""
    return f"{part} of {whole}{share}"


def dead_broker_sentence(tables: Mapping[str, Sequence[Row]], mode: str) -> str:
    """How many sends went to a dead broker, and how long clients and nodes routed to it."""
    sends = _mode_rows(tables, "dead_sends", mode)
    kills = _mode_rows(tables, "stale_route", mode)
    if not sends:
        return "No send was recorded, so sends to a dead broker were not measured."
    total = sum(int(r.get("sends") or 0) for r in sends)
    dead = sum(int(r.get("sends_to_dead") or 0) for r in sends)
    if not kills:
        return f"No broker was killed, so none of the {total} sends could go to a dead broker."
    sentence = f"{_of(dead, total)} sends went to a broker while it was dead"
    clients = [
        float(r["clients_window_ms"]) for r in kills if r.get("clients_window_ms") is not None
    ]
    nodes = [float(r["nodes_window_ms"]) for r in kills if r.get("nodes_window_ms") is not None]
    never = sum(int(r.get("client_topics_never_dropped") or 0) for r in kills)
    kill_text = "the kill" if len(kills) == 1 else f"each of {len(kills)} kills"
    if clients:
        sentence += (
            f"; clients kept routing to the killed broker for up to {_seconds(max(clients))} "
            f"after {kill_text}"
        )
    if nodes:
        sentence += f", and the NameServer nodes answered with it for up to {_seconds(max(nodes))}"
    if never:
        sentence += f"; {never} client routes still named it when the run ended"
    return sentence + "."


def ownership_sentence(tables: Mapping[str, Sequence[Row]], mode: str) -> str:
    """How often two consumers of a group owned the same queue, and how many queues."""
    rows = _mode_rows(tables, "ownership", mode)
    if not rows:
        return "No consumer rebalance was recorded, so queue ownership was not measured."
    row = rows[0]
    checkpoints = int(row.get("checkpoints") or 0)
    double = float(row.get("double_share") or 0.0)
    orphan = float(row.get("orphan_share") or 0.0)
    if double == 0:
        text = (
            "No queue was owned by two consumers of a group at any of the "
            f"{checkpoints} rebalance checkpoints"
        )
    else:
        held = row.get("double_ms")
        lasting = "" if held is None else f" for {_seconds(float(held))} (summed over groups)"
        text = (
            f"Two consumers of a group owned the same queue{lasting}, at {percent(double)} of "
            f"the {checkpoints} rebalance checkpoints (up to {row.get('max_double_queues')} "
            f"queues at once): those queues' messages could be consumed twice"
        )
    if orphan:
        text += (
            f"; at {percent(orphan)} a queue had no consumer (up to "
            f"{row.get('max_orphan_queues')} queues at once) and its messages waited"
        )
    return text + "."


def freshness_sentence(tables: Mapping[str, Sequence[Row]], mode: str) -> str:
    """What a client saw when it read soon after a write (the first t-visibility bucket)."""
    rows = sorted(_mode_rows(tables, "t_visibility", mode), key=lambda r: float(r["t_bucket_ms"]))
    rows = [r for r in rows if r.get("p_fresh") is not None]
    if not rows:
        return "No route read followed a write, so freshness was not measured."
    first = rows[0]
    reads = int(first.get("reads") or 0)
    stale = reads - round(float(first["p_fresh"]) * reads)
    return (
        f"Of the {reads} route reads that started {t_bucket_label(float(first['t_bucket_ms']))} "
        f"after a write, {_of(stale, reads)} still returned an older route."
    )


SESSION_TABLE = "session_guarantees"
SESSION_NAMES = {"monotonic_reads": "monotonic reads", "read_your_writes": "read-your-writes"}
SESSION_BROKEN = {
    "monotonic_reads": "a client session got a route older than one it had already read",
    "read_your_writes": "a writer did not read back its own acknowledged write",
}
SESSION_HELD = {
    "monotonic_reads": "no client session got a route older than one it had already read",
    "read_your_writes": "every writer read back its own acknowledged write (or a later one)",
}


def session_sentence(tables: Mapping[str, Sequence[Row]], mode: str) -> str:
    """Whether the sessions kept monotonic reads and read-your-writes (table
    ``session_guarantees``, ``spark_jobs.sessions``), in reads."""
    rows = _mode_rows(tables, SESSION_TABLE, mode)
    if not rows:
        return "Session guarantees were not measured."
    parts = []
    for rule, broken in SESSION_BROKEN.items():
        checked = sum(int(r.get(f"{rule}_checked") or 0) for r in rows)
        violations = sum(int(r.get(f"{rule}_violations") or 0) for r in rows)
        name = SESSION_NAMES[rule]
        if not checked:
            parts.append(f"{name} had no read to check")
        elif violations:
            parts.append(f"in {_of(violations, checked)} reads checked {broken} ({name} broken)")
        else:
            parts.append(f"{SESSION_HELD[rule]} ({name} held over {checked} reads)")
    text = "; ".join(parts)
    return text[0].upper() + text[1:] + "."


def client_paragraph(tables: Mapping[str, Sequence[Row]], mode: str) -> str:
    """One mode's paragraph: reads after a write, sends to a dead broker, queue owners,
    session guarantees, and (when the report has them) the same across seeds with their
    intervals."""
    sentences = (
        freshness_sentence(tables, mode),
        dead_broker_sentence(tables, mode),
        ownership_sentence(tables, mode),
        session_sentence(tables, mode),
    )
    across = seeds_paragraph(tables.get(SEED_INTERVALS, ()), mode)
    return f"**{mode}.** " + " ".join(sentences) + (f"\n\n{across}" if across else "")


def client_markdown(tables: Mapping[str, Sequence[Row]], modes: Sequence[str]) -> str:
    """The ``What this means for a client`` section of ``summary.md``."""
    paragraphs = "\n\n".join(client_paragraph(tables, mode) for mode in modes)
    return f"\n## What this means for a client\n\n{paragraphs}\n"
