"""The gateway's hold on split registrations (gateway.split_registration): parts in
order make one table, anything else drops it, and what a sender can make it hold
is bounded in parts, bytes, tables and time."""

from __future__ import annotations

import pytest

from broker_app.registration import BrokerIdentity, build_register_request
from gateway import split_registration
from gateway.split_registration import (
    Part,
    PartHeld,
    PartRefused,
    SplitTable,
    SplitTables,
    split_fields,
)
from remoting import register_body
from remoting.command import RemotingCommand
from remoting.errors import BodyDecodeError
from remoting.model import DataVersion, TopicConfig, TopicConfigSerializeWrapper

KEY = ("C", "10.0.0.1:10911", "broker-a", 0)
VERSION = DataVersion(1, 1, 1)


IDENTITY = BrokerIdentity("C", "10.0.0.1:10911", "broker-a", 0, "10.0.0.1:10912")


def part(
    *names: str, version: DataVersion = VERSION, size: int = 0, digest: bytes | None = None
) -> Part:
    """A part whose request carries ``names`` at ``version``; its body padded to
    ``size`` bytes when given (what the byte bounds count)."""
    wrapper = TopicConfigSerializeWrapper(
        data_version=version, topic_config_table={n: TopicConfig(n, 4, 4) for n in names}
    )
    request = build_register_request(IDENTITY, wrapper, compress_over_bytes=1 << 40)
    if size:
        request = RemotingCommand.request(request.code, request.ext_fields, b"x" * size)
    return Part(request, version, digest)


def decode(request: RemotingCommand) -> register_body.RegisterBrokerBody:
    return register_body.decode_register_broker_request_body(
        request.body, compressed=False, version=request.version
    )


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_parts_in_order_make_one_table_with_the_parts_version() -> None:
    tables = SplitTables()
    first = part("a", "b")
    assert tables.add(KEY, 0, 3, first) == PartHeld(0, 3)
    assert tables.add(KEY, 1, 3, part("c")) == PartHeld(1, 3)
    assert tables.held_bytes == first.body_bytes + part("c").body_bytes and len(tables) == 1
    whole = tables.add(KEY, 2, 3, part("d"))
    assert isinstance(whole, SplitTable)
    merged = whole.merge([decode(p.request) for p in whole.parts]).topic_config_wrapper
    assert set(merged.topic_config_table) == {"a", "b", "c", "d"}
    assert merged.data_version == VERSION
    assert (tables.held_bytes, len(tables), tables.merged) == (0, 0, 1)
    assert whole.digest is None, "a part without a digest: the table has none"


def test_a_table_digest_is_its_parts_digests_in_order_and_a_stray_version_fails() -> None:
    table = SplitTable(VERSION, (part("a", digest=b"1"), part("b", digest=b"2")))
    same = SplitTable(VERSION, (part("a", digest=b"1"), part("b", digest=b"2")))
    swapped = SplitTable(VERSION, (part("b", digest=b"2"), part("a", digest=b"1")))
    assert table.digest is not None and table.digest == same.digest != swapped.digest
    lying = SplitTable(VERSION, (part("a", version=DataVersion(9, 9, 9)),))
    with pytest.raises(BodyDecodeError, match="another DataVersion"):
        lying.merge([decode(p.request) for p in lying.parts])


def test_a_first_part_starts_over_and_a_stray_part_drops_the_table() -> None:
    tables = SplitTables()
    tables.add(KEY, 0, 3, part("a", size=10))
    tables.add(KEY, 0, 3, part("x", size=10))  # the broker started a new round
    assert tables.held_bytes == 10
    refused = tables.add(KEY, 2, 3, part("z", size=10))
    assert isinstance(refused, PartRefused) and "part 2 of 3 was expected" in refused.remark
    assert (len(tables), tables.held_bytes, tables.dropped) == (0, 0, 2)
    tables.add(KEY, 0, 2, part("a"))
    other = tables.add(KEY, 1, 2, part("b", version=DataVersion(1, 2, 2)))
    assert isinstance(other, PartRefused) and "another DataVersion" in other.remark
    assert isinstance(tables.add(KEY, 1, 2, part("b")), PartRefused)


def test_held_bytes_tables_and_idle_time_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    tables = SplitTables(clock=clock, held_bytes_max=1000, idle_s=5.0)
    tables.add(KEY, 0, 4, part("a", size=600))
    full = tables.add(KEY, 1, 4, part("b", size=600))
    assert isinstance(full, PartRefused) and "the most this node holds" in full.remark
    assert tables.held_bytes == 0

    tables.add(KEY, 0, 4, part("a", size=100))
    clock.now = 6.0
    late = tables.add(KEY, 1, 4, part("b", size=100))
    assert isinstance(late, PartRefused) and "no part of it is held" in late.remark

    monkeypatch.setattr(split_registration, "TABLES_MAX", 2)
    small = part("a", size=1)
    assert tables.add(("C", "a:1", "b1", 0), 0, 2, small) == PartHeld(0, 2)
    assert tables.add(("C", "a:2", "b2", 0), 0, 2, small) == PartHeld(0, 2)
    assert isinstance(tables.add(("C", "a:3", "b3", 0), 0, 2, small), PartRefused)


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({}, None),
        ({"splitRegistrationPart": "0", "splitRegistrationParts": "2"}, (0, 2)),
        ({"splitRegistrationPart": "1"}, "names both"),
        ({"splitRegistrationPart": "-1", "splitRegistrationParts": "2"}, "decimal"),
        ({"splitRegistrationPart": "2", "splitRegistrationParts": "2"}, "numbered from 0"),
        ({"splitRegistrationPart": "0", "splitRegistrationParts": "0"}, "1 to 4096"),
        ({"splitRegistrationPart": "0", "splitRegistrationParts": "4097"}, "1 to 4096"),
    ],
)
def test_the_header_fields_name_a_part_or_are_refused(
    fields: dict[str, str], expected: object
) -> None:
    got = split_fields(fields)
    if isinstance(expected, str):
        assert isinstance(got, PartRefused) and expected in got.remark
    else:
        assert got == expected
