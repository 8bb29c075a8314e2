"""URLs of the REST API, mounted at /api/v1/."""

from __future__ import annotations

from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from namesrv_app.api import views

app_name = "api"

urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api:schema"), name="docs"),
    path("routes/<str:topic>/", views.RouteView.as_view(), name="route"),
    path("routes/<str:topic>/compare/", views.RouteCompareView.as_view(), name="route-compare"),
    path("topics/", views.TopicListView.as_view(), name="topics"),
    path("topics/<str:topic>/", views.TopicDetailView.as_view(), name="topic"),
    path("clusters/", views.ClusterListView.as_view(), name="clusters"),
    path("broker-groups/", views.BrokerGroupListView.as_view(), name="broker-groups"),
    path(
        "broker-groups/<str:broker_name>/wipe-write-perm/",
        views.WritePermView.as_view(wipe=True),
        name="wipe-write-perm",
    ),
    path(
        "broker-groups/<str:broker_name>/add-write-perm/",
        views.WritePermView.as_view(wipe=False),
        name="add-write-perm",
    ),
    path("brokers/unregister/", views.UnregisterBrokerView.as_view(), name="unregister-broker"),
    path("kv/", views.KVView.as_view(), name="kv"),
    path("node/", views.NodeStatusView.as_view(), name="node"),
    path("node/raft/", views.RaftStatusView.as_view(), name="raft"),
    path("nodes/", views.NodeListView.as_view(), name="nodes"),
    path("nodes/membership/", views.MembershipView.as_view(), name="membership"),
]
