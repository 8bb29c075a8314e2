"""``host:port;host:port``: what an address server answers and a broker takes, strictly."""

from __future__ import annotations

import pytest

from remoting.namesrv_list import (
    NAMESRV_ADDRS_MAX,
    NamesrvListError,
    format_namesrv_list,
    parse_namesrv_list,
)


def test_a_list_parses_in_its_order_each_address_once() -> None:
    assert parse_namesrv_list("10.0.0.2:9876;ns1.example.com:9876;[::1]:9876;10.0.0.2:9876") == (
        "10.0.0.2:9876",
        "ns1.example.com:9876",
        "[::1]:9876",
    )


def test_only_the_first_line_counts_as_upstream_clear_new_line_does() -> None:
    assert parse_namesrv_list("  10.0.0.1:9876\r\nignored") == ("10.0.0.1:9876",)
    assert parse_namesrv_list("10.0.0.1:9876\n") == ("10.0.0.1:9876",)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   \n10.0.0.1:9876",  # the first line is empty
        "10.0.0.1:9876;",  # an empty item
        "10.0.0.1:9876; 10.0.0.2:9876",  # a blank inside an item
        "10.0.0.1",
        "10.0.0.1:0",
        "10.0.0.1:65536",
        "10.0.0.1:+99",
        "http://10.0.0.1:9876",
        "<html>:80",
        "[not-v6]:9876",
        "-host:9876",
        ";".join(f"10.0.0.{i}:9876" for i in range(NAMESRV_ADDRS_MAX + 1)),
    ],
)
def test_anything_malformed_refuses_the_whole_list(text: str) -> None:
    with pytest.raises(NamesrvListError):
        parse_namesrv_list(text)


def test_the_formatted_list_is_sorted_by_host_then_port_number() -> None:
    addrs = {"10.0.0.2:9876", "10.0.0.1:10000", "10.0.0.1:9876"}
    assert format_namesrv_list(addrs) == "10.0.0.1:9876;10.0.0.1:10000;10.0.0.2:9876"
    assert parse_namesrv_list(format_namesrv_list(addrs)) == tuple(
        format_namesrv_list(addrs).split(";")
    )
