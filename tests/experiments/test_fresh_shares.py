"""Unique write values: brokers that announce a fresh share every round
(``SimBroker.fresh_share``), and the prober telling a node's out-of-order mix of recorded
writes (a read) from a change nobody reported (a write it must infer)."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

from experiment_history.runs import HistoryWriter, RunMeta, iter_rows
from experiment_history.schema import ORIGIN_INFERRED, RouteItem, canonical_route
from experiments.registers import RegisterLog
from experiments.traffic import Prober
from experiments.workload import FRESH_SHARE_SPAN, ReadResult, Recorder, make_brokers

TOPIC = "topic-000"


def test_a_broker_announces_a_share_it_never_had_for_as_many_rounds_as_the_walk_has() -> None:
    [broker] = make_brokers(1, [TOPIC], 1, 4, random.Random(1), ["n1"])
    first = broker.route_item(TOPIC)
    versions = {broker.data_version.counter}
    shares = {first}
    for _ in range(FRESH_SHARE_SPAN**2 - 1):
        broker.fresh_share()
        item = broker.route_item(TOPIC)
        assert min(item.write_queues, item.read_queues) >= 4
        assert max(item.write_queues, item.read_queues) <= 4 + FRESH_SHARE_SPAN - 1
        shares.add(item)
        versions.add(broker.data_version.counter)
    assert len(shares) == len(versions) == FRESH_SHARE_SPAN**2
    # A stop in a fresh-share run is one more step of the same walk; past its end the
    # walk comes back to where it began (the bound the run's length must respect).
    broker.next_incarnation(fresh=True)
    assert broker.route_item(TOPIC) == first


def _prober(tmp_path: Path) -> tuple[Prober, RegisterLog, HistoryWriter]:
    writer = HistoryWriter(tmp_path / "run", RunMeta("r", "nemesis", "eventual", 1, ["n1"]))
    recorder = Recorder(writer)
    recorder.start()
    registers = RegisterLog()
    prober = Prober(
        {"n1": "127.0.0.1:1", "n2": "127.0.0.1:2"},
        [TOPIC],
        recorder,
        registers,
        sample_ms=250,
        timeout_s=1.0,
        process=lambda node: f"ns-{node}",
    )
    return prober, registers, writer


def _share(broker: str, queues: int) -> RouteItem:
    return RouteItem(broker, f"127.0.0.1:{len(broker)}", queues, queues, 6)


def test_a_node_mixing_recorded_writes_out_of_order_reads_and_an_unreported_change_is_a_write(
    tmp_path: Path,
) -> None:
    """Writes A1+B1, A2+B1, A2+B2 (each broker's next round). A node that missed A's
    second round but got B's answers A1+B2: no write had it, but every share in it did
    (eventual mode's divergence, a read for the checker). A share no write had (B3) is a
    change nobody reported: inferred, so the count shows it."""
    prober, registers, writer = _prober(tmp_path)
    a1, a2, b1, b2 = _share("a", 5), _share("a", 6), _share("bb", 5), _share("bb", 6)
    for at, value in ((0, [a1, b1]), (100, [a2, b1]), (200, [a2, b2])):
        registers.record(TOPIC, at, at + 10, canonical_route(value))
    prober.observe("n2", TOPIC, ReadResult("ok", canonical_route([a1, b1]), 50, 52))
    # n2 lags: it applied A's second round but not yet B's (superseded): a stale read.
    prober.observe("n2", TOPIC, ReadResult("ok", canonical_route([a2, b1]), 300, 302))
    assert (prober.writes, prober.composed) == (0, 1)
    prober.observe("n1", TOPIC, ReadResult("ok", canonical_route([a1, b1]), 50, 52))
    prober.observe("n1", TOPIC, ReadResult("ok", canonical_route([a1, b2]), 300, 302))
    assert (prober.writes, prober.composed) == (0, 2)
    prober.observe("n1", TOPIC, ReadResult("ok", canonical_route([a2]), 400, 402))
    assert (prober.writes, prober.composed) == (1, 2), "b absent: no write ever lacked it"
    prober.observe("n1", TOPIC, ReadResult("ok", canonical_route([a2, _share("bb", 7)]), 500, 502))
    assert prober.writes == 2
    # An eventual node that restarted (its journal says so) may lack any broker: a read.
    registers.note_restart("n1")
    prober.observe("n1", TOPIC, ReadResult("ok", canonical_route([b2]), 600, 602))
    prober.observe("n1", TOPIC, ReadResult("ok", canonical_route([a1, b1]), 700, 702))
    assert (prober.writes, prober.composed) == (2, 4)
    writer.close()
    inferred = [r for r in iter_rows(tmp_path / "run", "operations") if r["kind"] != "route_read"]
    assert [r["origin"] for r in inferred] == [ORIGIN_INFERRED] * 2
    asyncio.run(prober.close())
