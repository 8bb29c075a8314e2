"""Property tests: the table is a deterministic state machine.

Hypothesis prints the falsifying command sequence (and its seed) on failure.
"""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from raftstore.commands import Command
from raftstore.route_table import RouteTable
from tests.raftstore.commands_strategy import command_lists, liveness_commands, register_brokers

EXAMPLES = 60


def replay(table: RouteTable, commands: list[Command]) -> list[object]:
    return [table.apply(c) for c in commands]


def route_answers(table: RouteTable) -> object:
    topics = table.all_topic_list().topic_list
    return (table.cluster_info(), [table.pickup_topic_route(t) for t in topics])


@settings(max_examples=EXAMPLES, deadline=None)
@given(command_lists)
def test_replaying_the_same_commands_gives_the_same_state_and_answers(
    commands: list[Command],
) -> None:
    first, second = RouteTable(), RouteTable()
    assert replay(first, commands) == replay(second, commands)
    assert first.digest() == second.digest()
    assert (first.applied_version, first.routes_version) == (
        second.applied_version,
        second.routes_version,
    )
    assert first.snapshot() == second.snapshot()


@settings(max_examples=EXAMPLES, deadline=None)
@given(command_lists, command_lists)
def test_snapshot_then_restore_then_continue_equals_continuing(
    before: list[Command], after: list[Command]
) -> None:
    straight = RouteTable()
    replay(straight, before)
    restored = RouteTable.restore(straight.snapshot())
    assert restored.digest() == straight.digest()
    assert replay(restored, after) == replay(straight, after)
    assert restored.snapshot() == straight.snapshot()
    assert route_answers(restored) == route_answers(straight)


@settings(max_examples=EXAMPLES, deadline=None)
@given(command_lists)
def test_the_applied_version_advances_exactly_when_state_changes(commands: list[Command]) -> None:
    table = RouteTable()
    for command in commands:
        digest, version, routes = table.digest(), table.applied_version, table.routes_version
        answers = route_answers(table)
        result = table.apply(command)
        changed = table.digest() != digest
        assert changed == (not result.changes.empty), command
        assert table.applied_version == version + (1 if changed else 0)
        assert result.applied_version == table.applied_version
        if not result.changes.affects_routes:
            assert table.routes_version == routes
            assert route_answers(table) == answers, command


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.lists(register_brokers, max_size=8), st.lists(liveness_commands, max_size=30))
def test_heartbeats_never_advance_the_routes_version(
    registrations: list[Command], touches: list[Command]
) -> None:
    table = RouteTable()
    replay(table, registrations)
    routes_version = table.routes_version
    answers = route_answers(table)
    replay(table, touches)
    assert table.routes_version == routes_version
    assert route_answers(table) == answers
