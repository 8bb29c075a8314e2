"""Raft mode: a registration every member receives costs one log entry, and an
unchanged one costs none (``raftstore.liveness.RegistrationDeduper``)."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gateway.dispatch import RequestDispatcher
from gateway.registration import Kind, Registered, Registrar
from gateway.services import NameServerService
from localcluster.demo import DemoBroker, register_request, topic_table
from raftstore.commands import Command, RegisterBroker
from raftstore.liveness import REGISTRATION_WAIT_MIN_S
from raftstore.raft.replicator import RaftReplicator
from raftstore.results import ApplyResult, RegisterBrokerOutcome
from remoting import register_body
from remoting.model import DataVersion, RegisterBrokerBody, TopicConfig, TopicConfigSerializeWrapper
from remoting.register_request import BrokerRegistration, RegisterBrokerRequest
from tests.raftstore.raft_node import InProcessCluster

CLUSTER = "DefaultCluster"
BROKERS = 20
TOPICS_PER_BROKER = 50


def _wrapper(index: int, counter: int) -> TopicConfigSerializeWrapper:
    return TopicConfigSerializeWrapper(
        data_version=DataVersion(timestamp=1_000 + index, counter=counter),
        topic_config_table={
            name: TopicConfig(name, read_queue_nums=4, write_queue_nums=4)
            for name in (f"T{index}-{j}" for j in range(TOPICS_PER_BROKER))
        },
    )


async def _register(
    service: NameServerService, index: int, counter: int, broker_id: int = 0
) -> RegisterBrokerOutcome:
    return await service.register_broker(
        BrokerRegistration(
            cluster_name=CLUSTER,
            broker_addr=f"10.0.{broker_id}.{index}:10911",
            broker_name=f"broker-{index}",
            broker_id=broker_id,
            ha_server_addr=f"10.0.{broker_id}.{index}:10912",
            enable_acting_master=False,
        ),
        _wrapper(index, counter),
    )


@pytest.fixture
async def services(
    tmp_path: Path,
) -> AsyncIterator[tuple[InProcessCluster, list[NameServerService]]]:
    nodes = InProcessCluster(tmp_path)
    await nodes.start()
    await nodes.leader()
    yield nodes, [NameServerService(node) for node in nodes.nodes]
    await nodes.close()


@pytest.fixture
def decodes(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Counts REGISTER_BROKER bodies decoded (under "body") while the test runs."""
    counts = Counter[str]()
    decode = register_body.decode_register_broker_request_body

    def counting_decode(*args: Any, **kwargs: Any) -> RegisterBrokerBody:
        counts["body"] += 1
        return decode(*args, **kwargs)

    monkeypatch.setattr(register_body, "decode_register_broker_request_body", counting_decode)
    return counts


async def test_every_members_copy_of_a_registration_is_one_log_entry(
    services: tuple[InProcessCluster, list[NameServerService]],
) -> None:
    cluster, members = services
    entries: Counter[str] = Counter()

    def count(command: Command, _result: ApplyResult) -> None:
        entries[type(command).__name__] += 1

    cluster.nodes[0].subscribe(count)
    rounds = 4
    for counter in range(1, rounds + 1):
        # Each broker sends its (new) table to every member at the same moment.
        await asyncio.gather(*(_register(m, i, counter) for i in range(BROKERS) for m in members))
    await cluster.converged()
    real = BROKERS * rounds
    deduper = [m.registrations for m in members if m.registrations is not None]
    timeouts = sum(d.waits_timed_out for d in deduper)
    # Every copy proposed is one entry; the others were answered from state. A
    # follower whose wait ran out (a loaded machine) proposes its copy too, so the
    # bound is loose: well under one entry per copy.
    assert entries["RegisterBroker"] == sum(d.proposed for d in deduper), entries
    assert real <= entries["RegisterBroker"] <= real * 2, (entries, timeouts)
    for index in range(BROKERS):
        live = cluster.nodes[2].read(lambda t, i=index: t.live_broker(CLUSTER, f"10.0.0.{i}:10911"))
        assert live is not None and live.data_version.counter == rounds

    # The next periodic registrations carry the same tables: no RegisterBroker entry
    # at all, and at most the heartbeats the coalescer would propose anyway.
    before = Counter(entries)
    await asyncio.gather(*(_register(m, i, rounds) for i in range(BROKERS) for m in members))
    await asyncio.gather(*(m.replicator.barrier() for m in members))
    assert entries["RegisterBroker"] == before["RegisterBroker"]
    assert entries["BrokerHeartbeat"] - before["BrokerHeartbeat"] <= BROKERS
    assert sum(m.registrations.answered_as_touch for m in members if m.registrations) >= (
        BROKERS * 3 + BROKERS * rounds
    )


