"""A taken collection slug is refused with one answer whoever holds it (issue 36): the caller
learns the slug is in use, never whose collection it is or whether they could see it."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from django.test import override_settings
from rest_framework.exceptions import ValidationError

from advisors_app.api.serializers.documents import CollectionSerializer
from advisors_app.models import Collection

pytestmark = pytest.mark.django_db


def tenant_of(user: Any) -> str:
    """``ADVISORS["TENANT_RESOLVER"]`` of these tests: Alice works for Acme, others for Globex."""
    return "acme" if user.username == "alice" else "globex"


def slug_error(api: Any, slug: str) -> str:
    response = api.post("/api/collections/", {"slug": slug, "name": "Mine"}, format="json")
    assert response.status_code == 400, response.content
    [message] = response.json()["error"]["fields"]["slug"]
    return str(message)


def test_another_users_slug_is_only_not_available(api: Any, bob: Any) -> None:
    Collection.objects.create(slug="bobs-secret-plans", name="Bob's plans", owner=bob)
    message = slug_error(api, "bobs-secret-plans")
    assert message == "The slug 'bobs-secret-plans' is not available: choose another."
    assert Collection.objects.get(slug="bobs-secret-plans").name == "Bob's plans"


@override_settings(ADVISORS={"TENANT_RESOLVER": f"{__name__}.tenant_of"})
def test_another_tenants_shared_slug_is_only_not_available(api: Any) -> None:
    Collection.objects.create(slug="globex-pricing", name="Globex pricing", tenant="globex")
    assert slug_error(api, "globex-pricing") == (
        "The slug 'globex-pricing' is not available: choose another."
    )


def test_every_taken_slug_gets_the_same_answer_whoever_holds_it(
    api: Any, alice: Any, bob: Any
) -> None:
    Collection.objects.create(slug="kb", name="KB")
    Collection.objects.create(slug="notes", name="Notes", owner=alice)
    Collection.objects.create(slug="bobs", name="Bob's", owner=bob)
    answers = {
        slug_error(api, slug).replace(repr(slug), "<slug>") for slug in ("kb", "notes", "bobs")
    }
    assert answers == {"The slug <slug> is not available: choose another."}


def test_a_slug_taken_between_validation_and_insert_gets_the_same_message(
    alice: Any, bob: Any
) -> None:
    serializer = CollectionSerializer(
        data={"slug": "race", "name": "Race"}, context={"request": SimpleNamespace(user=alice)}
    )
    assert serializer.is_valid(), serializer.errors
    Collection.objects.create(slug="race", name="Bob's", owner=bob)
    with pytest.raises(ValidationError) as refused:
        serializer.save(owner=alice)
    assert refused.value.detail == {"slug": ["The slug 'race' is not available: choose another."]}
    assert Collection.objects.get(slug="race").owner == bob
