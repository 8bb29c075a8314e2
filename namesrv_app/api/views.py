"""REST API views: declarative shells over the read queries and the gateway client.

Reads come from the node's projection (``namesrv_app.web.reads``), or over the
wire for linearizable and cross-node reads. Every write validates its input
(400 with field messages, nothing sent) and then calls ONE gateway client
function (topics: the topic service, ``namesrv_app.topic_admin``, as the console
and ``manage.py topic`` do). Gateway failures become 503 (unreachable), 502
(refused) or 409 (not in raft mode) through :func:`exception_handler`.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import HttpResponseBase
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework import status
from rest_framework.exceptions import NotAuthenticated, ValidationError
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView, exception_handler as drf_exception_handler

from namesrv_app import gateway_client, topic_admin, topic_types
from namesrv_app.api import serializers as s
from namesrv_app.api.permissions import ApiDocsPermission, IsOperator, RouteReadPermission
from namesrv_app.gateway_client import GatewayError, PartialWrite, WriteOutcome
from namesrv_app.models import AuditEntry
from namesrv_app.roles import role_of
from namesrv_app.topic_rules import validate_deletable_topic
from namesrv_app.web import reads
from remoting.consistency import CONSISTENCY_LINEARIZABLE
from remoting.model import QueueData

ERRORS = {
    400: OpenApiResponse(
        OpenApiTypes.OBJECT, description="invalid input, nothing changed: field -> messages"
    ),
    401: OpenApiResponse(s.ErrorSerializer, description="not authenticated"),
    403: OpenApiResponse(s.ErrorSerializer, description="role missing"),
}
GATEWAY_ERRORS = {
    502: OpenApiResponse(s.ErrorSerializer, description="the gateway refused"),
    503: OpenApiResponse(s.ErrorSerializer, description="the gateway is unreachable"),
}
WRITE_ERRORS = {
    **GATEWAY_ERRORS,
    415: OpenApiResponse(
        s.ErrorSerializer,
        description="the body is not JSON, a form or multipart (or its multipart boundary is "
        "broken); nothing changed",
    ),
}
"""The answers of a request with a body: the gateway's, and a body DRF cannot parse."""
NAME_IN_PATH = (
    "A name following ^[%|a-zA-Z0-9_-]+$ is written as it is; any other name (the wire "
    "stores those too) as ~ followed by the name with every UTF-8 byte outside "
    "[A-Za-z0-9_.-] as ~XX, e.g. a/b as ~a~2Fb (namesrv_app.web.names)."
)
TOPIC_PARAM = OpenApiParameter(
    "topic", OpenApiTypes.STR, OpenApiParameter.PATH, description=f"topic name. {NAME_IN_PATH}"
)
BROKER_PARAM = OpenApiParameter(
    "broker_name",
    OpenApiTypes.STR,
    OpenApiParameter.PATH,
    description=f"broker group name. {NAME_IN_PATH}",
)
NOT_FOUND = {404: OpenApiResponse(s.ErrorSerializer, description="no such topic or path")}
PARTLY_DONE = (
    "partly done: some broker or node missed it; ``brokers`` and ``nodes`` say which, and why"
)


class ApiSchemaView(SpectacularAPIView):
    """The OpenAPI schema: a console role unless NAMESRV_WEB['PUBLIC_API_DOCS']."""

    permission_classes = [ApiDocsPermission]


