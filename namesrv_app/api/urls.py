"""URLs of the REST API, mounted at /api/v1/."""

from __future__ import annotations

from django.urls import path

from namesrv_app.api import backup, views
from namesrv_app.web import names  # noqa: F401  (registers <name:...>: any stored name)

app_name = "api"

urlpatterns = [
    path("schema/", views.ApiSchemaView.as_view(), name="schema"),
    path("docs/", views.ApiDocsView.as_view(url_name="api:schema"), name="docs"),
    path("routes/<name:topic>/", views.RouteView.as_view(), name="route"),
    path("routes/<name:topic>/compare/", views.RouteCompareView.as_view(), name="route-compare"),
    path("topics/", views.TopicListView.as_view(), name="topics"),
    path("topics/<name:topic>/", views.TopicDetailView.as_view(), name="topic"),
    path("clusters/", views.ClusterListView.as_view(), name="clusters"),
    path("broker-groups/", views.BrokerGroupListView.as_view(), name="broker-groups"),
    path(
        "broker-groups/<name:broker_name>/wipe-write-perm/",
        views.WritePermView.as_view(wipe=True),
        name="wipe-write-perm",
    ),
    path(
        "broker-groups/<name:broker_name>/add-write-perm/",
        views.WritePermView.as_view(wipe=False),
        name="add-write-perm",
    ),
    path("brokers/unregister/", views.UnregisterBrokerView.as_view(), name="unregister-broker"),
    path("kv/", views.KVView.as_view(), name="kv"),
    path("node/", views.NodeStatusView.as_view(), name="node"),
    path("node/raft/", views.RaftStatusView.as_view(), name="raft"),
    path("nodes/", views.NodeListView.as_view(), name="nodes"),
    path("nodes/membership/", views.MembershipView.as_view(), name="membership"),
    path("audit/", views.AuditLogView.as_view(), name="audit"),
    path("namesrv-config/", views.NamesrvConfigView.as_view(), name="namesrv-config"),
    path("backup/", backup.BackupView.as_view(), name="backup"),
]
