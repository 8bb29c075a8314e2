"""Websocket URL patterns of the console (routed by namesrv_site.asgi)."""

from __future__ import annotations

from django.urls import path

from namesrv_app.live import EventsConsumer

websocket_urlpatterns = [
    path("ws/events/", EventsConsumer.as_asgi(), name="ws-events"),
]
