"""What a GET_ROUTEINFO_BY_TOPIC request asks for, read the same way by the gateway's
dispatcher and by a read front (:mod:`gateway.front`), which must agree on which
requests share one cached answer."""

from __future__ import annotations

from raftstore.zone import ZONE_MODE_EXT_FIELD, ZONE_NAME_EXT_FIELD, zone_filter_requested
from remoting.codes import STANDARD_JSON_VERSION
from remoting.command import RemotingCommand
from remoting.consistency import CONSISTENCY_FIELD, CONSISTENCY_LINEARIZABLE
from remoting.headers import header_bool

RouteKey = tuple[str, bool]
"""(topic, standard JSON): requests with equal keys get the same answer body."""


def wants_standard_json(request: RemotingCommand) -> bool:
    """True when the answer must use quoted keys (4.9.4+ clients, or acceptStandardJsonOnly)."""
    if request.version >= STANDARD_JSON_VERSION:
        return True
    return header_bool(request, "acceptStandardJsonOnly") is True


def is_linearizable(request: RemotingCommand) -> bool:
    """True when the request asks for a linearizable read."""
    ext = request.ext_fields
    return ext is not None and ext.get(CONSISTENCY_FIELD) == CONSISTENCY_LINEARIZABLE


def shared_route_key(request: RemotingCommand) -> RouteKey | None:
    """The key of a route request whose answer is the applied table's cached body, or
    None when it needs more: no topic (the answer is an error), a linearizable read
    (a barrier first) or zone filtering (a body of its own)."""
    ext = request.ext_fields
    if ext is None:
        return None
    topic = ext.get("topic")
    if topic is None or ext.get(CONSISTENCY_FIELD) == CONSISTENCY_LINEARIZABLE:
        return None
    if zone_filter_requested(ext.get(ZONE_MODE_EXT_FIELD), ext.get(ZONE_NAME_EXT_FIELD)):
        return None
    return topic, wants_standard_json(request)
