"""The test settings, with :mod:`tests.sync_site.urls` as the URLconf."""

from tests.settings import *  # noqa: F403

ROOT_URLCONF = "tests.sync_site.urls"
