"""The site's ASGI application plus static files, for browser tests on a bare daphne.

``manage.py runserver`` serves static files itself; a plain ``daphne`` process does not, so
browser tests serve them the way runserver does (``ASGIStaticFilesHandler``).
"""

from __future__ import annotations

from channels.routing import ProtocolTypeRouter
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
from django.core.signals import request_started

from advisorsite.asgi import application as site

application = ProtocolTypeRouter(
    {
        "http": ASGIStaticFilesHandler(site.application_mapping["http"]),
        "websocket": site.application_mapping["websocket"],
    }
)


def _fresh_content_types(**kwargs: object) -> None:
    """Forget cached content type ids at each request: the tests flush the database between
    tests, which recreates content types under new ids, and the admin logs every save with
    them (an in-process live server is told by the flush; this process is not)."""
    from django.contrib.contenttypes.models import ContentType

    ContentType.objects.clear_cache()


request_started.connect(_fresh_content_types)
