"""The playground's compare page: one message to two things of a chain, side by side."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.template.loader import render_to_string
from django.test import Client

from advisors_app.definition.runtime import clear_cache
from advisors_app.models import CallLog
from tests.factories import make_chain, scripted_model

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    clear_cache()
    yield
    clear_cache()


def compare_url(chain) -> str:
    return f"/admin/advisors_app/advisorchain/{chain.pk}/playground/compare/"


@pytest.fixture
def chain():
    """Version 1 (production) appends " (v1)"; the draft now appends " (draft)"."""
    chain = make_chain(
        model=scripted_model(responses=("Hello.",)), advisors=(("append", {"text": " (v1)"}),)
    )
    row = chain.advisors.get()
    row.params = {"text": " (draft)"}
    row.save()
    return chain


def test_the_form_offers_the_draft_against_production(admin_client: Client, chain) -> None:
    response = admin_client.get(compare_url(chain))
    assert response.status_code == 200
    form = response.context["form"]
    assert (form.initial["left"], form.initial["right"]) == ("draft", "production")
    playground = admin_client.get(f"/admin/advisors_app/advisorchain/{chain.pk}/playground/")
    assert compare_url(chain) in playground.content.decode()


def test_one_message_runs_on_both_sides(admin_client: Client, chain) -> None:
    response = admin_client.post(
        compare_url(chain), {"left": "draft", "right": "production", "message": "hi"}
    )
    assert response.status_code == 200
    left, right = response.context["sides"]
    assert left["outcome"]["ran"] == "the draft"
    assert right["outcome"]["ran"] == "v1 (label production)"
    prompts = [side["outcome"]["prompt_messages"][-1]["text"] for side in (left, right)]
    assert prompts == ["hi (draft)", "hi (v1)"]
    assert response.context["summary"] == ["Same reply.", "The final prompts differ."]
    page = response.content.decode()
    assert 'id="compare-left"' in page and 'id="compare-right"' in page
    assert page.count('class="chain-picture"') == 2
    conversations = {side["outcome"]["result"].conversation_id for side in (left, right)}
    assert len(conversations) == 2  # each side in a conversation of its own
    assert CallLog.objects.count() == 2
    assert "usage -" in page  # the scripted model says no usage (format: the test below)


def test_a_label_and_its_version_or_an_equal_draft_are_refused(admin_client: Client, chain) -> None:
    """``production`` points at v1: comparing them, or the draft once it equals v1, only shows
    the model's randomness, as v1 against v1 would."""
    for left, right in (("production", "1"), ("1", "production")):
        response = admin_client.post(
            compare_url(chain), {"left": left, "right": right, "message": "hi"}
        )
        page = response.content.decode()
        assert "Choose two different things to compare" in page
        assert page.count("Choose two different things to compare") == 1  # said once
    differs = admin_client.post(
        compare_url(chain), {"left": "draft", "right": "1", "message": "hi"}
    )
    assert "sides" in differs.context
    row = chain.advisors.get()
    row.params = {"text": " (v1)"}
    row.save()
    equal = admin_client.post(compare_url(chain), {"left": "draft", "right": "1", "message": "hi"})
    assert "sides" not in equal.context
    assert CallLog.objects.count() == 2


def test_bad_input_is_refused_on_the_form_or_its_side(admin_client: Client, chain) -> None:
    same = admin_client.post(
        compare_url(chain), {"left": "draft", "right": "draft", "message": "hi"}
    )
    assert "Choose two different things to compare" in same.content.decode()
    assert "sides" not in same.context
    unknown = admin_client.post(
        compare_url(chain), {"left": "draft", "right": "9", "message": "hi"}
    )
    assert "right" in unknown.context["form"].errors
    bad = admin_client.post(
        compare_url(chain),
        {"left": "draft", "right": "1", "message": "hi", "params": '{"colour": 1}'},
    )
    assert all(side["outcome"]["refused"] for side in bad.context["sides"])
    assert "params.colour" in bad.content.decode()
    assert CallLog.objects.count() == 0


def test_only_editors_of_the_chain(client: Client, chain, django_user_model) -> None:
    viewer = django_user_model.objects.create_user("viewer", password="pw", is_staff=True)
    client.force_login(viewer)
    assert client.get(compare_url(chain)).status_code == 403
    assert client.post(compare_url(chain), {"message": "hi"}).status_code == 403


@pytest.mark.parametrize(
    ("usage", "line"),
    [
        (
            {"prompt_tokens": 956, "completion_tokens": 120, "total_tokens": 1076},
            "956 prompt + 120 completion = 1076 tokens",
        ),
        ({"total_tokens": 40}, "40 tokens"),
        (None, "-"),
    ],
)
def test_usage_is_a_line_in_the_playground_and_compare(usage, line) -> None:
    """Both pages include this, not the dict (``usage {'prompt_tokens': 956, ...}``)."""
    assert render_to_string("admin/advisors_app/usage_line.html", {"usage": usage}).strip() == line
