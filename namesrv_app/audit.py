"""The audit log: every change a signed-in user asks of this node, console or API.

:class:`AuditMiddleware` looks at each answered request that could change
something (not GET/HEAD/OPTIONS) and, when the user is signed in, writes one
:class:`~namesrv_app.models.AuditEntry` to the cluster-wide database: who, which
action on which target, on which node, with which status and result text. It
sits in one place instead of in every view, so a new form or endpoint is
audited without anyone remembering to. Anonymous requests are refused before
they change anything and are not recorded (login failures are django-axes').

Views may say more than the URL does: ``note(request, result=..., action=...)``
(the console's operation forms give their result sentence this way). A read that
hands out what matters asks to be recorded too (``record_read``: backups). An
operation run from a shell records itself (``record_operation``: recovery after quorum
loss); ``manage.py topic create/delete`` records each change and each refusal through
``record_command``, as the node it acts through, under the shell's OS account (the
command has no account of its own). A refusal is recorded with its reason: the
API's 400 field messages flattened into one line (``refusal_text``), the same
sentences the console and the CLI answer. Password and CSRF fields never reach the log.
"""

from __future__ import annotations

import getpass
import json
import logging
import os
from http import HTTPStatus
from typing import Any

import dj_database_url
from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.db import connections
from django.http import HttpRequest, HttpResponse
from django.http.multipartparser import MultiPartParserError
from django.utils import timezone

from namesrv_app.conf import namesrv_settings
from namesrv_app.models import AuditEntry

logger = logging.getLogger(__name__)

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})
NOT_AUDITED = frozenset({"login", "logout"})
SECRET_FIELD_MARKS = ("password", "csrf", "secret", "token")
DETAIL_BYTES_MAX = 4096
RESULT_CHARS_MAX = 2000
TARGET_KWARGS = ("topic", "broker_name", "run_id", "slug")
TARGET_FIELDS = ("topic", "broker_name", "key", "address", "label")
"""Form or JSON fields that name what a write is about, when the URL does not."""


def note(
    request: HttpRequest,
    *,
    result: str | None = None,
    action: str | None = None,
    failed: bool = False,
) -> None:
    """Tell the audit log what a view did: its result sentence, a finer action name, and
    whether it failed although the page answered 200 (a form showing its error)."""
    request.audit_failed = failed  # type: ignore[attr-defined]
    if result is not None:
        request.audit_result = result  # type: ignore[attr-defined]
    if action is not None:
        request.audit_action = action  # type: ignore[attr-defined]


def record_read(request: HttpRequest, *, action: str) -> None:
    """Ask the audit log to record this read too: reads are not recorded, but one that
    hands out what matters (a backup holds the whole config and KV) is, whether it was
    answered or refused, once the user is signed in. ``note`` may add its result."""
    request.audit_read = True  # type: ignore[attr-defined]
    note(request, action=action)


OPERATION_CHANNEL = "cli"
"""The channel of an entry a command-line operation wrote (``record_operation``)."""
_OPERATION_ALIAS = "audit-operation"
SQLITE_TIMEOUT_S = 20


def os_user() -> str:
    """The shell's account, the "who" of a command-line entry (its uid when it has no name)."""
    try:
        return getpass.getuser()[:150]
    except (OSError, KeyError):
        return f"uid {os.getuid()}"


def record_command(
    *,
    action: str,
    target: str,
    detail: dict[str, Any],
    status: int,
    result: str,
) -> None:
    """Write one entry for a change asked from ``manage.py`` on a node (``topic create``):
    this process runs with that node's settings, so the entry goes to the cluster-wide
    database its web processes write. The user is the shell's account; ``channel`` is
    ``cli``; ``ok`` as for a request (2xx but not 207). A lost entry is logged, not
    fatal: the change itself happened (or was refused) either way."""
    try:
        AuditEntry.objects.create(
            at=timezone.now(),
            username=os_user(),
            node_id=namesrv_settings().NODE_ID,
            channel=OPERATION_CHANNEL,
            action=action[:128],
            target=target[:255],
            detail=detail,
            status=status,
            ok=status < HTTPStatus.BAD_REQUEST and status != HTTPStatus.MULTI_STATUS,
            result=result[:RESULT_CHARS_MAX],
        )
    except Exception:
        logger.exception("could not write the audit entry of %s %s", action, target)


def refusal_text(errors: Any, prefix: str = "") -> str:
    """Field messages (DRF's 400 body, or field -> messages) as one line:
    ``queue_datas.0.read_queue_nums: Queue counts are ...; topic: ...``."""
    if isinstance(errors, dict):
        parts = [refusal_text(v, f"{prefix}.{k}" if prefix else str(k)) for k, v in errors.items()]
    elif isinstance(errors, list) and all(isinstance(e, str) for e in errors):
        text = " ".join(str(e) for e in errors)
        return f"{prefix}: {text}" if prefix and text else text
    elif isinstance(errors, list):
        parts = [refusal_text(e, f"{prefix}[{i}]") for i, e in enumerate(errors)]
    else:
        return f"{prefix}: {errors}" if prefix else str(errors)
    return "; ".join(part for part in parts if part)


def form_refusal(form: Any) -> str:
    """Why a console form was refused: its field messages, in ``refusal_text``'s line."""
    errors = form.errors.items()
    return refusal_text({("" if f == "__all__" else f): list(e) for f, e in errors})


