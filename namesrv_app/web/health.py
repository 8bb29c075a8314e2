"""``/healthz`` and ``/readyz``: what a load balancer or an orchestrator asks a node.

No login and no detail beyond one line: these answer anyone who reaches the web
port, so they say whether to send traffic here, not what the cluster looks like.

* ``/healthz``: this web process answers (200), whatever its gateway does;
* ``/readyz``: the node can serve routes. Eventual mode: the gateway answers its
  internal port. Raft mode: also a leader is known and this node has applied
  within :data:`APPLY_LAG_ENTRIES_MAX` entries of what it knows is committed, so
  its local reads are not far behind. 503 with the reason otherwise.
"""

from __future__ import annotations

from pathlib import Path

from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import cache_control, never_cache
from django.views.decorators.http import require_safe

from namesrv_app import gateway_client
from namesrv_app.gateway_client import GatewayError
from raftstore.vocab import MODE_RAFT

STATUS_TIMEOUT_S = 2.0
"""How long /readyz waits for its gateway (a probe must not hang)."""
APPLY_LAG_ENTRIES_MAX = 1000
"""Raft entries a ready node may have committed but not yet applied."""


def _plain(text: str, status: int = 200) -> HttpResponse:
    return HttpResponse(f"{text}\n", status=status, content_type="text/plain; charset=utf-8")


FAVICON = (Path(__file__).resolve().parents[1] / "static" / "namesrv" / "favicon.svg").read_bytes()
"""The console's icon; browsers ask /favicon.ico before they read the page's <link>."""


@cache_control(max_age=86400, public=True)
@require_safe
def favicon(request: HttpRequest) -> HttpResponse:
    """The console's icon (SVG), without a login."""
    return HttpResponse(FAVICON, content_type="image/svg+xml")


@never_cache
@require_safe
def healthz(request: HttpRequest) -> HttpResponse:
    """The process answers."""
    return _plain("ok")


@never_cache
@require_safe
def readyz(request: HttpRequest) -> HttpResponse:
    """The node can serve routes (see the module docstring)."""
    try:
        status = gateway_client.node_status(timeout_s=STATUS_TIMEOUT_S)
    except GatewayError:
        return _plain("not ready: the gateway does not answer", 503)
    if status.get("mode") == MODE_RAFT:
        if not status.get("leader"):
            return _plain("not ready: no raft leader known", 503)
        lag = int(status.get("commit_index", 0)) - int(status.get("applied_index", 0))
        if lag > APPLY_LAG_ENTRIES_MAX:
            return _plain(f"not ready: {lag} committed entries not applied yet", 503)
    return _plain("ready")