class ApiDocsView(SpectacularSwaggerView):
    """Swagger UI over the schema, with the schema's permission; a browser without a
    session is sent to the login page and back, instead of a bare 401."""

    permission_classes = [ApiDocsPermission]
    # Under the console's top bar (namesrv_app/templates/_top_nav.html).
    template_name = "api/swagger_ui.html"

    @extend_schema(exclude=True)
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """drf-spectacular's page, with what the top bar shows: the user's role and
        this section marked."""
        response: Response = super().get(request, *args, **kwargs)  # type: ignore[no-untyped-call]
        response.data.update(role=role_of(request.user), section="api")
        return response

    # DRF types this as Response, but finalize_response takes any HttpResponseBase,
    # and a redirect is what a browser without a session needs.
    def handle_exception(self, exc: Exception) -> HttpResponseBase:  # type: ignore[override]
        """NotAuthenticated becomes a redirect to the login page."""
        if isinstance(exc, NotAuthenticated):
            return redirect_to_login(self.request.get_full_path())
        response: HttpResponseBase = super().handle_exception(exc)
        return response


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's handler, plus gateway errors with their HTTP status."""
    if isinstance(exc, PartialWrite):
        # 207 Multi-Status: some nodes applied the write, some did not; each says which.
        body = {"ok": False, "partial": True, "detail": str(exc), "nodes": exc.outcome.per_node()}
        return Response(body, status=exc.http_status)
    if isinstance(exc, GatewayError):
        return Response({"detail": str(exc)}, status=exc.http_status)
    return drf_exception_handler(exc, context)


def _deletable_topic(topic: str) -> str:
    """A topic name a delete may send: one following the rule, or one this node stores."""
    try:
        validate_deletable_topic(topic)
    except DjangoValidationError as exc:
        raise ValidationError({"topic": exc.messages}) from exc
    return topic


def _valid(serializer_class: type[Any], data: Any) -> dict[str, Any]:
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    validated: dict[str, Any] = serializer.validated_data
    return validated


def _done(
    detail: str,
    outcome: WriteOutcome,
    count: int | None = None,
    code: int = status.HTTP_200_OK,
) -> Response:
    """A write's answer: the sentence (PartialWrite, HTTP 207, when some node missed
    it) and each node's result."""
    body: dict[str, Any] = {
        "ok": True,
        "detail": outcome.sentence(detail),
        "replicated": outcome.replicated,
        "nodes": outcome.per_node(),
    }
    if count is not None:
        body["count"] = count
    return Response(body, status=code)


def _topic_change(change: topic_admin.TopicChange) -> Response:
    """A topic create or delete: 201/200 done, 207 partly done, 502/503 done nowhere."""
    return Response(change.body(), status=change.http_status)


# ------------------------------------------------------------------- routes


class RouteView(APIView):
    """GET_ROUTEINFO_BY_TOPIC for people: the standard route JSON with its version."""

    permission_classes = [RouteReadPermission]

    @extend_schema(
        parameters=[TOPIC_PARAM, s.RouteQuerySerializer],
        responses={200: s.RouteSerializer, **NOT_FOUND, **ERRORS, **GATEWAY_ERRORS},
    )
    def get(self, request: Request, topic: str) -> Response:
        """``consistency=local`` reads the projection; ``linearizable`` asks the gateway.

        Any name: a producer may ask the wire for any topic, and so may this read.
        """
        query = _valid(s.RouteQuerySerializer, request.query_params)
        if query["consistency"] == CONSISTENCY_LINEARIZABLE:
            route = gateway_client.topic_route(topic, linearizable=True)
            state = gateway_client.node_status()
            node_id, version = str(state.get("node_id", "")), int(state["applied_version"])
        else:
            projected = reads.projected_route(topic)
            route, node_id, version = projected.route, projected.node_id, projected.applied_version
        if route is None:
            return Response(
                {"detail": f"No topic route info for {topic}", "applied_version": version},
                status=status.HTTP_404_NOT_FOUND,
            )
        return Response(
            {
                "topic": topic,
                "consistency": query["consistency"],
                "node_id": node_id,
                "applied_version": version,
                "route": reads.route_json(route),
            }
        )


class RouteCompareView(APIView):
    """The same route as every node of the cluster answers it, differences marked."""

    @extend_schema(
        parameters=[TOPIC_PARAM], responses={200: OpenApiTypes.OBJECT, **NOT_FOUND, **ERRORS}
    )
    def get(self, request: Request, topic: str) -> Response:
        """Ask every node over the wire (their own local answers)."""
        return Response(reads.compare_route(topic))


# ------------------------------------------------------------------- topics


