"""``SafeGuardAdvisor``: refuses requests (and optionally answers) that contain sensitive words.

Spring AI ``SafeGuardAdvisor`` (seed §6.2, reference §3.6), hardened as its own Javadoc says it
is not: see :class:`SafeGuardAdvisor`.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any, ClassVar

from ..advisor import AdvisorRole, CallAdvisor, StreamAdvisor
from ..requests import ChatClientRequest, ChatClientResponse
from ..response import ChatResponse
from ..streams import closing_stream
from ._matching import WordMatch, WordMatcher
from ._support import answer, replace_texts

__all__ = [
    "CONTENT_FILTER",
    "DEFAULT_FAILURE_RESPONSE",
    "SAFEGUARD_LISTS",
    "SAFEGUARD_MATCHED",
    "SAFEGUARD_STAGE",
    "SCOPE_PROMPT",
    "SCOPE_USER",
    "SafeGuardAdvisor",
]

logger = logging.getLogger(__name__)

DEFAULT_FAILURE_RESPONSE = (
    "I'm unable to respond to that due to sensitive content. "
    "Could we rephrase or discuss something else?"
)
#: Finish reason of a refusal (the name OpenAI and Gemini use for filtered output).
CONTENT_FILTER = "CONTENT_FILTER"
#: Context and metadata key: the configured words that matched, e.g. ``["bomb"]``.
SAFEGUARD_MATCHED = "safeguard_matched"
#: Context and metadata key: the names of the word lists that matched (named lists only).
SAFEGUARD_LISTS = "safeguard_lists"
#: Context and metadata key: ``"input"`` (the request was refused) or ``"output"``.
SAFEGUARD_STAGE = "safeguard_stage"
#: Check only the new user input: the last user message of the prompt (the default).
SCOPE_USER = "user"
#: Check every message of the prompt (system, history, tool results), as Spring AI does.
SCOPE_PROMPT = "prompt"


class SafeGuardAdvisor(CallAdvisor, StreamAdvisor):
    """Answers with ``failure_response`` instead of calling the model when a sensitive word matches.

    ``sensitive_words`` is a list of words, or a mapping of list name → words (the admin's
    sensitive-word lists); ``None`` raises ``ValueError("Sensitive words must not be null!")``
    and a ``None`` ``failure_response`` ``ValueError("Failure response must not be null!")``.
    No word, or only blank words, never matches. Name ``"SafeGuardAdvisor"``, default order 0.

    The refusal is one generation with ``failure_response`` and finish reason
    :data:`CONTENT_FILTER`; the words that matched and their lists are put in the response
    context and metadata (:data:`SAFEGUARD_MATCHED`, :data:`SAFEGUARD_LISTS`,
    :data:`SAFEGUARD_STAGE`) and logged at INFO, never in the text the user sees. The model
    is not called. Words that matching cannot tell apart ("decorator" and "Decorator" unless
    ``case_sensitive``) are one word, named once in the spelling configured first.

    Matching (``advisors_app.core.advisors._matching``): NFKC, case folding, invisible
    characters removed and TR39 homoglyphs folded, on the words and the text alike
    (``normalize=False`` restores Spring's plain lower-casing); ``case_sensitive=True`` keeps
    case; ``whole_words=True`` only matches whole words (``"ass"`` does not block
    ``"classroom assignment"``; Chinese/Japanese/Thai edges need no boundary); the default is
    substring matching, as in Spring AI.

    ``scope``: :data:`SCOPE_USER` (default) checks the last user message only, so a system
    prompt or replayed history cannot block every later turn (bug case B14);
    :data:`SCOPE_PROMPT` checks the whole prompt as Spring AI does. Put advisors that rewrite
    the user message (RAG, PII masking) inside the guard (larger order) if the check must see
    the user's own words.

    ``guard_output=True`` also checks the model's answer. Calls: an answer that matches is
    replaced by the refusal (usage and ids kept). Streams: text is held back only as long as a
    word could still be completing (the longest folded word's length, counted in folded
    characters so invisible padding cannot stretch it), so a word split across chunks is
    caught; on a match the model stream is closed and one refusal chunk follows the text
    already sent (which contained no sensitive word), with :data:`SAFEGUARD_STAGE` =
    ``"output"`` so a client can replace what it displayed.

    Divergences from Spring AI: the hardening above (fixes §5.7.48); the default scope; the
    refusal has a finish reason and names what matched (bug case B15); blank words are
    ignored (Spring's ``contains("")`` blocks everything); the context may hold ``None``
    values (Spring's ``Map.copyOf`` throws, defect 5.1.7).
    """

    __slots__ = ("_failure_response", "_guard_output", "_matcher", "_order", "_scope")

    DEFAULT_ORDER: ClassVar[int] = 0
    ROLES: ClassVar[frozenset[AdvisorRole]] = frozenset({AdvisorRole.GUARD})

    def __init__(
        self,
        sensitive_words: Iterable[str] | Mapping[str, Iterable[str]],
        failure_response: str = DEFAULT_FAILURE_RESPONSE,
        order: int = DEFAULT_ORDER,
        *,
        scope: str = SCOPE_USER,
        whole_words: bool = False,
        case_sensitive: bool = False,
        normalize: bool = True,
        guard_output: bool = False,
    ) -> None:
        if sensitive_words is None:
            raise ValueError("Sensitive words must not be null!")
        if failure_response is None:
            raise ValueError("Failure response must not be null!")
        if scope not in (SCOPE_USER, SCOPE_PROMPT):
            raise ValueError(f"scope must be {SCOPE_USER!r} or {SCOPE_PROMPT!r}, got {scope!r}")
        if isinstance(sensitive_words, str):
            lists: Mapping[str | None, Iterable[str]] = {None: [sensitive_words]}
        elif isinstance(sensitive_words, Mapping):
            lists = {name: words for name, words in sensitive_words.items()}
        else:
            lists = {None: list(sensitive_words)}
        self._matcher = WordMatcher(
            lists, case_sensitive=case_sensitive, whole_words=whole_words, normalize=normalize
        )
        self._failure_response = failure_response
        self._order = order
        self._scope = scope
        self._guard_output = guard_output

    @property
    def scope(self) -> str:
        """:data:`SCOPE_USER` or :data:`SCOPE_PROMPT` (for chain checks: with the prompt scope a
        guard ordered inside a memory advisor sees replayed history, bug case B14)."""
        return self._scope

    def _input_text(self, request: ChatClientRequest) -> str:
        prompt = request.prompt
        return prompt.user_message.text if self._scope == SCOPE_USER else prompt.contents

    def _refusal(
        self,
        context: Mapping[str, Any],
        matches: list[WordMatch],
        stage: str,
        model_response: ChatResponse | None = None,
    ) -> ChatClientResponse:
        words = list(dict.fromkeys(m.word for m in matches))
        names = list(dict.fromkeys(m.list_name for m in matches if m.list_name is not None))
        logger.info("%s blocked the %s: matched %s in %s", self.name, stage, words, names or "-")
        return answer(
            self._failure_response,
            context,
            finish_reason=CONTENT_FILTER,
            extra={SAFEGUARD_MATCHED: words, SAFEGUARD_LISTS: names, SAFEGUARD_STAGE: stage},
            metadata=model_response.metadata if model_response is not None else None,
        )

    async def advise_call(self, request: ChatClientRequest, chain: Any) -> ChatClientResponse:
        if self._matcher:
            matches = self._matcher.search(self._input_text(request))
            if matches:
                return self._refusal(request.context, matches, "input")
        response: ChatClientResponse = await chain.next_call(request)
        if self._guard_output and self._matcher and response.chat_response is not None:
            matches = self._matcher.search(response.chat_response.text)
            if matches:
                return self._refusal(response.context, matches, "output", response.chat_response)
        return response

    async def advise_stream(
        self, request: ChatClientRequest, chain: Any
    ) -> AsyncIterator[ChatClientResponse]:
        if self._matcher:
            matches = self._matcher.search(self._input_text(request))
            if matches:
                yield self._refusal(request.context, matches, "input")
                return
        stream = chain.next_stream(request)
        if not (self._guard_output and self._matcher):
            async with closing_stream(stream) as chunks:
                async for chunk in chunks:
                    yield chunk
            return
        windows: dict[int, _Window] = {}
        context: Mapping[str, Any] = request.context
        blocked: list[WordMatch] = []
        async with closing_stream(stream) as chunks:
            async for chunk in chunks:
                context = chunk.context
                response = chunk.chat_response
                if response is None or not response.generations:
                    yield chunk
                    continue
                texts: dict[int, str] = {}
                for index, generation in enumerate(response.generations):
                    window = windows.setdefault(index, _Window(self._matcher))
                    blocked = window.feed(generation.text, final=bool(generation.finish_reason))
                    if blocked:
                        break
                    texts[index] = window.take()
                if blocked:
                    break  # leaving the block closes the model stream
                yield ChatClientResponse(replace_texts(response, texts), chunk.context)
        if not blocked:
            rest: dict[int, str] = {}
            for index, window in windows.items():
                blocked = window.feed("", final=True)
                if blocked:
                    break
                if held := window.take():
                    rest[index] = held
            if not blocked:
                if rest:
                    yield ChatClientResponse(replace_texts(ChatResponse(), rest), context)
                return
        yield self._refusal(context, blocked, "output")


class _Window:
    """One generation's streamed text: what was checked and sent, and what is held back."""

    __slots__ = ("_matcher", "_out", "_pending", "_tail")

    def __init__(self, matcher: WordMatcher) -> None:
        self._matcher = matcher
        self._tail = ""  # the end of the text already sent: left context for the next check
        self._pending = ""  # received, checked so far, not sent yet
        self._out = ""

    def feed(self, text: str, *, final: bool) -> list[WordMatch]:
        """Add ``text``; return the words found, or decide what :meth:`take` may send."""
        matcher = self._matcher
        self._pending += text
        folded_tail = len(matcher.fold(self._tail))
        matches = matcher.search_folded(
            matcher.fold(self._tail + self._pending), min_end=folded_tail, open_end=not final
        )
        if matches:
            return matches
        cut = len(self._pending) if final else self._hold_from(self._pending)
        self._out, self._pending = self._pending[:cut], self._pending[cut:]
        self._tail = self._suffix(self._tail + self._out, matcher.max_length + 1)
        return []

    def take(self) -> str:
        out, self._out = self._out, ""
        return out

    def _hold_from(self, text: str) -> int:
        # Keep back enough characters to hold the longest word, so that a word still being
        # written lies wholly in the held part, however much invisible padding it contains.
        return len(text) - len(self._suffix(text, self._matcher.max_length))

    def _suffix(self, text: str, folded_chars: int) -> str:
        total = 0
        for i in range(len(text) - 1, -1, -1):
            total += self._matcher.folded_length(text[i])
            if total >= folded_chars:
                return text[i:]
        return text
