"""The admin's topic writes of s4 (delete on one node) and s5 (create on one node) are
recorded at their RPC, as the brokers' writes are: the operation is invoked before the
call goes out and completes at its acknowledgement, and the ground truth (``writes``)
changes at that acknowledgement, not before the call was sent."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from experiment_history.runs import HistoryWriter, iter_rows
from experiment_history.schema import (
    KIND_CREATE_TOPIC,
    KIND_DELETE_TOPIC,
    KIND_REGISTER,
    PROCESS_ADMIN,
)
from experiments import scenarios
from experiments.context import ExperimentContext
from experiments.scenarios import NEW_TOPIC, PartialTopicDelete, Scenario, TopicSubset
from experiments.workload import now_us
from tests.experiments.unit_context import unit_context

TOPICS = ["topic-000", "topic-001"]
NODES = ["n1", "n2", "n3"]
RPC_S = 0.03
"""How long the fake admin RPC takes: long enough that a stamp taken before it is
whole milliseconds earlier than its acknowledgement."""


class _Cluster:
    node_ids = NODES

    def remoting_addrs(self) -> dict[str, str]:
        return {n: f"127.0.0.1:{9000 + i}" for i, n in enumerate(NODES)}


def _context(tmp_path: Path, the_scenario: Scenario) -> tuple[ExperimentContext, HistoryWriter]:
    ctx, writer, _ = unit_context(
        tmp_path,
        the_scenario.name,
        topics=TOPICS,
        nodes=NODES,
        brokers=3,
        seed=3,
        cluster=_Cluster(),
        watched=TOPICS + list(the_scenario.subset_topics),
    )
    for topic in the_scenario.subset_topics:
        ctx.truth_overrides[topic] = ""
    ctx.record_truth("", KIND_REGISTER)
    for topic in ctx.topics:
        ctx.registers.record(topic, 0, 10, ctx.truth_of(topic))
    return ctx, writer


def _fake_rpc(ctx: ExperimentContext, calls: list[tuple[int, int]]) -> Any:
    """An admin RPC that takes :data:`RPC_S` and is acknowledged; meanwhile some other
    write of the run records the ground truth (as a broker's registration round would)."""

    async def rpc(*_: Any) -> bool:
        started = now_us()
        await asyncio.sleep(RPC_S / 2)
        ctx.record_truth("other-write", KIND_REGISTER)
        await asyncio.sleep(RPC_S / 2)
        calls.append((started, now_us()))
        return True

    return rpc


def _run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, the_scenario: Scenario, rpc_name: str
) -> tuple[ExperimentContext, list[dict[str, Any]], list[dict[str, Any]], tuple[int, int]]:
    ctx, writer = _context(tmp_path, the_scenario)
    calls: list[tuple[int, int]] = []
    monkeypatch.setattr(scenarios, rpc_name, _fake_rpc(ctx, calls))
    [spec] = asyncio.run(the_scenario.inject(ctx))
    assert spec.detail["acknowledged"] is True
    writer.close()
    ops = list(iter_rows(tmp_path / "run", "operations"))
    truth = list(iter_rows(tmp_path / "run", "writes"))
    [rpc] = calls
    return ctx, ops, truth, rpc


def _assert_at_the_rpc(
    ops: list[dict[str, Any]],
    truth: list[dict[str, Any]],
    rpc: tuple[int, int],
    topic: str,
    kind: str,
    value: str,
) -> None:
    rpc_start_us, rpc_end_us = rpc
    [write] = [r for r in ops if r["kind"] == kind]
    assert (write["process"], write["topic"], write["node"], write["outcome"]) == (
        PROCESS_ADMIN,
        topic,
        "n1",
        "ok",
    )
    assert write["value"] == value
    assert write["invoke_us"] <= rpc_start_us, "invoked before the call went out"
    assert rpc_end_us <= write["complete_us"], "complete at the acknowledgement"
    assert write["complete_us"] - write["invoke_us"] >= RPC_S * 1e6
    [changed] = [r for r in truth if r["topic"] == topic and r["kind"] == kind]
    assert changed["value"] == value
    assert changed["ts_ms"] == write["complete_us"] // 1_000, "the truth changes at the ack"
    assert changed["ts_ms"] >= rpc_end_us // 1_000 > rpc_start_us // 1_000
    # Nothing recorded the topic's new truth while the call was on its way (a broker's
    # round did record the ground truth then): its rows are the initial one and this.
    assert [r["kind"] for r in truth if r["topic"] == topic] == [KIND_REGISTER, kind]


def test_s4_records_the_delete_at_its_rpc_and_the_truth_at_its_ack(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    the_scenario = PartialTopicDelete()
    ctx, ops, truth, rpc = _run(tmp_path, monkeypatch, the_scenario, "delete_topic_on")
    _assert_at_the_rpc(ops, truth, rpc, TOPICS[0], KIND_DELETE_TOPIC, "")
    assert ctx.truth_of(TOPICS[0]) == ""
    assert ctx.registers.latest(TOPICS[0]) == ""


def test_s5_records_the_create_at_its_rpc_and_the_truth_at_its_ack(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    the_scenario = TopicSubset()
    ctx, ops, truth, rpc = _run(tmp_path, monkeypatch, the_scenario, "register_topic_on")
    value = ctx.truth_of(NEW_TOPIC)
    assert value
    _assert_at_the_rpc(ops, truth, rpc, NEW_TOPIC, KIND_CREATE_TOPIC, value)
    assert ctx.registers.latest(NEW_TOPIC) == value
