"""The user's message stored before the model runs, and the recovery of turns whose process died
(issue 36, finding 7): in one process, with the process's death played by rows naming a pid that
no longer runs. The real processes (``SIGKILL``, ``SIGTERM``) are in ``test_turn_crash.py``."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from io import StringIO
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib import admin
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from advisors_app.admin.logs import ChatMessageInline
from advisors_app.core import ProviderUnavailableError
from advisors_app.core.messages import AssistantMessage, UserMessage
from advisors_app.costs.budgets import applicable_budgets, clear_budget_cache
from advisors_app.costs.reservations import Reservation, reserve, settle
from advisors_app.definition.runtime import clear_cache
from advisors_app.memory.pending import message_state
from advisors_app.models import (
    Budget,
    BudgetCounter,
    BudgetReservation,
    ChatMessage,
    Conversation,
    ModelPrice,
)
from advisors_app.stores.memory import TURN_PENDING, DjangoChatMemoryRepository
from advisors_app.stores.sessions import DjangoSessionRepository
from advisors_app.turn import call_turn, stream_turn
from advisors_app.turn.recovery import recover_turns, this_process
from tests.factories import make_chain, scripted_model
from tests.turn_helpers import collect, script

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    clear_cache()
    clear_budget_cache()
    yield
    clear_cache()
    clear_budget_cache()


@pytest.fixture
def user(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("alice", password="pw")


@pytest.fixture
def chain() -> Any:
    return make_chain(
        "memo",
        model=scripted_model("memo-model", responses=(), repeat=False),
        advisors=(("message_chat_memory", {"max_messages": 10}),),
    )


def rows_of(key: str) -> list[tuple[int, str, str, dict[str, Any]]]:
    rows = ChatMessage.objects.filter(conversation__conversation_id=key).order_by("sequence")
    return [(r.sequence, r.message_type, r.text, r.metadata) for r in rows]


def a_dead_pid() -> int:
    """The pid of a process that ran here and has ended."""
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


@pytest.mark.parametrize("mode", ["call", "stream"])
async def test_the_message_is_stored_pending_while_the_model_runs(
    chain: Any, user: Any, mode: str
) -> None:
    seen: list[list[tuple[int, str, str, dict[str, Any]]]] = []
    prompts: list[list[str]] = []

    def answering(text: str) -> Any:
        async def answer(prompt: Any) -> Any:
            key = (await Conversation.objects.aget()).conversation_id
            seen.append(await sync_to_async(rows_of)(key))
            prompts.append([m.text for m in prompt.instructions])
            return [text] if mode == "stream" else text

        return answer

    await script(chain.slug, answering("one"), answering("two"))

    async def turn(message: str, conversation_id: str | None = None) -> str | None:
        if mode == "call":
            return (await call_turn(chain.slug, user, message, conversation_id)).conversation_id
        events = await collect(await stream_turn(chain.slug, user, message, conversation_id))
        return events[-1].conversation_id

    conversation = await turn("first")
    await turn("second", conversation)
    pending = {TURN_PENDING: this_process()}
    # While the model ran, the message was stored: first in the conversation's own INSERT,
    # then after the first turn.
    assert seen[0] == [(1, "user", "first", pending)]
    assert [row[:3] for row in seen[1]] == [
        (1, "user", "first"),
        (2, "assistant", "one"),
        (3, "user", "second"),
    ]
    assert seen[1][2][3] == pending
    # The model saw the pending message once: as the turn's message, never as history.
    assert prompts[1].count("second") == 1
    # The finish replaced it at its own number: no gap, no flag left.
    key = f"{user.pk}:{conversation}"
    rows = await sync_to_async(rows_of)(key)
    assert [row[:3] for row in rows] == [
        (1, "user", "first"),
        (2, "assistant", "one"),
        (3, "user", "second"),
        (4, "assistant", "two"),
    ]
    assert not [row for row in rows if TURN_PENDING in row[3]]
    assert (await Conversation.objects.aget()).last_sequence == 4


@pytest.mark.parametrize("mode", ["call", "stream"])
async def test_a_failed_turn_stores_nothing_as_before(chain: Any, user: Any, mode: str) -> None:
    await script(chain.slug, "one", ProviderUnavailableError("down", status=503))
    first = await call_turn(chain.slug, user, "first")
    if mode == "call":
        with pytest.raises(ProviderUnavailableError):
            await call_turn(chain.slug, user, "second", first.conversation_id)
    else:
        await collect(await stream_turn(chain.slug, user, "second", first.conversation_id))
    rows = await sync_to_async(rows_of)(f"{user.pk}:{first.conversation_id}")
    assert [row[1:3] for row in rows] == [("user", "first"), ("assistant", "one")]


def test_the_model_never_sees_a_pending_message(user: Any) -> None:
    repository = DjangoChatMemoryRepository()
    key = f"{user.pk}:c"
    Conversation.objects.create(conversation_id=key, owner=user)
    repository.append(key, [UserMessage("hello"), AssistantMessage("hi")])
    repository.write_pending(key, "lost", "elsewhere:1")
    assert [m.text for m in repository.find_by_conversation_id(key)] == ["hello", "hi"]
    assert [m.text for m in repository.find_last(key, 10)] == ["hello", "hi"]
    conversation = Conversation.objects.get()
    ahead = repository.read_window(conversation.pk, conversation.last_sequence, 10)
    assert [m.text for m in ahead.tail] == ["hello", "hi"]
    view = DjangoSessionRepository().load_view(key)
    assert [m.text for m in view.messages] == ["hello", "hi"]


def test_readers_show_a_pending_message_then_interrupted(user: Any) -> None:
    key = f"{user.pk}:c"
    Conversation.objects.create(conversation_id=key, owner=user, title="c")
    pk = DjangoChatMemoryRepository.write_pending(key, "are you there?", "elsewhere:1")
    client = Client()
    client.force_login(user)

    def api_message() -> dict[str, Any]:
        [message] = client.get("/api/conversations/c/").json()["messages"]
        return message

    message = api_message()
    assert (message["text"], message["state"], message["metadata"]) == (
        "are you there?",
        "pending",
        {},  # which process runs the turn is not the user's business
    )
    page = client.get("/chat/c/c/").content.decode()
    assert "Waiting for the reply" in page
    inline = ChatMessageInline(Conversation, admin.site)
    assert inline.flags(ChatMessage.objects.get(pk=pk)) == "pending (its turn is running)"

    # Older than ADVISORS["PENDING_TURN_SECONDS"]: its turn is taken as gone.
    stale = timezone.now() - timedelta(hours=1)
    ChatMessage.objects.filter(pk=pk).update(created_at=stale)
    assert api_message()["state"] == "interrupted"
    page = client.get("/chat/c/c/").content.decode()
    assert "Not answered: the server stopped before the reply." in page
    assert inline.flags(ChatMessage.objects.get(pk=pk)) == "interrupted (server_stopped)"
    assert message_state({"interrupted": True}, None) == "interrupted"  # a reply cut short
    assert message_state({}, stale) is None


def test_recovery_marks_a_dead_turns_message_and_releases_its_reservation(user: Any) -> None:
    budget = Budget.objects.create(name="daily", period="day", limit=Decimal(1))
    [applicable] = applicable_budgets(user, None, lambda: None)
    host = socket.gethostname()
    dead = f"{host}:{a_dead_pid()}"
    dead_turn = Reservation(turn="dead-turn", owner=dead)
    live_turn = Reservation(turn="live-turn", owner=this_process())
    stale_turn = Reservation(turn="stale-turn", owner="another-host:1")
    reserve([applicable], {"USD": Decimal("0.5")}, dead_turn)
    reserve([applicable], {"USD": Decimal("0.25")}, live_turn)
    reserve([applicable], {"USD": Decimal("0.125")}, stale_turn)
    BudgetReservation.objects.filter(turn="stale-turn").update(
        updated_at=timezone.now() - timedelta(hours=1)
    )
    key = f"{user.pk}:c"
    Conversation.objects.create(conversation_id=key, owner=user)
    lost = DjangoChatMemoryRepository.write_pending(key, "lost", dead)
    running = DjangoChatMemoryRepository.write_pending(key, "running", this_process())
    elsewhere = DjangoChatMemoryRepository.write_pending(key, "elsewhere", "another-host:1")
    assert BudgetCounter.objects.get().reserved == Decimal("0.875")

    recovery = recover_turns()

    assert (recovery.messages, recovery.reservations) == (1, 2)
    assert ChatMessage.objects.get(pk=lost).metadata == {
        TURN_PENDING: dead,
        "interrupted": True,
        "finish_reason": "server_stopped",
    }
    # A live turn of this process, and one of another host not yet stale, are left alone.
    assert ChatMessage.objects.get(pk=running).metadata == {TURN_PENDING: this_process()}
    assert ChatMessage.objects.get(pk=elsewhere).metadata == {TURN_PENDING: "another-host:1"}
    assert list(BudgetReservation.objects.values_list("turn", flat=True)) == ["live-turn"]
    assert BudgetCounter.objects.get().reserved == Decimal("0.25")
    # A turn taken for gone that settles after all releases nothing twice.
    settle([applicable], dead_turn)
    assert BudgetCounter.objects.get().reserved == Decimal("0.25")
    settle([applicable], live_turn)
    assert BudgetCounter.objects.get().reserved == 0
    assert not BudgetReservation.objects.exists()
    assert (recover_turns().messages, recover_turns().reservations) == (0, 0)
    assert budget.pk == applicable.id


async def test_a_turn_releases_its_reservation_and_leaves_no_row(user: Any) -> None:
    model = await sync_to_async(scripted_model)("priced", responses=("Fine.",))
    model.pricing = "manual"
    await model.asave()
    await ModelPrice.objects.acreate(
        chat_model=model, input_per_million=Decimal(1), output_per_million=Decimal(2)
    )
    await sync_to_async(make_chain)("priced", model=model)
    await Budget.objects.acreate(name="daily", period="day", limit=Decimal(1))
    outcome = await call_turn("priced", user, "hello")
    assert outcome.stored
    assert not await BudgetReservation.objects.aexists()
    counter = await BudgetCounter.objects.aget()
    assert counter.reserved == 0 and counter.spent > 0


def test_turn_recover_reports_what_it_did(user: Any) -> None:
    key = f"{user.pk}:c"
    Conversation.objects.create(conversation_id=key, owner=user)
    DjangoChatMemoryRepository.write_pending(key, "lost", f"{socket.gethostname()}:{a_dead_pid()}")
    out = StringIO()
    call_command("turn_recover", stdout=out)
    assert out.getvalue().strip() == (
        "1 pending message(s) marked interrupted, 0 budget reservation(s) released"
    )
