"""The two console roles and the checks every view and API permission uses.

* ``viewer`` may read everything the console and the API show.
* ``operator`` may also write (topics, write permission, KV, brokers, membership).

A superuser counts as an operator. An authenticated user in neither group sees
nothing: membership in a role is an explicit grant, never a default. The groups
are created by migration ``0002_console_roles``; ``manage.py create_operator``
creates users in them.
"""

from __future__ import annotations

from typing import Any

VIEWER_GROUP = "viewer"
OPERATOR_GROUP = "operator"
ROLE_GROUPS = (VIEWER_GROUP, OPERATOR_GROUP)
NO_ROLE = "none"


def _group_names(user: Any) -> set[str]:
    """The user's group names, cached on the user object for the request."""
    cached: set[str] | None = getattr(user, "_namesrv_groups", None)
    if cached is None:
        cached = set(user.groups.values_list("name", flat=True))
        user._namesrv_groups = cached
    return cached


def is_operator(user: Any) -> bool:
    """True for an active superuser or a member of the operator group."""
    if user is None or not user.is_authenticated or not user.is_active:
        return False
    return bool(user.is_superuser) or OPERATOR_GROUP in _group_names(user)


def is_viewer(user: Any) -> bool:
    """True for anyone allowed to read: viewers, operators and superusers."""
    if user is None or not user.is_authenticated or not user.is_active:
        return False
    return bool(user.is_superuser) or bool(_group_names(user) & set(ROLE_GROUPS))


def role_of(user: Any) -> str:
    """The strongest role of ``user``: "operator", "viewer" or "none"."""
    if is_operator(user):
        return OPERATOR_GROUP
    if is_viewer(user):
        return VIEWER_GROUP
    return NO_ROLE


def denial(needed: str, user: Any) -> str:
    """Why ``user`` is refused: the role the action needs and the one the user has, e.g.
    "This needs the operator role; your account has the viewer role."."""
    had = role_of(user)
    has = "has no console role" if had == NO_ROLE else f"has the {had} role"
    return f"This needs the {needed} role; your account {has}."
