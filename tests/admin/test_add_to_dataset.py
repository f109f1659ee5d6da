""" "Add to dataset" (issue 22, "Feedback"): call logs and rated replies become dataset items —
the user's message (and the earlier ones) as input, the reply or its correction as expected
output, the cited sources' metadata as expected documents — upserted by the turn's trace id."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.auth.models import Permission
from django.test import Client

from advisors_app.definition.runtime import clear_cache
from advisors_app.evaluation.curation import TurnOptions, add_replies, reply_of_call_log
from advisors_app.evaluation.feedback import parse_vote, record_vote
from advisors_app.ingestion.pipeline import ingest_text
from advisors_app.models import CallLog, ChatMessage, Collection, Dataset, DatasetItem, Score
from tests.api.conftest import client_for
from tests.factories import make_chain, scripted_model

pytestmark = pytest.mark.django_db

LOGS = "/admin/advisors_app/calllog/"
SCORES = "/admin/advisors_app/score/"


@pytest.fixture
def turns(django_user_model: Any) -> dict[str, Any]:
    """Alice's two turns with ``support`` in one conversation; she rates the second 👎."""
    clear_cache()
    alice = django_user_model.objects.create_user("alice", password="pw")
    make_chain("support", model=scripted_model("s", responses=("Sure.", "Refunds take 5 days.")))
    api = client_for(alice)
    first = api.post("/api/chains/support/call/", {"message": "I want a refund."}, format="json")
    conversation = first.json()["conversation_id"]
    second = api.post(
        "/api/chains/support/call/",
        {"message": "How long do refunds take?", "conversation_id": conversation},
        format="json",
    ).json()
    reply = ChatMessage.objects.get(pk=second["message_id"])
    vote, _ = record_vote(alice, parse_vote({"value": "down"}, message_id=reply.pk))
    clear_cache()
    return {
        "alice": alice,
        "reply": reply,
        "log": CallLog.objects.get(trace_id=second["trace_id"]),
        "vote": vote,
    }


def act(client: Client, url: str, rows: list[Any], **form: Any) -> Any:
    """The "Add to dataset" action on ``rows``: its page (no ``form``) or its submission."""
    data: dict[str, Any] = {"action": "add_to_dataset", ACTION_CHECKBOX_NAME: [r.pk for r in rows]}
    if "select_across" in form:
        data["select_across"] = form.pop("select_across")
    if form:
        data |= {"post": "yes", **form}
    return client.post(url, data)


def actions(client: Client, url: str) -> list[str]:
    form = client.get(url).context["action_form"]
    return [] if form is None else [name for name, _ in form.fields["action"].choices]


def items(slug: str = "feedback") -> list[DatasetItem]:
    return list(DatasetItem.objects.filter(dataset__slug=slug).order_by("valid_from", "pk"))


def test_a_call_log_becomes_an_item(admin_client: Client, turns: dict[str, Any]) -> None:
    log, reply = turns["log"], turns["reply"]
    assert reply_of_call_log(log) == reply
    page = act(admin_client, LOGS, [log])
    assert page.status_code == 200
    text = page.content.decode()
    assert "How long do refunds take?" in text and "Refunds take 5 days." in text
    assert "correction" in page.context["form"].fields  # one turn: a correction may be typed

    response = act(admin_client, LOGS, [log], new_dataset="feedback", history="on", tags="a, b")
    assert response.status_code == 302
    (item,) = items()
    assert item.key == f"trace-{log.trace_id}"
    assert item.input == {
        "message": "How long do refunds take?",
        "history": [
            {"role": "user", "content": "I want a refund."},
            {"role": "assistant", "content": "Sure."},
        ],
    }
    assert item.expected == {"output": "Refunds take 5 days."}  # no sources: no documents
    assert item.tags == ["a", "b"]

    # Again, unchanged (from its call log or its score): no new version.
    dataset = Dataset.objects.get(slug="feedback")
    same = {"dataset": dataset.pk, "history": "on", "tags": "a, b"}
    act(admin_client, LOGS, [log], **same)
    act(admin_client, SCORES, [turns["vote"]], **same)
    assert len(items()) == 1

    # Without the history it changed: a new version, the old one closed.
    act(admin_client, LOGS, [log], dataset=dataset.pk, tags="a, b")
    old, new = items()
    assert old.valid_to == new.valid_from and new.valid_to is None
    assert new.key == old.key and "history" not in new.input