class TopicListView(APIView):
    """Topics of the projection (filtered, paginated); POST registers one."""

    @extend_schema(
        parameters=[s.TopicQuerySerializer],
        responses={200: s.PaginatedTopicSummarySerializer, **ERRORS},
    )
    def get(self, request: Request) -> Response:
        """``search`` (substring), ``cluster``, ``broker``, ``type``; ``page``."""
        query = _valid(s.TopicQuerySerializer, request.query_params)
        rows = reads.topic_summaries(
            query.get("search", ""),
            query.get("cluster", ""),
            query.get("broker", ""),
            type_filter=query.get("type") or topic_types.ALL,
        )
        paginator = PageNumberPagination()
        page = paginator.paginate_queryset(rows, request, view=self)
        return paginator.get_paginated_response(s.TopicSummarySerializer(page, many=True).data)

    @extend_schema(
        request=s.RegisterTopicSerializer,
        responses={
            201: s.TopicResultSerializer,
            207: OpenApiResponse(s.TopicResultSerializer, description=PARTLY_DONE),
            **ERRORS,
            **WRITE_ERRORS,
        },
    )
    def post(self, request: Request) -> Response:
        """Create a topic (operators): through each group's master, then confirmed in
        every node's route; ``method=namesrv``: REGISTER_TOPIC_IN_NAMESRV (217) only."""
        data = _valid(s.RegisterTopicSerializer, request.data)
        queues = [
            QueueData(q["broker_name"], q["read_queue_nums"], q["write_queue_nums"], q["perm"])
            for q in data["queue_datas"]
        ]
        return _topic_change(topic_admin.create_topic(data["topic"], queues, data["method"]))


class TopicDetailView(APIView):
    """GET one topic's summary (viewers); DELETE it (operators; all clusters, or ``?cluster=``)."""

    @extend_schema(
        operation_id="v1_topic_retrieve",
        parameters=[TOPIC_PARAM],
        responses={200: s.TopicSummarySerializer, **NOT_FOUND, **ERRORS},
    )
    def get(self, request: Request, topic: str) -> Response:
        """The topic-list row of exactly this topic, from the projection."""
        row = reads.topic_summary(topic)
        if row is None:
            return Response(
                {"detail": f"No topic {topic} on this node"}, status=status.HTTP_404_NOT_FOUND
            )
        return Response(s.TopicSummarySerializer(row).data)

    @extend_schema(
        parameters=[TOPIC_PARAM, s.DeleteTopicQuerySerializer],
        responses={
            200: s.TopicResultSerializer,
            207: OpenApiResponse(s.TopicResultSerializer, description=PARTLY_DONE),
            404: OpenApiResponse(
                s.ErrorSerializer,
                description="no node routes the topic and no broker holds it; nothing sent",
            ),
            **ERRORS,
            **WRITE_ERRORS,
        },
    )
    def delete(self, request: Request, topic: str) -> Response:
        """Delete a topic (operators): DELETE_TOPIC_IN_BROKER (215) on every broker of its
        clusters, then DELETE_TOPIC_IN_NAMESRV (216) on every node; ``method=namesrv``:
        216 only."""
        topic = _deletable_topic(topic)
        query = _valid(s.DeleteTopicQuerySerializer, request.query_params)
        change = topic_admin.delete_topic(topic, query.get("cluster") or None, query["method"])
        return _topic_change(change)


# ------------------------------------------------------------------- clusters and brokers


class ClusterListView(APIView):
    """Clusters with group, replica and live-broker counts."""

    @extend_schema(responses={200: s.ClusterSerializer(many=True), **ERRORS})
    def get(self, request: Request) -> Response:
        """All clusters (there are few)."""
        return Response(s.ClusterSerializer(reads.cluster_summaries(), many=True).data)


