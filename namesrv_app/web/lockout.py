"""The answer to a locked-out login: the console's login page with the reason, HTTP 429.

django-axes (``settings.AXES_*``) counts failed logins per username and client
address and, past the limit, swaps the login view's answer for the one built
here. 429 (Too Many Requests) rather than 403: the password may even be right;
what is refused is one more try this soon, and ``Retry-After`` says when.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any

from axes.helpers import get_cool_off
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.db.models import Max
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

LOGIN_TEMPLATE = "registration/login.html"
SECONDS_PER_MINUTE = 60


def _username(request: HttpRequest) -> str:
    field = str(getattr(settings, "AXES_USERNAME_FORM_FIELD", "username"))
    return str(request.POST.get(field, ""))


def remaining_cool_off(request: HttpRequest, username: str) -> timedelta:
    """How long this username stays locked out for this client address.

    The cool-off runs from the last failure that counted (failures during the
    lockout are not counted, ``AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT``).
    """
    cool_off = get_cool_off(request) or timedelta(0)
    latest: datetime | None = AccessAttempt.objects.filter(
        username=username, ip_address=getattr(request, "axes_ip_address", None)
    ).aggregate(latest=Max("attempt_time"))["latest"]
    if latest is None:
        return cool_off
    return max(timedelta(0), latest + cool_off - timezone.now())


def lockout_message(remaining: timedelta) -> str:
    """The sentence the login page shows; the wait is rounded up to whole minutes."""
    minutes = max(1, math.ceil(remaining.total_seconds() / SECONDS_PER_MINUTE))
    unit = "minute" if minutes == 1 else "minutes"
    return (
        f"Too many failed logins for this account from your address; try again in {minutes} {unit}."
    )


def lockout_response(
    request: HttpRequest, original_response: Any = None, credentials: Any = None
) -> HttpResponse:
    """``AXES_LOCKOUT_CALLABLE``: the login page with the lockout message, status 429.

    axes calls it as ``(request, response, credentials)`` from its sync middleware
    and as ``(request, credentials)`` from its async one, so neither argument is
    trusted: the username comes from the submitted form.
    """
    username = _username(request)
    remaining = remaining_cool_off(request, username)
    context = {
        "form": AuthenticationForm(request, initial={"username": username}),
        "next": request.POST.get("next", request.GET.get("next", "")),
        "lockout_message": lockout_message(remaining),
    }
    status = int(getattr(settings, "AXES_HTTP_RESPONSE_CODE", 429))
    response = render(request, LOGIN_TEMPLATE, context, status=status)
    response["Retry-After"] = str(max(1, math.ceil(remaining.total_seconds())))
    return response
