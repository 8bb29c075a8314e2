"""The gateway's hold on split registrations (gateway.split_registration): parts in
order make one table, anything else drops it, and what a sender can make it hold
is bounded in parts, bytes, tables and time."""

from __future__ import annotations

import pytest

from gateway import split_registration
from gateway.split_registration import PartHeld, PartRefused, SplitTables, split_fields
from remoting.model import DataVersion, TopicConfig, TopicConfigSerializeWrapper

KEY = ("C", "10.0.0.1:10911", "broker-a", 0)
VERSION = DataVersion(1, 1, 1)


def part(*names: str, version: DataVersion = VERSION) -> TopicConfigSerializeWrapper:
    return TopicConfigSerializeWrapper(
        data_version=version, topic_config_table={n: TopicConfig(n, 4, 4) for n in names}
    )


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_parts_in_order_make_one_table_with_the_parts_version() -> None:
    tables = SplitTables()
    assert tables.add(KEY, 0, 3, part("a", "b"), 100) == PartHeld(0, 3)
    assert tables.add(KEY, 1, 3, part("c"), 100) == PartHeld(1, 3)
    assert tables.held_bytes == 200 and len(tables) == 1
    merged = tables.add(KEY, 2, 3, part("d"), 100)
    assert not isinstance(merged, PartHeld | PartRefused)
    assert set(merged.topic_config_table) == {"a", "b", "c", "d"}
    assert merged.data_version == VERSION
    assert (tables.held_bytes, len(tables), tables.merged) == (0, 0, 1)


def test_a_first_part_starts_over_and_a_stray_part_drops_the_table() -> None:
    tables = SplitTables()
    tables.add(KEY, 0, 3, part("a"), 10)
    tables.add(KEY, 0, 3, part("x"), 10)  # the broker started a new round
    assert tables.held_bytes == 10
    refused = tables.add(KEY, 2, 3, part("z"), 10)
    assert isinstance(refused, PartRefused) and "part 2 of 3 was expected" in refused.remark
    assert (len(tables), tables.held_bytes, tables.dropped) == (0, 0, 2)
    tables.add(KEY, 0, 2, part("a"), 10)
    other = tables.add(KEY, 1, 2, part("b", version=DataVersion(1, 2, 2)), 10)
    assert isinstance(other, PartRefused) and "another DataVersion" in other.remark
    assert isinstance(tables.add(KEY, 1, 2, part("b"), 10), PartRefused)


def test_held_bytes_tables_and_idle_time_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    tables = SplitTables(clock=clock, held_bytes_max=1000, idle_s=5.0)
    tables.add(KEY, 0, 4, part("a"), 600)
    full = tables.add(KEY, 1, 4, part("b"), 600)
    assert isinstance(full, PartRefused) and "the most this node holds" in full.remark
    assert tables.held_bytes == 0

    tables.add(KEY, 0, 4, part("a"), 100)
    clock.now = 6.0
    late = tables.add(KEY, 1, 4, part("b"), 100)
    assert isinstance(late, PartRefused) and "no part of it is held" in late.remark

    monkeypatch.setattr(split_registration, "TABLES_MAX", 2)
    assert tables.add(("C", "a:1", "b1", 0), 0, 2, part("a"), 1) == PartHeld(0, 2)
    assert tables.add(("C", "a:2", "b2", 0), 0, 2, part("a"), 1) == PartHeld(0, 2)
    assert isinstance(tables.add(("C", "a:3", "b3", 0), 0, 2, part("a"), 1), PartRefused)


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
