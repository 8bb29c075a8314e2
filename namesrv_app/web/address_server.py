"""``GET /rocketmq/nsaddr``: RocketMQ's address server, served by every node's web port.

Upstream clients and brokers can follow a NameServer list served over HTTP instead of
a fixed ``namesrvAddr``. ``MixAll.getWSAddr()`` builds the URL
``http://{rocketmq.namesrv.domain}:8080/rocketmq/{rocketmq.namesrv.domain.subgroup}``
(subgroup ``nsaddr`` by default, no port added when the domain has one; a client with
a ``unitName`` asks ``.../nsaddr-<unitName>?nofix=1``), and
``TopAddressing.fetchNSAddr`` reads the first line of a 200 answer as
``host:port;host:port``. Clients refresh it every two minutes
(``MQClientInstance``, ``fetchNameServerAddr``), brokers too with
``fetchNamesrvAddrByAddressServer=true`` (``BrokerController``).

What a node answers, the same for ``nsaddr`` and every ``nsaddr-<subgroup>``:

* raft mode: the current Raft members, each by the remoting address it recorded in the
  replicated state (:mod:`gateway.member_addrs`), else by the one this node's cluster
  file gives its Raft address; a member known by neither is left out. So a member
  added with add-node appears everywhere about a second after it joined, and a
  removed one is gone once its removal is applied.
* eventual mode: the nodes of this node's cluster file (its configuration).

Sorted by host and port, so the same members give the same text. 503 with a reason
when the gateway does not answer (a client then keeps the list it has) or no address
is known.

Public like upstream's (no login, no token: the clients send neither) and read-only
(GET and HEAD; anything else 405), behind Django's host check and security middleware
like every page. Cheap whoever asks: the answer is held for
:data:`NSADDR_CACHE_TTL_MS` in each web process, so the gateway is asked at most once
a second per process, and what it is asked is a read of a few keys, bounded by
:data:`~gateway.private_codes.MEMBERS_MAX`.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_safe

from gateway.private_codes import MEMBERS_MAX
from namesrv_app import gateway_client
from namesrv_app.conf import namesrv_settings
from namesrv_app.gateway_client import GatewayError
from raftstore.vocab import MODE_RAFT
from remoting.namesrv_list import NamesrvListError, check_namesrv_addr, format_namesrv_list

NSADDR_PATH_PATTERN = r"^rocketmq/nsaddr(?:-[A-Za-z0-9_.-]{1,64})?$"
"""``nsaddr`` and ``nsaddr-<subgroup>``, a subgroup of safe characters (upstream's
default subgroup and a client's ``unitName`` suffix)."""
NSADDR_CACHE_TTL_MS = 1000
"""How long one web process serves an answer before it asks again."""
GATEWAY_TIMEOUT_S = 2.0
"""How long a refresh waits for this node's gateway."""
CONTENT_TYPE = "text/plain; charset=utf-8"


@dataclass(frozen=True, slots=True)
class NsaddrAnswer:
    """One answer of the address server: the HTTP status and the text."""

    status: int
    text: str


@dataclass(frozen=True, slots=True)
class _Held:
    settings_key: tuple[Any, ...]
    answer: NsaddrAnswer
    expires_s: float


class _AnswerCache:
    """The answer of this process, refreshed by one thread at a time."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.held: _Held | None = None

    def fresh(self, key: tuple[Any, ...]) -> NsaddrAnswer | None:
        """The held answer while it is valid for ``key`` (lock-free: one attribute read)."""
        held = self.held
        if held is None or held.settings_key != key or time.monotonic() >= held.expires_s:
            return None
        return held.answer

    def refresh(self, key: tuple[Any, ...]) -> NsaddrAnswer:
        """The held answer, or a new one (blocking: run in a worker thread). Requests that
        missed together wait for the first one's refresh instead of each asking."""
        with self.lock:
            answer = self.fresh(key)
            if answer is None:
                answer = current_answer()
                expires_s = time.monotonic() + NSADDR_CACHE_TTL_MS / 1000
                self.held = _Held(key, answer, expires_s)
            return answer


_CACHE = _AnswerCache()


def _settings_key() -> tuple[Any, ...]:
    """What the answer depends on besides the cluster (tests change settings)."""
    conf = namesrv_settings()
    return (conf.MODE, conf.CLUSTER_FILE, conf.NODE_ID, conf.PORT, conf.INTERNAL_PORT)


def _plain_addr(value: object) -> str | None:
    """``value`` when it is a plain ``host:port``, else None."""
    if not isinstance(value, str):
        return None
    try:
        return check_namesrv_addr(value)
    except NamesrvListError:
        return None


def members_remoting(answer: dict[str, Any], configured: dict[str, str]) -> list[str]:
    """The remoting addresses of the members in a MEMBER_ADDRS ``answer``: each member's
    record, else ``configured[raft addr]``; members known by neither are left out."""
    members = answer.get("members")
    records = answer.get("remoting")
    if not isinstance(members, list) or not isinstance(records, dict):
        return []
    found = []
    for member in members[:MEMBERS_MAX]:
        addr = _plain_addr(records.get(member)) or _plain_addr(configured.get(member))
        if addr is not None:
            found.append(addr)
    return found


def current_answer() -> NsaddrAnswer:
    """The list as this node knows it now (asks the gateway in raft mode)."""
    nodes = gateway_client.cluster_nodes()
    if namesrv_settings().MODE != MODE_RAFT:
        addrs = [addr for node in nodes if (addr := _plain_addr(node.remoting_addr))]
    else:
        try:
            answer = gateway_client.member_addrs(timeout_s=GATEWAY_TIMEOUT_S)
        except GatewayError:
            return NsaddrAnswer(503, "the gateway does not answer")
        configured = {n.raft_addr: n.remoting_addr for n in nodes if n.raft_addr}
        addrs = members_remoting(answer, configured)
    if not addrs:
        return NsaddrAnswer(503, "no NameServer address known")
    return NsaddrAnswer(200, format_namesrv_list(addrs))


@csrf_exempt  # nothing to protect (GET and HEAD only), and other methods get 405, not 403
@never_cache
@require_safe
async def nsaddr(request: HttpRequest) -> HttpResponse:
    """``host:port;host:port`` of the NameServers clients should use (module docstring).

    Async, so a held answer costs no thread hop; a refresh asks the gateway from a
    worker thread (its client blocks).
    """
    key = _settings_key()
    answer = _CACHE.fresh(key)
    if answer is None:
        answer = await asyncio.to_thread(_CACHE.refresh, key)
    return HttpResponse(answer.text, status=answer.status, content_type=CONTENT_TYPE)
