"""``create_operator`` runs Django's password validators (AUTH_PASSWORD_VALIDATORS) and
refuses a weak password with their reasons, leaving no account behind (and an existing
account's password as it was)."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.web.conftest import PASSWORD, make_user

PASSWORD_ENV = "OPERATOR_PASSWORD"


def create_operator(username: str, password: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """``create_operator USERNAME --password-env ...`` in this process; what it printed."""
    monkeypatch.setenv(PASSWORD_ENV, password)
    out = io.StringIO()
    call_command("create_operator", username, "--password-env", PASSWORD_ENV, stdout=out)
    return out.getvalue()


@pytest.mark.parametrize(
    ("password", "reason"),
    [
        ("short-Pw1", "too short. It must contain at least 12 characters"),
        ("password1234", "too common"),
        ("804213379912345", "entirely numeric"),
        ("margaret.hamilton", "too similar to the username"),
    ],
)
def test_a_weak_password_is_refused_with_the_reason_and_no_account_is_made(
    db: Any, monkeypatch: pytest.MonkeyPatch, password: str, reason: str
) -> None:
    with pytest.raises(CommandError, match="password refused: ") as refused:
        create_operator("margaret.hamilton", password, monkeypatch)
    assert reason in str(refused.value)
    assert not User.objects.filter(username="margaret.hamilton").exists()


def test_a_refused_password_leaves_an_existing_accounts_password_alone(
    db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_user("otto", "operator")
    with pytest.raises(CommandError, match="too common"):
        create_operator("otto", "password1234", monkeypatch)
    assert User.objects.get(username="otto").check_password(PASSWORD)


def test_a_strong_password_is_accepted(db: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    assert create_operator("grace", PASSWORD, monkeypatch).strip() == (
        "created grace with role operator"
    )
    assert User.objects.get(username="grace").check_password(PASSWORD)
