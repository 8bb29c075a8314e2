"""Console pages: thin views over ``reads`` (projection) and ``forms`` (gateway writes).

Every page needs a logged-in user with a console role; operation pages need
the operator role. Lists are paginated and their related rows fetched per
page, so the pages stay fast with 1k brokers and 10k topics.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import wraps
from http import HTTPStatus
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Page, Paginator
from django.db.models import Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_http_methods

from namesrv_app import audit, gateway_client, models, topic_types
from namesrv_app.agreement import broker_matrix
from namesrv_app.conf import namesrv_settings
from namesrv_app.gateway_client import GatewayError
from namesrv_app.models import AuditEntry
from namesrv_app.roles import is_operator, is_viewer, role_of
from namesrv_app.web import reads, topology_drawing, units
from namesrv_app.web.forms import (
    OPERATION_FORMS,
    KVDeleteForm,
    KVPutForm,
    MembershipForm,
    NamesrvConfigForm,
    OperationForm,
)
from raftstore.config import key_notes, key_units

View = Callable[..., HttpResponse]
RECENT_ROWS = 10
REFUSED_NOTE_PREFIX = "refused"
"""How a ``key_notes()`` line starts for a key this NameServer refuses to change."""


def console_view(*, operator: bool = False) -> Callable[[View], View]:
    """Login required, then the viewer (or operator) role; 403 otherwise."""

    def wrap(view: View) -> View:
        @login_required
        @wraps(view)
        def checked(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            allowed = is_operator(request.user) if operator else is_viewer(request.user)
            if not allowed:
                raise PermissionDenied(
                    "this page needs the operator role"
                    if operator
                    else "this page needs a console role"
                )
            return view(request, *args, **kwargs)

        return checked

    return wrap


def _page(request: HttpRequest, rows: Any) -> Page[Any]:
    size = int(gateway_client.web_setting("PAGE_SIZE", 50))
    return Paginator(rows, size).get_page(request.GET.get("page"))


def _context(request: HttpRequest, section: str, **extra: Any) -> dict[str, Any]:
    return {
        "section": section,
        "role": role_of(request.user),
        "can_write": is_operator(request.user),
        **extra,
    }


def _nodes_context(panels: list[dict[str, Any]]) -> dict[str, Any]:
    """What the node tables show: Raft's fields in raft mode only (the mode the nodes
    report; this node's setting when none answers); an eventual node has no leader, term
    or quorum, and shows its own last scan instead (its age on the wall clock, which the
    gateways stamp it with)."""
    answered = {p.get("mode") for p in panels if p["reachable"]}
    raft = (
        gateway_client.MODE_RAFT in answered
        if answered
        else namesrv_settings().MODE == gateway_client.MODE_RAFT
    )
    return {
        "nodes": panels,
        "disagree": any(p["disagrees"] for p in panels),
        "raft_mode": raft,
        "wall_now_ms": time.time_ns() // 1_000_000,
    }


# ------------------------------------------------------------------- pages


@console_view()
def overview(request: HttpRequest) -> HttpResponse:
    """Cluster health: every node, broker liveness, topic count, recent changes."""
    # One NODE_STATUS per node per render: the card and the table show the same answer.
    panels = reads.node_panels()
    recent_heartbeats = list(models.LiveBroker.objects.order_by("-last_update_ms")[:RECENT_ROWS])
    context = _context(
        request,
        "overview",
        **_nodes_context(panels),
        local_applied=local_applied_version(panels),
        liveness=reads.liveness_counts(),
        clusters=reads.cluster_summaries(),
        topic_count=reads.topic_count(),
        recent_heartbeats=recent_heartbeats,
        timing_note=units.demo_timing_note(b.heartbeat_timeout_ms for b in recent_heartbeats),
        recent_topics=models.QueueData.objects.order_by("-applied_version").values(
            "topic", "broker_name", "perm", "applied_version"
        )[:RECENT_ROWS],
        now_ms=reads.liveness_now_ms(),
    )
    return render(request, "console/overview.html", context)


def local_applied_version(panels: list[dict[str, Any]]) -> dict[str, Any]:
    """This node's applied version for the Overview's card, taken from the same status
    answers as the nodes table; the projection's only when this node's gateway did not
    answer (and labelled so)."""
    for panel in panels:
        if panel["local"] and panel["reachable"]:
            return {
                "node_id": panel["node_id"],
                "version": panel.get("applied_version"),
                "source": "status",
            }
    state = reads.local_node_state() or {}
    return {
        "node_id": state.get("node_id", ""),
        "version": state.get("applied_version", 0),
        "source": "projection",
    }


@console_view()
def topology(request: HttpRequest) -> HttpResponse:
    """Cluster -> broker group -> replicas, as a picture and a table (one page of groups),
    and the node x broker matrix: every replica as each node's own table has it."""
    search, cluster = request.GET.get("search", ""), request.GET.get("cluster", "")
    page = _page(request, reads.broker_groups(search, cluster))
    groups = reads.replicas_of(page.object_list)
    matrix = broker_matrix(
        reads.node_panels(brokers=True), reads.expiring_after_ms, search=search, cluster=cluster
    )
    context = _context(
        request,
        "topology",
        page=page,
        groups=groups,
        matrix=matrix,
        svg=topology_drawing.layout(groups, matrix),
        timing_note=units.demo_timing_note(
            r["heartbeat_timeout_ms"] for g in groups for r in g["replicas"]
        ),
        clusters=reads.cluster_summaries(),
        search=search,
        cluster=cluster,
    )
    return render(request, "console/topology.html", context)


