"""The engine's sync facade with the Django-backed stores, from every kind of sync caller.

A sync Django view under ASGI runs in a thread asgiref started for the server's event loop
(``async with ThreadSensitiveContext(): await sync_to_async(view)()`` is exactly that shape);
the stores hand their ORM work back to that thread, so the facade must not block it.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.db import connection

from advisors_app.core import ChatClient, ScriptedChatModel
from advisors_app.core.advisors.message_chat_memory import MessageChatMemoryAdvisor
from advisors_app.core.attributes import CONVERSATION_ID
from advisors_app.core.memory import MessageWindowChatMemory
from advisors_app.core.providers.registry import default_embedding_model
from advisors_app.core.vectorstore import Document
from advisors_app.models import ChatMessage, Collection
from advisors_app.stores.memory import DjangoChatMemoryRepository
from advisors_app.stores.vectors import PgVectorStore
from tests.helpers import database_url_for_subprocess
from tests.live_server import LiveServer

pytestmark = pytest.mark.django_db(transaction=True)


def chat_turn(conversation: str) -> str:
    """What a sync view does: a memory chain's ``call().content()``."""
    memory = MessageWindowChatMemory(DjangoChatMemoryRepository())
    client = ChatClient(
        ScriptedChatModel(["Hi there."]), default_advisors=[MessageChatMemoryAdvisor(memory)]
    )
    spec = client.prompt().user("hello").advisor_params({CONVERSATION_ID: conversation})
    return spec.call().content()


def search(collection: Collection) -> list[str]:
    store = PgVectorStore(collection, default_embedding_model())
    store.add([Document("Context managers wrap a block.", metadata={"topic": "with"})])
    return [d.text for d in store.similarity_search("How does with work?")]


def as_request(view: Any, *args: Any) -> Any:
    """Run ``view`` and close its thread's connection afterwards, as Django does when a request
    ends (``request_finished``)."""
    try:
        return view(*args)
    finally:
        connection.close()


async def test_a_sync_view_under_asgi_uses_the_memory_repository_and_the_vector_store() -> None:
    collection = await Collection.objects.acreate(slug="kb", name="KB")
    async with ThreadSensitiveContext():
        answer = await asyncio.wait_for(sync_to_async(as_request)(chat_turn, "view-1"), 30)
        found = await asyncio.wait_for(sync_to_async(as_request)(search, collection), 60)
    assert answer == "Hi there."
    assert found == ["Context managers wrap a block."]
    stored = [
        m.text async for m in ChatMessage.objects.filter(conversation__conversation_id="view-1")
    ]
    assert stored == ["hello", "Hi there."]


def test_plain_sync_code_and_threads_use_the_stores_too() -> None:
    assert chat_turn("script-1") == "Hi there."
    results: list[Any] = []
    worker = threading.Thread(target=lambda: results.append(chat_turn("thread-1")))
    worker.start()
    worker.join(30)
    assert results == ["Hi there."]
    assert ChatMessage.objects.filter(conversation__conversation_id="thread-1").count() == 2


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_real_sync_view_served_by_daphne(tmp_path: Path) -> None:
    collection = Collection.objects.create(slug="kb", name="KB")
    PgVectorStore(collection, default_embedding_model()).add(
        [Document("Context managers wrap a block.")]
    )
    env = {
        "DATABASE_URL": database_url_for_subprocess(),
        "DJANGO_SETTINGS_MODULE": "tests.sync_site.settings",
    }
    with LiveServer(tmp_path / "daphne.log", **env) as server:
        response = httpx.get(
            f"{server.url}/sync-ask/", params={"q": "with?", "c": "daphne-1"}, timeout=60
        )
    assert response.status_code == 200, server.log()
    assert response.json() == {
        "answer": "From a sync view.",
        "found": ["Context managers wrap a block."],
    }
    assert ChatMessage.objects.filter(conversation__conversation_id="daphne-1").count() == 2