async def test_a_broker_heard_only_by_a_follower_is_registered_and_answered(
    services: tuple[InProcessCluster, list[NameServerService]],
) -> None:
    cluster, members = services
    leader = await cluster.leader()
    follower = next(m for m in members if m.replicator is not leader)
    await _register(follower, 1, 1)
    slave = await _register(follower, 1, 1, broker_id=1)
    assert slave.master_addr == "10.0.0.1:10911"
    await cluster.converged()
    for node in cluster.nodes:
        assert node.read(lambda t: t.live_broker(CLUSTER, "10.0.1.1:10911")) is not None
    # Every member gives the same answer to the slave's next registration.
    answers = await asyncio.gather(*(_register(m, 1, 1, broker_id=1) for m in members))
    assert {a.master_addr for a in answers} == {"10.0.0.1:10911"}


async def test_copies_known_by_their_digest_are_answered_without_decoding(
    services: tuple[InProcessCluster, list[NameServerService]],
    decodes: Counter[str],
) -> None:
    """Over the wire path: every member gets the same REGISTER_BROKER frame. Copies of an
    applied request are answered from state without decoding their body, and a periodic
    registration with an unchanged table decodes nothing and adds no entry."""
    cluster, members = services
    dispatchers = [RequestDispatcher(m) for m in members]
    entries: Counter[str] = Counter()

    entries_elided: Counter[str] = Counter()

    def count(command: Command, _result: ApplyResult) -> None:
        entries[type(command).__name__] += 1
        if isinstance(command, RegisterBroker) and command.topics_elided:
            entries_elided[type(command).__name__] += 1

    cluster.nodes[0].subscribe(count)
    # A copy logged without its table may also be answered from state (a follower that
    # saw the leader's entry applied while it waited): neither decoded nor proposed.
    elided_from_state = Counter[str]()
    for member in members:
        deduper_of = member.registrations
        assert deduper_of is not None
        answer = deduper_of.answer_from_state

        async def counting(
            command: RegisterBroker, *, waited: bool = False, answer: Any = answer
        ) -> ApplyResult | None:
            result = await answer(command, waited=waited)
            if result is not None and command.topics_elided:
                elided_from_state["copies"] += 1
            return result

        deduper_of.answer_from_state = counting  # type: ignore[method-assign]
    brokers = [
        DemoBroker(CLUSTER, f"broker-{i}", 0, f"10.1.0.{i}:10911", f"10.1.0.{i}:10912")
        for i in range(BROKERS)
    ]
    rounds = 3
    for counter in range(1, rounds + 1):
        frames = [
            register_request(
                b,
                topic_table([f"D{i}-{j}" for j in range(TOPICS_PER_BROKER)]),
                DataVersion(timestamp=1, counter=counter),
            )
            for i, b in enumerate(brokers)
        ]
        answers = await asyncio.gather(
            *(d.register_broker(frame, None) for frame in frames for d in dispatchers)
        )
        assert {a.code for a in answers} == {0}
    await cluster.converged()
    real = BROKERS * rounds
    deduper = [m.registrations for m in members if m.registrations is not None]
    undecoded = sum(d.answered_undecoded for d in deduper)
    elided = sum(d.proposed_elided for d in deduper)
    assert real <= entries["RegisterBroker"] <= real * 2, entries
    # Every copy was answered undecoded, proposed without its (unchanged) table, or
    # decoded; after the first round the tables repeat with new DataVersions, so most
    # of those entries leave their table out.
    answered = decodes["body"] + undecoded + elided + elided_from_state["copies"]
    assert answered == real * len(members), (decodes, undecoded, elided, elided_from_state)
    assert undecoded >= real // 2, (decodes, undecoded)
    assert elided >= BROKERS * (rounds - 1) // 2, (decodes, elided)
    assert entries_elided["RegisterBroker"] == elided

    decoded_before, entries_before = decodes["body"], entries["RegisterBroker"]
    answers = await asyncio.gather(
        *(d.register_broker(frame, None) for frame in frames for d in dispatchers)
    )
    await asyncio.gather(*(m.replicator.barrier() for m in members))
    assert {a.code for a in answers} == {0}
    assert decodes["body"] == decoded_before, "an unchanged table is not decoded"
    assert entries["RegisterBroker"] == entries_before


