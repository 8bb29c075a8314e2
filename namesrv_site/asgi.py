"""ASGI entry point: Django over HTTP, Channels consumers over websockets.

A node's web process serves it with uvicorn (``node.processes.asgi_server_argv``:
httptools, uvloop, websockets). The static files are answered inside Django's stack
by whitenoise (``namesrv_app.web.static_files``), from the folder ``collectstatic``
filled before the process started.
"""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "namesrv_site.settings")

# Django must be set up before the consumers (and their models) are imported.
django_application = get_asgi_application()

# Every view module now, while the process starts, not at the first request: the first
# client (a load balancer's /healthz among them) would wait for it, about half a second.
get_resolver().url_patterns  # noqa: B018

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from namesrv_app.api.route_reads import RouteReads  # noqa: E402
from namesrv_app.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        # Plain REST route reads are answered beside Django (its handler's thread hops
        # cost more than the answer); every other request is Django's.
        "http": RouteReads(django_application),
        # The session cookie authenticates the socket; the origin check stops
        # another site's page from opening it with the operator's cookie.
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
    }
)
