"""Every answer under ``/api/`` in JSON: the errors and redirects Django makes itself.

DRF answers its own views' errors in JSON (``namesrv_app.api.views.exception_handler``).
What no API view answers is Django's: a path no URL pattern matches (the console's HTML
404), a server error outside DRF's handler (the console's HTML 500) and the trailing-slash
redirect (an empty body). :class:`ApiErrorAnswers` turns each of them into
``{"detail": ...}`` with the same status and headers; the console keeps its HTML pages.

A path without its trailing slash is redirected, not answered: one URL per resource keeps
the audit log, the metrics and the exact-path match of the route reads answered beside
Django whole. A GET or HEAD gets a 301; any other method a 308, which a client repeats
with the same method and body (after a 301 clients send a POST again as a GET, and its
body is lost).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.urls import is_valid_path
from django.utils.http import escape_leading_slashes
from rest_framework.response import Response

API_PREFIX = "/api/"
JSON_TYPE = "application/json"
PATH_SHOWN_CHARS_MAX = 200
REDIRECT_METHODS_KEPT = ("GET", "HEAD")
MOVED_PERMANENTLY = 301
PERMANENT_REDIRECT = 308
NOT_MODIFIED = 304
NOT_FOUND = 404
SERVER_ERROR = 500
STATUS_SENTENCES = {
    400: "Bad request.",
    403: "Forbidden.",
    405: "Method not allowed.",
    413: "The request is too large.",
    SERVER_ERROR: "Server error: the request failed on this node; its web log has the cause.",
}


def is_api_request(request: HttpRequest) -> bool:
    """True for a request under ``/api/`` (or ``/api`` itself)."""
    return request.path.startswith(API_PREFIX) or request.path == API_PREFIX.rstrip("/")


def slash_location(request: HttpRequest) -> str | None:
    """The URL with its trailing slash when only that one names an API view, else None."""
    path = request.path_info
    if path.endswith("/"):
        return None
    urlconf = getattr(request, "urlconf", None)
    if is_valid_path(path, urlconf) or not is_valid_path(f"{path}/", urlconf):
        return None
    return escape_leading_slashes(request.get_full_path(force_append_slash=True))


def json_answer(status: int, body: dict[str, Any]) -> HttpResponse:
    """A JSON answer with ``status``."""
    return HttpResponse(json.dumps(body), status=status, content_type=JSON_TYPE)


def slash_redirect(request: HttpRequest, location: str) -> HttpResponse:
    """The redirect to ``location``: 301 for reads, 308 (method and body kept) otherwise."""
    status = MOVED_PERMANENTLY if request.method in REDIRECT_METHODS_KEPT else PERMANENT_REDIRECT
    response = json_answer(
        status,
        {
            "detail": f"The API's URLs end with a slash: this one is {location}.",
            "location": location,
        },
    )
    response["Location"] = location
    return response


def _sentence(request: HttpRequest, status: int) -> str:
    if status == NOT_FOUND:
        shown = request.path[:PATH_SHOWN_CHARS_MAX]
        return f"No API endpoint at {shown}: the API's endpoints are listed at /api/v1/docs/."
    return STATUS_SENTENCES.get(status, f"HTTP {status}.")


def needs_json(response: HttpResponse) -> bool:
    """True for Django's own error or redirect answer: not DRF's, not JSON already."""
    status = response.status_code
    if isinstance(response, Response) or status < MOVED_PERMANENTLY or status == NOT_MODIFIED:
        return False
    return not str(response.get("Content-Type", "")).startswith(JSON_TYPE)


def in_json(request: HttpRequest, response: HttpResponse) -> HttpResponse:
    """``response`` with a JSON body: the same status and headers (cookies, Location,
    security headers), the HTML or empty body replaced by ``{"detail": ...}``."""
    body: dict[str, Any] = {"detail": _sentence(request, response.status_code)}
    if response.has_header("Location"):
        body["location"] = response["Location"]
        body["detail"] = f"See {response['Location']}."
    response.content = json.dumps(body).encode()
    response["Content-Type"] = JSON_TYPE
    if response.has_header("Content-Length"):
        response["Content-Length"] = str(len(response.content))
    return response


def api_answer(request: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
    """What an API request is answered: the slash redirect for a 404 that has one, Django's
    own errors in JSON, everything else untouched."""
    if not is_api_request(request):
        return response
    if response.status_code == NOT_FOUND and not isinstance(response, Response):
        location = slash_location(request)
        if location is not None:
            return slash_redirect(request, location)
    # A streaming answer (a file) is left alone: its body cannot be swapped.
    if isinstance(response, HttpResponse) and needs_json(response):
        return in_json(request, response)
    return response


class ApiErrorAnswers:
    """Middleware (inside CommonMiddleware, so its slash redirect never sees an API 404):
    every answer under ``/api/`` in JSON. Sync and async capable: no thread hop under ASGI."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        self._is_async = iscoroutinefunction(get_response)
        if self._is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self._is_async:
            return self._acall(request)
        return api_answer(request, self.get_response(request))

    async def _acall(self, request: HttpRequest) -> HttpResponseBase:
        pending: Awaitable[HttpResponseBase] = self.get_response(request)
        return api_answer(request, await pending)
