"""The notes demo: ``save_note`` / ``list_notes`` on the real database, and the ``notes`` chain.

The tools read the turn's user from the tool context (``PRINCIPAL``); these tests pass that
context directly. The pause and resume of a turn are the turn service's tests.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from advisors_app.core.attributes import PRINCIPAL
from advisors_app.core.messages import ToolResponse, ToolResponseMessage, UserMessage
from advisors_app.core.prompt import Prompt, ToolCallingChatOptions
from advisors_app.core.providers.registry import create_chat_model
from advisors_app.definition import check_draft
from advisors_app.definition.runtime import load_chain
from advisors_app.demo import loader
from advisors_app.demo.loader import ensure_demo_rows
from advisors_app.demo.models import MAX_NOTE_CHARS, DemoNote
from advisors_app.demo.tools import LISTED_NOTES, NoPrincipalError, list_notes, save_note
from advisors_app.models import AdvisorChain, ChatModelConfig


def arguments(text: str) -> str:
    return json.dumps({"text": text})


@pytest.fixture
def users(django_user_model: Any) -> tuple[Any, Any]:
    return (
        django_user_model.objects.create_user("ada", password="pw"),
        django_user_model.objects.create_user("bob", password="pw"),
    )


async def notes_of(user: Any) -> list[str]:
    return [n.text async for n in DemoNote.objects.filter(owner=user).order_by("pk")]


def test_save_note_declares_that_it_needs_approval_and_list_notes_does_not() -> None:
    assert save_note.requires_approval_for({"text": "x"}) is True
    assert list_notes.requires_approval_for({}) is False
    schema = save_note.definition.input_schema
    assert list(schema["properties"]) == ["text"] and schema["required"] == ["text"]
    assert list_notes.definition.input_schema["properties"] == {}
    assert "approves" in save_note.definition.description


@pytest.mark.django_db(transaction=True)
async def test_a_note_is_saved_for_the_principal_only(users: tuple[Any, Any]) -> None:
    ada, bob = users
    answer = await save_note.call(arguments("  buy milk "), {PRINCIPAL: ada})
    note = await DemoNote.objects.aget()
    assert answer == f"Saved note #{note.pk}: buy milk"
    assert note.owner_id == ada.pk and note.text == "buy milk"
    assert await notes_of(bob) == []

    await save_note.call(arguments("call mum"), {PRINCIPAL: bob})
    listed = await list_notes.call("{}", {PRINCIPAL: ada})
    assert listed.startswith("Your latest notes:\n") and f"#{note.pk} (" in listed
    assert "buy milk" in listed and "call mum" not in listed


@pytest.mark.django_db(transaction=True)
async def test_list_notes_gives_the_latest_ten_newest_first(users: tuple[Any, Any]) -> None:
    ada, _ = users
    assert await list_notes.call("", {PRINCIPAL: ada}) == "You have no notes yet."
    for n in range(LISTED_NOTES + 2):
        await save_note.call(arguments(f"note {n}"), {PRINCIPAL: ada})
    lines = (await list_notes.call("", {PRINCIPAL: ada})).splitlines()[1:]
    assert len(lines) == LISTED_NOTES == 10
    assert [line.rsplit(": ", 1)[1] for line in lines] == [
        f"note {n}" for n in range(LISTED_NOTES + 1, 1, -1)
    ]


@pytest.mark.parametrize("tool", [save_note, list_notes])
@pytest.mark.parametrize("context", [None, {}, {PRINCIPAL: None}])
@pytest.mark.django_db(transaction=True)
async def test_without_a_principal_the_tools_refuse(tool: Any, context: Any) -> None:
    args = arguments("x") if tool is save_note else "{}"
    with pytest.raises(NoPrincipalError, match="no user to act for"):
        await tool.call(args, context)
    assert await DemoNote.objects.acount() == 0


@pytest.mark.django_db(transaction=True)
async def test_an_anonymous_user_is_no_principal() -> None:
    from django.contrib.auth.models import AnonymousUser

    with pytest.raises(NoPrincipalError):
        await save_note.call(arguments("x"), {PRINCIPAL: AnonymousUser()})


@pytest.mark.django_db(transaction=True)
async def test_over_long_and_blank_notes_are_refused(users: tuple[Any, Any]) -> None:
    ada, _ = users
    with pytest.raises(ValueError, match=f"at most {MAX_NOTE_CHARS}"):
        await save_note.call(arguments("x" * (MAX_NOTE_CHARS + 1)), {PRINCIPAL: ada})
    with pytest.raises(ValueError, match="empty"):
        await save_note.call(arguments("   "), {PRINCIPAL: ada})
    assert await DemoNote.objects.acount() == 0
    longest = await save_note.call(arguments("y" * MAX_NOTE_CHARS), {PRINCIPAL: ada})
    assert longest.endswith("y" * MAX_NOTE_CHARS)


@pytest.mark.django_db
def test_load_demo_creates_the_notes_chain_once() -> None:
    first = loader.DemoReport()
    ensure_demo_rows(report=first)
    assert {"chat model notes-scripted", "advisor chain notes"} <= set(first.created)
    second = loader.DemoReport()
    ensure_demo_rows(report=second)
    assert second.created == [] and second.reset == []
    assert AdvisorChain.objects.filter(slug=loader.NOTES_CHAIN).count() == 1

    chain = AdvisorChain.objects.get(slug=loader.NOTES_CHAIN)
    assert chain.enabled and chain.chat_model.slug == loader.NOTES_MODEL
    assert chain.tools == ["save_note", "list_notes"]
    assert "Save a note: buy milk" in chain.description and "approve" in chain.description
    assert check_draft(chain).messages == ()
    assert chain.labels.get(name="production").version.snapshot_hash == (
        check_draft(chain).snapshot_hash
    )
    advisors = load_chain(loader.NOTES_CHAIN).advisors
    assert [a.name for a in advisors] == ["MessageChatMemoryAdvisor", "Tool Calling Advisor"]
    assert advisors[0].order < advisors[1].order  # memory wraps the tool loop


@pytest.mark.django_db
def test_an_edited_notes_model_is_kept_and_force_restores_it() -> None:
    ensure_demo_rows()
    row = ChatModelConfig.objects.get(slug=loader.NOTES_MODEL)
    row.settings = {"responses": ["mine"]}
    row.save()
    ensure_demo_rows()
    assert ChatModelConfig.objects.get(slug=loader.NOTES_MODEL).settings == {"responses": ["mine"]}
    ensure_demo_rows(force=True)
    restored = ChatModelConfig.objects.get(slug=loader.NOTES_MODEL)
    assert restored.settings == loader.NOTES_MODEL_SETTINGS


@pytest.mark.django_db
def test_the_notes_chain_is_on_the_chat_page(client: Any, django_user_model: Any) -> None:
    ensure_demo_rows()
    client.force_login(django_user_model.objects.create_user("ada", password="pw"))
    page = client.get("/chat/")
    assert page.status_code == 200
    slugs = [c["slug"] for c in page.context["chains"]]
    assert {loader.MAIN_CHAIN, loader.JSON_CHAIN, loader.NOTES_CHAIN} <= set(slugs)


OFFERED = ToolCallingChatOptions(tool_callbacks=(save_note, list_notes))


async def answer(model: Any, *messages: Any) -> Any:
    return (await model.call(Prompt(list(messages), OFFERED))).result.output


@pytest.mark.parametrize(
    ("message", "tool", "args"),
    [
        ("Save a note: buy milk", "save_note", {"text": "buy milk"}),
        ("please add a note - call mum\nat six", "save_note", {"text": "call mum\nat six"}),
        ("Save a note: make a list of gifts", "save_note", {"text": "make a list of gifts"}),
        ("List my notes", "list_notes", {}),
        ("what are my notes?", "list_notes", {}),
        ("Note that the car is in row 4", "save_note", {"text": "Note that the car is in row 4"}),
    ],
)
async def test_the_notes_model_calls_the_tool_the_message_asks_for(
    message: str, tool: str, args: dict[str, str]
) -> None:
    model = create_chat_model(
        {"provider": "scripted", **loader.NOTES_MODEL_SETTINGS}, name=loader.NOTES_MODEL
    )
    [call] = (await answer(model, UserMessage(message))).tool_calls
    assert (call.name, json.loads(call.arguments)) == (tool, args)


async def test_the_notes_model_answers_the_tool_result_and_otherwise_explains() -> None:
    model = create_chat_model({"provider": "scripted", **loader.NOTES_MODEL_SETTINGS})
    hello = await answer(model, UserMessage("Hello"))
    assert not hello.tool_calls and "Save a note: buy milk" in hello.text
    request = UserMessage("Save a note: buy milk")
    rejected = ToolResponseMessage(
        (
            ToolResponse(
                "call_1",
                "save_note",
                "The user rejected the call to tool 'save_note'; it was not executed.",
            ),
        )
    )
    reply = await answer(model, request, rejected)
    assert reply.text == (
        "The save_note tool answered: The user rejected the call to tool 'save_note'; "
        "it was not executed."
    )


@pytest.mark.django_db
def test_the_stored_notes_model_is_plain_json_and_builds_from_its_row() -> None:
    ensure_demo_rows()
    row = ChatModelConfig.objects.get(slug=loader.NOTES_MODEL)
    row.full_clean()
    config = row.to_config()
    assert json.loads(json.dumps(config)) == config
    model = create_chat_model(config, name=row.slug)
    reply = asyncio.run(answer(model, UserMessage("Save a note: buy milk")))
    assert reply.tool_calls[0].name == "save_note"
