"""Compaction of a session's view: a trigger says when, a strategy says what leaves the view.

Spring AI 2.1 session compaction (docs "Compaction": ``SessionService.compact(id, trigger,
strategy)``, ``TurnCountTrigger``, ``TokenCountTrigger``, ``WindowCompactionStrategy`` with
``lastTurns``, recursive summarization). :func:`compact_session` evaluates the trigger on the
active view and runs the strategy only when it fires (or when forced); the result is one
:class:`~advisors_app.core.memory.session.Boundary` appended to the log, version-checked
against the boundary the view was read with; the messages are never touched.

Triggers (``should_compact(view) -> bool``): :class:`TurnCountTrigger` (turns in the view over
``max_turns``), :class:`MessageCountTrigger` (messages over ``max_messages``),
:class:`TokenCountTrigger` (the view's estimated tokens — system, summary, messages — over
``max_tokens``; :meth:`TokenCountTrigger.share_of` sets it as a share of a model's context
window, in tokens). Strategies (``async compact(view) -> CompactionResult``):

* :class:`WindowCompactionStrategy`: keeps the last ``last_turns`` turns verbatim, the rest
  leaves the view without a summary (the sliding window of the 2.0 memories, on turns);
* :class:`RecursiveSummarizationCompactionStrategy`: keeps the last ``last_turns`` turns
  verbatim and replaces the older ones by a summary a chat model writes of the previous summary
  plus the newly covered turns (so the summary always covers the whole compacted past);
* :class:`KeyFactsCompactionStrategy`: keeps the last ``last_turns`` turns verbatim and replaces
  the older ones by the facts the user stated in them, their own sentences, picked by fixed
  rules without a model (for small local models, whose summaries drop or invent facts), merged
  with the previous boundary's list. Spring AI has no such strategy; it is ours.

All cut only where :func:`~advisors_app.core.memory.session.turn_starts` allows: never inside
a turn, never between a tool call and its response. Divergence: Spring AI's result lists the
covered, pinned and preserved events; here the covered and preserved messages are listed and
the boundary carries the summary (the view renders it, see ``SessionMemoryAdvisor``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..messages import AssistantMessage, Message, SystemMessage, ToolResponseMessage, UserMessage
from ..model import ChatModel
from ..prompt import ChatOptions, Prompt
from ..templates import PromptTemplate
from ..tokens import TiktokenTokenCountEstimator, TokenCountEstimator
from .facts import (
    KEY_FACTS_HEADER,
    deduplicated,
    previous_facts,
    render_key_facts,
    select_facts,
    stated_facts,
)
from .session import Boundary, SessionRepository, SessionView, count_turns, turn_starts

__all__ = [
    "DEFAULT_SUMMARY_PROMPT",
    "KEY_FACTS_HEADER",
    "CompactionPolicy",
    "CompactionResult",
    "CompactionStrategy",
    "CompactionTrigger",
    "KeyFactsCompactionStrategy",
    "MessageCountTrigger",
    "RecursiveSummarizationCompactionStrategy",
    "TokenCountTrigger",
    "TurnCountTrigger",
    "WindowCompactionStrategy",
    "compact_session",
    "render_key_facts",
    "render_transcript",
    "stated_facts",
    "view_tokens",
]

#: The summarizer's instructions: ``{summary}`` is the previous summary (or "(none)"),
#: ``{conversation}`` the newly covered turns as ``User:`` / ``Assistant:`` / ``Tool`` lines.
DEFAULT_SUMMARY_PROMPT = """\
Write a short summary of a conversation between a user and an assistant, for the assistant to \
remember it. Keep every fact the user stated (names, numbers, preferences, decisions) and the \
questions that are still open. Write plain sentences, no greeting.

Summary so far:
{summary}

New part of the conversation:
{conversation}

