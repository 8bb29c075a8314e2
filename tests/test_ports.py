"""tools.ports: listening ports below the ephemeral range, free when handed out."""

from __future__ import annotations

import socket

import pytest

from tools.ports import (
    EPHEMERAL_RANGE_FILE,
    PORT_SHARE_ENV,
    free_port,
    is_bindable,
    listen_port_range,
)


def test_ports_come_from_below_the_ephemeral_range() -> None:
    low, high = listen_port_range()
    ephemeral_low = int(EPHEMERAL_RANGE_FILE.read_text().split()[0])

    assert high < ephemeral_low
    assert all(low <= free_port() <= high for _ in range(20))


def test_a_handed_out_port_can_be_bound_and_is_then_taken() -> None:
    port = free_port()
    with socket.socket() as server:
        server.bind(("127.0.0.1", port))
        server.listen()
        assert not is_bindable("127.0.0.1", port)


def test_avoided_ports_are_never_handed_out() -> None:
    avoided = {free_port() for _ in range(5)}
    assert all(free_port(avoid=avoided) not in avoided for _ in range(50))


def test_a_port_is_never_handed_out_twice_by_one_process() -> None:
    """Picks made before their servers bind (a cluster's Raft and proxy ports) are
    still distinct."""
    picked = [free_port() for _ in range(200)]
    assert len(set(picked)) == len(picked)


def test_a_port_share_picks_only_in_its_slice(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two processes given different shares never pick the same port."""
    monkeypatch.delenv(PORT_SHARE_ENV, raising=False)
    whole_low, whole_high = listen_port_range()
    slices = []
    for index in range(3):
        monkeypatch.setenv(PORT_SHARE_ENV, f"{index}/3")
        low, high = listen_port_range()
        assert whole_low <= low < high <= whole_high
        assert all(low <= free_port() <= high for _ in range(20))
        slices.append((low, high))
    assert slices[0][1] < slices[1][0] and slices[1][1] < slices[2][0]


@pytest.mark.parametrize("share", ["3/3", "-1/2", "a/b", "1", "0/0", "0/65"])
def test_a_bad_port_share_is_refused_by_name(monkeypatch: pytest.MonkeyPatch, share: str) -> None:
    monkeypatch.setenv(PORT_SHARE_ENV, share)
    with pytest.raises(ValueError, match=PORT_SHARE_ENV):
        listen_port_range()