def record_operation(
    database_url: str,
    *,
    node_id: str,
    action: str,
    target: str,
    detail: dict[str, Any],
    result: str,
    ok: bool = True,
) -> None:
    """Write one entry for an operation run from a shell (``cluster recover``,
    ``run_node --force-new-cluster``) into the shared database at ``database_url``:
    the one the cluster's nodes use, which need not be this process's own (a command
    run beside a local cluster, or the node supervisor, which migrates it for its
    processes). The user is the shell's account; ``channel`` is ``cli``."""
    settings_dict: dict[str, Any] = dict(dj_database_url.parse(database_url))
    if settings_dict.get("ENGINE", "").endswith("sqlite3"):
        # The nodes' web processes may be writing the same file.
        settings_dict["OPTIONS"] = {"timeout": SQLITE_TIMEOUT_S}
    connections.settings[_OPERATION_ALIAS] = connections.configure_settings(
        {"default": settings_dict}
    )["default"]
    try:
        AuditEntry.objects.using(_OPERATION_ALIAS).create(
            at=timezone.now(),
            username=os_user(),
            node_id=node_id,
            channel=OPERATION_CHANNEL,
            action=action[:128],
            target=target[:255],
            detail=detail,
            status=HTTPStatus.OK if ok else HTTPStatus.INTERNAL_SERVER_ERROR,
            ok=ok,
            result=result[:RESULT_CHARS_MAX],
        )
    finally:
        connections[_OPERATION_ALIAS].close()
        del connections[_OPERATION_ALIAS]
        del connections.settings[_OPERATION_ALIAS]


def _read_recorded(request: HttpRequest) -> bool:
    return bool(getattr(request, "audit_read", False))


def _body(request: HttpRequest) -> bytes:
    """A JSON body, read (and kept) before the view: its parser reads the cached copy."""
    return request.body if request.content_type == "application/json" else b""


def _detail(request: HttpRequest, body: bytes) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    if request.content_type == "application/json" and body:
        try:
            parsed = json.loads(body[:DETAIL_BYTES_MAX])
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            fields = parsed
    else:
        try:
            fields = {key: request.POST.get(key) for key in request.POST}
        except MultiPartParserError:
            # A broken multipart body was refused (415/400); the entry says so.
            fields = {"body": "(unparsable multipart body)"}
    return {
        str(key): value
        for key, value in fields.items()
        if not any(mark in str(key).lower() for mark in SECRET_FIELD_MARKS)
    }


def _succeeded(request: HttpRequest, response: HttpResponse) -> bool:
    """A 2xx or redirect answer that is not a partial write (207) nor a form that failed."""
    status = response.status_code
    if status >= HTTPStatus.BAD_REQUEST or status == HTTPStatus.MULTI_STATUS:
        return False
    return not getattr(request, "audit_failed", False)


def _result(request: HttpRequest, response: HttpResponse) -> str:
    told = getattr(request, "audit_result", None)
    if told is not None:
        return str(told)[:RESULT_CHARS_MAX]
    data = getattr(response, "data", None)
    if isinstance(data, dict) and "detail" in data:
        return str(data["detail"])[:RESULT_CHARS_MAX]
    if response.status_code == HTTPStatus.BAD_REQUEST and isinstance(data, dict | list) and data:
        # A validation failure: its field messages, as the API answered them.
        return refusal_text(data)[:RESULT_CHARS_MAX]
    return response.reason_phrase or ""


class AuditMiddleware:
    """Writes one AuditEntry per answered, signed-in, state-changing request.

    Sync and async capable, so under ASGI a read never pays a thread hop for it.
    """

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self._acall(request)
        if request.method in SAFE_METHODS:
            read: HttpResponse = self.get_response(request)
            if _read_recorded(request):
                self._record_safely(request, read, b"")
            return read
        body = _body(request)
        response = self.get_response(request)
        self._record_safely(request, response, body)
        return response

    async def _acall(self, request: HttpRequest) -> HttpResponse:
        if request.method in SAFE_METHODS:
            response: HttpResponse = await self.get_response(request)
            if _read_recorded(request):
                await sync_to_async(self._record_safely)(request, response, b"")
            return response
        body = _body(request)
        response = await self.get_response(request)
        await sync_to_async(self._record_safely)(request, response, body)
        return response

    def _record_safely(self, request: HttpRequest, response: HttpResponse, body: bytes) -> None:
        try:
            self._record(request, response, body)
        except Exception:
            # The change itself happened; a lost entry must be loud, not fatal.
            logger.exception(
                "could not write the audit entry of %s %s", request.method, request.path
            )

    def _record(self, request: HttpRequest, response: HttpResponse, body: bytes) -> None:
        match = request.resolver_match
        user = getattr(request, "user", None)
        if match is None or match.url_name in NOT_AUDITED:
            return
        if response.status_code == HTTPStatus.METHOD_NOT_ALLOWED:
            return  # no such write here: nothing was asked of the cluster
        if user is None or not user.is_authenticated:
            return
        channel = "api" if match.namespace == "api" else "console"
        action = getattr(request, "audit_action", None) or (
            f"{match.url_name} {request.method}" if channel == "api" else str(match.url_name)
        )
        detail = _detail(request, body)
        target = next((str(match.kwargs[k]) for k in TARGET_KWARGS[:3] if k in match.kwargs), "")
        target = target or next((str(detail[f]) for f in TARGET_FIELDS if detail.get(f)), "")
        target = target or str(match.kwargs.get("slug", ""))
        AuditEntry.objects.create(
            at=timezone.now(),
            username=user.get_username(),
            node_id=namesrv_settings().NODE_ID,
            channel=channel,
            action=action[:128],
            target=target[:255],
            detail=detail,
            status=response.status_code,
            ok=_succeeded(request, response),
            result=_result(request, response),
        )