Updated summary:"""

_ESTIMATOR = TiktokenTokenCountEstimator()


def _positive(name: str, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return value


def view_tokens(view: SessionView, estimator: TokenCountEstimator | None = None) -> int:
    """Estimated tokens of what the view puts in a prompt: system, summary and messages."""
    estimate = (estimator or _ESTIMATOR).estimate
    return estimate(list(view.system)) + estimate(view.summary) + estimate(list(view.messages))


class CompactionTrigger(Protocol):
    """Says when a view should be compacted."""

    def should_compact(self, view: SessionView) -> bool: ...


@dataclass(frozen=True, slots=True)
class TurnCountTrigger:
    """Fires when the view holds more than ``max_turns`` turns (Spring AI ``TurnCountTrigger``)."""

    max_turns: int

    def __post_init__(self) -> None:
        _positive("max_turns", self.max_turns)

    def should_compact(self, view: SessionView) -> bool:
        return count_turns(view.messages) > self.max_turns


@dataclass(frozen=True, slots=True)
class MessageCountTrigger:
    """Fires when the view holds more than ``max_messages`` (non-system) messages."""

    max_messages: int

    def __post_init__(self) -> None:
        _positive("max_messages", self.max_messages)

    def should_compact(self, view: SessionView) -> bool:
        return len(view.messages) > self.max_messages


@dataclass(frozen=True, slots=True)
class TokenCountTrigger:
    """Fires when the view's estimated tokens exceed ``max_tokens`` (Spring AI
    ``TokenCountTrigger``). ``estimator`` defaults to ``TiktokenTokenCountEstimator``."""

    max_tokens: int
    estimator: TokenCountEstimator | None = None

    def __post_init__(self) -> None:
        _positive("max_tokens", self.max_tokens)

    @classmethod
    def share_of(
        cls, context_window: int, share: float, estimator: TokenCountEstimator | None = None
    ) -> TokenCountTrigger:
        """Fires past ``share`` (0 < share <= 1) of ``context_window`` tokens."""
        _positive("context_window", context_window)
        if not 0 < share <= 1:
            raise ValueError(f"share must be > 0 and <= 1, got {share!r}")
        return cls(max(1, int(context_window * share)), estimator)

    def should_compact(self, view: SessionView) -> bool:
        return view_tokens(view, self.estimator) > self.max_tokens


@dataclass(frozen=True, slots=True)
class CompactionResult:
    """What a strategy decided: the boundary to append (``None``: nothing leaves the view),
    the messages that leave the view, those kept verbatim, the summary, and the tokens the
    view saves (an estimate, net of the summary)."""

    boundary: Boundary | None
    covered: tuple[Message, ...] = ()
    preserved: tuple[Message, ...] = ()
    summary: str = ""
    tokens_estimated_saved: int = 0

    @property
    def unchanged(self) -> bool:
        return self.boundary is None


UNCHANGED = CompactionResult(None)


class CompactionStrategy(Protocol):
    """Decides what leaves a view (and what replaces it)."""

    async def compact(self, view: SessionView) -> CompactionResult: ...


def _cut(view: SessionView, last_turns: int) -> int | None:
    """The index in ``view.messages`` where the last ``last_turns`` turns start (``None``: the
    view holds no more than that, nothing to cover)."""
    starts = turn_starts(view.messages)
    if len(starts) <= last_turns:
        return None
    cut = starts[len(starts) - last_turns]
    return cut if cut > 0 else None


@dataclass(frozen=True, slots=True)
class WindowCompactionStrategy:
    """Keeps the last ``last_turns`` turns; the older ones leave the view (no summary; a prior
    summary is kept). Spring AI ``WindowCompactionStrategy.builder().lastTurns(n)``."""

    last_turns: int = 10

    def __post_init__(self) -> None:
        _positive("last_turns", self.last_turns)

    async def compact(self, view: SessionView) -> CompactionResult:
        cut = _cut(view, self.last_turns)
        if cut is None:
            return UNCHANGED
        covered = view.messages[:cut]
        boundary = Boundary(view.positions[cut - 1], summary=view.summary)
        return CompactionResult(
            boundary, covered, view.messages[cut:], view.summary, _ESTIMATOR.estimate(covered)
        )


def render_transcript(messages: Sequence[Message], max_chars: int | None = None) -> str:
    """``messages`` as ``User: ...`` / ``Assistant: ...`` / ``Tool name: ...`` lines; each text
    cut to ``max_chars`` characters (``None``: whole)."""

    def cut(text: str) -> str:
        text = " ".join(text.split())
        if max_chars is not None and len(text) > max_chars:
            return text[: max(0, max_chars - 1)] + "…"
        return text

    lines = []
    for message in messages:
        if isinstance(message, UserMessage):
            lines.append(f"User: {cut(message.text)}")
        elif isinstance(message, AssistantMessage):
            if message.text.strip():
                lines.append(f"Assistant: {cut(message.text)}")
            for call in message.tool_calls:
                lines.append(f"Assistant calls {call.name}({cut(call.arguments)})")
        elif isinstance(message, ToolResponseMessage):
            for response in message.responses:
                lines.append(f"Tool {response.name}: {cut(response.response_data)}")
        elif isinstance(message, SystemMessage):
            continue
    return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class RecursiveSummarizationCompactionStrategy:
    """Keeps the last ``last_turns`` turns verbatim; the older ones leave the view and a summary
    of the previous summary plus them, written by ``chat_model``, replaces them.

    ``prompt`` is a template with ``{conversation}`` (and optionally ``{summary}``), default
    :data:`DEFAULT_SUMMARY_PROMPT`; ``max_summary_tokens`` bounds the summary (completion
    tokens); ``context_window`` (tokens, ``None``: unknown) bounds what is sent: the covered
    turns' texts are shortened until the request fits. ``model_name`` is recorded on the
    boundary. Raises what the model raises (nothing is written then).
    """

    chat_model: ChatModel
    last_turns: int = 4
    prompt: str = DEFAULT_SUMMARY_PROMPT
    max_summary_tokens: int = 256
    context_window: int | None = None
    model_name: str = ""

    def __post_init__(self) -> None:
        if self.chat_model is None:
            raise ValueError("chatModel cannot be null")
        _positive("last_turns", self.last_turns)
        _positive("max_summary_tokens", self.max_summary_tokens)
        PromptTemplate(self.prompt, required=("conversation",))

    def _request(self, previous: str, covered: Sequence[Message]) -> str:
        template = PromptTemplate(self.prompt)
        values = {"summary": previous or "(none)"}
        text = template.render(values, conversation=render_transcript(covered))
        if self.context_window is None:
            return text
        # Leave room for the summary and the chat format; shorten each message until it fits.
        budget = self.context_window - self.max_summary_tokens - 64
        limit = 2000
        while _ESTIMATOR.estimate(text) > budget and limit > 40:
            limit //= 2
            text = template.render(values, conversation=render_transcript(covered, limit))
        return text

    async def compact(self, view: SessionView) -> CompactionResult:
        cut = _cut(view, self.last_turns)
        if cut is None:
            return UNCHANGED
        covered = view.messages[:cut]
        prompt = Prompt(
            [UserMessage(self._request(view.summary, covered))],
            ChatOptions(temperature=0.0, max_tokens=self.max_summary_tokens),
        )
        response = await self.chat_model.call(prompt)
        summary = (response.text or "").strip()
        usage = response.metadata.usage
        model = self.model_name or response.metadata.model
        boundary = Boundary(
            view.positions[cut - 1],
            summary=summary,
            model=model,
            usage=usage.to_dict() if usage is not None else None,
        )
        saved = _ESTIMATOR.estimate(covered) + _ESTIMATOR.estimate(view.summary)
        return CompactionResult(
            boundary, covered, view.messages[cut:], summary, saved - _ESTIMATOR.estimate(summary)
        )


@dataclass(frozen=True, slots=True)
class KeyFactsCompactionStrategy:
    """Keeps the last ``last_turns`` turns verbatim; the older ones leave the view and the facts
    the user stated in them replace them, verbatim, found by rules instead of a model.

    Each covered user message is split into sentences and filtered by :func:`stated_facts`
    (assistant replies and tool results are not read: they are not what the user stated);
    the facts are appended to those of the previous boundary (recursive, as the summarization
    strategy), deduplicated (case, spacing and a final ``.``/``!`` ignored; the earliest stays)
    and capped at ``max_tokens`` (estimated, header included): the facts the user asked to
    remember go first, then the earliest others; a fact that does not fit is left out (it is
    still in the log, for ``conversation_search``). The summary is :data:`KEY_FACTS_HEADER`
    then one ``- `` line per fact, oldest first; no fact, no summary. The boundary records no
    model and no usage, like a window's. Our addition: Spring AI 2.1 names no such strategy.
    """

    last_turns: int = 4
    max_tokens: int = 256

    def __post_init__(self) -> None:
        _positive("last_turns", self.last_turns)
        _positive("max_tokens", self.max_tokens)

    async def compact(self, view: SessionView) -> CompactionResult:
        cut = _cut(view, self.last_turns)
        if cut is None:
            return UNCHANGED
        covered = view.messages[:cut]
        facts = previous_facts(view.summary)
        for message in covered:
            if isinstance(message, UserMessage):
                facts.extend(stated_facts(message.text))
        summary = render_key_facts(select_facts(deduplicated(facts), self.max_tokens))
        boundary = Boundary(view.positions[cut - 1], summary=summary)
        saved = _ESTIMATOR.estimate(covered) + _ESTIMATOR.estimate(view.summary)
        return CompactionResult(
            boundary, covered, view.messages[cut:], summary, saved - _ESTIMATOR.estimate(summary)
        )


@dataclass(frozen=True, slots=True)
class CompactionPolicy:
    """A trigger and a strategy, as a session advisor applies them."""

    trigger: CompactionTrigger
    strategy: CompactionStrategy

    async def compact(
        self, repository: SessionRepository, conversation_id: str, *, force: bool = False
    ) -> CompactionResult:
        return await compact_session(
            repository, conversation_id, self.trigger, self.strategy, force=force
        )


async def compact_session(
    repository: SessionRepository,
    conversation_id: str,
    trigger: CompactionTrigger,
    strategy: CompactionStrategy,
    *,
    force: bool = False,
) -> CompactionResult:
    """Compact the session if ``trigger`` fires on its view (always with ``force``).

    Spring AI ``SessionService.compact(id, trigger, strategy)``. Reads the view, runs the
    strategy and appends its boundary unless another compaction appended one meanwhile (then
    the result is unchanged: the newer boundary stands). Never changes a message.
    """
    view = await repository.aload_view(conversation_id)
    if not force and not trigger.should_compact(view):
        return UNCHANGED
    result = await strategy.compact(view)
    if result.boundary is None:
        return result
    if not await repository.aappend_boundary(conversation_id, result.boundary, after=view.covered):
        return UNCHANGED
    return result
