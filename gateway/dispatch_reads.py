"""The request codes answered at once from this node's applied state.

Every handler here reads, never writes, and never waits: the remoting server calls it
through :meth:`gateway.dispatch.RequestDispatcher.answer_now` and writes its answer
without creating a Task. Route queries (105) without a barrier, cluster info (106), the
topic lists (206, 224, 304, 311-313), KV reads (101, 219), the namesrv config (319) and a
broker member group (901) live here, apart from the writes and waiting reads in
:mod:`gateway.dispatch`, so that each module stays one job and a readable length.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from gateway import selectors
from gateway.clock import Clock
from gateway.route_cache import RouteCache
from gateway.route_request import wants_standard_json
from raftstore.config import NamesrvConfig
from raftstore.replicator import Replicator
from raftstore.zone import (
    ZONE_MODE_EXT_FIELD,
    ZONE_NAME_EXT_FIELD,
    filter_route_by_zone,
    zone_filter_requested,
)
from remoting import bodies
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand, make_response
from remoting.headers import header_str, require_str
from remoting.model import TopicList

ROUTE_FAQ_URL = "https://rocketmq.apache.org/docs/bestPractice/06FAQ"

_SUCCESS = int(ResponseCode.SUCCESS)
"""Route bodies use quoted keys from this request version on. Plain ints: the route
query path uses both per query, and an IntEnum member lookup costs a descriptor call."""

REMARK_NOT_READY = "name server not ready"
REMARK_DISABLE = "disable"


def route_not_found_remark(topic: str | None) -> str:
    """The 5.x TOPIC_NOT_EXIST remark, FAQ link included."""
    shown = "null" if topic is None else topic
    return (
        f"No topic route info in name server for the topic: {shown}\n"
        f"See {ROUTE_FAQ_URL} for further details."
    )


def need_wait_for_service(config: NamesrvConfig, started_ms: int, now_ms: int) -> bool:
    """5.x ClientRequestProcessor readiness: refuse routes for ``waitSecondsForService``
    after the processor started, when ``needWaitForService`` is on."""
    if not config.need_wait_for_service:
        return False
    return now_ms - started_ms < config.wait_seconds_for_service * 1000


class ImmediateReads:
    """The sync read handlers; :class:`~gateway.dispatch.RequestDispatcher` owns one and
    maps its request codes to these methods in its ``sync_handlers`` table."""

    def __init__(
        self,
        replicator: Replicator,
        route_cache: RouteCache,
        clock: Clock,
        started_ms: int,
        node_properties: Callable[[], Mapping[str, str]] | None,
    ) -> None:
        self.replicator = replicator
        self.route_cache = route_cache
        self.clock = clock
        # The dispatcher's start: the readiness window is measured from it.
        self.started_ms = started_ms
        self.node_properties = node_properties

    def _config(self) -> NamesrvConfig:
        # Kept current by the route cache's apply listener: no lock on the hot path.
        return self.route_cache.config

    # ---------------------------------------------------------------- KV config

    def get_kv_config(self, request: RemotingCommand) -> RemotingCommand:
        """101: the value in ext ``value``; 22 with ``extFields {}`` when missing."""
        namespace = header_str(request, "namespace")
        key = header_str(request, "key")
        value = (
            None
            if namespace is None or key is None
            else selectors.kv_get(self.replicator, namespace, key)
        )
        if value is None:
            return make_response(
                request,
                ResponseCode.QUERY_NOT_FOUND,
                remark=f"No config item, Namespace: {namespace} Key: {key}",
                ext_fields={},
            )
        return make_response(request, ResponseCode.SUCCESS, ext_fields={"value": value})

    def get_kv_list_by_namespace(self, request: RemotingCommand) -> RemotingCommand:
        """219: the namespace as a KVTable; 22 when it never existed."""
        namespace = header_str(request, "namespace")
        table = None if namespace is None else selectors.kv_list(self.replicator, namespace)
        if table is None:
            return make_response(
                request,
                ResponseCode.QUERY_NOT_FOUND,
                remark=f"No config item, Namespace: {namespace}",
            )
        return make_response(request, ResponseCode.SUCCESS, body=bodies.encode_kv_table(table))

    # ---------------------------------------------------------------- brokers

    def get_broker_member_group(self, request: RemotingCommand) -> RemotingCommand:
        """901: a copy of the group's addresses, ``{}`` when unknown."""
        group = selectors.broker_member_group(
            self.replicator,
            require_str(request, "clusterName"),
            require_str(request, "brokerName"),
        )
        return make_response(
            request, ResponseCode.SUCCESS, body=bodies.encode_broker_member_group(group)
        )

    # ---------------------------------------------------------------- routes

    def route_answer(self, request: RemotingCommand) -> RemotingCommand:
        """105: the cached route body; 17 when unknown; 1 while not ready.

        Both answers carry ext ``routesVersion``, this node's routes version read before
        the body (:data:`~remoting.consistency.ROUTES_VERSION_FIELD`).

        The body is the cached one of the applied state (see
        :class:`~gateway.route_cache.RouteCache`), in the request's JSON style.
        """
        cache = self.route_cache
        config = cache.config
        if config.need_wait_for_service and need_wait_for_service(
            config, self.started_ms, self.clock.now_ms()
        ):
            return make_response(request, ResponseCode.SYSTEM_ERROR, remark=REMARK_NOT_READY)
        ext = request.ext_fields or {}
        topic = ext.get("topic")
        standard = wants_standard_json(request)
        # Read before the body: the answer's routes are at least this new.
        answered = cache.versions.answer_fields()
        body = None if topic is None else cache.route_body(topic, standard=standard)
        if body is None:
            return make_response(
                request,
                ResponseCode.TOPIC_NOT_EXIST,
                remark=route_not_found_remark(topic),
                ext_fields=answered,
            )
        zone_name = ext.get(ZONE_NAME_EXT_FIELD)
        if (
            topic is not None
            and zone_name is not None
            and zone_filter_requested(ext.get(ZONE_MODE_EXT_FIELD), zone_name)
        ):
            body = self._zone_filtered_route_body(topic, zone_name) or body
        return make_response(request, _SUCCESS, body=body, ext_fields=answered)

    def _zone_filtered_route_body(self, topic: str, zone_name: str) -> bytes | None:
        """5.x ZoneRouteRPCHook: the route for one zone, re-encoded in the plain style."""
        route = selectors.topic_route(self.replicator, topic)
        if route is None:
            return None
        filtered = filter_route_by_zone(route, zone_name)
        return bodies.encode_topic_route_data(filtered, standard=False)

    def get_broker_cluster_info(self, request: RemotingCommand) -> RemotingCommand:
        """106: always fastjson's plain form (unquoted broker-id keys)."""
        info = selectors.cluster_info(self.replicator)
        return make_response(request, ResponseCode.SUCCESS, body=bodies.encode_cluster_info(info))

    # ---------------------------------------------------------------- topic lists

    def _topic_list_response(
        self, request: RemotingCommand, enabled: bool, read: Callable[[], TopicList]
    ) -> RemotingCommand:
        if not enabled:
            return make_response(request, ResponseCode.SYSTEM_ERROR, remark=REMARK_DISABLE)
        topics = read()
        return make_response(request, ResponseCode.SUCCESS, body=bodies.encode_topic_list(topics))

    def get_all_topic_list(self, request: RemotingCommand) -> RemotingCommand:
        """206: every topic; 1 "disable" when enableAllTopicList is off."""
        return self._topic_list_response(
            request,
            self._config().enable_all_topic_list,
            lambda: selectors.all_topic_list(self.replicator),
        )

    def get_topics_by_cluster(self, request: RemotingCommand) -> RemotingCommand:
        """224: topics of one cluster; 1 "disable" when enableTopicList is off."""
        enabled = self._config().enable_topic_list
        cluster = require_str(request, "cluster") if enabled else ""
        return self._topic_list_response(
            request, enabled, lambda: selectors.topics_by_cluster(self.replicator, cluster)
        )

    def get_system_topic_list(self, request: RemotingCommand) -> RemotingCommand:
        """304: cluster and broker names plus one broker address; no enable check."""
        return self._topic_list_response(
            request, True, lambda: selectors.system_topic_list(self.replicator)
        )

    def get_unit_topic_list(self, request: RemotingCommand) -> RemotingCommand:
        """311: unit topics; 1 "disable" when enableTopicList is off."""
        return self._topic_list_response(
            request,
            self._config().enable_topic_list,
            lambda: selectors.unit_topic_list(self.replicator),
        )

    def get_has_unit_sub_topic_list(self, request: RemotingCommand) -> RemotingCommand:
        """312: topics with unit subscriptions; 1 "disable" when enableTopicList is off."""
        return self._topic_list_response(
            request,
            self._config().enable_topic_list,
            lambda: selectors.has_unit_sub_topic_list(self.replicator),
        )

    def get_has_unit_sub_ununit_list(self, request: RemotingCommand) -> RemotingCommand:
        """313: non-unit topics with unit subscriptions; 1 "disable" when enableTopicList is off."""
        return self._topic_list_response(
            request,
            self._config().enable_topic_list,
            lambda: selectors.has_unit_sub_ununit_topic_list(self.replicator),
        )

    # ---------------------------------------------------------------- config

    def get_namesrv_config(self, request: RemotingCommand) -> RemotingCommand:
        """319: ``key=value`` lines, keys sorted; the per-process keys as this node runs them."""
        props = self._config().to_properties()
        if self.node_properties is not None:
            props.update(self.node_properties())
        return make_response(request, ResponseCode.SUCCESS, body=bodies.encode_properties(props))
