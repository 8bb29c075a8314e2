"""The address of the client behind a request, believing proxies only when trusted.

The web process sees the socket's peer (uvicorn runs with ``--no-proxy-headers``).
Behind a reverse proxy that peer is the proxy itself, so a login lockout keyed on it
would lock a user out for everyone behind the proxy after one attacker's five wrong
passwords. ``NAMESRV_WEB['TRUSTED_PROXIES']`` (``NAMESRV_WEB_TRUSTED_PROXIES``: addresses
or CIDR networks) names the proxies whose ``X-Forwarded-For`` is believed; by default
there are none, and a header from any peer changes nothing.

With trusted proxies, the header is read from the right, as each proxy appends the
peer it saw: the client is the first hop, from the right, that is not a trusted proxy
(the "rightmost untrusted" rule). Everything left of it was written by that client
and is never looked at, so a client cannot pick the address it is counted under.
django-axes calls :func:`client_address` (``AXES_CLIENT_IP_CALLABLE``).
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache
from typing import Any

from namesrv_app.gateway_client import web_setting

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

FORWARDED_FOR_META = "HTTP_X_FORWARDED_FOR"
HOPS_MAX = 32
"""Hops read from the right of X-Forwarded-For: more proxies than any chain has, and a
bound on the work a long header can cause."""


@lru_cache(maxsize=8)
def parse_networks(items: tuple[str, ...]) -> tuple[Network, ...]:
    """The networks named by ``items`` (addresses or CIDR); ValueError names a bad one."""
    networks = []
    for item in items:
        try:
            networks.append(ipaddress.ip_network(item.strip(), strict=False))
        except ValueError:
            raise ValueError(f"{item!r} is not an IP address or a CIDR network") from None
    return tuple(networks)


def trusted_proxies() -> tuple[Network, ...]:
    """The configured trusted proxies (read on each call so tests can change them)."""
    return parse_networks(tuple(web_setting("TRUSTED_PROXIES", ())))


def parse_address(text: str) -> Address | None:
    """An address as proxies write it (``a.b.c.d``, ``a.b.c.d:port``, ``[v6]:port``,
    ``v6``), IPv4-mapped IPv6 as IPv4; None when it is none of these."""
    text = text.strip()
    if text.startswith("["):
        text = text[1:].partition("]")[0]
    elif text.count(":") == 1:
        text = text.partition(":")[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _trusted(address: Address, networks: tuple[Network, ...]) -> bool:
    return any(address in network for network in networks)


def client_address(request: Any) -> str | None:
    """The client's address: the peer's, or, when the peer is a trusted proxy, the first
    untrusted hop of X-Forwarded-For read from the right. None without a peer address."""
    peer = parse_address(str(request.META.get("REMOTE_ADDR") or ""))
    if peer is None:
        return None
    networks = trusted_proxies()
    if not _trusted(peer, networks):
        return str(peer)
    header = str(request.META.get(FORWARDED_FOR_META) or "")
    client = peer
    for hop in reversed(header.rsplit(",", HOPS_MAX)[-HOPS_MAX:] if header else []):
        address = parse_address(hop)
        if address is None:
            # A trusted proxy writes addresses only: the chain is broken here, and the
            # nearest address it vouched for is the best that is known.
            break
        client = address
        if not _trusted(address, networks):
            break
    return str(client)
