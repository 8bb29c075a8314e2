"""The route-answer store, its per-topic versions and the route request key a read
front relies on."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.clock import ManualClock
from gateway.dispatch import RequestDispatcher
from gateway.route_answers import FILE_BYTES, RouteAnswers, RouteVersions
from gateway.route_cache import RouteCache
from gateway.route_request import shared_route_key
from gateway.services import NameServerService
from raftstore.config import NamesrvConfig
from raftstore.replicator import LocalReplicator
from raftstore.route_table import RouteTable
from remoting.codes import RequestCode
from remoting.command import RemotingCommand
from tests.gateway.conftest import (
    DEFAULT_ADDR,
    DEFAULT_BROKER,
    DEFAULT_BROKER_ID,
    DEFAULT_CLUSTER,
    START_MS,
    UNIT_TOPICS,
    register_default_broker,
)


def route_request(**fields: str) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, fields, version=479)


def test_a_reader_sees_each_bump_of_the_writer(tmp_path: Path) -> None:
    path = tmp_path / "route-versions"
    writer = RouteVersions(path, writable=True)
    reader = RouteVersions(path, writable=False)
    try:
        before = reader.version("TopicA")
        writer.bump("TopicA")
        assert reader.version("TopicA") == (before[0], before[1] + 1)
        writer.bump_all()
        assert reader.version("TopicA")[0] == before[0] + 1
    finally:
        reader.close()
        writer.close()


def test_a_file_of_the_wrong_size_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "not-versions"
    path.write_bytes(b"\0" * (FILE_BYTES - 8))
    with pytest.raises(ValueError, match="not a route versions file"):
        RouteVersions(path, writable=False)


@pytest.mark.parametrize(
    ("fields", "key"),
    [
        ({"topic": "T"}, ("T", True)),
        ({"topic": "T", "acceptStandardJsonOnly": "true"}, ("T", True)),
        ({}, None),
        ({"topic": "T", "consistency": "linearizable"}, None),
        ({"topic": "T", "__ZONE_MODE": "true", "__ZONE_NAME": "z1"}, None),
        ({"topic": "T", "__ZONE_MODE": "false", "__ZONE_NAME": "z1"}, ("T", True)),
    ],
)
def test_requests_share_a_cached_answer_only_when_it_is_the_plain_body(
    fields: dict[str, str], key: tuple[str, bool] | None
) -> None:
    assert shared_route_key(route_request(**fields)) == key


def test_an_old_client_gets_its_own_key() -> None:
    old = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}, version=1)
    assert shared_route_key(old) == ("T", False)


async def test_every_route_change_bumps_the_topic_before_the_write_returns(
    tmp_path: Path,
) -> None:
    """Registration, unregistration through the broker's name, eviction: each bumps."""
    replicator = LocalReplicator("n1", RouteTable(NamesrvConfig()))
    service = NameServerService(replicator, ManualClock(START_MS))
    cache = RouteCache(replicator, entries_max=1)
    dispatcher = RequestDispatcher(service, route_cache=cache)
    versions = RouteVersions(tmp_path / "v", writable=True)
    cache.share_versions(versions)
    try:
        first = versions.version(UNIT_TOPICS[0])
        await register_default_broker(service)
        assert versions.version(UNIT_TOPICS[0]) != first
        answer = dispatcher.route_answer(route_request(topic=UNIT_TOPICS[0]))
        assert answer.code == 0
        cached = versions.version(UNIT_TOPICS[0])
        # The cache holds one entry: filling the second topic evicts the first.
        dispatcher.route_answer(route_request(topic=UNIT_TOPICS[1]))
        assert versions.version(UNIT_TOPICS[0]) != cached
        dispatcher.route_answer(route_request(topic=UNIT_TOPICS[0]))
        cached = versions.version(UNIT_TOPICS[0])
        await service.unregister_broker(
            cluster_name=DEFAULT_CLUSTER,
            broker_addr=DEFAULT_ADDR,
            broker_name=DEFAULT_BROKER,
            broker_id=DEFAULT_BROKER_ID,
        )
        assert versions.version(UNIT_TOPICS[0]) != cached
    finally:
        versions.close()


def test_an_answer_is_served_only_at_the_version_it_was_held_at() -> None:
    answers: RouteAnswers[tuple[str, bool], int, bytes] = RouteAnswers(4)
    answers.put(("T", True), 1, b"route at 1")
    assert answers.get(("T", True), 1) == b"route at 1"
    assert answers.get(("T", True), 2) is None
    assert answers.get(("T", False), 1) is None
    answers.put(("T", True), 2, b"route at 2")
    assert answers.get(("T", True), 2) == b"route at 2" and len(answers) == 1


def test_the_store_is_bounded_and_gives_up_its_oldest_answer_first() -> None:
    answers: RouteAnswers[str, int, bytes] = RouteAnswers(2)
    assert answers.put("a", 0, b"a") is None and answers.put("b", 0, b"b") is None
    assert answers.put("a", 1, b"a again") is None  # a held key is replaced in place
    assert answers.put("c", 0, b"c") == "a"
    assert len(answers) == 2 and answers.get("a", 1) is None and answers.get("c", 0) == b"c"


def test_private_versions_start_equal_and_move_with_each_bump() -> None:
    versions = RouteVersions.private()
    try:
        before = versions.version("T")
        versions.bump("T")
        assert versions.version("T") == (before[0], before[1] + 1)
        versions.bump_all()
        assert versions.version("Other")[0] == before[0] + 1
    finally:
        versions.close()
