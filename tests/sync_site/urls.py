"""The example site's URLs plus ``/sync-ask/``."""

from django.urls import include, path

from tests.sync_site.views import ask

urlpatterns = [path("sync-ask/", ask), path("", include("advisorsite.urls"))]
