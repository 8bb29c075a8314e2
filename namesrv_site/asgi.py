"""ASGI entry point: Django over HTTP, Channels consumers over websockets.

The launcher serves it with uvicorn (``launcher.asgi_server_argv``: httptools,
uvloop, websockets); daphne serves it too (``manage.py runserver`` uses daphne).
"""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "namesrv_site.settings")

# Django must be set up before the consumers (and their models) are imported.
django_application = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

from namesrv_app.api.fast_routes import RouteReadAsgi  # noqa: E402
from namesrv_app.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        # The console's few static files are served by the process itself, so a
        # node needs no separate web server.
        # Cached REST route reads are answered before Django's handler (its per-request
        # thread hops cost more than the answer); everything else passes through.
        "http": RouteReadAsgi(ASGIStaticFilesHandler(django_application)),
        # The session cookie authenticates the socket; the origin check stops
        # another site's page from opening it with the operator's cookie.
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
    }
)
