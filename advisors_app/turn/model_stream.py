"""What a stream tells of the model's own stream in a chain with a tool loop: ``tool_call_delta``
events (a tool call's arguments as the model streams them) and ``reasoning`` events.

The tool loop holds a round's chunks back until it knows whether the round answers or calls
tools (and drops a tool round's chunks: they are not the answer), so the turn watches the
model's own stream instead: :func:`watched` passes the model's chunks through unchanged and
hands ``emit`` each streamed piece of a call as a :class:`ToolCallDeltaEvent`, before the loop
runs the call and the ``tool_call`` event follows, and each piece of reasoning as a
:class:`ReasoningEvent` as it comes (a tool round's too). Providers stream a call as fragments
whose first names it (``id``, ``name``) and whose later ones carry only its ``index``; each
delta names its call, kept here per model stream (one round).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from advisors_app.core.requests import ChatClientResponse
from advisors_app.core.streams import closing_stream
from advisors_app.security.redaction import redact
from advisors_app.turn.events import ReasoningEvent, ToolCallDeltaEvent, TurnEvent

__all__ = ["watched"]


async def watched(
    chunks: AsyncIterator[ChatClientResponse], emit: Callable[[TurnEvent], None]
) -> AsyncIterator[ChatClientResponse]:
    """``chunks`` as they are, with a ``reasoning`` event for each piece of reasoning and a
    ``tool_call_delta`` for each streamed tool-call fragment in them. Fragments carry their
    call's ``index``; a whole call (``index`` ``None``: a model or a tool emulation that sends
    calls complete) has nothing to stream, only its ``tool_call``."""
    named: dict[int, tuple[str, str]] = {}  # index -> (id, name), once the call is named
    async with closing_stream(chunks) as stream:
        async for chunk in stream:
            chat = chunk.chat_response
            generations = chat.generations if chat is not None else ()
            if generations and generations[0].output.reasoning:
                emit(ReasoningEvent(generations[0].output.reasoning))
            for generation in generations:
                for call in generation.output.tool_calls:
                    if call.index is None:
                        continue
                    known_id, known_name = named.get(call.index, ("", ""))
                    first = not known_id
                    named[call.index] = (known_id or call.id, known_name or call.name)
                    fragment = "" if call.arguments == "{}" else call.arguments
                    if fragment or first:
                        # A fragment may echo a secret from the prompt: redacted.
                        emit(ToolCallDeltaEvent(*named[call.index], redact(fragment)))
            yield chunk