def test_a_correction_becomes_the_expected_output(
    admin_client: Client, admin_user: Any, turns: dict[str, Any]
) -> None:
    reply, alice = turns["reply"], turns["alice"]
    # The user's correction counts, a reviewer's wins over it.
    record_vote(
        alice,
        parse_vote({"key": "correction", "value": True, "comment": "Mine."}, message_id=reply.pk),
    )
    act(admin_client, SCORES, [turns["vote"]], new_dataset="feedback")
    assert items()[-1].expected == {"output": "Mine."}
    admin_client.post(
        f"/admin/advisors_app/score/rate/{reply.pk}/",
        {"key": "thumbs", "value": "down", "correction": "Refunds take 10 days."},
    )
    reviewer_scores = Score.objects.filter(source="reviewer", message=reply)
    assert reviewer_scores.count() == 2  # the 👎 and the correction
    act(admin_client, SCORES, list(reviewer_scores), new_dataset="feedback")
    assert items()[-1].expected == {"output": "Refunds take 10 days."}
    # A correction typed on the action's page wins; it needs a single turn.
    act(admin_client, LOGS, [turns["log"]], new_dataset="feedback", correction="Ten days.")
    assert items()[-1].expected == {"output": "Ten days."}
    assert [i.valid_to is None for i in items()] == [False, False, True]
    with pytest.raises(ValueError, match="one turn"):
        add_replies(items()[0].dataset, [reply, reply], TurnOptions(correction="x"))


def test_the_form_and_the_skipped_turns(admin_client: Client, turns: dict[str, Any]) -> None:
    log = turns["log"]
    first = CallLog.objects.exclude(pk=log.pk).get()
    page = act(admin_client, LOGS, [first, log])
    assert "correction" not in page.context["form"].fields  # two turns
    response = act(admin_client, LOGS, [first, log], history="on")
    assert response.status_code == 200
    assert "Choose a dataset or give a new one" in response.content.decode()
    # A turn whose conversation is gone is skipped, named; the other is added.
    first_reply = reply_of_call_log(first)
    assert first_reply is not None
    ChatMessage.objects.filter(pk=first_reply.pk).delete()
    response = act(admin_client, LOGS, [first, log], new_dataset="feedback")
    shown = [str(m) for m in response.wsgi_request._messages]
    assert shown[0] == "Dataset feedback: 1 added, 0 changed, 0 unchanged, 0 removed, 1 skipped."
    assert shown[1].startswith(f"Skipped call log {first.trace_id}: no stored reply")
    assert len(items()) == 1


def test_adding_needs_add_datasetitem(django_user_model: Any, turns: dict[str, Any]) -> None:
    staff = django_user_model.objects.create_user("staff", password="pw", is_staff=True)
    staff.user_permissions.add(
        *Permission.objects.filter(codename__in=["view_calllog", "view_score", "add_score"])
    )
    client = Client()
    client.force_login(staff)
    for url, row in ((LOGS, turns["log"]), (SCORES, turns["vote"])):
        assert "add_to_dataset" not in actions(client, url)
        act(client, url, [row], new_dataset="feedback")
    assert not Dataset.objects.filter(slug="feedback").exists() and items() == []

    staff.user_permissions.add(Permission.objects.get(codename="add_datasetitem"))
    client.force_login(staff)
    assert "add_to_dataset" in actions(client, LOGS)
    assert "add_to_dataset" in actions(client, SCORES)
    act(client, LOGS, [turns["log"]], new_dataset="feedback")
    assert len(items()) == 1


def test_cited_sources_become_expected_documents(
    admin_client: Client, django_user_model: Any
) -> None:
    clear_cache()
    collection = Collection.objects.create(slug="kb", name="KB")
    ingest_text(collection, "refunds.md", "Refunds take 5 days.", metadata={"topic": "refunds"})
    ingest_text(collection, "parcels.md", "Parcels arrive in a week.", metadata={"topic": "ship"})
    make_chain(
        "rag",
        model=scripted_model("rag-model", responses=("Five days.",)),
        advisors=(("question_answer", {"collection": "kb", "top_k": 1}),),
    )
    bob = django_user_model.objects.create_user("bob")
    body = (
        client_for(bob)
        .post("/api/chains/rag/call/", {"message": "How long do refunds take?"}, format="json")
        .json()
    )
    clear_cache()
    log = CallLog.objects.get(trace_id=body["trace_id"])
    act(admin_client, LOGS, [log], new_dataset="feedback", documents_key="topic")
    assert items()[-1].expected == {"output": "Five days.", "documents": {"topic": ["refunds"]}}
    # The source's own name needs no document row.
    act(admin_client, LOGS, [log], new_dataset="feedback", documents_key="source")
    assert items()[-1].expected["documents"] == {"source": ["refunds.md"]}
    # A key no cited document has: no expected documents.
    act(admin_client, LOGS, [log], new_dataset="feedback", documents_key="lang")
    assert items()[-1].expected == {"output": "Five days."}


def test_select_across_every_page(admin_client: Client, turns: dict[str, Any]) -> None:
    page = act(admin_client, LOGS, [turns["log"]], select_across="1")
    assert page.status_code == 200 and len(page.context["turns"]) == 2
    assert 'name="select_across" value="1"' in page.content.decode()
    act(admin_client, LOGS, [turns["log"]], select_across="1", new_dataset="feedback")
    assert sorted(i.message for i in items()) == ["How long do refunds take?", "I want a refund."]