class BrokerGroupListView(APIView):
    """Broker groups with their replicas and liveness, paginated."""

    @extend_schema(
        parameters=[OpenApiParameter("search", str), OpenApiParameter("cluster", str)],
        responses={200: s.PaginatedBrokerGroupSerializer, **ERRORS},
    )
    def get(self, request: Request) -> Response:
        """``search`` (substring of the name), ``cluster``; ``page``."""
        groups = reads.broker_groups(
            request.query_params.get("search", ""), request.query_params.get("cluster", "")
        )
        paginator = PageNumberPagination()
        page = paginator.paginate_queryset(groups, request, view=self)
        data = s.BrokerGroupSerializer(reads.replicas_of(page or []), many=True).data
        return paginator.get_paginated_response(data)


class WritePermView(APIView):
    """Wipe or add the write permission of a broker group's topics."""

    permission_classes = [IsOperator]
    wipe = True

    @extend_schema(
        parameters=[BROKER_PARAM],
        request=None,
        responses={200: s.ResultSerializer, **NOT_FOUND, **ERRORS, **WRITE_ERRORS},
    )
    def post(self, request: Request, broker_name: str) -> Response:
        """205 (wipe) or 327 (add) through the gateway; the topic count."""
        name = _valid(s.BrokerNameSerializer, {"broker_name": broker_name})["broker_name"]
        if self.wipe:
            count, outcome = gateway_client.wipe_write_perm(name)
            return _done(f"wiped write permission on {name}", outcome, count)
        count, outcome = gateway_client.add_write_perm(name)
        return _done(f"added write permission on {name}", outcome, count)


class UnregisterBrokerView(APIView):
    """Unregister one broker replica."""

    permission_classes = [IsOperator]

    @extend_schema(
        request=s.UnregisterBrokerSerializer,
        responses={200: s.ResultSerializer, **ERRORS, **WRITE_ERRORS},
    )
    def post(self, request: Request) -> Response:
        """UNREGISTER_BROKER (104) through the gateway."""
        data = _valid(s.UnregisterBrokerSerializer, request.data)
        outcome = gateway_client.unregister_broker(
            data["cluster_name"], data["broker_addr"], data["broker_name"], data["broker_id"]
        )
        return _done(f"unregistered {data['broker_name']}/{data['broker_id']}", outcome)


# ------------------------------------------------------------------- KV config


class KVView(APIView):
    """KV config: GET lists namespaces, POST puts an item, DELETE removes one."""

    @extend_schema(
        parameters=[OpenApiParameter("search", str)],
        responses={200: s.KVNamespaceSerializer(many=True), **ERRORS},
    )
    def get(self, request: Request) -> Response:
        """Every namespace with its entries."""
        data = reads.kv_namespaces(request.query_params.get("search", ""))
        return Response(s.KVNamespaceSerializer(data, many=True).data)

    @extend_schema(
        request=s.KVPutSerializer, responses={200: s.ResultSerializer, **ERRORS, **WRITE_ERRORS}
    )
    def post(self, request: Request) -> Response:
        """PUT_KV_CONFIG (100) through the gateway (operators)."""
        data = _valid(s.KVPutSerializer, request.data)
        outcome = gateway_client.put_kv(data["namespace"], data["key"], data["value"])
        return _done(f"stored {data['namespace']}/{data['key']}", outcome)

    @extend_schema(
        parameters=[s.KVKeySerializer],
        responses={200: s.ResultSerializer, **ERRORS, **WRITE_ERRORS},
    )
    def delete(self, request: Request) -> Response:
        """DELETE_KV_CONFIG (102) through the gateway (operators); ``?namespace=&key=``."""
        data = _valid(s.KVKeySerializer, request.query_params)
        outcome = gateway_client.delete_kv(data["namespace"], data["key"])
        return _done(f"deleted {data['namespace']}/{data['key']}", outcome)


# ------------------------------------------------------------------- nodes


class NodeStatusView(APIView):
    """This node: NODE_STATUS from its gateway, and what its projection reflects."""

    @extend_schema(responses={200: OpenApiTypes.OBJECT, **ERRORS})
    def get(self, request: Request) -> Response:
        """The gateway's status when it answers; ``gateway_error`` otherwise."""
        body: dict[str, Any] = {"projection": reads.local_node_state()}
        try:
            body["status"] = gateway_client.node_status()
        except GatewayError as exc:
            body["status"], body["gateway_error"] = None, str(exc)
        return Response(body)


