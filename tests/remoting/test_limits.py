"""The server-wide limits of remoting/limits.py on their own (the server's use of them,
over real sockets, is tests/remoting/test_server_limits.py)."""

from __future__ import annotations

import logging

import pytest

from remoting.limits import (
    CONNECTIONS_PER_PREFIX_MAX,
    CONNECTIONS_PER_PREFIX_MAX_ENV,
    RefusalLog,
    SourceCounts,
    UnfinishedFrameBudget,
    configured_connections_per_prefix_max,
    source_of,
)


def test_the_refusal_log_says_how_many_lines_it_left_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    refusal_log = RefusalLog(lines_max=2, interval_s=10.0)
    caplog.set_level(logging.WARNING, logger="remoting.limits")

    written = [refusal_log.warning(t, "refusing peer %d", t) for t in (0.0, 1.0, 2.0, 3.0, 11.0)]

    assert written == [True, True, False, False, True]
    assert [r.getMessage() for r in caplog.records] == [
        "refusing peer 0",
        "refusing peer 1",
        "refusing peer 11 (2 similar lines left out)",
    ]


def test_the_unfinished_frame_budget_refuses_a_growth_past_it_and_takes_releases() -> None:
    budget = UnfinishedFrameBudget(100)

    assert budget.reserve(60)
    assert not budget.reserve(41)
    assert budget.held_bytes == 60
    assert budget.reserve(-60)
    assert budget.reserve(100)
    assert budget.held_bytes == 100


def test_source_counts_refuse_one_past_the_address_cap_and_forget_an_address_at_zero() -> None:
    counts = SourceCounts(2, 100)
    peer, other = source_of("10.0.0.1"), source_of("10.0.0.2")

    assert counts.admit(peer) is None
    assert counts.admit(peer) is None
    assert counts.admit(peer) == "10.0.0.1 already holds 2 connections (the maximum per address)"
    assert counts.admit(other) is None
    assert counts.count("10.0.0.1") == 2
    counts.release(peer)
    counts.release(peer)
    assert counts.count("10.0.0.1") == 0
    assert counts.admit(peer) is None


def test_a_prefix_is_capped_over_all_of_its_addresses_and_other_prefixes_are_not() -> None:
    counts = SourceCounts(2, 5)

    admitted = [counts.admit(source_of(f"10.0.1.{host}")) for host in range(1, 4) for _ in "ab"]

    assert admitted == [None] * 5 + [
        "10.0.1.0/24 already holds 5 connections (the maximum per prefix)"
    ]
    assert counts.prefix_count("10.0.1.200") == 5
    assert counts.admit(source_of("10.0.2.1")) is None  # the next /24
    counts.release(source_of("10.0.1.1"))
    assert counts.admit(source_of("10.0.1.77")) is None


def test_an_ipv6_peer_counts_by_its_64_and_a_mapped_ipv4_peer_as_ipv4() -> None:
    counts = SourceCounts(10, 2)

    assert counts.admit(source_of("2001:db8:1:2::a")) is None
    assert counts.admit(source_of("2001:db8:1:2:ffff::b")) is None
    refused = counts.admit(source_of("2001:db8:1:2::c"))
    assert refused == "2001:db8:1:2::/64 already holds 2 connections (the maximum per prefix)"
    assert counts.admit(source_of("2001:db8:1:3::a")) is None
    assert source_of("::ffff:10.0.0.1") == source_of("10.0.0.1")
    assert source_of("fe80::1%eth0").prefix == "fe80::/64"


def test_the_loopback_network_is_capped_as_a_whole_at_two_prefixes() -> None:
    counts = SourceCounts(10, 4)
    loopback = [source_of(f"127.{i}.0.1") for i in range(9)]

    answers = [counts.admit(source) for source in loopback]

    assert answers[:8] == [None] * 8
    assert answers[8] == (
        "the loopback network already holds 8 connections (the maximum: 2 prefixes' worth)"
    )
    assert counts.admit(source_of("10.0.0.1")) is None  # elsewhere is another matter
    counts.release(loopback[0])
    assert counts.admit(source_of("::1")) is None  # IPv6's loopback is the same host


def test_a_peer_without_an_ip_address_counts_only_by_its_name() -> None:
    counts = SourceCounts(2, 1)
    unix = source_of("")

    assert unix.prefix is None
    assert [counts.admit(unix) for _ in range(3)][-1] is not None
    assert counts.admit(source_of("10.0.0.1")) is None


def test_the_prefix_cap_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CONNECTIONS_PER_PREFIX_MAX_ENV, raising=False)
    assert configured_connections_per_prefix_max() == CONNECTIONS_PER_PREFIX_MAX == 8192
    monkeypatch.setenv(CONNECTIONS_PER_PREFIX_MAX_ENV, "64")
    assert configured_connections_per_prefix_max() == 64
    for bad in ("0", "-3", "many", "1.5"):
        monkeypatch.setenv(CONNECTIONS_PER_PREFIX_MAX_ENV, bad)
        with pytest.raises(ValueError, match=CONNECTIONS_PER_PREFIX_MAX_ENV):
            configured_connections_per_prefix_max()


@pytest.mark.parametrize("value", [0, -1])
def test_every_limit_must_be_positive(value: int) -> None:
    with pytest.raises(ValueError, match="unfinished_frames_bytes_max"):
        UnfinishedFrameBudget(value)
    with pytest.raises(ValueError, match="connections_per_address_max"):
        SourceCounts(value, 1)
    with pytest.raises(ValueError, match="connections_per_prefix_max"):
        SourceCounts(1, value)
