"""Admin of scores (issue 22): the list with its filters, links to the reply and call log."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from advisors_app.definition.runtime import clear_cache
from advisors_app.evaluation.feedback import parse_vote, record_vote
from advisors_app.models import CallLog, ChatMessage, Score
from tests.api.conftest import client_for
from tests.factories import make_chain, scripted_model

pytestmark = pytest.mark.django_db

LIST = "/admin/advisors_app/score/"


@pytest.fixture
def votes(django_user_model: Any) -> dict[str, Any]:
    """Alice's 👎 on a ``support`` reply and Bob's accuracy score on a ``sales`` reply."""
    clear_cache()
    alice = django_user_model.objects.create_user("alice", password="pw")
    bob = django_user_model.objects.create_user("bob", password="pw")
    make_chain("support", model=scripted_model("s", responses=("Refunds <b>take</b> 5 days.",)))
    make_chain("sales", model=scripted_model("t", responses=("Plans start at $9.",)))
    rows = {}
    for user, slug, data in (
        (alice, "support", {"value": "down", "reason": "wrong"}),
        (bob, "sales", {"key": "accuracy", "value": 0.25}),
    ):
        body = (
            client_for(user)
            .post(f"/api/chains/{slug}/call/", {"message": "Hi"}, format="json")
            .json()
        )
        score, _ = record_vote(user, parse_vote(data, message_id=body["message_id"]))
        rows[slug] = score
    clear_cache()
    return rows


def shown(admin_client: Client, query: str = "") -> list[Score]:
    response = admin_client.get(LIST + query)
    assert response.status_code == 200
    return list(response.context["cl"].queryset)


def test_the_list_filters_by_chain_version_key_and_source(
    admin_client: Client, votes: dict[str, Any]
) -> None:
    support, sales = votes["support"], votes["sales"]
    assert set(shown(admin_client)) == {support, sales}
    assert shown(admin_client, "?chain_slug=support") == [support]
    assert shown(admin_client, f"?chain_version__id__exact={sales.chain_version_id}") == [sales]
    assert shown(admin_client, "?key=accuracy") == [sales]
    assert shown(admin_client, "?source__exact=user") == [sales, support]
    assert shown(admin_client, "?source__exact=evaluator") == []
    assert shown(admin_client, "?reason__exact=wrong") == [support]

    page = admin_client.get(LIST).content.decode()
    for choice in ("support", "sales", "accuracy", "thumbs", "Evaluator", "Reviewer"):
        assert choice in page  # the filter choices
    log = CallLog.objects.get(pk=support.call_log_id)
    assert f"/admin/advisors_app/calllog/{log.pk}/change/" in page and log.trace_id in page
    reply = ChatMessage.objects.get(pk=support.message_id)
    assert f"/admin/advisors_app/conversation/{reply.conversation_id}/change/" in page
    assert "Refunds &lt;b&gt;take&lt;/b&gt; 5 days." in page  # the excerpt, escaped
    assert "👎" in page and "0.25" in page and "alice" in page


def test_scores_are_read_only_but_deletable(admin_client: Client, votes: dict[str, Any]) -> None:
    score = votes["support"]
    page = admin_client.get(f"{LIST}{score.pk}/change/")
    assert page.status_code == 200 and "👎" in page.content.decode()
    assert admin_client.get(f"{LIST}add/").status_code == 403
    admin_client.post(f"{LIST}{score.pk}/delete/", {"post": "yes"})
    assert not Score.objects.filter(pk=score.pk).exists()
