"""ASGI entry point: HTTP goes to Django (and ``/mcp/`` to the MCP endpoint), websockets to the
app's Channels routes."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "advisorsite.settings")
# Set up Django before importing anything that may touch models (the websocket consumers).
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import re_path  # noqa: E402

from advisors_app.routing import http_urlpatterns, websocket_urlpatterns  # noqa: E402
from advisors_app.security.body_limits import BodyLimitMiddleware  # noqa: E402
from advisors_app.security.origins import CsrfOriginValidator  # noqa: E402
from advisors_app.turn.shutdown import stop_turns_before_daphne_exits  # noqa: E402

application = ProtocolTypeRouter(
    {
        # The MCP endpoint (advisors_app.mcp_server) is an ASGI app of its own; Django the rest.
        # Bodies over ADVISORS["MAX_REQUEST_BODY_BYTES"] (uploads: their files on top) get 413
        # before either sees them; under daphne, while they arrive.
        "http": BodyLimitMiddleware(URLRouter([*http_urlpatterns, re_path(r"", django_asgi_app)])),
        # Origin checked as Django's CSRF checks it: scheme, host and port (not Channels'
        # AllowedHostsOriginValidator, which lets any port of an allowed host in).
        "websocket": CsrfOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
# Ctrl-C mid-turn stores the turns as interrupted instead of losing them.
stop_turns_before_daphne_exits()
