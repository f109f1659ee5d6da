"""Two daphne processes on the Redis layer: a socket on one resumes a turn running on the other
(issue 23), and sees each event once."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from django.test import Client

from advisors_app.models import ChatMessage, ChatModelConfig
from tests.factories import make_chain
from tests.live_server import LiveServer
from tests.test_consumers_redis import servers, socket  # noqa: F401 (fixture)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]

WORDS = [f"w{n} " for n in range(30)]


async def frame(ws: Any) -> dict[str, Any]:
    while True:
        received = json.loads(await asyncio.wait_for(ws.recv(), 10))
        if received["type"] != "conversation":
            return received


def test_a_socket_on_one_process_resumes_a_turn_running_on_the_other(
    servers: tuple[LiveServer, LiveServer],  # noqa: F811
    django_user_model: Any,
) -> None:
    first, second = servers
    alice = django_user_model.objects.create_user("alice", password="pw")
    model = ChatModelConfig.objects.create(
        slug="slow-words",
        provider="scripted",
        settings={"responses": [WORDS], "chunk_delay": 0.05},
    )
    chain = make_chain("slow", model=model, advisors=(("message_chat_memory", {}),))
    client = Client()
    client.force_login(alice)
    cookie = f"sessionid={client.cookies['sessionid'].value}"

    async def scenario() -> tuple[list[dict], list[dict], list[dict]]:
        on_b = await socket(second, chain.slug, cookie)
        await on_b.send(json.dumps({"type": "message", "text": "count"}))
        own = [await frame(on_b) for _ in range(4)]
        # A socket on the other process (the laptop reopened) resumes after the second event:
        # what it missed comes from the Redis stream, the rest live through the layer.
        on_a = await socket(first, chain.slug, cookie)
        await on_a.send(
            json.dumps(
                {
                    "type": "resume",
                    "conversation_id": own[0]["conversation_id"],
                    "last_event_id": own[1]["event_id"],
                }
            )
        )
        while own[-1]["type"] != "done":
            own.append(await frame(on_b))
        seen = []
        while not seen or seen[-1]["type"] != "done" or seen[-1].get("resumed_elsewhere"):
            seen.append(await frame(on_a))
        await on_a.close()
        await on_b.close()
        return own, [f for f in seen if f.get("resumed_elsewhere")], seen

    own, live_before, seen = asyncio.run(scenario())
    ids = [f["event_id"] for f in own]
    resumed = [f for f in seen if not f.get("resumed_elsewhere")]
    # Joined mid-turn: nothing flagged (it would start in the middle); each id once.
    assert len({f["event_id"] for f in seen}) == len(seen)
    assert live_before == []
    assert [f["event_id"] for f in resumed] == ids[2:]
    everything = own[:2] + seen
    assert "".join(f["text"] for f in everything if f["type"] == "delta") == "".join(WORDS)
    assert resumed[-1]["type"] == "done" and resumed[-1]["content"] == "".join(WORDS)
    stored = ChatMessage.objects.filter(conversation__conversation_id__startswith=f"{alice.pk}:")
    assert [m.text for m in stored.order_by("sequence")] == ["count", "".join(WORDS)]
