"""REGISTER_BROKER bodies: the fast per-topic conversion gives what the careful one gives.

Topic entries whose properties all have the types a broker writes take a short
path; anything else (numeric strings, 0/1 booleans, missing properties, nulls,
out-of-range numbers, odd attribute values) goes through the careful
conversion. Whatever the entry, the decoded register body must hold exactly
what ``decode_topic_config`` makes of that entry, and fail exactly when it fails.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from remoting.bodies import decode_topic_config
from remoting.errors import BodyDecodeError
from remoting.model import DataVersion, RegisterBrokerBody, TopicConfig, TopicConfigSerializeWrapper
from remoting.register_body import decode_register_broker_body, encode_register_broker_body

INT64_MAX = 2**63 - 1

_ints = st.one_of(
    st.integers(-(2**31), 2**31),
    st.sampled_from([INT64_MAX, INT64_MAX + 1, -(2**63), -(2**63) - 1]),
)
_values: dict[str, st.SearchStrategy[Any]] = {
    "topicName": st.one_of(st.text(max_size=8), st.integers(0, 9), st.booleans()),
    "readQueueNums": st.one_of(_ints, st.sampled_from(["8", "x", "1.5", " 8"]), st.booleans()),
    "writeQueueNums": st.one_of(_ints, st.sampled_from(["16", "-3"]), st.floats(0, 4)),
    "perm": st.one_of(_ints, st.booleans()),
    "topicFilterType": st.one_of(
        st.sampled_from(["SINGLE_TAG", "MULTI_TAG", ""]), st.integers(0, 2), st.booleans()
    ),
    "topicSysFlag": _ints,
    "order": st.one_of(st.booleans(), st.sampled_from([0, 1, 2, "true", "false", "yes"])),
    "attributes": st.one_of(
        st.dictionaries(
            st.text(max_size=4),
            st.one_of(st.text(max_size=4), st.integers(0, 9), st.none(), st.booleans()),
            max_size=3,
        ),
        st.just([]),
        st.just("a=b"),
    ),
}
# What a broker writes: every property present with its Java type.
_java_ints = st.integers(-(2**31), 2**31 - 1)
_well_typed = st.fixed_dictionaries(
    {
        "topicName": st.text(max_size=8),
        "readQueueNums": _java_ints,
        "writeQueueNums": _java_ints,
        "perm": _java_ints,
        "topicFilterType": st.sampled_from(["SINGLE_TAG", "MULTI_TAG", ""]),
        "topicSysFlag": _java_ints,
        "order": st.booleans(),
        "attributes": st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=3),
    }
)


@st.composite
def topic_entries(draw: st.DrawFn) -> dict[str, Any]:
    """A well-typed entry with up to three properties changed, nulled or removed."""
    entry = dict(draw(_well_typed))
    for key in draw(st.lists(st.sampled_from(sorted(_values)), max_size=3, unique=True)):
        change = draw(st.sampled_from(["other", "null", "absent"]))
        if change == "absent":
            del entry[key]
        else:
            entry[key] = None if change == "null" else draw(_values[key])
    return entry


def register_body(table: dict[str, Any]) -> bytes:
    """A plain REGISTER_BROKER body JSON with ``table`` as its topicConfigTable."""
    return json.dumps(
        {
            "filterServerList": [],
            "topicConfigSerializeWrapper": {
                "dataVersion": {"counter": 1, "stateVersion": 0, "timestamp": 5},
                "topicConfigTable": table,
            },
        }
    ).encode()


@settings(max_examples=400, deadline=None)
@given(entries=st.lists(topic_entries(), min_size=1, max_size=4))
def test_every_topic_entry_decodes_as_the_careful_conversion_does(
    entries: list[dict[str, Any]],
) -> None:
    table = {f"T{index}": entry for index, entry in enumerate(entries)}
    expected: dict[str, TopicConfig] = {}
    failure: BodyDecodeError | None = None
    for name, entry in table.items():
        try:
            expected[name] = decode_topic_config(json.dumps(entry).encode())
        except BodyDecodeError as exc:
            failure = exc
    if failure is not None:
        try:
            decode_register_broker_body(register_body(table), compressed=False, version=400)
        except BodyDecodeError:
            return
        raise AssertionError(f"decoded although an entry fails alone: {failure}")
    body = decode_register_broker_body(register_body(table), compressed=False, version=400)
    assert body.topic_config_wrapper.topic_config_table == expected


BROKER_ENTRY: dict[str, Any] = {
    "attributes": {},
    "order": False,
    "perm": 6,
    "readQueueNums": 8,
    "topicFilterType": "SINGLE_TAG",
    "topicName": "T",
    "topicSysFlag": 0,
    "writeQueueNums": 8,
}
EDGE_CHANGES: list[dict[str, Any]] = [
    {},
    {"perm": INT64_MAX},
    {"perm": INT64_MAX + 1},
    {"readQueueNums": -(2**63) - 1},
    {"writeQueueNums": INT64_MAX + 1},
    {"topicSysFlag": INT64_MAX + 1},
    {"readQueueNums": "8"},
    {"perm": True},
    {"order": 1},
    {"order": "true"},
    {"topicFilterType": ""},
    {"topicFilterType": None},
    {"topicName": 7},
    {"attributes": None},
    {"attributes": {"a": None, "b": "x"}},
    {"attributes": {"a": 1}},
    {"attributes": {"a": "1"}},
    {"attributes": ["a"]},
]


@pytest.mark.parametrize("change", EDGE_CHANGES)
def test_edge_entries_decode_as_the_careful_conversion_does(change: dict[str, Any]) -> None:
    entry = {**BROKER_ENTRY, **change}
    data = register_body({"T": entry})
    try:
        expected = decode_topic_config(json.dumps(entry).encode())
    except BodyDecodeError:
        with pytest.raises(BodyDecodeError):
            decode_register_broker_body(data, compressed=False, version=400)
        return
    body = decode_register_broker_body(data, compressed=False, version=400)
    assert body.topic_config_wrapper.topic_config_table == {"T": expected}


def test_a_broker_written_body_round_trips_through_the_fast_path() -> None:
    table = {
        f"Topic{index}": TopicConfig(
            topic_name=f"Topic{index}",
            read_queue_nums=index + 1,
            write_queue_nums=index + 2,
            perm=6 if index % 2 else 4,
            topic_filter_type="MULTI_TAG" if index % 3 else "SINGLE_TAG",
            topic_sys_flag=index % 4,
            order=index % 5 == 0,
            attributes={"+message.type": "NORMAL"} if index % 2 else {},
        )
        for index in range(50)
    }
    body = RegisterBrokerBody(
        TopicConfigSerializeWrapper(
            data_version=DataVersion(timestamp=9, counter=3), topic_config_table=table
        ),
        ["filter:1"],
    )
    data = encode_register_broker_body(body, compressed=False)
    decoded = decode_register_broker_body(data, compressed=False, version=400)
    assert decoded.topic_config_wrapper.topic_config_table == table
    assert decoded.filter_server_list == ["filter:1"]
