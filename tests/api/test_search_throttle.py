"""Per-user throttling of ``POST /api/documents/search/`` (issue 36): every search costs an
embedding and a vector query, so a user over ``ADVISORS["SEARCH_THROTTLE_RATE"]`` gets 429
``throttled`` with ``Retry-After``, whatever the search asked."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings

from advisors_app.conf import app_settings
from advisors_app.ingestion.pipeline import ingest_text
from advisors_app.models import Collection
from tests.api.conftest import client_for

pytestmark = pytest.mark.django_db

SEARCH = "/api/documents/search/"


@pytest.fixture
def kb() -> None:
    ingest_text(Collection.objects.create(slug="kb", name="KB"), "faq.md", "Refunds take 5 days.")


def search(api: Any, **body: Any) -> Any:
    return api.post(SEARCH, {"collection": "kb", "query": "refunds", **body}, format="json")


def test_searches_are_limited_by_default() -> None:
    assert app_settings.SEARCH_THROTTLE_RATE == "60/minute"


@override_settings(ADVISORS={"SEARCH_THROTTLE_RATE": "3/minute"})
def test_a_user_over_the_search_rate_gets_429_with_retry_after(
    kb: None, api: Any, bob: Any
) -> None:
    assert search(api).status_code == 200
    assert search(api, top_k=0).status_code == 400  # refused, and counted all the same
    assert search(api, collection="nobodys").status_code == 400
    throttled = search(api)
    assert throttled.status_code == 429
    assert 0 < int(throttled["Retry-After"]) <= 60
    error = throttled.json()["error"]
    assert error["code"] == "throttled" and 0 < error["retry_after"] <= 60
    assert error["message"].startswith("Too many searches: try again in ")
    assert "SEARCH_THROTTLE_RATE" in error["message"]
    # Per user; other endpoints are not counted.
    assert search(client_for(bob)).status_code == 200
    assert api.get("/api/collections/").status_code == 200


@override_settings(ADVISORS={"SEARCH_THROTTLE_RATE": ""})
def test_an_empty_rate_turns_search_throttling_off(kb: None, api: Any) -> None:
    for _ in range(5):
        assert search(api).status_code == 200