async def test_a_table_left_out_of_the_log_is_sent_whole_once_the_state_moved(
    services: tuple[InProcessCluster, list[NameServerService]],
    decodes: Counter[str],
) -> None:
    """Over the wire: a broker's periodic registrations with a new DataVersion and the
    same table are replicated without the table, and every member stores the new
    DataVersion. After an operator deletes one of its topics, the next one is decoded
    and replicated whole, so the topic is back on every member."""
    cluster, members = services
    dispatchers = [RequestDispatcher(m) for m in members]
    broker = DemoBroker(CLUSTER, "broker-e", 0, "10.2.0.1:10911", "10.2.0.1:10912")
    table = topic_table([f"E-{j}" for j in range(TOPICS_PER_BROKER)])

    async def register_everywhere(counter: int) -> None:
        frame = register_request(broker, table, DataVersion(timestamp=1, counter=counter))
        answers = await asyncio.gather(*(d.register_broker(frame, None) for d in dispatchers))
        assert {a.code for a in answers} == {0}
        await asyncio.gather(*(m.replicator.barrier() for m in members))
        for node in cluster.nodes:
            live = node.read(lambda t: t.live_broker(CLUSTER, "10.2.0.1:10911"))
            assert live is not None and live.data_version.counter == counter

    await register_everywhere(1)
    first_decodes = decodes["body"]
    deduper = [m.registrations for m in members if m.registrations is not None]
    for counter in (2, 3, 4):
        await register_everywhere(counter)
    assert decodes["body"] == first_decodes, "same table, new DataVersion: not decoded"
    assert sum(d.proposed_elided for d in deduper) >= 3

    await members[0].delete_topic("E-7")
    await register_everywhere(5)
    assert decodes["body"] > first_decodes
    await cluster.converged()
    for node in cluster.nodes:
        assert node.read(lambda t: t.pickup_topic_route("E-7")) is not None
    # Recorded again: the next one leaves the table out once more.
    elided_before, decoded_before = sum(d.proposed_elided for d in deduper), decodes["body"]
    await register_everywhere(6)
    assert sum(d.proposed_elided for d in deduper) > elided_before
    assert decodes["body"] == decoded_before


