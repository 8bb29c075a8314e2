"""Login lockout behind a reverse proxy: keyed on the real client, never on a header a
client wrote itself.

``NAMESRV_WEB['TRUSTED_PROXIES']`` names the proxies whose X-Forwarded-For is believed
(none by default). From a trusted proxy the lockout counts the client the proxy names,
so one attacker behind the proxy does not lock a user out for everyone behind it; from
any other peer the header changes nothing, so an attacker cannot escape the lockout by
inventing addresses. The real login view, django-axes and the ASGI application.
"""

from __future__ import annotations

import asyncio
import re
from typing import TYPE_CHECKING, Any

import pytest
from axes.models import AccessAttempt
from django.contrib.auth.models import User
from django.http import HttpRequest
from django.test import Client

from namesrv_app.web.client_address import client_address
from namesrv_site.settings import env_networks
from tests.web.conftest import PASSWORD
from tests.web.test_login_throttle import LIMIT, LOGIN, WRONG, asgi_login, logged_in

if TYPE_CHECKING:
    from django.test.client import _MonkeyPatchedWSGIResponse as Answer

PROXY = "10.1.0.5"
PROXIES = "10.1.0.0/24"
ATTACKER = "203.0.113.7"
NEIGHBOUR = "203.0.113.8"  # another user of the same proxy
DIRECT_PEER = "198.51.100.20"


@pytest.fixture(autouse=True)
def quick_password_hashing(settings: Any) -> None:
    """Every wrong password costs a full hash; the throttle does not depend on which."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def behind_proxy(settings: Any) -> None:
    """The console sits behind the proxies of 10.1.0.0/24."""
    settings.NAMESRV_WEB = {**settings.NAMESRV_WEB, "TRUSTED_PROXIES": [PROXIES]}


def attempt(password: str, peer: str, forwarded_for: str | None = None) -> Answer:
    """vera's login form from ``peer``, with X-Forwarded-For when given."""
    extra = {} if forwarded_for is None else {"HTTP_X_FORWARDED_FOR": forwarded_for}
    return Client(REMOTE_ADDR=peer, **extra).post(LOGIN, {"username": "vera", "password": password})


def counted_addresses() -> set[str]:
    """The addresses django-axes counted failures under."""
    return set(AccessAttempt.objects.values_list("ip_address", flat=True))


def test_behind_a_trusted_proxy_the_lockout_is_keyed_on_the_forwarded_client(
    viewer: User, behind_proxy: None
) -> None:
    failures = [attempt(WRONG, PROXY, ATTACKER).status_code for _ in range(LIMIT)]
    assert failures == [200] * (LIMIT - 1) + [429]
    assert attempt(PASSWORD, PROXY, ATTACKER).status_code == 429
    assert logged_in(attempt(PASSWORD, PROXY, NEIGHBOUR))
    assert counted_addresses() == {ATTACKER}


def test_a_forwarded_header_from_an_untrusted_peer_changes_nothing(viewer: User) -> None:
    # No trusted proxy (the default): each try claims another client, all count as one.
    failures = [
        attempt(WRONG, DIRECT_PEER, f"192.0.2.{index}").status_code for index in range(LIMIT)
    ]
    assert failures == [200] * (LIMIT - 1) + [429]
    assert attempt(PASSWORD, DIRECT_PEER, NEIGHBOUR).status_code == 429
    assert counted_addresses() == {DIRECT_PEER}


def test_a_peer_outside_the_trusted_proxies_is_its_own_client(
    viewer: User, behind_proxy: None
) -> None:
    for index in range(LIMIT):
        attempt(WRONG, DIRECT_PEER, f"192.0.2.{index}")
    assert attempt(PASSWORD, DIRECT_PEER, NEIGHBOUR).status_code == 429
    assert logged_in(attempt(PASSWORD, PROXY, NEIGHBOUR))
    assert counted_addresses() == {DIRECT_PEER}


def test_a_client_cannot_pick_its_address_by_writing_the_header_itself(
    viewer: User, behind_proxy: None
) -> None:
    # The client sends its own X-Forwarded-For; the proxy appends the address it saw.
    spoofed = [f"192.0.2.{index}, {ATTACKER}" for index in range(LIMIT + 1)]
    answers = [attempt(WRONG, PROXY, header).status_code for header in spoofed]
    assert answers == [200] * (LIMIT - 1) + [429, 429]
    assert counted_addresses() == {ATTACKER}


@pytest.mark.django_db(transaction=True)
def test_the_asgi_application_keys_the_lockout_the_same_way(
    viewer: User, behind_proxy: None
) -> None:
    async def run() -> list[int]:
        tries = [await asgi_login("vera", WRONG, PROXY, ATTACKER) for _ in range(LIMIT)]
        tries.append(await asgi_login("vera", PASSWORD, PROXY, ATTACKER))
        tries.append(await asgi_login("vera", PASSWORD, PROXY, NEIGHBOUR))
        return [status for status, _ in tries]

    statuses = asyncio.run(run())
    assert statuses == [200] * (LIMIT - 1) + [429, 429, 302]


@pytest.mark.parametrize(
    ("peer", "header", "client"),
    [
        (PROXY, f"{ATTACKER}, 10.1.0.9", ATTACKER),  # two trusted hops, read from the right
        (PROXY, f"not-an-address, {ATTACKER}", ATTACKER),
        (PROXY, "not-an-address", PROXY),  # a broken chain: the nearest vouched-for address
        (PROXY, "", PROXY),  # the proxy's own request (a health check)
        (PROXY, f"[2001:db8::7]:443, {PROXY}", "2001:db8::7"),
        (PROXY, f"{ATTACKER}:5123", ATTACKER),
        (f"::ffff:{PROXY}", ATTACKER, ATTACKER),  # IPv4-mapped peer on a dual-stack socket
        (DIRECT_PEER, ATTACKER, DIRECT_PEER),
    ],
)
def test_the_client_address_is_the_first_untrusted_hop_from_the_right(
    behind_proxy: None, peer: str, header: str, client: str
) -> None:
    request = HttpRequest()
    request.META = {"REMOTE_ADDR": peer, "HTTP_X_FORWARDED_FOR": header}
    assert client_address(request) == client


def test_a_malformed_trusted_proxy_setting_is_refused_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from django.core.exceptions import ImproperlyConfigured

    monkeypatch.setenv("NAMESRV_WEB_TRUSTED_PROXIES", "10.1.0.0/24, 10.2.0.0/33")
    expected = re.escape("NAMESRV_WEB_TRUSTED_PROXIES: '10.2.0.0/33' is not an IP address")
    with pytest.raises(ImproperlyConfigured, match=expected):
        env_networks("NAMESRV_WEB_TRUSTED_PROXIES")