@console_view()
def topics(request: HttpRequest) -> HttpResponse:
    """Topics with search, type filter and paging (aggregated per topic in SQL).

    System topics are hidden unless asked for (``?type=system`` or ``all``): the
    default is normal, retry and DLQ topics, with a note of how many are hidden.
    """
    search, cluster = request.GET.get("search", ""), request.GET.get("cluster", "")
    type_filter = request.GET.get("type", topic_types.USER)
    if type_filter not in topic_types.TYPE_FILTERS:
        type_filter = topic_types.USER
    page = _page(request, reads.topic_summaries(search, cluster, type_filter=type_filter))
    queues = reads.topic_queues_by_broker([t["topic"] for t in page.object_list], cluster)
    rows = [{**t, "queue_datas": queues.get(t["topic"], [])} for t in page.object_list]
    counts = reads.topic_type_counts(search, cluster)
    shown = topic_types.types_of_filter(type_filter)
    context = _context(
        request,
        "topics",
        page=page,
        rows=rows,
        search=search,
        cluster=cluster,
        # Names only (one query): the filter needs no per-cluster counts.
        clusters=models.Cluster.objects.order_by("name").values("name"),
        type_filter=type_filter,
        type_choices=[
            (value, topic_types.TYPE_FILTER_LABELS[value], _type_count(counts, value))
            for value in topic_types.TYPE_FILTERS
        ],
        hidden_system=0 if topic_types.SYSTEM in shown else counts[topic_types.SYSTEM],
    )
    return render(request, "console/topics.html", context)


def _type_count(counts: dict[str, int], type_filter: str) -> int:
    """How many topics a type filter value keeps, from the per-type counts."""
    return sum(counts[t] for t in topic_types.types_of_filter(type_filter))


