"""The "done when" of issue 22, through the admin: an admin rates answers, turns rated answers
into a dataset, runs it against staging and production, sees what regressed, and promotion to
production is blocked until staging is no worse."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.test import Client

from advisors_app.definition import move_label, publish
from advisors_app.definition.runtime import clear_cache
from advisors_app.evaluation.feedback import parse_vote, record_vote
from advisors_app.models import ChatMessage, Dataset, EvalRun, Score
from tests.api.conftest import client_for
from tests.eval_fixtures import make_versions
from tests.factories import scripted_model
from tests.task_worker import run_queued_tasks

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_chains() -> Any:
    clear_cache()
    yield
    clear_cache()


def ask(user: Any, message: str) -> ChatMessage:
    """``user`` asks the ``support`` chain (production) in a new conversation."""
    body = (
        client_for(user)
        .post("/api/chains/support/call/", {"message": message}, format="json")
        .json()
    )
    return ChatMessage.objects.get(pk=body["message_id"])


def run_both(admin: Client, dataset: Dataset) -> tuple[EvalRun, EvalRun]:
    """Production's and staging's runs on ``dataset``, started on its Run evaluation page."""
    for target in ("production", "staging"):
        response = admin.post(
            f"/admin/advisors_app/dataset/{dataset.pk}/run/",
            {"chain": "support", "target": target, "evaluators": ""},
        )
        assert response.status_code == 302
    assert run_queued_tasks() == 2
    baseline, candidate = EvalRun.objects.order_by("-pk")[:2][::-1]
    assert (baseline.status, candidate.status) == ("done", "done")
    return baseline, candidate


def test_rate_curate_run_compare_and_gate(admin_client: Client, django_user_model: Any) -> None:
    # Production (v1) answers "Refunds take 5 days."; staging (v2) "Refunds take 10 days, by
    # bank transfer.".
    chain = make_versions()
    alice = django_user_model.objects.create_user("alice")
    bob = django_user_model.objects.create_user("bob")
    days = ask(alice, "How long do refunds take?")
    paid = ask(bob, "How are refunds paid?")
    record_vote(alice, parse_vote({"value": "up"}, message_id=days.pk))
    record_vote(bob, parse_vote({"value": "down", "reason": "wrong"}, message_id=paid.pk))

    # An admin rates the answers from the transcript, correcting the wrong one.
    transcript = admin_client.get(
        f"/admin/advisors_app/conversation/{paid.conversation_id}/change/"
    ).content.decode()
    rate = f"/admin/advisors_app/score/rate/{paid.pk}/"
    assert rate in transcript
    response = admin_client.post(
        rate,
        {"key": "thumbs", "value": "down", "reason": "wrong", "correction": "By bank transfer."},
    )
    assert response.status_code == 302
    admin_client.post(f"/admin/advisors_app/score/rate/{days.pk}/", {"value": "up"})
    rated = Score.objects.filter(source="reviewer", key="thumbs")
    assert rated.count() == 2

    # ... turns the rated answers into a dataset ...
    response = admin_client.post(
        "/admin/advisors_app/score/",
        {
            "action": "add_to_dataset",
            ACTION_CHECKBOX_NAME: [score.pk for score in rated],
            "post": "yes",
            "new_dataset": "rated",
            "documents_key": "topic",
        },
    )
    assert response.status_code == 302
    dataset = Dataset.objects.get(slug="rated")
    expected = {i.message: i.expected for i in dataset.current_items()}
    assert expected == {
        "How long do refunds take?": {"output": "Refunds take 5 days."},
        "How are refunds paid?": {"output": "By bank transfer."},
    }

    # ... gates production on it ...
    response = admin_client.post(
        "/admin/advisors_app/promotiongate/add/",
        {
            "chain": chain.pk,
            "label": "production",
            "dataset": dataset.pk,
            "evaluators": "",
            "max_regressions": "0",
            "min_delta": "",
            "enabled": "on",
        },
    )
    assert response.status_code == 302

    # ... runs it against staging and production and sees what regressed ...
    baseline, candidate = run_both(admin_client, dataset)
    compare = admin_client.get(
        f"/admin/advisors_app/evalrun/{baseline.pk}/compare/{candidate.pk}/"
    ).content.decode()
    assert "1 regressed" in compare and "1 improved" in compare
    keys = {i.message: i.key for i in dataset.current_items()}
    days_key, paid_key = keys["How long do refunds take?"], keys["How are refunds paid?"]
    assert compare.index(f">{days_key}<") < compare.index(f">{paid_key}<")  # regressions first

    # ... and promotion to production is blocked until staging is no worse.
    promote = f"/admin/advisors_app/advisorchain/{chain.pk}/promote/"
    page = admin_client.post(promote, {"label": "production", "version": 2, "reason": "ship"})
    assert page.status_code == 200
    assert f"1 item(s) regressed ({days_key})" in page.content.decode()
    assert chain.labels.get(name="production").version.number == 1

    chain.chat_model = scripted_model(
        "v3-model", responses=("Refunds take 5 days. Paid by bank transfer.",)
    )
    chain.save()
    fixed, _ = publish(chain, message="v3: days and payment")
    move_label(chain, "staging", fixed)
    clear_cache()
    run_both(admin_client, dataset)
    response = admin_client.post(promote, {"label": "production", "version": 3, "reason": "ok"})
    assert response.status_code == 302, response.content.decode()[:2000]
    assert chain.labels.get(name="production").version.number == 3
