"""A plain sync Django view, as a project would write one: the engine's sync API with the
Django chat-memory repository and the pgvector store (docs/engine.md, "Sync and async")."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse

from advisors_app.core import ChatClient, ScriptedChatModel
from advisors_app.core.advisors.message_chat_memory import MessageChatMemoryAdvisor
from advisors_app.core.attributes import CONVERSATION_ID
from advisors_app.core.memory import MessageWindowChatMemory
from advisors_app.core.providers.registry import default_embedding_model
from advisors_app.models import Collection
from advisors_app.stores.memory import DjangoChatMemoryRepository
from advisors_app.stores.vectors import PgVectorStore

memory = MessageWindowChatMemory(DjangoChatMemoryRepository())
client = ChatClient(
    ScriptedChatModel(["From a sync view."]), default_advisors=[MessageChatMemoryAdvisor(memory)]
)


def ask(request: HttpRequest) -> JsonResponse:
    spec = client.prompt().user(request.GET["q"])
    answer = spec.advisor_params({CONVERSATION_ID: request.GET["c"]}).call().content()
    store = PgVectorStore(Collection.objects.get(slug="kb"), default_embedding_model())
    found = [d.text for d in store.similarity_search(request.GET["q"])]
    return JsonResponse({"answer": answer, "found": found})
