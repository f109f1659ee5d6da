"""A staff member's tests are not their chats: the conversations of the admin playground, its
compare page and evaluation runs stay out of the chat sidebar and ``GET /api/conversations/``
(issue 40), while they still continue by id."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client

from advisors_app.definition.runtime import clear_cache
from advisors_app.evaluation.runs import create_run, execute_run
from advisors_app.memory.conversations import conversation_key
from advisors_app.models import Conversation
from advisors_app.turn import add_hook, remove_hook
from advisors_app.turn.state import Finished
from tests.eval_fixtures import make_dataset, make_versions
from tests.factories import make_chain, scripted_model

pytestmark = pytest.mark.django_db

BASE = "/admin/advisors_app/advisorchain"


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    clear_cache()
    yield
    clear_cache()


def listed(client: Client) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """What the user's lists show: the chat page's sidebar and the API's list."""
    sidebar = client.get("/chat/").context["conversations"]
    api = client.get("/api/conversations/").json()["results"]
    return sidebar, api


def test_playground_and_compare_conversations_stay_out_of_the_lists(
    admin_client: Client, admin_user: Any
) -> None:
    chain = make_chain(model=scripted_model(responses=("Hello.",)))
    playground = f"{BASE}/{chain.pk}/playground/"
    first = admin_client.post(playground, {"message": "hi"}).context["result"]
    again = admin_client.post(
        playground, {"message": "more", "conversation_id": first.conversation_id}
    ).context["result"]
    assert again.conversation_id == first.conversation_id  # still continues by id
    chain.system_prompt = "Be brief."  # the draft differs from production: both sides run
    chain.save()
    sides = admin_client.post(
        f"{BASE}/{chain.pk}/playground/compare/",
        {"left": "draft", "right": "production", "message": "hi"},
    ).context["sides"]
    assert all("result" in side["outcome"] for side in sides)
    assert Conversation.objects.filter(owner=admin_user).count() == 3
    assert listed(admin_client) == ([], [])

    # A chat of the same staff member is listed as ever.
    chat = admin_client.post(
        f"/api/chains/{chain.slug}/call/", {"message": "hi"}, content_type="application/json"
    ).json()
    sidebar, api = listed(admin_client)
    assert [c["id"] for c in sidebar] == [chat["conversation_id"]]
    assert [c["id"] for c in api] == [chat["conversation_id"]]
    key = conversation_key(admin_user, first.conversation_id)
    assert not Conversation.objects.get(conversation_id=key).listed


@pytest.mark.django_db(transaction=True)
def test_an_evaluation_runs_each_item_in_an_unlisted_conversation() -> None:
    make_versions()
    run = create_run(make_dataset(), "support")
    seen: list[tuple[bool, ...]] = []

    def conversations_now(finished: Finished) -> None:  # inside the turn's transaction
        seen.append(tuple(Conversation.objects.values_list("listed", flat=True)))

    add_hook("finish", conversations_now)
    try:
        run = execute_run(run.pk)
    finally:
        remove_hook("finish", conversations_now)
    assert run is not None and run.status == "done"
    assert seen == [(False,)] * 3  # each item's conversation, and no listed one
    assert not Conversation.objects.exists()  # deleted after each item
