"""``register_body.topics_digest``: what a REGISTER_BROKER body says besides its
DataVersion, read without decoding it, and that DataVersion.

Raft mode replicates a registration without its topic table when this digest equals
the one of the broker's last registration (``RegisterBroker.topics_elided``), so two
bodies may share a digest only when they differ in nothing but the DataVersion."""

from __future__ import annotations

import dataclasses

from remoting import register_body
from remoting.codes import CURRENT_VERSION, MQVersion, RequestCode
from remoting.command import RemotingCommand
from remoting.model import DataVersion, RegisterBrokerBody, TopicConfig, TopicConfigSerializeWrapper

DV = DataVersion(state_version=1, timestamp=1_700_000_000_000, counter=5)


def _request(
    topics: tuple[str, ...] = ("TopicTest", "Orders"),
    dv: DataVersion = DV,
    *,
    filters: tuple[str, ...] = (),
    compressed: bool = False,
    version: int = CURRENT_VERSION,
) -> RemotingCommand:
    wrapper = TopicConfigSerializeWrapper(
        data_version=dv, topic_config_table={t: TopicConfig(t, 8, 8) for t in topics}
    )
    body = register_body.encode_register_broker_body(
        RegisterBrokerBody(wrapper, list(filters)), compressed=compressed
    )
    fields = {"compressed": "true" if compressed else "false", "brokerName": "broker-a"}
    return RemotingCommand.request(RequestCode.REGISTER_BROKER, fields, body, version=version)


def test_the_same_table_with_another_data_version_has_the_same_digest() -> None:
    first = register_body.topics_digest(_request())
    later = register_body.topics_digest(
        _request(dv=DataVersion(state_version=1, timestamp=1_700_000_999_999, counter=123_456))
    )
    assert first is not None and later is not None
    assert first[0] == later[0]
    assert first[1] == DV
    assert later[1] == DataVersion(1, 1_700_000_999_999, 123_456)


def test_anything_else_changes_the_digest() -> None:
    base = register_body.topics_digest(_request())
    assert base is not None
    for other in (
        _request(("TopicTest",)),
        _request(("TopicTest", "Orders", "More")),
        _request(filters=("127.0.0.1:7001",)),
        _request(version=CURRENT_VERSION - 1),
    ):
        digest = register_body.topics_digest(other)
        assert digest is not None and digest[0] != base[0]
    wider = _request()
    body = bytes(wider.body or b"").replace(b'"readQueueNums":8', b'"readQueueNums":9', 1)
    changed = register_body.topics_digest(dataclasses.replace(wider, body=body))
    assert changed is not None and changed[0] != base[0]


def test_bodies_it_does_not_recognise_are_left_to_the_decoder() -> None:
    assert register_body.topics_digest(_request(compressed=True)) is None
    assert register_body.topics_digest(_request(version=MQVersion.V3_0_11 - 1)) is None
    plain = _request()
    body = bytes(plain.body or b"")
    marker = b'"topicConfigSerializeWrapper":{"dataVersion":{'
    for bad in (
        # The marker twice (a key of that name inside the table).
        body.replace(
            b'"topicConfigTable":{', b'"topicConfigTable":{"x":' + marker + b'"counter":1}},', 1
        ),
        # Keys in another order: the DataVersion is not the wrapper's first key.
        body.replace(marker, b'"topicConfigSerializeWrapper":{"zz":1,"dataVersion":{', 1),
        # Not flat integers.
        body.replace(b'"counter":5', b'"counter":"5"', 1),
        body.replace(b'"counter":5', b'"counter":5.5', 1),
        body.replace(b'"counter":5', b'"extra":1,"counter":5', 1),
        b"",
    ):
        assert register_body.topics_digest(dataclasses.replace(plain, body=bad)) is None, bad