async def test_each_copy_is_decided_once_and_answered_its_way(
    services: tuple[InProcessCluster, list[NameServerService]],
    decodes: Counter[str],
) -> None:
    """A broker's first registration is decoded and logged whole; the same request
    again is known by its digest everywhere; the same table with a new DataVersion is
    logged without the table and decoded nowhere. Whatever its kind, a registration
    checks the quorum once."""
    cluster, members = services
    registrars = [Registrar(m) for m in members]
    quorum_checks: Counter[int] = Counter()
    for index, member in enumerate(members):
        assert isinstance(member.replicator, RaftReplicator)
        refusal = member.replicator.quorum_refusal

        def counted(*, proposing: bool = False, index: int = index, refusal: Any = refusal) -> Any:
            quorum_checks[index] += proposing
            return refusal(proposing=proposing)

        member.replicator.quorum_refusal = counted  # type: ignore[method-assign]
    broker = DemoBroker(CLUSTER, "broker-k", 0, "10.3.0.1:10911", "10.3.0.1:10912")
    table = topic_table([f"K-{j}" for j in range(TOPICS_PER_BROKER)])

    async def decided(counter: int) -> Counter[Kind]:
        frame = register_request(broker, table, DataVersion(timestamp=1, counter=counter))
        answers = await asyncio.gather(
            *(
                r.register(RegisterBrokerRequest.read(frame), channel=None, peer_host="127.0.0.1")
                for r in registrars
            )
        )
        await asyncio.gather(*(m.replicator.barrier() for m in members))
        assert all(isinstance(a, Registered) for a in answers)
        decided = [a for a in answers if isinstance(a, Registered)]
        assert not any(a.outcome.failed or a.outcome.needs_full for a in decided)
        assert quorum_checks == Counter(dict.fromkeys(range(len(members)), 1))
        quorum_checks.clear()
        return Counter(a.kind for a in decided)

    first = await decided(1)
    assert first[Kind.FULL] >= 1 and first[Kind.TOPICS_UNCHANGED] == 0, first
    decoded = decodes["body"]
    assert await decided(1) == Counter({Kind.SEEN: len(members)})
    moved = await decided(2)
    assert moved[Kind.TOPICS_UNCHANGED] >= 1 and moved[Kind.FULL] == 0, moved
    assert decodes["body"] == decoded
    await cluster.converged()


async def test_a_registration_that_moves_only_liveness_is_answered_from_state(
    services: tuple[InProcessCluster, list[NameServerService]],
    decodes: Counter[str],
) -> None:
    """The broker's last registration again with only its liveness moved (a larger
    ``maxOffset``): a new request digest, so not SEEN, but its plan on the applied state
    holds only liveness edits, so the leader answers it LIVENESS_ONLY, from state as a
    heartbeat: no RegisterBroker entry, the body not decoded."""
    cluster, members = services
    leader = await cluster.leader()
    service = next(m for m in members if m.replicator is leader)
    deduper = service.registrations
    assert deduper is not None
    registrar = Registrar(service)
    broker = DemoBroker(CLUSTER, "broker-l", 0, "10.5.0.1:10911", "10.5.0.1:10912")
    table = topic_table([f"L-{j}" for j in range(TOPICS_PER_BROKER)])
    entries: Counter[str] = Counter()

    def count(command: Command, _result: ApplyResult) -> None:
        entries[type(command).__name__] += 1

    leader.subscribe(count)

    async def decided(max_offset: int) -> Kind:
        frame = register_request(broker, table, DataVersion(timestamp=1, counter=1))
        assert frame.ext_fields is not None
        frame.ext_fields["maxOffset"] = str(max_offset)
        answer = await registrar.register(
            RegisterBrokerRequest.read(frame), channel=None, peer_host="127.0.0.1"
        )
        assert isinstance(answer, Registered)
        assert not (answer.outcome.failed or answer.outcome.needs_full)
        return answer.kind

    assert await decided(100) == Kind.FULL
    await leader.barrier()
    decoded, registered = decodes["body"], entries["RegisterBroker"]
    touches = deduper.answered_as_touch
    assert await decided(200) == Kind.LIVENESS_ONLY
    await leader.barrier()
    assert decodes["body"] == decoded, "a liveness-only registration was decoded"
    assert entries["RegisterBroker"] == registered, "a liveness-only registration was logged"
    assert deduper.answered_as_touch == touches + 1
    await cluster.converged()


