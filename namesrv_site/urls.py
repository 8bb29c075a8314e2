"""URL routes: the read-only admin, the REST API (/api/v1/) and the operator console (/)."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path, re_path

from namesrv_app.api.views import ApiSchemaView
from namesrv_app.web import address_server, health, metrics

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    # RocketMQ's address server: public, like upstream's (namesrv_app/web/address_server.py).
    re_path(address_server.NSADDR_PATH_PATTERN, address_server.nsaddr, name="nsaddr"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", metrics.metrics_view, name="metrics"),
    path("favicon.ico", health.favicon, name="favicon"),
    path("admin/", admin.site.urls),
    path("api/schema/", ApiSchemaView.as_view(), name="schema"),
    path("api/v1/", include("namesrv_app.api.urls")),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", include("namesrv_app.web.urls")),
]
