"""tools.ports: listening ports below the ephemeral range, free when handed out."""

from __future__ import annotations

import socket

from tools.ports import EPHEMERAL_RANGE_FILE, free_port, is_bindable, listen_port_range


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
