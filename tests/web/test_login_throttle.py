"""Login throttling (django-axes): wrong passwords lock out one username from one address.

The console's login (``accounts/login/``, Django's LoginView) and the admin's go
through ``AxesStandaloneBackend``. After ``AXES_FAILURE_LIMIT`` (5) failures for a
username from an address, that pair gets HTTP 429 and the console's login page
saying when to try again, even with the right password, until the cool-off ends.
"""

from __future__ import annotations

import asyncio
import re
import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import pytest
from django.contrib.auth.models import User
from django.test import Client

from tests.web.conftest import PASSWORD

if TYPE_CHECKING:
    # The test client's response type exists in django-stubs only.
    from django.test.client import _MonkeyPatchedWSGIResponse as Answer

LOGIN = "/accounts/login/"
LIMIT = 5
ATTACKER = "10.0.0.66"
ELSEWHERE = "10.0.0.77"
WRONG = "not the password"
LOCKED_OUT = "Too many failed logins for this account from your address"
COOL_OFF_S = 3.0
"""Long enough that a loaded machine's stall between the last failure and the next try
(a CI run: over 1 s) does not end the lockout before the test looks at it."""


@pytest.fixture(autouse=True)
def quick_password_hashing(settings: Any) -> None:
    """Every wrong password costs a full hash; the throttle does not depend on which."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def attempt(username: str, password: str, address: str = ATTACKER) -> Answer:
    """One login form submission from ``address`` (a fresh browser each time)."""
    return Client(REMOTE_ADDR=address).post(LOGIN, {"username": username, "password": password})


def fail(username: str, times: int, address: str = ATTACKER) -> list[Answer]:
    """``times`` wrong passwords for ``username`` from ``address``."""
    return [attempt(username, WRONG, address) for _ in range(times)]


def logged_in(response: Answer) -> bool:
    """The login view redirects (302) only after a successful login."""
    return response.status_code == 302


def test_it_locks_out_a_user_after_five_wrong_passwords_even_with_the_right_one(
    viewer: User,
) -> None:
    before = fail("vera", LIMIT - 1)
    locking = attempt("vera", WRONG)
    right = attempt("vera", PASSWORD)
    assert [r.status_code for r in before] == [200] * (LIMIT - 1)  # the form, with its error
    assert locking.status_code == 429
    assert right.status_code == 429 and not logged_in(right)


def test_the_lockout_is_explained_on_the_console_login_page(viewer: User) -> None:
    fail("vera", LIMIT)
    response = attempt("vera", PASSWORD)
    html = response.content.decode()
    assert response.status_code == 429
    assert f"{LOCKED_OUT}; try again in 15 minutes." in html
    assert 'id="lockout"' in html and 'name="password"' in html  # the login form, again
    assert "did not match" not in html
    assert 14 * 60 < int(response["Retry-After"]) <= 15 * 60


def test_another_user_from_the_same_address_is_not_locked_out(viewer: User, operator: User) -> None:
    fail("vera", LIMIT)
    assert logged_in(attempt("otto", PASSWORD))


def test_the_same_user_from_another_address_is_not_locked_out(viewer: User) -> None:
    fail("vera", LIMIT)
    assert logged_in(attempt("vera", PASSWORD, ELSEWHERE))


def test_the_lockout_ends_after_the_cool_off(viewer: User, settings: Any) -> None:
    settings.AXES_COOLOFF_TIME = timedelta(seconds=COOL_OFF_S)
    fail("vera", LIMIT)
    locked = attempt("vera", PASSWORD)
    time.sleep(COOL_OFF_S + 0.2)
    assert locked.status_code == 429 and "try again in 1 minute." in locked.content.decode()
    assert logged_in(attempt("vera", PASSWORD))


def test_tries_during_the_lockout_do_not_extend_it(viewer: User, settings: Any) -> None:
    settings.AXES_COOLOFF_TIME = timedelta(seconds=COOL_OFF_S)
    fail("vera", LIMIT)
    time.sleep(COOL_OFF_S / 2)
    assert attempt("vera", WRONG).status_code == 429
    time.sleep(COOL_OFF_S / 2 + 0.2)
    assert logged_in(attempt("vera", PASSWORD))


def test_a_successful_login_before_the_limit_resets_the_count(viewer: User) -> None:
    fail("vera", LIMIT - 1)
    assert logged_in(attempt("vera", PASSWORD))
    again = fail("vera", LIMIT - 1)
    assert [r.status_code for r in again] == [200] * (LIMIT - 1)
    assert logged_in(attempt("vera", PASSWORD))


def test_the_limit_is_a_setting(viewer: User, settings: Any) -> None:
    settings.AXES_FAILURE_LIMIT = 2
    assert [r.status_code for r in fail("vera", 2)] == [200, 429]


def test_the_admin_login_is_throttled_too(db: Any) -> None:
    User.objects.create_superuser("root", password=PASSWORD)
    answers = [
        Client(REMOTE_ADDR=ATTACKER)
        .post("/admin/login/", {"username": "root", "password": WRONG})
        .status_code
        for _ in range(LIMIT)
    ]
    assert answers[-1] == 429
    assert attempt("root", PASSWORD).status_code == 429


# ------------------------------------------------------------------- under the ASGI app


async def asgi_call(
    method: str,
    path: str,
    address: str,
    cookies: str = "",
    body: bytes = b"",
    forwarded_for: str = "",
) -> tuple[int, dict[bytes, list[bytes]], str]:
    """One HTTP request through ``namesrv_site.asgi.application`` (what uvicorn serves)."""
    from namesrv_site.asgi import application

    headers = [(b"host", b"127.0.0.1")]
    if forwarded_for:
        headers.append((b"x-forwarded-for", forwarded_for.encode()))
    if cookies:
        headers.append((b"cookie", cookies.encode()))
    if body:
        headers += [
            (b"content-type", b"application/x-www-form-urlencoded"),
            (b"content-length", str(len(body)).encode()),
        ]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": (address, 50000),
        "server": ("127.0.0.1", 8000),
    }
    sent: list[dict[str, Any]] = []
    delivered = asyncio.Event()

    async def receive() -> dict[str, Any]:
        if not delivered.is_set():
            delivered.set()
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # never disconnects while answering
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await application(scope, receive, send)
    start = sent[0]
    answer_headers: dict[bytes, list[bytes]] = {}
    for name, value in start["headers"]:
        answer_headers.setdefault(name.lower(), []).append(value)
    text = b"".join(m.get("body", b"") for m in sent[1:]).decode()
    return int(start["status"]), answer_headers, text


async def asgi_login(
    username: str, password: str, address: str, forwarded_for: str = ""
) -> tuple[int, str]:
    """GET the login page for its CSRF cookie and token, then POST the form, over ASGI
    (from ``address``, with X-Forwarded-For when given)."""
    _, headers, page = await asgi_call("GET", LOGIN, address, forwarded_for=forwarded_for)
    cookie = next(c for c in headers[b"set-cookie"] if c.startswith(b"csrftoken="))
    csrf_cookie = cookie.split(b";")[0].decode()
    match = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
    assert match is not None
    form = {"csrfmiddlewaretoken": match[1], "username": username, "password": password}
    status, _, text = await asgi_call(
        "POST", LOGIN, address, csrf_cookie, urlencode(form).encode(), forwarded_for
    )
    return status, text


@pytest.mark.django_db(transaction=True)
def test_the_lockout_holds_under_the_asgi_application(viewer: User) -> None:
    async def run() -> list[tuple[int, str]]:
        return [await asgi_login("vera", WRONG, ATTACKER) for _ in range(LIMIT)] + [
            await asgi_login("vera", PASSWORD, ATTACKER),
            await asgi_login("vera", PASSWORD, ELSEWHERE),
        ]

    *failures, locked, elsewhere = asyncio.run(run())
    assert [status for status, _ in failures] == [200] * (LIMIT - 1) + [429]
    assert locked[0] == 429 and LOCKED_OUT in locked[1]
    assert elsewhere[0] == 302
