"""Guard checks: what a rail of :class:`~advisors_app.core.advisors.guard.GuardAdvisor` looks for.

A check reads one text and returns a :class:`Finding` (flagged or not, what it found, and the
text with it redacted when the check can redact). :meth:`GuardCheck.run` bounds it: a check
that raises or exceeds its ``timeout`` (seconds) is flagged when it fails closed
(``fail_closed=True``) and passed when it fails open, and says so in the finding.

Built in (keys of :data:`~.registry.guard_checks`):

=====================  ======================================================================
``words``              sensitive words (SafeGuard's matcher: look-alikes and invisible
                       characters folded); redacts each occurrence of a matched word
``pii``                emails, phones, cards, IBANs, IPs, Chinese IDs (the PII masking
                       recipe's detectors); redacts to the recipe's placeholders
``regex``              regular expressions; redacts matches
``secrets``            API keys, tokens, private keys (:mod:`.secrets`); redacts them
``prompt_injection``   the shipped offline classifier
                       (:func:`~advisors_app.core.decision.prompt_injection_classifier`)
``decision``           any :class:`~advisors_app.core.decision.DecisionModel` question,
                       flagged when its answer is ``flag_choice`` with at least ``threshold``
``topic``              "is this text about <topic>?", flagged when the answer is "no"
=====================  ======================================================================
"""

from __future__ import annotations

import asyncio
import re
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..advisors._matching import WordMatcher
from ..decision import DecisionModel, prompt_injection_classifier
from ..decision.injection import ATTACK, BENIGN, INJECTION_THRESHOLD, PROMPT_INJECTION_QUESTION
from ..mappings import EMPTY, freeze
from .secrets import find_secrets, redact_secrets

__all__ = [
    "REDACTED",
    "DecisionCheck",
    "Finding",
    "GuardCheck",
    "PiiCheck",
    "PromptInjectionCheck",
    "RegexCheck",
    "SecretsCheck",
    "TopicCheck",
    "WordsCheck",
]

#: What ``words`` and ``regex`` checks replace a match with.
REDACTED = "[REDACTED]"


@dataclass(frozen=True, slots=True)
class Finding:
    """What a check found in one text.

    ``flagged``: the rail's action applies. ``detail``: JSON-compatible facts for the verdict
    (matched words, a probability, an error). ``redacted``: the text with what was found
    replaced (``None``: the check cannot redact). ``failed``: the check errored or timed out
    and ``flagged`` is its fail-open/closed default. ``seconds``: how long it took.
    """

    flagged: bool
    detail: Mapping[str, Any] = field(default=EMPTY)
    redacted: str | None = None
    failed: bool = False
    seconds: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "detail", freeze(self.detail))