async def test_an_unchanged_split_table_is_known_by_its_digest_and_never_decoded(
    services: tuple[InProcessCluster, list[NameServerService]],
    decodes: Counter[str],
) -> None:
    """A table split in parts (gateway.split_registration) is held undecoded: its
    first registration decodes and logs it whole (SPLIT); the same table again, or
    with a new DataVersion, is known by the parts' digests and decoded nowhere; a
    table with one topic fewer is decoded and logged whole, and the topic goes."""
    from broker_app.registration import BrokerIdentity, build_register_request, split_table

    cluster, members = services
    await members[0].update_namesrv_config({"deleteTopicWithBrokerRegistration": "true"})
    registrars = [Registrar(m) for m in members]
    identity = BrokerIdentity(CLUSTER, "broker-s", 0, "10.4.0.1:10911", "10.4.0.1:10912")
    names = [f"S-{j}" for j in range(TOPICS_PER_BROKER)]

    async def decided(topics: list[str], counter: int) -> Counter[Kind]:
        wrapper = TopicConfigSerializeWrapper(
            data_version=DataVersion(timestamp=1, counter=counter),
            topic_config_table={n: TopicConfig(n, 4, 4) for n in topics},
        )
        requests = [
            build_register_request(identity, part, compress_over_bytes=1 << 40, extra_fields=f)
            for part, f in split_table(wrapper, 20)
        ]
        kinds: Counter[Kind] = Counter()
        for registrar in registrars:
            for request in requests:
                answer = await registrar.register(
                    RegisterBrokerRequest.read(request), channel=None, peer_host="127.0.0.1"
                )
                if isinstance(answer, Registered):
                    assert not (answer.outcome.failed or answer.outcome.needs_full)
                    kinds[answer.kind] += 1
        await asyncio.gather(*(m.replicator.barrier() for m in members))
        return kinds

    first = await decided(names, 1)
    assert first[Kind.SPLIT] >= 1 and sum(first.values()) == len(members), first
    decoded = decodes["body"]
    again = await decided(names, 1)
    assert again[Kind.SPLIT] == 0 and sum(again.values()) == len(members), again
    moved = await decided(names, 2)
    assert moved[Kind.SPLIT] == 0, moved
    assert decodes["body"] == decoded, "an unchanged split table was decoded"
    for node in cluster.nodes:
        live = node.read(lambda t: t.live_broker(CLUSTER, "10.4.0.1:10911"))
        assert live is not None and live.data_version.counter == 2

    smaller = await decided(names[1:], 3)
    assert smaller[Kind.SPLIT] >= 1, smaller
    assert decodes["body"] > decoded
    await cluster.converged()
    for node in cluster.nodes:
        assert node.read(lambda t: t.pickup_topic_route("S-0")) is None
        assert node.read(lambda t: t.pickup_topic_route("S-1")) is not None


async def test_a_copy_the_leader_never_gets_waits_once_on_a_quiet_cluster_twice_on_a_busy_one(
    services: tuple[InProcessCluster, list[NameServerService]],
) -> None:
    """A broker that reaches only a follower: the follower looks its request digest up
    and waits for the leader's copy once; on a quiet cluster it then proposes its own
    (one timed-out wait, not one per check), on a busy one it waits a second time,
    since there a copy's delay has a long tail and each extra copy adds to the load."""
    cluster, members = services
    leader = await cluster.leader()
    await cluster.converged()  # the follower knows its leader: it waits for its copy
    follower = next(m for m in members if m.replicator is not leader)
    registrar = Registrar(follower)
    deduper = follower.registrations
    assert deduper is not None
    broker = DemoBroker(CLUSTER, "broker-q", 0, "10.4.0.1:10911", "10.4.0.1:10912")
    table = topic_table([f"Q-{j}" for j in range(TOPICS_PER_BROKER)])

    async def register(counter: int) -> None:
        frame = register_request(broker, table, DataVersion(timestamp=1, counter=counter))
        answer = await registrar.register(
            RegisterBrokerRequest.read(frame), channel=None, peer_host="127.0.0.1"
        )
        assert isinstance(answer, Registered) and not answer.outcome.failed

    for _ in range(40):
        deduper._observe(0.004)  # commits of a few ms, steady: a quiet cluster
    assert deduper.wait_s == REGISTRATION_WAIT_MIN_S and not deduper.busy
    await register(1)
    assert deduper.waits_timed_out == 1

    for index in range(40):
        deduper._observe(0.04 + 0.02 * (index % 3))  # slower, and spread: a busy one
    assert deduper.busy and deduper.wait_s < 0.5
    await register(2)
    assert deduper.waits_timed_out == 3
