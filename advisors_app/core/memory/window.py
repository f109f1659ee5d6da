"""Choosing the window of a conversation that a model gets to see: by whole turns, within a budget.

A *turn* starts at a user message and runs to the next one (the assistant reply, and any tool
calls and tool responses in between). Spring AI's ``MessageWindowChatMemory`` cuts by message
count and then "snaps" the cut forward to the next user message; when there is none it evicts
every non-system message, and a window can start with a lone tool response whose call was
evicted, which providers reject (defect 5.3.18, bug case B08). :func:`select_window` fixes that:

1. a conversation that fits the budget is kept whole, messages before its first user message
   (an assistant greeting) included: only trimming starts a window at a user message (issue 17;
   the first version dropped a greeting even when everything fitted);
2. otherwise it keeps the longest run of **whole turns**, newest first, whose cost fits the
   budget, so the window starts at a user message and every tool response keeps its call;
3. when even the newest turn does not fit, it keeps that turn's user message plus the longest
   tail of the turn that starts at an assistant message and fits (never an empty window for a
   conversation with a user message, unless that message alone exceeds the budget);
4. as a last guard, a tool response whose call is not in the window is dropped (a transcript
   written by other code may hold one).

System messages are not part of the window: the memory keeps them apart, never counts them
against the budget and never evicts them (bug case B08).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..messages import AssistantMessage, Message, ToolResponseMessage, UserMessage

__all__ = ["drop_orphan_tool_responses", "select_window", "window_positions"]


def select_window(
    tail: Sequence[Message], budget: int, cost: Callable[[Message], int], *, complete: bool
) -> list[Message] | None:
    """The window of ``tail`` within ``budget``, or ``None`` if older messages must be read.

    ``tail`` holds the newest non-system messages of a conversation, oldest first; ``complete``
    says whether it reaches back to the conversation's first message. ``cost(message)`` is the
    message's share of the budget (1 for a message-count window, tokens for a token window).
    Returns ``None`` when the answer depends on messages older than ``tail``; the caller reads
    more and asks again. Runs in O(len(tail)) calls to ``cost``.
    """
    positions = window_positions(tail, budget, cost, complete=complete)
    if positions is None:
        return None
    return drop_orphan_tool_responses([tail[i] for i in positions])


def window_positions(
    tail: Sequence[Message], budget: int, cost: Callable[[Message], int], *, complete: bool
) -> list[int] | None:
    """The indices in ``tail`` of the messages :func:`select_window` keeps, ascending.

    Same arguments and ``None`` as :func:`select_window`; the indices are taken before tool
    responses without their call are dropped (apply :func:`drop_orphan_tool_responses` to the
    messages). All indices but the first are consecutive: the window is a run of the newest
    messages, or the newest turn's user message followed by such a run.
    """
    total = 0
    earliest_turn: int | None = None
    i = len(tail) - 1
    exceeded = False
    while i >= 0:
        total += cost(tail[i])
        if total > budget:
            exceeded = True
            break
        if isinstance(tail[i], UserMessage):
            earliest_turn = i
        i -= 1
    if not exceeded:
        if not complete:
            return None  # older turns may fit as well
        return list(range(len(tail)))  # everything fits: a leading greeting stays
    if earliest_turn is not None:
        return list(range(earliest_turn, len(tail)))
    # The newest turn alone is over budget, or there is no user message in the part read.
    user_at = next((j for j in range(i, -1, -1) if isinstance(tail[j], UserMessage)), None)
    if user_at is None:
        return [] if complete else None
    room = budget - cost(tail[user_at])
    if room < 0:
        return []
    total = 0
    start = len(tail)
    for k in range(len(tail) - 1, user_at, -1):
        total += cost(tail[k])
        if total > room:
            break
        if isinstance(tail[k], AssistantMessage):
            start = k
    return [user_at, *range(start, len(tail))]


def drop_orphan_tool_responses(messages: Sequence[Message]) -> list[Message]:
    """``messages`` without tool responses whose call id no earlier assistant message made.

    A tool-response message that loses every response is dropped; one that loses some keeps
    the others, in order.
    """
    called: set[str] = set()
    kept: list[Message] = []
    for message in messages:
        if isinstance(message, AssistantMessage):
            called.update(call.id for call in message.tool_calls)
        elif isinstance(message, ToolResponseMessage):
            answered = tuple(r for r in message.responses if r.id in called)
            if len(answered) != len(message.responses):
                if not answered:
                    continue
                message = message.mutate(responses=answered)
        kept.append(message)
    return kept
