"""The KV config quota (``kvConfigBytesMax``): a replicated rule of the route table.

A put that would grow the KV config (namespace + key + value UTF-8 bytes of
every entry) past the maximum is refused and changes nothing; shrinking and
deleting are always allowed. Every node refuses the same put, also after a
snapshot, because the rule reads only replicated state.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

from raftstore.commands import Command, DeleteKV, PutKV, UpdateNamesrvConfig
from raftstore.config import DEFAULT_KV_CONFIG_BYTES_MAX, NamesrvConfig
from raftstore.results import ApplyResult, KvQuotaExceeded
from raftstore.route_table import RouteTable
from raftstore.rules import kv_entry_bytes
from raftstore.snapshot import MAGIC
from tests.raftstore.raft_node import InProcessCluster

QUOTA_BYTES = 100


def quota_table(bytes_max: int = QUOTA_BYTES) -> RouteTable:
    """An empty table whose KV config may hold ``bytes_max`` bytes."""
    return RouteTable(NamesrvConfig(kv_config_bytes_max=bytes_max))


def value_of(entry_bytes: int, namespace: str = "ns", key: str = "k") -> str:
    """A value making the entry ``(namespace, key, value)`` exactly ``entry_bytes`` long."""
    return "v" * (entry_bytes - len(namespace) - len(key))


def test_the_default_quota_is_4_mib_under_a_java_style_property() -> None:
    config = NamesrvConfig()

    assert config.kv_config_bytes_max == DEFAULT_KV_CONFIG_BYTES_MAX == 4 * 1024 * 1024
    assert config.to_properties()["kvConfigBytesMax"] == "4194304"
    assert config.updated({"kvConfigBytesMax": "1024"}).kv_config_bytes_max == 1024


def test_an_entry_counts_the_utf8_bytes_of_its_namespace_key_and_value() -> None:
    assert kv_entry_bytes("ns", "k", "v") == 4
    assert kv_entry_bytes("ns", "clé", "値") == 2 + 4 + 3
    assert kv_entry_bytes("ns", "k", "\ud800") == 2 + 1 + 3  # a lone surrogate never raises


def test_a_put_that_fills_the_quota_exactly_is_taken() -> None:
    table = quota_table()

    result = table.apply(PutKV("ns", "k", value_of(QUOTA_BYTES)))

    assert result.outcome is None
    assert table.kv_bytes() == QUOTA_BYTES


def test_a_put_past_the_quota_is_refused_and_changes_nothing() -> None:
    table = quota_table()
    table.apply(PutKV("ns", "a", value_of(60, key="a")))
    before = (table.applied_version, table.digest(), table.kv_namespaces())

    result = table.apply(PutKV("other", "b", value_of(41, "other", "b")))

    assert result.outcome == KvQuotaExceeded(bytes_max=QUOTA_BYTES, bytes_after=101)
    assert result.changes.empty
    assert (table.applied_version, table.digest(), table.kv_namespaces()) == before
    assert table.kv_list("other") is None  # not even the namespace was created


def test_the_refusal_says_the_maximum_and_what_the_put_would_make() -> None:
    assert KvQuotaExceeded(4194304, 4195000).remark == (
        "KV config quota exceeded: 4194304 bytes max, the put would make 4195000"
    )


def test_replacing_a_value_counts_only_the_difference() -> None:
    table = quota_table()
    table.apply(PutKV("ns", "k", value_of(90)))

    grown = table.apply(PutKV("ns", "k", value_of(QUOTA_BYTES)))
    too_big = table.apply(PutKV("ns", "k", value_of(QUOTA_BYTES + 1)))

    assert grown.outcome is None
    assert too_big.outcome == KvQuotaExceeded(QUOTA_BYTES, QUOTA_BYTES + 1)
    assert table.kv_get("ns", "k") == value_of(QUOTA_BYTES)


def test_over_a_lowered_quota_smaller_values_and_deletes_are_taken_but_growth_is_not() -> None:
    table = quota_table()
    table.apply(PutKV("ns", "a", value_of(50, key="a")))
    table.apply(PutKV("ns", "b", value_of(50, key="b")))
    table.apply(UpdateNamesrvConfig((("kvConfigBytesMax", "60"),)))

    grow = table.apply(PutKV("ns", "c", "x"))
    same = table.apply(PutKV("ns", "a", value_of(50, key="a")))
    shrink = table.apply(PutKV("ns", "a", value_of(10, key="a")))
    delete = table.apply(DeleteKV("ns", "b"))
    fits_again = table.apply(PutKV("ns", "c", value_of(50, key="c")))

    assert grow.outcome == KvQuotaExceeded(60, 104)
    assert same.outcome is None and same.changes.empty
    assert shrink.outcome is None and shrink.changes.kv == {("ns", "a")}
    assert delete.changes.kv == {("ns", "b")}
    assert fits_again.outcome is None
    assert table.kv_bytes() == 60


def test_deleting_frees_room_for_a_later_put() -> None:
    table = quota_table()
    table.apply(PutKV("ns", "a", value_of(QUOTA_BYTES, key="a")))
    assert table.apply(PutKV("ns", "b", "x")).outcome is not None

    table.apply(DeleteKV("ns", "a"))

    assert table.apply(PutKV("ns", "b", "x")).outcome is None
    assert table.kv_bytes() == len("ns") + 2


def test_a_zero_or_negative_quota_is_not_a_valid_config() -> None:
    table = quota_table()

    table.apply(UpdateNamesrvConfig((("kvConfigBytesMax", "0"),)))
    table.apply(UpdateNamesrvConfig((("kvConfigBytesMax", "-5"),)))

    assert table.config.kv_config_bytes_max == QUOTA_BYTES


# ---------------------------------------------------------------- snapshots and replay


def script() -> list[Command]:
    """Puts around a lowered quota: some refused, some taken, a delete between them."""
    return [
        PutKV("ns", "a", value_of(40, key="a")),
        PutKV("ns", "b", value_of(40, key="b")),
        PutKV("ns", "c", value_of(40, key="c")),  # refused: 120 > 100
        DeleteKV("ns", "a"),
        PutKV("ns", "c", value_of(40, key="c")),  # fits now
        UpdateNamesrvConfig((("kvConfigBytesMax", "50"),)),
        PutKV("ns", "d", "x"),  # refused: over the lowered maximum
        PutKV("ns", "b", value_of(5, key="b")),  # a smaller value: taken
        PutKV("ns", "d", value_of(10, key="d")),  # refused: 55 > 50
        PutKV("ns", "d", "x"),  # 49: fits
    ]


def outcomes(table: RouteTable, commands: Sequence[Command]) -> list[ApplyResult]:
    """Apply each command, returning its result."""
    return [table.apply(command) for command in commands]


def test_the_same_commands_refuse_the_same_puts_on_every_table() -> None:
    first, second = quota_table(), quota_table()

    results = outcomes(first, script())

    assert results == outcomes(second, script())
    refused = [i for i, r in enumerate(results) if isinstance(r.outcome, KvQuotaExceeded)]
    assert refused == [2, 6, 8]
    assert first.snapshot() == second.snapshot()


def test_a_table_restored_from_a_snapshot_refuses_exactly_like_the_original() -> None:
    commands = script()
    for split in range(len(commands) + 1):
        straight = quota_table()
        outcomes(straight, commands[:split])
        restored = RouteTable.restore(straight.snapshot())

        assert outcomes(restored, commands[split:]) == outcomes(straight, commands[split:])
        assert restored.digest() == straight.digest()
        assert restored.kv_bytes() == straight.kv_bytes()


def test_the_quota_is_in_the_snapshot_only_when_it_is_not_the_default() -> None:
    default, lowered = RouteTable(), quota_table()

    default_doc = json.loads(default.snapshot()[len(MAGIC) + 2 :])
    lowered_doc = json.loads(lowered.snapshot()[len(MAGIC) + 2 :])

    # A state that leaves the quota alone has the digest of the release before it.
    assert "kv_config_bytes_max" not in default_doc["state"]["config"]
    assert lowered_doc["state"]["config"]["kv_config_bytes_max"] == QUOTA_BYTES
    assert RouteTable.restore(default.snapshot()).config.kv_config_bytes_max == (
        DEFAULT_KV_CONFIG_BYTES_MAX
    )
    assert RouteTable.restore(lowered.snapshot()).config == lowered.config
    assert default.digest() != lowered.digest()


# ---------------------------------------------------------------- a raft cluster


def recorder(log: list[object]) -> Callable[[Command, ApplyResult], None]:
    """An apply listener appending (command, outcome) to ``log``."""
    return lambda command, result: log.append((command, result.outcome))


async def test_every_raft_node_refuses_the_same_put_and_keeps_the_same_state(
    tmp_path: Path,
) -> None:
    async with InProcessCluster(tmp_path, propose_timeout_s=3.0) as cluster:
        seen: dict[str, list[object]] = {n.node_id: [] for n in cluster.nodes}
        for node in cluster.nodes:
            node.subscribe(recorder(seen[node.node_id]))
        follower = await cluster.follower()
        await follower.propose(UpdateNamesrvConfig((("kvConfigBytesMax", "100"),)))
        await follower.propose(PutKV("ns", "a", value_of(60, key="a")))

        refused = await follower.propose(PutKV("ns", "b", value_of(41, key="b")))

        assert refused.outcome == KvQuotaExceeded(100, 101)
        statuses = await cluster.converged()
        assert {s.applied_version for s in statuses} == {2}
        assert len({repr(log) for log in seen.values()}) == 1
        for node in cluster.nodes:
            assert node.read(lambda table: table.kv_namespaces()) == {
                "ns": {"a": value_of(60, key="a")}
            }
