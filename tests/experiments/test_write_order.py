"""The order the harness gives its writes (experiments.write_order): overlapping topic sets
one at a time and in the order asked, disjoint ones together, a restart ahead of the
waiting ones, and one journal read shared by every write that asks at once."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from experiments.write_order import FreshRound, TopicGate


@pytest.fixture
def gate() -> TopicGate:
    return TopicGate()


@pytest.fixture
def log() -> list[str]:
    """What the writes did, in order: ``+name`` when one got its topics, ``-name`` when
    it let them go."""
    return []


async def _write(gate: TopicGate, topics: set[str], log: list[str], name: str, **kw: bool) -> None:
    async with gate.hold(topics, **kw):
        log.append(f"+{name}")
        await asyncio.sleep(0.01)
        log.append(f"-{name}")


async def _holding(
    gate: TopicGate, topics: set[str], log: list[str], name: str
) -> Callable[[], Awaitable[None]]:
    """Start a write that holds ``topics`` until it is let go; returns, once it holds
    them, what lets it go (and waits until it has)."""
    release = asyncio.Event()

    async def hold() -> None:
        async with gate.hold(topics):
            log.append(f"+{name}")
            await release.wait()
            log.append(f"-{name}")

    task = asyncio.create_task(hold())
    while f"+{name}" not in log:
        await asyncio.sleep(0)

    async def let_go() -> None:
        release.set()
        await task

    return let_go


async def _queued(
    gate: TopicGate, topics: set[str], log: list[str], name: str, **kw: bool
) -> asyncio.Task[None]:
    """Start a write and return its task once it waits in the gate."""
    task = asyncio.create_task(_write(gate, topics, log, name, **kw))
    await asyncio.sleep(0)
    return task


async def test_disjoint_writes_run_together_and_overlapping_ones_in_order(
    gate: TopicGate, log: list[str]
) -> None:
    topics = {"ab": {"a", "b"}, "c": {"c"}, "bc": {"b", "c"}, "a": {"a"}}
    await asyncio.gather(*(_write(gate, held, log, name) for name, held in topics.items()))
    # ab and c start together; bc waits for both; a asked after bc and shares nothing
    # with it, but ab holds "a", so it starts when ab ends, before bc.
    assert log[:2] == ["+ab", "+c"]
    assert log.index("+bc") > max(log.index("-ab"), log.index("-c"))
    assert log.index("+a") > log.index("-ab")
    # Never two holders of one topic at a time.
    holders: dict[str, str] = {}
    for event in log:
        name = event[1:]
        for topic in topics[name]:
            if event[0] == "+":
                assert topic not in holders, (topic, holders[topic], name)
                holders[topic] = name
            else:
                del holders[topic]


async def test_a_write_waiting_for_one_topic_holds_none(gate: TopicGate, log: list[str]) -> None:
    """No convoy: a wide write waiting for one busy topic does not block the others."""
    let_go = await _holding(gate, {"z"}, log, "z")
    wide = await _queued(gate, {"a", "b", "z"}, log, "wide")
    # "a" is claimed by the waiting wide write, which asked first: it stays in order.
    # "y" is free: it runs now, although the wide write is still waiting.
    await _write(gate, {"y"}, log, "y")
    assert gate.waiting() == 1
    await let_go()
    await wide
    assert log == ["+z", "+y", "-y", "-z", "+wide", "-wide"]


async def test_first_goes_ahead_of_the_waiting_writes(gate: TopicGate, log: list[str]) -> None:
    let_go = await _holding(gate, {"a"}, log, "run")
    queued = [await _queued(gate, {"a"}, log, f"q{i}") for i in range(3)]
    restart = await _queued(gate, {"a"}, log, "restart", first=True)
    await let_go()
    await asyncio.gather(restart, *queued)
    assert log[:4] == ["+run", "-run", "+restart", "-restart"]


async def test_a_cancelled_waiter_leaves_the_queue(gate: TopicGate, log: list[str]) -> None:
    let_go = await _holding(gate, {"a"}, log, "holder")
    doomed = await _queued(gate, {"a", "b"}, log, "doomed")
    doomed.cancel()
    with pytest.raises(asyncio.CancelledError):
        await doomed
    # "b" is free again although "a" is still held.
    await _write(gate, {"b"}, log, "b")
    await let_go()
    assert gate.waiting() == 0
    assert log == ["+holder", "+b", "-b", "-holder"]


async def test_fresh_round_shares_one_read_and_each_caller_sees_a_later_one() -> None:
    reads: list[int] = []
    go = asyncio.Event()

    async def read() -> None:
        reads.append(len(reads))
        await go.wait()

    fresh = FreshRound(read)
    early = asyncio.create_task(fresh())
    await asyncio.sleep(0)
    # These ask while read 0 is under way: read 0 began before them, so they share read 1.
    late = [asyncio.create_task(fresh()) for _ in range(20)]
    await asyncio.sleep(0)
    go.set()
    await asyncio.gather(early, *late)
    assert reads == [0, 1]
