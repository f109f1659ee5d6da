"""``tool_call_delta`` events: a tool call's arguments as the model streams them.

The tool loop holds a round's tool-call chunks back (they are not answer text), so the turn
watches the model's own stream instead: :func:`watched` passes the model's chunks through
unchanged and hands each streamed piece of a call to ``emit`` as a :class:`ToolCallDeltaEvent`,
before the loop runs the call and the ``tool_call`` event follows. Providers stream a call as
fragments whose first names it (``id``, ``name``) and whose later ones carry only its
``index``; each delta names its call, kept here per model stream (one round).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from advisors_app.core.requests import ChatClientResponse
from advisors_app.core.streams import closing_stream
from advisors_app.security.redaction import redact
from advisors_app.turn.events import ToolCallDeltaEvent

__all__ = ["watched"]


async def watched(
    chunks: AsyncIterator[ChatClientResponse], emit: Callable[[ToolCallDeltaEvent], None]
) -> AsyncIterator[ChatClientResponse]:
    """``chunks`` as they are, with a ``tool_call_delta`` for each streamed tool-call fragment
    in them. Fragments carry their call's ``index``; a whole call (``index`` ``None``: a model
    or a tool emulation that sends calls complete) has nothing to stream, only its
    ``tool_call``."""
    named: dict[int, tuple[str, str]] = {}  # index -> (id, name), once the call is named
    async with closing_stream(chunks) as stream:
        async for chunk in stream:
            chat = chunk.chat_response
            for generation in chat.generations if chat is not None else ():
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
