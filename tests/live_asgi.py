"""The site's ASGI application plus static files, for browser tests on a bare daphne.

``manage.py runserver`` serves static files itself; a plain ``daphne`` process does not, so
browser tests serve them the way runserver does (``ASGIStaticFilesHandler``).
"""

from __future__ import annotations

from channels.routing import ProtocolTypeRouter
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

from advisorsite.asgi import application as site

application = ProtocolTypeRouter(
    {
        "http": ASGIStaticFilesHandler(site.application_mapping["http"]),
        "websocket": site.application_mapping["websocket"],
    }
)
