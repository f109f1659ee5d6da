"""A server killed or stopped mid-turn (issue 36, finding 7), on real daphne processes.

* ``SIGKILL`` mid-turn, then a restart: the user's message is stored (it was written before the
  model ran), shown interrupted once the new process has recovered the dead one's turns, the
  conversation goes on, and the budget reservation the dead turn held is released;
* ``SIGTERM`` mid-turn: the SSE stream ends with an ``error`` event (code ``server_shutdown``)
  and the websocket gets an ``error`` frame, then a close with code 4503.

The model is scripted and slow (100 chunks, 0.1 s apart): each test waits for a streamed
``delta``, so the turn is surely running when the signal lands, and nothing waits for a clock.
"""

from __future__ import annotations

import asyncio
import json
import signal
import threading
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import httpx
import pytest
from django.test import Client
from rest_framework.authtoken.models import Token
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from advisors_app.costs.budgets import clear_budget_cache
from advisors_app.costs.pricing import clear_price_cache
from advisors_app.models import (
    Budget,
    BudgetCounter,
    BudgetReservation,
    CallLog,
    ChatMessage,
    ModelPrice,
)
from advisors_app.stores.memory import TURN_PENDING, DjangoChatMemoryRepository
from tests.factories import make_chain, scripted_model
from tests.helpers import database_url_for_subprocess
from tests.live_server import ROOT, LiveServer

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]


@pytest.fixture(autouse=True)
def fresh_caches() -> Iterator[None]:
    clear_price_cache()
    clear_budget_cache()
    yield
    clear_price_cache()
    clear_budget_cache()


