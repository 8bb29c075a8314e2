"""The order the harness gives its writes (experiments.write_order): overlapping topic sets
one at a time and in the order asked, disjoint ones together, a restart ahead of the
waiting ones, and one journal read shared by every write that asks at once."""

from __future__ import annotations

import asyncio

import pytest

from experiments.write_order import FreshRound, TopicGate


async def _write(gate: TopicGate, topics: set[str], log: list[str], name: str, **kw: bool) -> None:
    async with gate.hold(topics, **kw):
        log.append(f"+{name}")
        await asyncio.sleep(0.01)
        log.append(f"-{name}")


def test_disjoint_writes_run_together_and_overlapping_ones_in_order() -> None:
    async def main() -> list[str]:
        gate = TopicGate()
        log: list[str] = []
        tasks = [
            asyncio.create_task(_write(gate, {"a", "b"}, log, "ab")),
            asyncio.create_task(_write(gate, {"c"}, log, "c")),
            asyncio.create_task(_write(gate, {"b", "c"}, log, "bc")),
            asyncio.create_task(_write(gate, {"a"}, log, "a")),
        ]
        await asyncio.gather(*tasks)
        return log

    log = asyncio.run(main())
    # ab and c start together; bc waits for both; a asked after bc and shares nothing
    # with it, but ab holds "a", so it starts when ab ends, before bc.
    assert log[:2] == ["+ab", "+c"]
    assert log.index("+bc") > max(log.index("-ab"), log.index("-c"))
    assert log.index("+a") > log.index("-ab")
    # Never two holders of one topic at a time.
    holders: dict[str, str] = {}
    topics = {"ab": {"a", "b"}, "c": {"c"}, "bc": {"b", "c"}, "a": {"a"}}
    for event in log:
        name = event[1:]
        for topic in topics[name]:
            if event[0] == "+":
                assert topic not in holders, (topic, holders[topic], name)
                holders[topic] = name
            else:
                del holders[topic]


def test_a_write_waiting_for_one_topic_holds_none() -> None:
    """No convoy: a wide write waiting for one busy topic does not block the others."""

    async def main() -> list[str]:
        gate = TopicGate()
        log: list[str] = []
        release = asyncio.Event()

        async def slow() -> None:
            async with gate.hold({"z"}):
                log.append("+z")
                await release.wait()

        slow_task = asyncio.create_task(slow())
        await asyncio.sleep(0)
        wide = asyncio.create_task(_write(gate, {"a", "b", "z"}, log, "wide"))
        await asyncio.sleep(0)
        # "a" is claimed by the waiting wide write, which asked first: it stays in order.
        # "y" is free: it runs now, although the wide write is still waiting.
        await _write(gate, {"y"}, log, "y")
        assert gate.waiting() == 1
        release.set()
        await asyncio.gather(slow_task, wide)
        return log

    assert asyncio.run(main()) == ["+z", "+y", "-y", "+wide", "-wide"]


def test_first_goes_ahead_of_the_waiting_writes() -> None:
    async def main() -> list[str]:
        gate = TopicGate()
        log: list[str] = []
        release = asyncio.Event()

        async def running() -> None:
            async with gate.hold({"a"}):
                log.append("+run")
                await release.wait()
                log.append("-run")

        first_task = asyncio.create_task(running())
        await asyncio.sleep(0)
        queued = [asyncio.create_task(_write(gate, {"a"}, log, f"q{i}")) for i in range(3)]
        await asyncio.sleep(0)
        restart = asyncio.create_task(_write(gate, {"a"}, log, "restart", first=True))
        await asyncio.sleep(0)
        release.set()
        await asyncio.gather(first_task, restart, *queued)
        return log

    log = asyncio.run(main())
    assert log[:4] == ["+run", "-run", "+restart", "-restart"]


def test_a_cancelled_waiter_leaves_the_queue() -> None:
    async def main() -> list[str]:
        gate = TopicGate()
        log: list[str] = []
        release = asyncio.Event()

        async def running() -> None:
            async with gate.hold({"a"}):
                await release.wait()

        holder = asyncio.create_task(running())
        await asyncio.sleep(0)
        doomed = asyncio.create_task(_write(gate, {"a", "b"}, log, "doomed"))
        await asyncio.sleep(0)
        doomed.cancel()
        with pytest.raises(asyncio.CancelledError):
            await doomed
        # "b" is free again although "a" is still held.
        await _write(gate, {"b"}, log, "b")
        release.set()
        await holder
        assert gate.waiting() == 0
        return log

    assert asyncio.run(main()) == ["+b", "-b"]


def test_fresh_round_shares_one_read_and_each_caller_sees_a_later_one() -> None:
    async def main() -> tuple[int, list[int]]:
        reads: list[int] = []
        gate = asyncio.Event()

        async def read() -> None:
            reads.append(len(reads))
            await gate.wait()

        fresh = FreshRound(read)
        early = asyncio.create_task(fresh())
        await asyncio.sleep(0)
        # These ask while read 0 is under way: read 0 began before them, so they share
        # read 1.
        late = [asyncio.create_task(fresh()) for _ in range(20)]
        await asyncio.sleep(0)
        gate.set()
        await asyncio.gather(early, *late)
        return fresh.runs, reads

    runs, reads = asyncio.run(main())
    assert runs == 2
    assert reads == [0, 1]