class GuardCheck(ABC):
    """One check: :meth:`inspect` a text (write it), :meth:`run` it within its bounds.

    ``name`` identifies it in verdicts (default: its ``kind``); ``timeout`` is its time budget
    in seconds (``None``: none); ``fail_closed`` says whether an error or a timeout flags the
    text (the default for classifier checks, so an attacker cannot win by slowing a check
    down) or passes it. Checks are immutable and shared by concurrent requests.
    """

    kind: ClassVar[str] = ""
    #: Whether :meth:`inspect` fills :attr:`Finding.redacted`.
    can_redact: ClassVar[bool] = False

    def __init__(
        self, *, name: str = "", timeout: float | None = None, fail_closed: bool = True
    ) -> None:
        if timeout is not None and timeout <= 0:
            raise ValueError(f"timeout must be positive seconds or None, got {timeout!r}")
        self.name = name or self.kind
        self.timeout = timeout
        self.fail_closed = fail_closed

    @abstractmethod
    async def inspect(self, text: str) -> Finding:
        """What this check finds in ``text`` (may raise; :meth:`run` handles it)."""

    async def run(self, text: str) -> Finding:
        """:meth:`inspect` bounded by :attr:`timeout`; errors become a failed finding."""
        started = time.perf_counter()
        try:
            if self.timeout is None:
                found = await self.inspect(text)
            else:
                found = await asyncio.wait_for(self.inspect(text), self.timeout)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            reason = (
                f"timed out after {self.timeout} s"
                if isinstance(exc, TimeoutError)
                else f"{type(exc).__name__}: {exc}"
            )
            return Finding(
                self.fail_closed,
                {"error": reason, "fail": "closed" if self.fail_closed else "open"},
                failed=True,
                seconds=time.perf_counter() - started,
            )
        return Finding(
            found.flagged, found.detail, found.redacted, seconds=time.perf_counter() - started
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


def _replace_spans(text: str, spans: Iterable[tuple[int, int]], marker: str) -> str:
    parts: list[str] = []
    cursor = 0
    for start, end in sorted(set(spans)):
        if start < cursor:
            continue
        parts += [text[cursor:start], marker]
        cursor = end
    parts.append(text[cursor:])
    return "".join(parts)


class WordsCheck(GuardCheck):
    """Sensitive words, matched as :class:`~advisors_app.core.advisors.SafeGuardAdvisor`
    matches them (``lists``: list name → words). Redaction replaces the occurrences a plain
    case-insensitive search finds (a look-alike spelling is flagged but may stay visible)."""

    kind = "words"
    can_redact = True

    def __init__(
        self,
        lists: Mapping[str | None, Iterable[str]],
        *,
        whole_words: bool = False,
        case_sensitive: bool = False,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        self._matcher = WordMatcher(lists, whole_words=whole_words, case_sensitive=case_sensitive)
        self._flags = 0 if case_sensitive else re.IGNORECASE

    async def inspect(self, text: str) -> Finding:
        matches = self._matcher.search(text) if self._matcher else []
        if not matches:
            return Finding(False)
        words = list(dict.fromkeys(m.word for m in matches))
        spans = [
            m.span() for word in words for m in re.finditer(re.escape(word), text, self._flags)
        ]
        return Finding(True, {"matched": words}, _replace_spans(text, spans, REDACTED))


class PiiCheck(GuardCheck):
    """Personal data, found by the PII masking recipe's detectors
    (:class:`~advisors_app.core.advisors.PiiMaskingAdvisor`: ``kinds``, ``phone_regions``);
    redaction gives its placeholders (``<EMAIL_1a2b3c4d>``)."""

    kind = "pii"
    can_redact = True

    def __init__(
        self,
        kinds: Sequence[str] | None = None,
        *,
        phone_regions: Sequence[str] = ("US", "CN"),
        **options: Any,
    ) -> None:
        from ..advisors.pii_masking import DEFAULT_KINDS, PiiMaskingAdvisor

        super().__init__(**options)
        self._masker = PiiMaskingAdvisor(kinds or DEFAULT_KINDS, phone_regions=phone_regions)

    async def inspect(self, text: str) -> Finding:
        counts: dict[str, int] = {}
        masked = self._masker.mask(text, {}, counts)
        return Finding(bool(counts), {"found": counts} if counts else EMPTY, masked)


class RegexCheck(GuardCheck):
    """Regular expressions (``patterns``, searched with ``re.search``); flagged when any
    matches; redaction replaces every match with ``[REDACTED]``."""

    kind = "regex"
    can_redact = True

    def __init__(self, patterns: Sequence[str], *, ignore_case: bool = True, **options: Any):
        super().__init__(**options)
        if not patterns:
            raise ValueError("a regex check needs at least one pattern")
        flags = re.IGNORECASE if ignore_case else 0
        self._patterns = [re.compile(p, flags) for p in patterns]

    async def inspect(self, text: str) -> Finding:
        spans = [m.span() for p in self._patterns for m in p.finditer(text) if m.end() > m.start()]
        matched = [p.pattern for p in self._patterns if p.search(text)]
        if not matched:
            return Finding(False)
        return Finding(True, {"patterns": matched}, _replace_spans(text, spans, REDACTED))


class SecretsCheck(GuardCheck):
    """API keys, tokens and private keys (:mod:`.secrets`); redaction replaces them with
    ``[SECRET]``. The kinds found are reported, never the values."""

    kind = "secrets"
    can_redact = True

    async def inspect(self, text: str) -> Finding:
        spans = find_secrets(text)
        if not spans:
            return Finding(False)
        kinds = list(dict.fromkeys(kind for kind, _, _ in spans))
        return Finding(True, {"kinds": kinds}, redact_secrets(text, spans))


class DecisionCheck(GuardCheck):
    """A :class:`~advisors_app.core.decision.DecisionModel` question about the text, flagged
    when the probability of ``flag_choice`` is at least ``threshold`` (whichever choice the
    model picked: a 0.3 threshold flags a 30 % chance)."""

    kind = "decision"

    def __init__(
        self,
        model: DecisionModel,
        question: str,
        *,
        flag_choice: str = "yes",
        choices: Sequence[str] | None = None,
        threshold: float = 0.5,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        if not question.strip():
            raise ValueError("a decision check needs a question")
        if choices is not None and flag_choice not in choices:
            raise ValueError(f"flag_choice {flag_choice!r} is not one of {list(choices)}")
        self.model = model
        self.question = question
        self.flag_choice = flag_choice
        self.choices = tuple(choices) if choices is not None else None
        self.threshold = threshold

    async def inspect(self, text: str) -> Finding:
        decision = await self.model.decide(self.question, text, self.choices)
        probability = decision.probability_of(self.flag_choice)
        flagged = probability >= self.threshold
        return Finding(flagged, {"choice": decision.choice, "probability": round(probability, 4)})


class TopicCheck(DecisionCheck):
    """Flagged when the text is not about ``topic`` ("Is this text about Python?" → "no")."""

    kind = "topic"

    def __init__(self, model: DecisionModel, topic: str, **options: Any) -> None:
        if not topic.strip():
            raise ValueError("a topic check needs a topic")
        self.topic = topic
        super().__init__(
            model, f"Is this text about {topic}? Answer yes or no.", flag_choice="no", **options
        )


class PromptInjectionCheck(DecisionCheck):
    """The shipped prompt-injection classifier (or ``model``, another decision model answering
    ``"attack"``/``"benign"``): flagged at ``threshold`` (the classifier's own,
    :data:`~advisors_app.core.decision.injection.INJECTION_THRESHOLD`) or above."""

    kind = "prompt_injection"

    def __init__(
        self,
        model: DecisionModel | None = None,
        *,
        threshold: float = INJECTION_THRESHOLD,
        **options: Any,
    ) -> None:
        super().__init__(
            model or prompt_injection_classifier(),
            PROMPT_INJECTION_QUESTION,
            flag_choice=ATTACK,
            choices=(ATTACK, BENIGN),
            threshold=threshold,
            **options,
        )