@console_view()
def topic_detail(request: HttpRequest, topic: str) -> HttpResponse:
    """One topic's route from the projection, and as each node answers it.

    Any name: the wire stores topics the console's form would refuse, and their
    pages must open too (the URL carries them through ``<name:topic>``).
    """
    projected = reads.projected_route(topic)
    route = None if projected.route is None else reads.route_json(projected.route)
    queue_datas = [] if route is None else route.get("queueDatas", [])
    summary = reads.topic_summary(topic)
    context = _context(
        request,
        "topics",
        topic=topic,
        topic_type=None if summary is None else summary["type"],
        projected=projected,
        route=route,
        totals={
            "brokers": len(queue_datas),
            "read": sum(q.get("readQueueNums", 0) for q in queue_datas),
            "write": sum(q.get("writeQueueNums", 0) for q in queue_datas),
        },
        comparison=reads.compare_route(topic),
    )
    return render(request, "console/topic_detail.html", context)


@console_view()
def nodes(request: HttpRequest) -> HttpResponse:
    """Every node's panel (Raft's fields in raft mode) and the membership form."""
    panels = reads.node_panels()
    context = _context(
        request,
        "nodes",
        **_nodes_context(panels),
        membership_form=MembershipForm(),
    )
    return render(request, "console/nodes.html", context)


@console_view()
def namesrv_config(request: HttpRequest) -> HttpResponse:
    """Every node's NameServer config side by side, differences marked; the update form."""
    comparison = reads.config_comparison()
    notes, units = key_notes(), key_units()
    for row in comparison["rows"]:
        row["note"] = notes.get(row["key"], "")
        row["unit"] = units.get(row["key"], "")
        row["refused"] = row["note"].startswith(REFUSED_NOTE_PREFIX)
    context = _context(
        request,
        "config",
        comparison=comparison,
        form=NamesrvConfigForm(initial=request.GET.dict()),
    )
    return render(request, "console/config.html", context)


@console_view()
def audit_log(request: HttpRequest) -> HttpResponse:
    """Who changed what, when, on which node, with what result (newest first)."""
    search = request.GET.get("search", "").strip()
    rows = AuditEntry.objects.all()
    if search:
        rows = rows.filter(
            Q(username__icontains=search)
            | Q(action__icontains=search)
            | Q(target__icontains=search)
            | Q(node_id=search)
        )
    context = _context(request, "audit", page=_page(request, rows), search=search)
    return render(request, "console/audit.html", context)


@console_view()
def kv_config(request: HttpRequest) -> HttpResponse:
    """KV namespaces and entries, with put and delete forms."""
    search = request.GET.get("search", "")
    context = _context(
        request,
        "kv",
        namespaces=reads.kv_namespaces(search),
        search=search,
        put_form=KVPutForm(),
        delete_form=KVDeleteForm(),
    )
    return render(request, "console/kv.html", context)


@console_view()
def operations(request: HttpRequest) -> HttpResponse:
    """The list of every operation form."""
    forms = [
        (slug, form_class.title, form_class.destructive)
        for slug, form_class in OPERATION_FORMS.items()
    ]
    return render(request, "console/operations.html", _context(request, "ops", forms=forms))


@console_view(operator=True)
@require_http_methods(["GET", "POST"])
def operation(request: HttpRequest, slug: str) -> HttpResponse:
    """One operation: GET shows the form (prefilled from the query), POST validates and runs it."""
    form_class = OPERATION_FORMS.get(slug)
    if form_class is None:
        raise Http404("no such operation")
    result, error, status = None, None, 200
    if request.method == "POST":
        form: OperationForm = form_class(request.POST)
        if form.is_valid():
            try:
                result = form.execute()
            except GatewayError as exc:
                error, status = str(exc), exc.http_status
        else:
            status = 400
    else:
        form = form_class(initial=request.GET.dict())
    if request.method == "POST":
        audit.note(
            request,
            result=result or error or audit.form_refusal(form),
            action=f"ops:{slug}",
            failed=result is None,
        )
    # 207: the write landed somewhere but not everywhere; a warning, neither success
    # nor a plain error.
    context = _context(
        request,
        "ops",
        form=form,
        slug=slug,
        result=result,
        error=error,
        partial=status == HTTPStatus.MULTI_STATUS,
    )
    return render(request, "console/operation.html", context, status=status)
