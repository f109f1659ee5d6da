"""URL routes of the example site: a home page, log in/out, the admin, the app at the root, and
/favicon.ico (the app's icon)."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest, HttpResponsePermanentRedirect
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import TemplateView


def favicon(request: HttpRequest) -> HttpResponsePermanentRedirect:
    """Browsers ask for /favicon.ico on pages that declare no icon (the admin's, DRF's): the
    app's SVG icon, rather than a 404 in every admin page's log."""
    return HttpResponsePermanentRedirect(static("advisors_app/favicon.svg"))


urlpatterns = [
    path("favicon.ico", favicon),
    path("", TemplateView.as_view(template_name="home.html"), name="home"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("admin/", admin.site.urls),
    path("", include("advisors_app.urls")),
]
