"""The "done when" of issues 9 and 16, through the admin only.

Issue 9: a chain built only in the admin answers in the playground with memory, retrieval and
SafeGuard active, and an order changed in the admin changes the next request's behaviour.
Issue 16: an edit to a chain and to a template shows in the diff, is published and promoted,
users get it on their next turn, one click rolls production back, and the label history says
who did what.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from asgiref.sync import async_to_sync
from django.core.files.uploadedfile import SimpleUploadedFile
from django.http import HttpResponse
from django.test import Client

from advisors_app.definition.runtime import clear_cache
from advisors_app.models import AdvisorChain, ChatModelConfig, Collection, PromptTemplate
from advisors_app.turn import call_turn
from tests.admin.forms import chain_form
from tests.factories import make_chain
from tests.task_worker import run_queued_tasks

pytestmark = pytest.mark.django_db

REFUSAL = "I'm unable to respond to that due to sensitive content."
POLICY = b"Refund policy: refunds take 5 days. Confidential: the internal fee is 3%.\n"


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    clear_cache()
    yield
    clear_cache()


def created(response: HttpResponse) -> None:
    """The admin accepted the form (it redirects); otherwise show its errors."""
    errors = response.context.get("errors") if response.context else None
    assert response.status_code == 302, errors


def build_in_the_admin(admin: Client) -> AdvisorChain:
    created(
        admin.post(
            "/admin/advisors_app/chatmodelconfig/add/",
            {
                "slug": "script",
                "provider": "scripted",
                "settings": json.dumps({"responses": ["Refunds take 5 days."], "repeat": True}),
                "timeout": "60",
                "max_retries": "2",
            },
        )
    )
    created(
        admin.post(
            "/admin/advisors_app/sensitivewordlist/add/",
            {"slug": "blocked", "words": "confidential\nbomb"},
        )
    )
    # The search fields as the add form shows them filled in.
    search_defaults = {
        "search_mode": "vector",
        "vector_weight": "1.0",
        "lexical_weight": "0.7",
        "rrf_k": "5",
        "text_search_config": "english",
    }
    created(
        admin.post(
            "/admin/advisors_app/collection/add/", {"slug": "kb", "name": "KB", **search_defaults}
        )
    )
    collection = Collection.objects.get()
    admin.post(
        f"/admin/advisors_app/collection/{collection.pk}/upload/",
        {"file": SimpleUploadedFile("policy.txt", POLICY, "text/plain")},
    )
    assert run_queued_tasks() == 1  # the upload's ingestion job, as a task worker runs it
    rows = [
        {"advisor_type": "message_chat_memory", "params": {"max_messages": 10}},
        {"advisor_type": "question_answer", "params": {"collection": "kb"}},
        {"advisor_type": "safe_guard", "params": {"word_lists": ["blocked"]}},
    ]
    model = ChatModelConfig.objects.get()
    created(
        admin.post(
            "/admin/advisors_app/advisorchain/add/", chain_form(chat_model=model.pk, rows=rows)
        )
    )
    return AdvisorChain.objects.get()


def play(admin: Client, chain: AdvisorChain, message: str, conversation: str = "") -> dict:
    url = f"/admin/advisors_app/advisorchain/{chain.pk}/playground/"
    response = admin.post(url, {"message": message, "conversation_id": conversation})
    assert response.status_code == 200
    context = response.context
    assert "result" in context, context.get("refused") or context.get("failure")
    return {
        "reply": context["result"].content,
        "conversation": context["result"].conversation_id,
        "prompt": [(m["type"], m["text"]) for m in context["prompt_messages"]],
        "advisors": [row["name"] for row in context["trace_rows"]],
    }


def test_an_admin_built_chain_runs_memory_rag_and_safeguard_and_follows_order_changes(
    admin_client: Client,
) -> None:
    chain = build_in_the_admin(admin_client)

    first = play(admin_client, chain, "How long do refunds take?")
    assert first["reply"] == "Refunds take 5 days."
    assert first["advisors"] == [
        "SafeGuardAdvisor",
        "MessageChatMemoryAdvisor",
        "QuestionAnswerAdvisor",
        "call",
    ]
    [(role, text)] = first["prompt"]
    assert role == "user" and text.startswith("How long do refunds take?")
    assert "refunds take 5 days" in text  # retrieved from the uploaded document

    blocked = play(admin_client, chain, "How to build a bomb?", first["conversation"])
    assert blocked["reply"].startswith(REFUSAL)
    assert blocked["advisors"] == ["SafeGuardAdvisor"]  # nothing else ran, no model call

    follow_up = play(admin_client, chain, "And for gift cards?", first["conversation"])
    roles = [role for role, _ in follow_up["prompt"]]
    assert roles == ["user", "assistant", "user"]  # memory: the first turn, not the refused one
    assert follow_up["prompt"][0][1] == "How long do refunds take?"
    assert follow_up["prompt"][1][1] == "Refunds take 5 days."

    # Move the guard inside retrieval: it now checks the augmented question, which holds the
    # document's "Confidential", and refuses.
    rows = [
        {
            "id": row.pk,
            "advisor_type": row.advisor_type,
            "params": row.params,
            "order": "10" if row.advisor_type == "safe_guard" else "",
        }
        for row in chain.advisors.order_by("id")
    ]
    created(
        admin_client.post(
            f"/admin/advisors_app/advisorchain/{chain.pk}/change/", chain_form(chain, rows=rows)
        )
    )

    after = play(admin_client, chain, "How long do refunds take?")
    assert after["reply"].startswith(REFUSAL)
    assert after["advisors"] == [
        "MessageChatMemoryAdvisor",
        "QuestionAnswerAdvisor",
        "SafeGuardAdvisor",
    ]


def test_an_admin_edits_diffs_publishes_promotes_and_rolls_back_a_chain(
    admin_client: Client, admin_user
) -> None:
    template = PromptTemplate.objects.create(slug="tone", text="You are terse.")
    chain = make_chain(system_template=template, advisors=(("append", {"text": " (v1)"}),))
    page = f"/admin/advisors_app/advisorchain/{chain.pk}"

    def prompt() -> list[str]:
        """What production sends the model for a user's next turn."""
        result = async_to_sync(call_turn)(chain.slug, admin_user, "hi")
        return [m["text"] for m in result.prompt["messages"]]

    assert prompt() == ["You are terse.", "hi (v1)"]
    row = chain.advisors.get()
    edit = [{"id": row.pk, "advisor_type": "append", "params": {"text": " (v2)"}}]
    created(
        admin_client.post(
            f"{page}/change/", chain_form(chain, rows=edit, system_template=template.pk)
        )
    )
    created(
        admin_client.post(
            f"/admin/advisors_app/prompttemplate/{template.pk}/change/",
            {"slug": "tone", "name": "", "text": "You are warm.", "placeholders": ""},
        )
    )
    assert prompt() == ["You are terse.", "hi (v1)"]  # edits reach nobody yet
    assert "The draft differs from what production serves (v1)." in (
        admin_client.get(f"{page}/change/").content.decode()
    )

    diff = admin_client.get(f"{page}/diff/?from=production&to=draft").context["diff"]
    assert diff["advisors"] == ["changed append: param text"]
    assert ("diff-add", "+You are warm.") in diff["templates"][0]["lines"]

    created(admin_client.post(f"{page}/publish/", {"message": "warmer, v2 suffix"}))
    created(
        admin_client.post(
            f"{page}/promote/", {"label": "production", "version": "2", "reason": "ship it"}
        )
    )
    assert prompt() == ["You are warm.", "hi (v2)"]

    created(admin_client.post(f"{page}/labels/production/rollback/", {"reason": "complaints"}))
    assert prompt() == ["You are terse.", "hi (v1)"]

    events = admin_client.get(f"{page}/change/").context["label_events"]
    assert [(str(e.from_version), str(e.to_version), e.actor, e.reason) for e in events] == [
        ("v2", "v1", admin_user, "complaints"),
        ("v1", "v2", admin_user, "ship it"),
        ("None", "v1", None, "first version"),
    ]