@pytest.fixture
def alice(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("alice", password="pw")


def slow_chain() -> Any:
    """A memory chain on a slow, priced scripted model: 100 chunks 0.1 s apart when streamed
    (a call answers at once)."""
    model = scripted_model("slow-model", responses=[["x"] * 100], repeat=True)
    model.settings["chunk_delay"] = 0.1
    model.pricing = "manual"
    model.save()
    ModelPrice.objects.create(
        chat_model=model, input_per_million=Decimal(1), output_per_million=Decimal(2)
    )
    return make_chain(
        "slow", model=model, advisors=(("message_chat_memory", {"max_messages": 10}),)
    )


def stream_until_delta(url: str, token: str, body: dict[str, Any]) -> tuple[Any, list[str]]:
    """Start an SSE turn in a thread; return it once a ``delta`` came, with the lines read
    (the thread goes on reading until the stream ends)."""
    lines: list[str] = []
    streaming = threading.Event()

    def read() -> None:
        try:
            with httpx.stream(
                "POST", url, json=body, headers={"Authorization": f"Token {token}"}, timeout=60
            ) as response:
                for line in response.iter_lines():
                    lines.append(line)
                    if line.startswith("event: delta"):
                        streaming.set()
        except httpx.HTTPError:
            pass  # the server went away: the point of these tests
        finally:
            streaming.set()

    thread = threading.Thread(target=read)
    thread.start()
    assert streaming.wait(60)
    assert any(line.startswith("event: delta") for line in lines), lines
    return thread, lines


def events_of(lines: list[str]) -> list[dict[str, Any]]:
    return [json.loads(line[len("data: ") :]) for line in lines if line.startswith("data: ")]


def test_sigkill_mid_turn_then_restart(alice: Any) -> None:
    slow_chain()
    budget = Budget.objects.create(name="daily", period="day", limit=Decimal(10))
    token = Token.objects.create(user=alice).key
    headers = {"Authorization": f"Token {token}"}
    server = LiveServer(
        ROOT / "test-artifacts" / "crash" / "sigkill.log",
        DATABASE_URL=database_url_for_subprocess(),
    )
    server.start()
    try:
        thread, lines = stream_until_delta(
            f"{server.url}/api/chains/slow/stream/", token, {"message": "are you there?"}
        )
        [start] = [e for e in events_of(lines) if e["type"] == "start"]
        conversation = start["conversation_id"]
        key = f"{alice.pk}:{conversation}"
        # Running: the message is stored already, pending; the call is reserved on the budget.
        [pending] = ChatMessage.objects.filter(conversation__conversation_id=key)
        assert (pending.message_type, pending.text) == ("user", "are you there?")
        assert pending.metadata[TURN_PENDING].endswith(f":{server.process.pid}")  # type: ignore[union-attr]
        [held] = BudgetReservation.objects.all()
        assert held.turn == start["trace_id"]
        assert BudgetCounter.objects.get(budget=budget).reserved == held.amount > 0

        server.process.send_signal(signal.SIGKILL)  # type: ignore[union-attr]
        server.process.wait(30)  # type: ignore[union-attr]
        thread.join(30)
        assert not thread.is_alive()
        # Nothing of the turn was finished: the message is as it was, the reservation held.
        assert not CallLog.objects.exists()
        assert ChatMessage.objects.get(pk=pending.pk).metadata == pending.metadata
        assert BudgetCounter.objects.get(budget=budget).reserved > 0

        server.start()  # a new process on this host: it recovers the dead one's turns
        history = httpx.get(
            f"{server.url}/api/conversations/{conversation}/", headers=headers, timeout=30
        )
        assert history.status_code == 200, history.text
        [message] = history.json()["messages"]
        assert (message["type"], message["text"], message["state"]) == (
            "user",
            "are you there?",
            "interrupted",
        )
        assert TURN_PENDING not in message["metadata"]  # which process ran it is not shown
        assert message["metadata"]["finish_reason"] == "server_stopped"
        assert not BudgetReservation.objects.exists()
        assert BudgetCounter.objects.get(budget=budget).reserved == 0

        # The conversation goes on; the model never sees the unanswered message as history.
        answer = httpx.post(
            f"{server.url}/api/chains/slow/call/",
            json={"message": "hello again", "conversation_id": conversation},
            headers=headers,
            timeout=60,
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["stored"] is True
        rows = ChatMessage.objects.filter(conversation__conversation_id=key).order_by("sequence")
        assert [(r.message_type, r.text[:5]) for r in rows] == [
            ("user", "are y"),
            ("user", "hello"),
            ("assistant", "xxxxx"),
        ]
        remembered = DjangoChatMemoryRepository().find_by_conversation_id(key)
        assert [m.text[:5] for m in remembered] == ["hello", "xxxxx"]
        assert not BudgetReservation.objects.exists()
        assert BudgetCounter.objects.get(budget=budget).reserved == 0
    finally:
        server.stop()


def test_sigterm_ends_sse_and_websocket_streams_with_an_error_event(alice: Any) -> None:
    slow_chain()
    token = Token.objects.create(user=alice).key
    client = Client()
    client.force_login(alice)
    cookie = f"sessionid={client.cookies['sessionid'].value}"
    server = LiveServer(
        ROOT / "test-artifacts" / "crash" / "sigterm.log",
        DATABASE_URL=database_url_for_subprocess(),
    )
    server.start()
    frames: list[dict[str, Any]] = []
    closed: list[int | None] = []

    async def websocket_turn_then_sigterm() -> None:
        async with connect(
            f"{server.ws_url}/ws/chat/slow/",
            origin=server.url,  # type: ignore[arg-type]
            additional_headers={"Cookie": cookie},
            proxy=None,
        ) as ws:
            await ws.send(
                json.dumps({"type": "message", "text": "over ws", "conversation_id": "ws"})
            )
            while json.loads(await asyncio.wait_for(ws.recv(), 30))["type"] != "delta":
                pass
            server.process.send_signal(signal.SIGTERM)  # type: ignore[union-attr]
            try:
                while True:
                    frames.append(json.loads(await asyncio.wait_for(ws.recv(), 30)))
            except ConnectionClosed as gone:
                closed.append(gone.rcvd.code if gone.rcvd is not None else None)

    try:
        thread, lines = stream_until_delta(
            f"{server.url}/api/chains/slow/stream/",
            token,
            {"message": "over sse", "conversation_id": "sse"},
        )
        asyncio.run(websocket_turn_then_sigterm())
        thread.join(30)
        assert not thread.is_alive()
        server.process.wait(30)  # type: ignore[union-attr]
    finally:
        server.stop()
    sse_end = events_of(lines)[-1]
    assert (sse_end["type"], sse_end["code"]) == ("error", "server_shutdown"), lines[-6:]
    assert sse_end["conversation_id"] == "sse"
    # The turn's final frame (a conversation announcement may follow it).
    ws_end = [frame for frame in frames if frame["type"] in ("done", "error")][-1]
    assert (ws_end["type"], ws_end["code"]) == ("error", "server_shutdown"), frames[-3:]
    assert ws_end["conversation_id"] == "ws"
    assert closed == [4503]
    for public, asked in (("sse", "over sse"), ("ws", "over ws")):
        key = f"{alice.pk}:{public}"
        rows = ChatMessage.objects.filter(conversation__conversation_id=key).order_by("sequence")
        [(user, question), (kind, partial)] = [(r.message_type, r.text) for r in rows]
        assert (user, question, kind) == ("user", asked, "assistant")
        assert 1 <= len(partial) < 100
        assert CallLog.objects.get(conversation_id=key).status == "cancelled"
