"""What the turn's tests share: a chain on a script the tests fill, and readers of what a turn
left (its transcript, its call logs, a stream's events)."""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async

from advisors_app.core import ScriptedChatModel
from advisors_app.definition.runtime import load_chain
from advisors_app.models import CallLog, ChatMessage
from tests.factories import make_chain, scripted_model
from tests.helpers import without_outcome

__all__ = ["alogs", "atranscript", "collect", "script", "script_chain", "transcript"]


def script_chain() -> Any:
    """A chain on a scripted model with an empty script (each test adds its answers with
    :func:`script`), an advisor that appends ``!`` to the message, and a system prompt."""
    return make_chain(
        model=scripted_model("script", responses=(), repeat=False),
        advisors=(("append", {"text": "!"}),),
        system_prompt="Be brief.",
    )


async def script(slug: str, *items: Any) -> ScriptedChatModel:
    """The cached chain's scripted model, with ``items`` appended to its script."""
    model = (await sync_to_async(load_chain)(slug)).client.chat_model
    model.add(*items)
    return model


def transcript(key: str) -> list[tuple[str, str, dict]]:
    """The stored conversation ``key``: ``(type, text, metadata without the outcome)``."""
    rows = ChatMessage.objects.filter(conversation__conversation_id=key).order_by("sequence")
    return [(r.message_type, r.text, without_outcome(r.metadata)) for r in rows]


alogs = sync_to_async(lambda: list(CallLog.objects.order_by("created").values()))
atranscript = sync_to_async(transcript)


async def collect(stream: Any) -> list[Any]:
    """Every event of a ``TurnStream``."""
    return [event async for event in stream]
