"""Aligning a request with what memory holds: the history to add and the messages to store.

A request may carry history of its own: the whole conversation, the part of it since some point,
or a tool exchange (``[U, A(call), T]``) run by the caller. A memory advisor must then send each
message once and store each message once. :func:`align_request` compares the request's messages
with the newest **stored** messages (not only the window, which may skip the middle of a long
turn) and answers two questions:

* ``history``: the window's messages the request does not carry, to put before it;
* ``new``: the request's messages memory does not hold yet, in order, to store with the reply.

The request holds stored messages when it starts with the newest ones (the longest suffix of the
transcript that is a prefix of the request), or, failing that, when the whole window occurs in it
(after messages of the caller's own, e.g. examples, which are then neither added nor stored).
Messages compare without their metadata; blank messages (a user message without text or media,
an assistant message without text or tool calls) are skipped for the comparison and never
stored.

Spring AI (``MessageChatMemoryAdvisor``, reference §3.8) checks only whether the stored window
occurs somewhere in the prompt and stores only the last user message or tool response, so a
prompt carrying a tool exchange stored only its tool response (which the window then hides),
and a window that skipped part of a long turn was added again in front of a prompt carrying that
turn, duplicating messages and separating a tool call from its response (issue 17).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..messages import AssistantMessage, Message, ToolResponseMessage, UserMessage
from .window import drop_orphan_tool_responses

__all__ = ["RequestHistory", "align_request", "has_content"]


@dataclass(frozen=True, slots=True)
class RequestHistory:
    """What a memory holds for one request (``ChatMemory.history_for``)."""

    #: The stored system messages, oldest first.
    system: tuple[Message, ...]
    #: The window's messages the request does not carry, oldest first: they go before it.
    history: tuple[Message, ...]
    #: The request's non-blank messages memory does not hold yet, in the request's order.
    new: tuple[Message, ...]


def has_content(message: Message) -> bool:
    """Whether ``message`` says anything: text or media, tool calls, tool responses."""
    if isinstance(message, UserMessage):
        return bool(message.text.strip() or message.media)
    if isinstance(message, AssistantMessage):
        return bool(message.text.strip() or message.tool_calls)
    if isinstance(message, ToolResponseMessage):
        return bool(message.responses)
    return bool(message.text.strip())


def align_request(
    tail: Sequence[Message], positions: Sequence[int], messages: Sequence[Message]
) -> tuple[list[Message], list[Message]]:
    """``(history, new)`` for a request with ``messages`` over a stored conversation.

    ``tail`` holds the newest stored non-system messages, oldest first, at least as many as the
    request has when the conversation has that many; ``positions`` are the indices in ``tail``
    of the window (:func:`~advisors_app.core.memory.window.window_positions`); ``messages`` are
    the request's non-system messages. Linear in ``len(tail) + len(messages)``.
    """
    content = [m for m in messages if has_content(m)]
    held = _overlap(tail, content)
    if not held:
        window = drop_orphan_tool_responses([tail[i] for i in positions])
        at = _find(content, window) if window else -1
        if at >= 0:
            return [], content[at + len(window) :]
    cut = len(tail) - held
    kept = _with_answered_calls(tail, [i for i in positions if i < cut], cut, content)
    return drop_orphan_tool_responses([tail[i] for i in kept]), content[held:]


def _with_answered_calls(
    tail: Sequence[Message], kept: list[int], cut: int, content: Sequence[Message]
) -> list[int]:
    """``kept`` extended back to the stored call that the request's tool responses answer.

    A request may answer a tool call that memory holds but the window left out (a caller that
    runs the tools itself, with a small window); the call then comes back with the messages
    stored after it, after the window's user message, so that no response reaches the model
    without its call (providers reject that).
    """
    called: set[str] = set()
    unanswered: set[str] = set()
    for message in content:
        if isinstance(message, AssistantMessage):
            called.update(call.id for call in message.tool_calls)
        elif isinstance(message, ToolResponseMessage):
            unanswered.update(r.id for r in message.responses if r.id not in called)
    if not unanswered:
        return kept
    at = next((i for i in range(cut - 1, -1, -1) if _calls(tail[i], unanswered)), None)
    if at is None or at in kept:
        return kept
    before = [i for i in kept if i < at]
    if not before:
        user = next((i for i in range(at - 1, -1, -1) if isinstance(tail[i], UserMessage)), None)
        before = [] if user is None else [user]
    return [*before, *range(at, cut)]


def _calls(message: Message, ids: set[str]) -> bool:
    return isinstance(message, AssistantMessage) and any(c.id in ids for c in message.tool_calls)


def _failure_table(pattern: Sequence[Message]) -> list[int]:
    table = [0] * len(pattern)
    k = 0
    for i in range(1, len(pattern)):
        while k and pattern[i] != pattern[k]:
            k = table[k - 1]
        if pattern[i] == pattern[k]:
            k += 1
        table[i] = k
    return table


def _find(text: Sequence[Message], pattern: Sequence[Message]) -> int:
    """Where ``pattern`` first occurs in ``text`` as a contiguous run, or -1 (KMP, linear)."""
    table = _failure_table(pattern)
    k = 0
    for i, item in enumerate(text):
        while k and item != pattern[k]:
            k = table[k - 1]
        if item == pattern[k]:
            k += 1
            if k == len(pattern):
                return i + 1 - k
    return -1


def _overlap(text: Sequence[Message], pattern: Sequence[Message]) -> int:
    """Length of the longest suffix of ``text`` that is a prefix of ``pattern`` (linear)."""
    if not pattern:
        return 0
    table = _failure_table(pattern)
    k = 0
    for item in text:
        if k == len(pattern):
            k = table[k - 1]
        while k and item != pattern[k]:
            k = table[k - 1]
        if item == pattern[k]:
            k += 1
    return k
