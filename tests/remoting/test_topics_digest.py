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
    assert first.topics == later.topics
    assert first.data_version == DV
    assert later.data_version == DataVersion(1, 1_700_000_999_999, 123_456)


def test_the_request_digest_built_on_it_tells_requests_apart_as_the_body_does() -> None:
    """A copy of the same request (another opaque) has the same digest; another
    DataVersion, header field or table does not."""

    def request_digest(request: RemotingCommand) -> bytes:
        return register_body.registration_digest(request, register_body.topics_digest(request))

    base = _request()
    copy = dataclasses.replace(base, opaque=base.opaque + 1)
    assert request_digest(copy) == request_digest(base)
    others = [
        _request(dv=DataVersion(state_version=1, timestamp=1_700_000_000_000, counter=6)),
        _request(("TopicTest",)),
        dataclasses.replace(base, ext_fields={**(base.ext_fields or {}), "brokerName": "b"}),
    ]
    digests = {request_digest(r) for r in [base, *others]}
    assert len(digests) == 1 + len(others)


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
        assert digest is not None and digest.topics != base.topics
    wider = _request()
    body = bytes(wider.body or b"").replace(b'"readQueueNums":8', b'"readQueueNums":9', 1)
    changed = register_body.topics_digest(dataclasses.replace(wider, body=body))
    assert changed is not None and changed.topics != base.topics


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
