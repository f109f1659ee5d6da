"""``advisors_app.conf``: defaults, overrides read at access time, caches reset on change."""

from __future__ import annotations

from django.test import override_settings

from advisors_app.conf import DEFAULTS, app_settings, cached_by_settings


def test_every_default_is_a_typed_property() -> None:
    with override_settings(ADVISORS={}):
        for name, default in DEFAULTS.items():
            assert getattr(app_settings, name) == default
    assert app_settings.EMBEDDING_DIMENSIONS == 384


def test_overrides_are_read_at_access_time() -> None:
    with override_settings(ADVISORS={"MAX_MESSAGE_CHARS": 10}):
        assert app_settings.MAX_MESSAGE_CHARS == 10
    assert app_settings.MAX_MESSAGE_CHARS == 8000


def test_cached_objects_are_rebuilt_when_advisors_changes() -> None:
    builds: list[int] = []

    @cached_by_settings
    def build() -> int:
        builds.append(app_settings.EMBEDDING_DIMENSIONS)
        return builds[-1]

    assert build() == build() == 384
    with override_settings(ADVISORS={"EMBEDDING_DIMENSIONS": 768}):
        assert build() == build() == 768
    assert build() == 384
    assert builds == [384, 768, 384]
