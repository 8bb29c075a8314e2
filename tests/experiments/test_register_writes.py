"""Which writes the history holds: acknowledged ones at their RPC, and only what the system
does on its own inferred by the prober (experiments/registers.py, experiments/traffic.py)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from experiment_history.runs import HistoryWriter, RunMeta, iter_rows
from experiment_history.schema import KIND_REGISTER, KIND_UNREGISTER, RouteItem, canonical_route
from experiments.context import ExperimentContext
from experiments.node_views import NodeViews
from experiments.registers import INITIAL, RegisterLog, with_broker
from experiments.traffic import Prober
from experiments.workload import (
    Ack,
    ReadResult,
    Recorder,
    SimBroker,
    now_us,
)
from tests.experiments.unit_context import unit_context

TOPIC = "topic-000"
A = RouteItem("broker-a", "127.0.0.1:1", 4, 4, 6)
B = RouteItem("broker-b", "127.0.0.1:2", 4, 4, 6)
CHURN = RouteItem("broker-churn", "127.0.0.1:3", 4, 4, 6)
BOTH = canonical_route([A, B])
WITH_CHURN = canonical_route([A, B, CHURN])
ONLY_A = canonical_route([A])


def test_a_broker_s_share_is_added_and_removed_in_the_canonical_value() -> None:
    assert with_broker(BOTH, "broker-churn", CHURN) == WITH_CHURN
    assert with_broker(WITH_CHURN, "broker-churn", None) == BOTH
    assert with_broker("", "broker-a", A) == ONLY_A


def test_candidates_are_the_values_not_yet_superseded_when_the_read_starts() -> None:
    log = RegisterLog()
    assert log.candidates(TOPIC, 0, 10) == {INITIAL}
    log.record(TOPIC, 0, 10, BOTH)
    assert log.candidates(TOPIC, 5, 8) == {INITIAL, BOTH}, "the write is concurrent"
    assert log.candidates(TOPIC, 11, 12) == {BOTH}
    log.record(TOPIC, 20, 30, WITH_CHURN)
    assert log.candidates(TOPIC, 25, 26) == {BOTH, WITH_CHURN}
    assert log.candidates(TOPIC, 31, 32) == {WITH_CHURN}
    assert log.latest(TOPIC) == WITH_CHURN
    log.record(TOPIC, 40, None, BOTH)
    assert log.candidates(TOPIC, 100, 101) == {WITH_CHURN, BOTH}, "a pending write may land"
    assert log.latest(TOPIC) == WITH_CHURN


def test_a_read_after_overlapping_writes_tells_which_one_the_register_ended_with() -> None:
    """The churn's registration (acked at 50) and a raft expiry of broker-b (committed at
    30) overlap, so either may have come last; ordering by ack would say the registration,
    and the next write would be built on a value the system no longer holds."""
    log = RegisterLog()
    log.record(TOPIC, 0, 5, BOTH)
    log.record(TOPIC, 10, 50, WITH_CHURN)
    expired_b = canonical_route([A, CHURN])
    log.record(TOPIC, 12, 30, expired_b)
    assert log.latest(TOPIC) == WITH_CHURN, "no read yet: the latest ack"
    log.note_read(TOPIC, expired_b, 11)
    assert log.latest(TOPIC) == WITH_CHURN, "sent before the expiry was: says nothing"
    log.note_read(TOPIC, BOTH, 60)
    assert log.latest(TOPIC) == WITH_CHURN, "a value no longer possible settles nothing"
    log.note_read(TOPIC, expired_b, 61)
    assert log.latest(TOPIC) == expired_b
    log.record(TOPIC, 70, 80, ONLY_A)
    assert log.latest(TOPIC) == ONLY_A, "a later write is the latest again"


def test_raft_writes_whose_log_entries_are_known_are_ordered_by_the_log() -> None:
    """An expiry (log entry 7) reported by a node that applied it late ends after the
    registration the log put after it (entry 8): the register holds the registration's
    value, and the next write is built on that. Writes without an entry keep the ack
    order."""
    log = RegisterLog()
    log.record(TOPIC, 0, 5, BOTH, position=3)
    handle = log.record(TOPIC, 10, None, WITH_CHURN)
    log.complete(TOPIC, handle, 30, position=8)
    log.record(TOPIC, 12, 40, ONLY_A, position=7)
    assert log.latest(TOPIC) == WITH_CHURN, "entry 8 follows entry 7, whatever the acks say"
    log.record(TOPIC, 50, 60, BOTH)
    assert log.latest(TOPIC) == BOTH, "the latest answer named no entry: by the acks"


def test_a_write_valued_again_keeps_what_a_read_settled_before_it_was_sent() -> None:
    """A round no node acknowledged (the churn's share) may still have committed; a read
    sent after it settled that it did. The next write, valued again once its answer
    names its place in the log, is valued as if it had not been sent yet: its own
    sending, after the read, must not make the read too old to count."""
    log = RegisterLog()
    log.record(TOPIC, 0, 5, BOTH, position=3)
    log.record(TOPIC, 10, None, WITH_CHURN)  # no ack: pending for ever
    log.note_read(TOPIC, WITH_CHURN, 20)
    handle = log.record(TOPIC, 30, None, with_broker(WITH_CHURN, "broker-b", None))
    assert log.latest(TOPIC, before=9, excluding=handle) == WITH_CHURN
    assert log.latest(TOPIC, before=9) == BOTH, "counted, it makes the read too old"


def _by_the_definition(
    writes: list[tuple[int, int | None, str]], invoke: int, complete: int
) -> set[str]:
    """The rule read word for word, every write against every other: a value is possible
    when a write of it was invoked by the read's end and no write invoked after it
    completed had itself completed before the read began (the initial value: until any
    write completed before the read)."""
    done = [w for w in writes if w[1] is not None and w[1] < invoke]
    values = set() if done else {INITIAL}
    for start, end, value in writes:
        superseded = end is not None and any(later[0] > end for later in done)
        if start <= complete and not superseded:
            values.add(value)
    return values


_write = st.tuples(
    st.integers(0, 40), st.one_of(st.none(), st.integers(0, 20)), st.sampled_from([A, B, CHURN])
).map(lambda w: (w[0], None if w[1] is None else w[0] + w[1], canonical_route([w[2]])))


@settings(max_examples=300, deadline=None)
@given(st.lists(_write, max_size=6), st.integers(0, 50), st.integers(0, 10))
def test_candidates_follow_the_superseding_rule_the_analysis_uses(
    writes: list[tuple[int, int | None, str]], invoke: int, length: int
) -> None:
    """The prober's candidates come from ``experiment_history.superseding``, as the anomaly
    classes' possible sources do; checked against the rule's plain reading."""
    log = RegisterLog()
    for start, end, value in writes:
        log.record(TOPIC, start, end, value)
    expected = _by_the_definition(writes, invoke, invoke + length)
    assert log.candidates(TOPIC, invoke, invoke + length) == expected


def _prober(tmp_path: Path) -> tuple[Prober, RegisterLog, HistoryWriter]:
    writer = HistoryWriter(tmp_path / "run", RunMeta("r", "unit", "raft", 1, ["n1", "n2"]))
    recorder = Recorder(writer)
    recorder.start()
    registers = RegisterLog()
    return _prober_of(recorder, registers), registers, writer


def _prober_of(
    recorder: Recorder, registers: RegisterLog, views: NodeViews | None = None
) -> Prober:
    """A prober of n1 and n2 (no node behind them: tests hand it the answers)."""
    return Prober(
        {"n1": "127.0.0.1:1", "n2": "127.0.0.1:2"},
        [TOPIC],
        recorder,
        registers,
        sample_ms=250,
        timeout_s=1.0,
        process=lambda node: f"ns-{node}",
        views=views,
    )


def _answer(value: str, at_us: int) -> ReadResult:
    return ReadResult("ok", value, at_us, at_us + 2)


def _inferred(tmp_path: Path, writer: HistoryWriter) -> list[dict[str, Any]]:
    writer.close()
    return [r for r in iter_rows(tmp_path / "run", "operations") if r["kind"] != "route_read"]


def test_the_prober_infers_only_what_no_recorded_write_explains(tmp_path: Path) -> None:
    prober, registers, writer = _prober(tmp_path)
    registers.record(TOPIC, 0, 10, BOTH)
    prober.observe("n1", TOPIC, _answer(BOTH, 100))
    prober.observe("n2", TOPIC, _answer(BOTH, 100))
    # The churn's registration, acknowledged at 300: n1 follows, n2 lags behind.
    registers.record(TOPIC, 290, 300, WITH_CHURN)
    prober.observe("n1", TOPIC, _answer(WITH_CHURN, 350))
    prober.observe("n2", TOPIC, _answer(BOTH, 350))
    prober.observe("n2", TOPIC, _answer(WITH_CHURN, 600))
    assert prober.writes == 0, "a lagging node and its catching up are no writes"
    # broker-b expires on n1: the system acted on its own.
    prober.observe("n1", TOPIC, _answer(canonical_route([A, CHURN]), 850))
    # Its heartbeat brings it back: a value seen before, but superseded by the expiry.
    prober.observe("n1", TOPIC, _answer(WITH_CHURN, 1_100))
    assert prober.writes == 2
    expire, back = _inferred(tmp_path, writer)
    assert (expire["kind"], expire["node"], expire["invoke_us"], expire["complete_us"]) == (
        "expire",
        "n1",
        350,
        852,
    ), "the window opens at that node's previous probe"
    assert (back["kind"], back["value"], back["invoke_us"]) == ("register", WITH_CHURN, 850)
    assert expire["origin"] == back["origin"] == "inferred"


def test_a_stale_node_never_becomes_a_write(tmp_path: Path) -> None:
    prober, registers, writer = _prober(tmp_path)
    registers.record(TOPIC, 0, 10, WITH_CHURN)
    prober.observe("n2", TOPIC, _answer(WITH_CHURN, 100))
    registers.record(TOPIC, 200, 210, BOTH)
    registers.record(TOPIC, 400, 410, WITH_CHURN)
    registers.record(TOPIC, 600, 610, BOTH)
    for at_us in (700, 950, 1_200):
        prober.observe("n2", TOPIC, _answer(WITH_CHURN, at_us))
    assert prober.writes == 0 and _inferred(tmp_path, writer) == []
    asyncio.run(prober.close())


def test_a_node_that_never_heard_of_a_broker_catches_up_without_a_write(
    tmp_path: Path,
) -> None:
    """Eventual mode: broker-x reaches only n2, so n1's answers lack it and are values no
    write had (the recorded writes' shares put together). When n1 then answers a value
    a later write had, it moved forward, even if writes superseded that one since: a
    stale read for the checker, not a change nobody reported. Going back to an earlier
    write's value is still one."""
    prober, registers, writer = _prober(tmp_path)

    def share(item: RouteItem, queues: int) -> RouteItem:
        return RouteItem(item.broker, item.master_addr, queues, 4, 6)

    x = RouteItem("broker-x", "127.0.0.1:9", 4, 4, 6)
    registers.record(TOPIC, 0, 10, canonical_route([share(A, 1), share(B, 1)]))
    prober.observe("n1", TOPIC, _answer(canonical_route([share(A, 1), share(B, 1)]), 50))
    registers.record(TOPIC, 100, 110, canonical_route([share(A, 1), share(B, 1), x]))
    registers.record(TOPIC, 200, 210, canonical_route([share(A, 2), share(B, 1), x]))
    registers.record(TOPIC, 220, 230, canonical_route([share(A, 2), share(B, 2), x]))
    prober.observe("n1", TOPIC, _answer(canonical_route([share(A, 2), share(B, 2)]), 250))
    assert prober.composed == 1, "no write had n1's value: its shares put together"
    # n2 drops every broker (its journal reports it), then they register again.
    registers.record(TOPIC, 300, 310, "")
    registers.record(TOPIC, 400, 410, canonical_route([share(A, 3)]))
    caught_up = canonical_route([share(A, 3), share(B, 3)])
    registers.record(TOPIC, 420, 430, caught_up)
    registers.record(TOPIC, 440, 450, canonical_route([share(A, 3), share(B, 3), x]))
    prober.observe("n1", TOPIC, _answer(caught_up, 600))
    assert prober.writes == 0, "forward to a later write's value, past its successor"
    prober.observe("n1", TOPIC, _answer(canonical_route([share(A, 3)]), 700))
    assert prober.writes == 1, "back to an earlier write's value: broker-b left unreported"
    (back,) = _inferred(tmp_path, writer)
    assert (back["kind"], back["node"], back["invoke_us"]) == ("expire", "n1", 600)
    asyncio.run(prober.close())


def _expired(
    context: ExperimentContext,
    node: str,
    brokers: list[SimBroker],
    started_us: int,
    seq: int,
    took_us: int = 500,
) -> None:
    """``node``'s journal reports scan ``seq``, begun at ``started_us`` (on the harness
    clock) and done ``took_us`` later, that expired ``brokers``."""
    report = {
        "seq": seq,
        "started_us": started_us,
        "committed_us": started_us + took_us,
        "expired": [{"addr": b.addr} for b in brokers],
    }
    context._record_expiry(node, report, wall_offset=0)


def _eventual(
    tmp_path: Path,
) -> tuple[ExperimentContext, HistoryWriter, list[SimBroker], Prober]:
    """Eventual mode, n1 and n2: the register and both nodes (their answers at 20 µs)
    hold every broker of the topic; the prober models each node's table."""
    context, writer, brokers = unit_context(
        tmp_path, "nemesis", topics=[TOPIC], nodes=["n1", "n2"], brokers=2, seed=1, mode="eventual"
    )
    full = context.fleet.truth(TOPIC)
    context.registers.record(TOPIC, 0, 10, full)
    prober = _prober_of(context.recorder, context.registers, context.fleet.views)
    for node in ("n1", "n2"):
        prober.observe(node, TOPIC, _answer(full, 20))
    return context, writer, brokers, prober


def test_an_eventual_node_s_journaled_return_to_an_old_value_is_no_inferred_write(
    tmp_path: Path,
) -> None:
    """Eventual mode: every broker of the topic expired on n2 long ago (the empty route,
    recorded from n2's journal), then they registered again. Now n1's own scan expires
    them (a link cut): its journal reports it, but its result, the empty route, is the
    old write's value, so no write of its own is recorded, and n1's reads of the empty
    route must not become an inferred write either. A later return to the empty route
    that no journal reports still is one."""
    context, writer, brokers, prober = _eventual(tmp_path)
    full = context.fleet.truth(TOPIC)
    _expired(context, "n2", brokers, 100, seq=1, took_us=5)
    context.registers.record(TOPIC, 200, 210, full)  # they register again
    _expired(context, "n1", brokers, 1_000, seq=2, took_us=5)
    assert context.notes["journal_repeats"] == 1, "n1's expiry repeats n2's old value"
    prober.observe("n1", TOPIC, _answer("", 1_100))
    prober.observe("n1", TOPIC, _answer("", 1_400))
    assert prober.writes == 0, "n1's reads of the empty route are the old write's"
    prober.observe("n1", TOPIC, _answer(full, 1_700))  # a recorded registration...
    context.registers.record(TOPIC, 1_600, 1_650, full)
    prober.observe("n1", TOPIC, _answer("", 2_000))  # ...then empty with no report
    assert prober.writes == 1
    inferred = [r for r in _inferred(tmp_path, writer) if r["origin"] == "inferred"]
    assert [(r["node"], r["value"], r["invoke_us"]) for r in inferred] == [("n1", "", 1_700)]
    asyncio.run(prober.close())


def test_an_eventual_node_s_expiry_is_valued_on_its_own_table(tmp_path: Path) -> None:
    """Eventual mode: a registration only n1 acknowledged (a new share of the first
    broker) is not in n2's table, so n2's own expiry of the second broker leaves n2 at
    the first broker's old share, not at the register's latest value less the second
    broker; n2's answer of it is that write's, nothing inferred."""
    context, writer, (first, second), prober = _eventual(tmp_path)
    full = context.fleet.truth(TOPIC)
    old = first.route_item(TOPIC)
    new = dataclasses.replace(old, write_queues=old.write_queues + 5)
    context.fleet.views.acked("n1", first.name, {TOPIC: new}, 300)
    context.registers.record(TOPIC, 250, 300, with_broker(full, first.name, new))
    _expired(context, "n2", [second], 900, seq=1, took_us=100)
    prober.observe("n2", TOPIC, _answer(canonical_route([old]), 1_100))
    assert prober.writes == 0
    expiry = [r for r in _inferred(tmp_path, writer) if r["kind"] == "expire"]
    assert [(r["node"], r["value"]) for r in expiry] == [("n2", canonical_route([old]))]
    asyncio.run(prober.close())


def test_an_eventual_node_at_what_its_own_changes_left_it_is_read_not_written(
    tmp_path: Path,
) -> None:
    """Eventual mode: n1 expired the second broker itself, whose next registration only
    n2 acknowledged; when the first broker unregisters from both, the register holds the
    second broker's share, but n1 holds nothing: the empty route, which n2's own expiry
    once wrote. n1's answer of it is what its own recorded changes left it at, a read
    for the checker (a stale one), not a write nobody reported."""
    context, _writer, (first, second), prober = _eventual(tmp_path)
    full = context.fleet.truth(TOPIC)
    _expired(context, "n1", [second], 100, seq=1, took_us=5)
    _expired(context, "n2", [first, second], 150, seq=1, took_us=5)
    context.fleet.views.acked("n2", second.name, {TOPIC: second.route_item(TOPIC)}, 210)
    context.fleet.views.acked("n2", first.name, {TOPIC: first.route_item(TOPIC)}, 210)
    context.registers.record(TOPIC, 200, 210, full)  # both back, on n2 only
    for node in ("n1", "n2"):
        context.fleet.views.acked(node, first.name, {TOPIC: None}, 300)
    context.registers.record(TOPIC, 290, 300, with_broker(full, first.name, None))
    prober.observe("n1", TOPIC, _answer("", 400))
    assert (prober.writes, prober.composed) == (0, 1)
    asyncio.run(prober.close())


def _context(tmp_path: Path) -> tuple[ExperimentContext, HistoryWriter, list[SimBroker]]:
    context, writer, brokers = unit_context(
        tmp_path, "clock-skew", topics=[TOPIC], nodes=["n1", "n2"], brokers=2, seed=1
    )
    context.registers.record(TOPIC, 0, 10, context.fleet.truth(TOPIC))
    return context, writer, brokers


def _registered(context: ExperimentContext, broker: str) -> int:
    """One registration of ``broker`` that n1 acknowledges; returns the ack's µs."""
    acked: list[int] = []

    async def call() -> list[Ack]:
        acked.append(now_us())
        return [Ack("n1", acked[0])]

    asyncio.run(context.broker_write(broker, KIND_REGISTER, call))
    return acked[0]


def test_an_unchanged_registration_after_a_reported_expiry_puts_the_share_back(
    tmp_path: Path,
) -> None:
    """A skewed raft scan expires a live broker; its next registration, unchanged as far as
    the harness knows (the expiry is reported later), brings it back: the history must hold
    that registration as a write, or reads of the restored route look impossible."""
    context, writer, (first, second) = _context(tmp_path)
    both = context.registers.latest(TOPIC)
    before_scan = _registered(context, first.name)  # quiet, and acked before the scan
    scan_us = before_scan + 1_000
    time.sleep(max(0, scan_us + 600 - now_us()) / 1e6)  # past the scan's commit (500 µs)
    after_scan = _registered(context, first.name)  # quiet, may follow the expiry
    _expired(context, "n1", [first], scan_us, seq=7)
    rows = _inferred(tmp_path, writer)[-2:]
    without = with_broker(both, first.name, None)
    assert [(r["kind"], r["value"]) for r in rows] == [("expire", without), ("register", both)]
    restored = rows[1]
    assert [r["origin"] for r in rows] == ["node", "inferred"], (
        "the expiry is the leader's report; the registration's being a write is inferred"
    )
    assert restored["complete_us"] == after_scan and restored["node"] == "n1"
    assert json.loads(restored["extra"])["after_expiry_scan"] == 7
    assert context.registers.candidates(TOPIC, after_scan + 1, after_scan + 2) == {both}
    # Restored once: a later expiry of the other broker does not bring it back again.
    _expired(context, "n1", [second], now_us(), seq=8)
    assert context.registers.latest(TOPIC) == with_broker(both, second.name, None)


def test_a_harness_write_and_a_heartbeat_round_say_where_they_came_from(tmp_path: Path) -> None:
    """``broker_write`` records ``harness`` (the churn, a scenario's stop or start) unless
    the broker's own heartbeat round sent it (``BrokerFleet.record_round``): ``client``."""
    context, writer, (first, _second) = _context(tmp_path)

    async def call() -> list[Ack]:
        return [Ack("n1", now_us())]

    asyncio.run(context.broker_write(first.name, KIND_UNREGISTER, call))
    asyncio.run(context.broker_write(first.name, KIND_REGISTER, call, origin="client"))
    rows = _inferred(tmp_path, writer)
    assert [(r["kind"], r["origin"]) for r in rows] == [
        ("unregister", "harness"),
        ("register", "client"),
    ]


def test_a_write_on_its_way_when_the_recording_stops_stays_in_the_history(
    tmp_path: Path,
) -> None:
    """Reads recorded before the stop may already show a round still on its way: its
    write is recorded when its answers come, after the stop; one sent after the stop
    is not."""
    context, writer, (first, _second) = _context(tmp_path)

    async def stopping() -> list[Ack]:
        context.recorder.stop()
        return [Ack("n1", now_us())]

    async def after() -> list[Ack]:
        return [Ack("n1", now_us())]

    asyncio.run(context.broker_write(first.name, KIND_UNREGISTER, stopping))
    asyncio.run(context.broker_write(first.name, KIND_REGISTER, after))
    assert [r["kind"] for r in _inferred(tmp_path, writer)] == ["unregister"]


def test_a_stopped_broker_comes_back_with_a_route_share_it_never_had(tmp_path: Path) -> None:
    """Each stop steps the broker's queues, so the share its next start registers differs
    from every earlier one: a stop and start never write a topic's earlier value again."""
    context, _, (first, _second) = _context(tmp_path)
    seen = [first.route_item(TOPIC)]

    async def restarts() -> None:
        for _ in range(3):
            context.fleet.kill_hard(first.name)
            context.fleet.start_broker(first.name)  # its heartbeat task: cancelled below
            seen.append(first.route_item(TOPIC))
        await context.fleet.close()

    asyncio.run(restarts())
    assert len({item.encode() for item in seen}) == 4
    assert [item.write_queues for item in seen] == [seen[0].write_queues + i for i in range(4)]
    assert all(item.read_queues == item.write_queues for item in seen)


def test_a_round_cancelled_mid_call_stays_in_the_history_pending(tmp_path: Path) -> None:
    """A kill_broker step cancels the broker's round while a node it cannot reach keeps
    it waiting, after another node may have applied it: the write is recorded anyway,
    pending (``timeout``: it may have landed or not), so a read of its share names it
    instead of looking like a value nobody wrote."""
    context, writer, (first, _second) = _context(tmp_path)
    sent = context.registers.latest(TOPIC)

    async def round_cut_short() -> None:
        async def call() -> list[Ack]:
            await asyncio.sleep(60)  # n2 never answers
            return []

        task = asyncio.create_task(
            context.broker_write(first.name, KIND_UNREGISTER, call, origin="client")
        )
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(round_cut_short())
    (row,) = _inferred(tmp_path, writer)
    assert (row["kind"], row["outcome"], row["origin"]) == ("unregister", "timeout", "client")
    assert row["value"] == with_broker(sent, first.name, None)
    assert row["complete_us"] > row["invoke_us"]
