"""A NameServer address list as RocketMQ writes it: ``host:port;host:port``.

The same text is ``namesrvAddr`` in a client's or a broker's config and the answer
of an address server (``GET /rocketmq/nsaddr``, which ``TopAddressing.fetchNSAddr``
reads). Both sides of this project use these two functions: the web process
formats the members it serves, our broker parses what it fetched. Parsing is
strict, because the answer comes from over the network and decides where a
broker registers: every item must be a plain ``host:port`` (a host name, an IPv4
address or a bracketed IPv6 address, and a port from 1 to 65535), or the whole
list is refused.
"""

from __future__ import annotations

import ipaddress
import re

NAMESRV_ADDRS_MAX = 64
"""Items one list may hold: far more NameServers than any cluster runs, and a bound
on what a broker takes from an address server."""
HOST_CHARS_MAX = 253
"""The longest DNS name."""
PORT_MAX = 65535
SEPARATOR = ";"

_HOST_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$")
_PORT = re.compile(r"^[0-9]{1,5}$")


class NamesrvListError(ValueError):
    """A list or one of its items is not ``host:port;host:port``."""


def check_namesrv_addr(text: str) -> str:
    """``text`` when it is one plain ``host:port``, else :class:`NamesrvListError`."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not _PORT.match(port) or not 0 < int(port) <= PORT_MAX:
        raise NamesrvListError(f"{text[:80]!r} is not host:port")
    if host.startswith("[") and host.endswith("]"):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            raise NamesrvListError(f"{text[:80]!r} has a malformed IPv6 address") from None
        return text
    if len(host) > HOST_CHARS_MAX or not _HOST_NAME.match(host):
        raise NamesrvListError(f"{text[:80]!r} has a malformed host")
    return text


def parse_namesrv_list(text: str) -> tuple[str, ...]:
    """The addresses of ``host:port;host:port`` in their order, each once.

    Like upstream's ``TopAddressing.clearNewLine`` only the first line counts, and it
    is stripped of surrounding blanks; anything else malformed (an empty list, an
    empty item, a blank inside an item, more than :data:`NAMESRV_ADDRS_MAX` items)
    raises :class:`NamesrvListError` naming the first problem.
    """
    line = text.replace("\r", "\n").split("\n", 1)[0].strip()
    if not line:
        raise NamesrvListError("the list is empty")
    items = line.split(SEPARATOR)
    if len(items) > NAMESRV_ADDRS_MAX:
        raise NamesrvListError(f"more than {NAMESRV_ADDRS_MAX} addresses")
    return tuple(dict.fromkeys(check_namesrv_addr(item) for item in items))


def format_namesrv_list(addrs: list[str] | tuple[str, ...] | set[str]) -> str:
    """``addrs`` as one ``host:port;host:port`` line: each once, sorted by host and then
    by port number, so the same members always give the same text."""

    def order(addr: str) -> tuple[str, int]:
        host, _, port = addr.rpartition(":")
        return host, int(port)

    return SEPARATOR.join(sorted(set(addrs), key=order))
