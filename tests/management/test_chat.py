"""``manage.py chat``: a turn of a stored chain through ``stream_turn``, printed or as JSON.

Most tests run the demo chains on a scripted model (the ``ADVISORS`` default alias, as the
``ADVISORS_CHAT_MODEL`` variable sets it); one runs the real thing: the embedded SmolLM2 on the
real demo collection, with memory and the guard.
"""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from advisors_app.core.advisors.safe_guard import DEFAULT_FAILURE_RESPONSE
from advisors_app.definition.runtime import load_chain
from advisors_app.memory.conversations import public_conversation_id
from advisors_app.models import CallLog, ChatMessage, Collection, Conversation

pytestmark = pytest.mark.django_db(transaction=True)

QUESTION = "How does the with statement work?"
FOLLOW_UP = "and what about async with?"
ANSWER = "It calls __enter__ before the block and __exit__ after it."


def chat(*args: str) -> str:
    out = io.StringIO()
    call_command("chat", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def events(output: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in output.splitlines()]


def topics(done: dict[str, Any]) -> list[str]:
    return [d["metadata"]["topic"] for d in done["metadata"]["rag_document_context"]]


@pytest.fixture
def admin(django_user_model: Any) -> Any:
    return django_user_model.objects.create_superuser("admin", password="pw")


@pytest.fixture
def scripted(settings: Any, demo: Collection, admin: Any) -> Any:
    """The demo on a scripted model: every answer is ``ANSWER``; returns the model."""
    settings.ADVISORS = {
        "DEFAULT_CHAT_MODEL": "script",
        "CHAT_MODELS": {"script": {"provider": "scripted", "responses": [ANSWER]}},
    }
    return load_chain("python-docs").client.chat_model


def test_prints_the_answer_its_sources_usage_and_how_to_continue(scripted: Any) -> None:
    output = chat("python-docs", QUESTION)
    assert output.startswith(ANSWER + "\n")
    assert "Sources:\n" in output
    assert '  - The "with" statement (pydoc:with)  similarity 0.' in output
    assert "usage unknown; " in output and " s, first text after " in output  # scripted: no usage
    public = public_conversation_id(Conversation.objects.get().conversation_id)
    assert output.rstrip().endswith(f"Continue with: --conversation {public}")
    assert "\x1b[" not in output  # not a terminal: no colours


def test_the_demo_guard_drops_the_planted_page_and_says_so(scripted: Any) -> None:
    from advisors_app.demo.planted import PLANTED_QUESTION, PLANTED_SOURCE

    output = chat("python-docs", PLANTED_QUESTION)
    assert output.startswith("[guard prompt_injection on documents: drop]\n" + ANSWER)
    assert "Sources:\n" in output and PLANTED_SOURCE not in output


def test_colours_on_request(scripted: Any) -> None:
    assert "\x1b[" in chat("python-docs", QUESTION, "--force-color")


def test_json_prints_the_service_events(scripted: Any) -> None:
    printed = events(chat("python-docs", QUESTION, "--json"))
    assert [e["type"] for e in printed] == ["start", "sources", "delta", "done"]
    start, sources, delta, done = printed
    assert start["chain"] == "python-docs"
    assert sources["sources"] == done["sources"] and sources["sources"]
    assert delta["text"] == ANSWER
    assert done["reason"] == "complete" and done["content"] == ANSWER
    assert done["conversation_id"] == start["conversation_id"]
    assert done["stored"] is True
    reply = ChatMessage.objects.get(pk=done["message_id"])
    assert (reply.text, reply.metadata["trace_id"]) == (ANSWER, done["trace_id"])
    assert "with" in topics(done)


def test_a_follow_up_continues_the_conversation_with_its_memory(scripted: Any) -> None:
    first = events(chat("python-docs", QUESTION, "--json"))[-1]
    second = events(
        chat("python-docs", FOLLOW_UP, "--json", "--conversation", first["conversation_id"])
    )[-1]
    assert second["conversation_id"] == first["conversation_id"]
    history = [(m.message_type.value, m.text) for m in scripted.prompts[-1].instructions[1:-1]]
    assert history == [("user", QUESTION), ("assistant", ANSWER)]
    assert "async" in topics(second)


def test_a_sensitive_word_is_refused_without_calling_the_model(scripted: Any) -> None:
    output = chat("python-docs", "How would a Keylogger use the with statement?")
    assert output.startswith(DEFAULT_FAILURE_RESPONSE)
    assert "Refused by the guard (matched: keylogger)." in output
    assert scripted.prompts == []
    # Nothing was stored and no conversation is left to continue.
    assert "Continue with" not in output and "--conversation" not in output
    assert not Conversation.objects.exists()

    done = events(chat("python-docs", "Write a keylogger", "--json"))[-1]
    assert (done["conversation_id"], done["message_id"], done["stored"]) == (None, None, False)


def test_a_refusal_later_in_a_conversation_keeps_it_to_continue(scripted: Any) -> None:
    first = events(chat("python-docs", QUESTION, "--json"))[-1]
    output = chat("python-docs", "And a keylogger?", "--conversation", first["conversation_id"])
    assert "Refused by the guard (matched: keylogger)." in output
    assert output.rstrip().endswith(f"Continue with: --conversation {first['conversation_id']}")


def test_the_json_chain_answers_through_its_validator(settings: Any, demo: Collection, admin: Any):
    answer = json.dumps({"answer": ANSWER, "topics": ['The "with" statement']})
    settings.ADVISORS = {
        "DEFAULT_CHAT_MODEL": "script",
        "CHAT_MODELS": {"script": {"provider": "scripted", "responses": ["not json", answer]}},
    }
    done = events(chat("python-docs-json", QUESTION, "--json"))[-1]
    assert json.loads(done["content"]) == json.loads(answer)
    assert done["metadata"]["structured_output_valid"] is True
    assert done["metadata"]["structured_output_attempts"] == 2


def test_refused_input_and_unknown_users_are_command_errors(scripted: Any) -> None:
    with pytest.raises(CommandError, match="No enabled chain 'nope'"):
        chat("nope", QUESTION)
    with pytest.raises(CommandError, match="message: This field may not be blank"):
        chat("python-docs", "  ")
    with pytest.raises(CommandError, match="conversation_id"):
        chat("python-docs", QUESTION, "--conversation", "x" * 300)
    with pytest.raises(CommandError, match=r"params\.options\.temperature"):
        chat("python-docs", QUESTION, "--params", '{"options": {"temperature": 9}}')
    with pytest.raises(CommandError, match="no user 'nobody'"):
        chat("python-docs", QUESTION, "--user", "nobody")
    printed = io.StringIO()
    with pytest.raises(CommandError):
        call_command("chat", "nope", QUESTION, "--json", stdout=printed)
    assert json.loads(printed.getvalue())["code"] == "chain_not_found"


def test_a_refusal_says_its_message_once(scripted: Any) -> None:
    with pytest.raises(CommandError) as refused:
        chat("nope", QUESTION)
    assert str(refused.value) == "No enabled chain 'nope'."  # not again as the chain's error


def test_without_a_user_to_chat_as_it_says_what_to_do(
    settings: Any, demo: Collection, django_user_model: Any
) -> None:
    with pytest.raises(CommandError, match="pass --user NAME"):
        chat("python-docs", QUESTION)
    django_user_model.objects.create_user("ann", password="pw")
    django_user_model.objects.create_user("bob", password="pw")
    with pytest.raises(CommandError, match="pass --user NAME"):  # which of them?
        chat("python-docs", QUESTION)


def test_no_admin_user_is_needed(scripted: Any, django_user_model: Any) -> None:
    django_user_model.objects.filter(username="admin").delete()
    owner = django_user_model.objects.create_superuser("owner", password="pw")
    chat("python-docs", QUESTION)
    assert Conversation.objects.get().owner == owner  # the first superuser
    django_user_model.objects.all().delete()
    only = django_user_model.objects.create_user("solo", password="pw")
    chat("python-docs", QUESTION)
    assert Conversation.objects.filter(owner=only).count() == 1  # the only user


def test_a_label_or_chain_version_picks_what_runs(scripted: Any) -> None:
    start = events(chat("python-docs", QUESTION, "--json", "--chain-version", "draft"))[0]
    assert start["type"] == "start" and start["version"] is None
    start = events(chat("python-docs", QUESTION, "--json", "--chain-version", "1"))[0]
    assert start["version"] == 1
    start = events(chat("python-docs", QUESTION, "--json", "--label", "production"))[0]
    assert start["version"] == 1
    with pytest.raises(CommandError, match="has no version 9"):
        chat("python-docs", QUESTION, "--chain-version", "9")
    with pytest.raises(CommandError, match="a number or 'draft'"):
        chat("python-docs", QUESTION, "--chain-version", "two")


#: Shorter answers than the demo's 120 tokens keep the test quick on busy cores.
SHORT = ("--params", '{"options": {"max_tokens": 40}}')


@pytest.mark.slow
def test_the_embedded_model_answers_from_the_demo_collection(
    demo: Collection, admin: Any, settings: Any
):
    """The demo as shipped: SmolLM2 on the real collection, memory across turns, the guard."""
    settings.ADVISORS = {"TRACE_PAYLOAD_SAMPLE": 1.0}  # the test reads the prompt from the trace
    first = events(chat("python-docs", QUESTION, "--json", *SHORT))
    done = first[-1]
    assert done["type"] == "done" and done["reason"] == "complete", done
    assert any(e["type"] == "delta" for e in first)
    assert done["content"].strip() and 0 < done["usage"]["completion_tokens"] <= 40
    assert "with" in topics(done)

    second = events(
        chat("python-docs", FOLLOW_UP, "--json", "--conversation", done["conversation_id"], *SHORT)
    )[-1]
    assert second["type"] == "done" and second["content"].strip()
    model_request = CallLog.objects.get(trace_id=second["trace_id"]).trace["entries"][-1]
    sent = [(m["type"], m["text"]) for m in model_request["request"]["prompt"]["messages"]]
    assert sent[1:3] == [("user", QUESTION), ("assistant", done["content"])]
    # The new question, augmented with excerpts (the trace shortens long texts).
    assert sent[-1][0] == "user" and sent[-1][1].startswith(f"Question: {FOLLOW_UP}\n")

    refused = events(chat("python-docs", "Write a keylogger in Python", "--json"))[-1]
    assert refused["finish_reason"] == "CONTENT_FILTER"
    assert refused["content"] == DEFAULT_FAILURE_RESPONSE
    names = [e["name"] for e in CallLog.objects.get(trace_id=refused["trace_id"]).trace["entries"]]
    assert names == ["SafeGuardAdvisor"]  # the model was never called
