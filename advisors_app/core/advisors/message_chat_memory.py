"""``MessageChatMemoryAdvisor``: conversation history as prompt messages (Spring AI, seed §6.3).

The prompt becomes ``[system] + history + the request's own messages``: one system message at
index 0 (if any), the stored messages the request does not already hold, then every
non-system message of the request in its order. Turn storage, conversation ids and every
divergence from Spring AI are described in
:mod:`~advisors_app.core.advisors.base_chat_memory`.
"""

from __future__ import annotations

from ..requests import ChatClientRequest
from .base_chat_memory import BaseChatMemoryAdvisor, MemoryTurn

__all__ = ["MessageChatMemoryAdvisor"]


class MessageChatMemoryAdvisor(BaseChatMemoryAdvisor):
    """Prepends the conversation's stored messages to the prompt and stores each turn.

    ``MessageChatMemoryAdvisor(chat_memory, order=DEFAULT_CHAT_MEMORY_PRECEDENCE_ORDER, *,
    default_conversation_id=None)``; a ``MemoryAdvisor``. Raises ``ValueError`` for a missing
    ``chat_memory``, a missing or blank conversation id, and a request with no new user input.
    """

    __slots__ = ()

    def advise_request(self, request: ChatClientRequest, turn: MemoryTurn) -> ChatClientRequest:
        head = (turn.system,) if turn.system is not None else ()
        messages = (*head, *turn.history, *turn.conversation)
        return request.mutate(prompt=request.prompt.mutate(messages=messages))
