"""Asking the chat model on behalf of a RAG module (transformers and expanders)."""

from __future__ import annotations

from typing import Any

from ..client import ChatClient
from ..exceptions import AdvisorStateError
from ..prompt import ChatOptions

__all__ = ["as_chat_client", "ask"]


def as_chat_client(client_or_model: Any, owner: str) -> ChatClient:
    """A ``ChatClient`` from a client or a bare chat model, for the RAG module ``owner``.

    Raises ``AdvisorStateError("chatClientBuilder cannot be null")`` for ``None`` (Spring's
    builder message) and ``ValueError`` naming ``owner`` for anything else that is not a model.
    """
    if client_or_model is None:
        raise AdvisorStateError("chatClientBuilder cannot be null")
    if isinstance(client_or_model, ChatClient):
        return client_or_model
    if hasattr(client_or_model, "call") and hasattr(client_or_model, "stream"):
        return ChatClient(client_or_model)
    raise ValueError(f"{owner} needs a ChatClient or a ChatModel, got {client_or_model!r}")


async def ask(client: ChatClient, text: str, options: ChatOptions | None) -> str | None:
    """The model's answer to ``text`` sent as the user message, stripped; ``None`` if blank."""
    spec = client.prompt().user(text)
    if options is not None:
        spec = spec.options(options)
    answer = await (await spec.acall()).acontent()
    if answer is None or not answer.strip():
        return None
    return answer.strip()
