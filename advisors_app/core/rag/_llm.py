"""Asking the chat model on behalf of a RAG module (transformers and expanders).

A query's call is one of the turn's model calls: the turn's model-call meter (in the query's
context, :data:`~advisors_app.core.metering.MODEL_CALL_METER`) admits and records it as the
model advisors' calls are — priced, held to the budgets, in the turn's call log (issue 36).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..client import ChatClient
from ..exceptions import AdvisorStateError
from ..metering import MODEL_CALL_METER
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


async def ask(
    client: ChatClient,
    text: str,
    options: ChatOptions | None,
    context: Mapping[str, Any] | None = None,
) -> str | None:
    """The model's answer to ``text`` sent as the user message, stripped; ``None`` if blank.
    ``context``: the query's, whose model-call meter (if any) meters the call."""
    spec = client.prompt().user(text)
    if options is not None:
        spec = spec.options(options)
    meter = (context or {}).get(MODEL_CALL_METER)
    if meter is not None:
        spec = spec.advisor_param(MODEL_CALL_METER, meter)
    answer = await (await spec.acall()).acontent()
    if answer is None or not answer.strip():
        return None
    return answer.strip()
