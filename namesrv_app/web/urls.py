"""URLs of the operator console, mounted at the site root."""

from __future__ import annotations

from django.urls import path

from namesrv_app.web import (
    backup,
    brokers,
    experiments,
    names,  # noqa: F401  (registers <name:...>: any stored name)
    views,
)

app_name = "console"

urlpatterns = [
    path("", views.overview, name="overview"),
    path("topology/", views.topology, name="topology"),
    path("topics/", views.topics, name="topics"),
    path("topics/<name:topic>/", views.topic_detail, name="topic"),
    path("nodes/", views.nodes, name="nodes"),
    path("nodes/backup/", backup.backup, name="backup"),
    path("brokers/", brokers.brokers, name="brokers"),
    path("brokers/topic/", brokers.broker_topic, name="broker-topic"),
    path("brokers/send/", brokers.broker_send, name="broker-send"),
    path("brokers/control/", brokers.broker_control_action, name="broker-control"),
    path("kv/", views.kv_config, name="kv"),
    path("audit/", views.audit_log, name="audit"),
    path("config/", views.namesrv_config, name="config"),
    path("ops/", views.operations, name="operations"),
    path("ops/<slug:slug>/", views.operation, name="operation"),
    path("experiments/", experiments.experiment_list, name="experiments"),
    path("experiments/launch/", experiments.experiment_launch, name="experiment-launch"),
    path("experiments/<name:run_id>/", experiments.experiment_report, name="experiment"),
    path(
        "experiments/<name:run_id>/timeline/",
        experiments.experiment_timeline,
        name="experiment-timeline",
    ),
    path(
        "experiments/<name:run_id>/plot/<str:name>.png",
        experiments.experiment_plot,
        name="experiment-plot",
    ),
]
