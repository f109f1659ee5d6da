"""A long conversation on the embedded SmolLM2 (4,096 tokens) never overflows with session
memory (issue 20): summarized by the model itself, compacted by the queued task between turns
and inline when a turn would not fit; every provider call succeeds and the log is complete."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync

from advisors_app.models import CallLog, ChatMessage, ChatModelConfig, ConversationBoundary
from advisors_app.runtime import clear_cache
from advisors_app.services import call_turn
from tests.factories import make_chain
from tests.task_worker import run_queued_tasks

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

TURNS = 60
SESSION = {
    "trigger": {"kind": "tokens", "share": 0.35},
    "strategy": "summarize",
    "keep_last_turns": 2,
    "summary_max_tokens": 120,
    "prompt_headroom": 0.35,
}


@pytest.mark.timeout(1800)
def test_sixty_turns_on_the_embedded_model_never_exceed_its_context(
    django_user_model: Any,
) -> None:
    clear_cache()
    user = django_user_model.objects.create_user("alice", password="pw")
    model = ChatModelConfig.objects.create(
        slug="smol",
        provider="embedded",
        options={"max_tokens": 60, "temperature": 0.0},
        timeout=600,
    )
    make_chain("long", model=model, advisors=(("session_memory", SESSION),))
    conversation = None
    for n in range(TURNS):
        # ~150 tokens a message: the view passes the trigger every few turns.
        message = f"Note {n}: my favourite number today is {n * 7}. " + (
            "Please remember the details of this message, they matter for later. " * 10
        )
        outcome = async_to_sync(call_turn)("long", user, message, conversation_id=conversation)
        assert outcome.status == "ok", outcome
        conversation = outcome.conversation_id
        run_queued_tasks()  # a worker keeping up with the conversation
    logs = list(CallLog.objects.values_list("status", "usage"))
    assert len(logs) == TURNS and all(status == "ok" for status, _ in logs)
    assert max(usage["prompt_tokens"] + usage["completion_tokens"] for _, usage in logs) <= 4096
    assert ChatMessage.objects.count() == 2 * TURNS  # the log is complete
    assert ConversationBoundary.objects.count() >= 5
    assert ConversationBoundary.objects.exclude(summary="").exists()