class RaftStatusView(APIView):
    """The Raft fields of this node's status (state, term, indexes, peers, quorum)."""

    RAFT_FIELDS = (
        "node_id",
        "mode",
        "state",
        "leader",
        "term",
        "commit_index",
        "applied_index",
        "log_length",
        "has_quorum",
        "peers",
    )

    @extend_schema(responses={200: OpenApiTypes.OBJECT, **ERRORS, **GATEWAY_ERRORS})
    def get(self, request: Request) -> Response:
        """Straight from NODE_STATUS (eventual nodes report state "standalone")."""
        state = gateway_client.node_status()
        return Response({name: state.get(name) for name in self.RAFT_FIELDS})


class NodeListView(APIView):
    """Every node of the cluster file, asked over the wire, with a disagreement flag."""

    @extend_schema(responses={200: OpenApiTypes.OBJECT, **ERRORS})
    def get(self, request: Request) -> Response:
        """Unreachable nodes are listed with their error."""
        panels = reads.node_panels()
        return Response({"agree": not any(p["disagrees"] for p in panels), "nodes": panels})


class NamesrvConfigView(APIView):
    """Every node's NamesrvConfig side by side (GET); update keys (POST, operators)."""

    @extend_schema(responses={200: OpenApiTypes.OBJECT, **ERRORS})
    def get(self, request: Request) -> Response:
        """``nodes``, one row per key with each node's value, ``differs``, ``blacklisted``."""
        return Response(reads.config_comparison())

    @extend_schema(
        request=s.NamesrvConfigUpdateSerializer,
        responses={200: s.ResultSerializer, **ERRORS, **WRITE_ERRORS},
    )
    def post(self, request: Request) -> Response:
        """UPDATE_NAMESRV_CONFIG (318) where writes go; a key or value a node would refuse: 400
        with the reason."""
        properties = _valid(s.NamesrvConfigUpdateSerializer, request.data)["properties"]
        known = gateway_client.namesrv_config()
        refusals = [
            why
            for key, value in properties.items()
            if (why := gateway_client.config_update_refusal(key, value, known)) is not None
        ]
        if refusals:
            raise ValidationError({"properties": refusals})
        outcome = gateway_client.update_namesrv_config(properties)
        keys = ", ".join(f"{k}={v}" for k, v in sorted(properties.items()))
        return _done(f"set {keys}", outcome)


class AuditLogView(APIView):
    """The cluster's audit log, newest first: every change signed-in users asked for,
    on any node (``?user=``, ``?node=`` filter)."""

    @extend_schema(
        parameters=[OpenApiParameter("user", str), OpenApiParameter("node", str)],
        responses={200: s.PaginatedAuditEntrySerializer, **ERRORS},
    )
    def get(self, request: Request) -> Response:
        """Paginated, newest first."""
        rows = AuditEntry.objects.all()
        if request.query_params.get("user"):
            rows = rows.filter(username=request.query_params["user"])
        if request.query_params.get("node"):
            rows = rows.filter(node_id=request.query_params["node"])
        paginator = PageNumberPagination()
        page = paginator.paginate_queryset(rows, request, view=self)
        return paginator.get_paginated_response(s.AuditEntrySerializer(page, many=True).data)


class MembershipView(APIView):
    """Add or remove a Raft member; 409 on a node in eventual mode."""

    permission_classes = [IsOperator]

    @extend_schema(
        request=s.MembershipSerializer,
        responses={
            200: s.ResultSerializer,
            409: s.ErrorSerializer,
            **ERRORS,
            **WRITE_ERRORS,
        },
    )
    def post(self, request: Request) -> Response:
        """Through the gateway's internal port."""
        data = _valid(s.MembershipSerializer, request.data)
        change = gateway_client.add_node if data["action"] == "add" else gateway_client.remove_node
        state = change(data["address"])
        detail = f"{data['action']} {data['address']} (replicated through Raft)"
        body = {"ok": True, "detail": detail, "count": len(state.get("peers", []))}
        return Response(body)
