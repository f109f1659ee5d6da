"""The facts a user stated, picked from their messages by fixed rules (no model).

What :class:`~advisors_app.core.memory.compaction.KeyFactsCompactionStrategy` keeps of the
turns it folds away: :func:`stated_facts` splits a user's message into sentences and keeps the
ones that state something — first-person statements, requests to remember, sentences with
names, numbers or codes — dropping questions, requests and code; :func:`select_facts` caps a
list at a token budget; :func:`render_key_facts` / :func:`previous_facts` write and read the
summary the boundary carries.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from ..tokens import TiktokenTokenCountEstimator

__all__ = [
    "KEY_FACTS_HEADER",
    "deduplicated",
    "previous_facts",
    "render_key_facts",
    "select_facts",
    "stated_facts",
]

_ESTIMATOR = TiktokenTokenCountEstimator()


#: The first line of a :class:`KeyFactsCompactionStrategy` summary; each fact follows on its
#: own ``- `` line (the form the next compaction reads back).
KEY_FACTS_HEADER = "Facts the user stated earlier in this conversation:"

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_LIST_MARKER = re.compile(r"^\s*(?:[-*•]|\d{1,3}[.)])\s+")
_QUESTION_OPENER = re.compile(
    r"(?:what|who|whom|whose|where|when|why|how|which|is|are|am|was|were|do|does|did|can|"
    r"could|would|will|shall|should|may|might)\b",
    re.IGNORECASE,
)
_REQUEST_OPENER = re.compile(
    r"(?:please\s+)?(?:tell|explain|show|give|help|describe|list|write|compare|summari[sz]e|"
    r"define|teach|walk)\b",
    re.IGNORECASE,
)
_REMEMBER = re.compile(
    r"\b(?:remember|don'?t forget|do not forget|keep in mind|make a note|note that|take note)\b",
    re.IGNORECASE,
)
_POLITE_REMEMBER = re.compile(
    r"(?:can|could|would|will)\s+you\s+(?:please\s+)?(?:remember|note|keep in mind)\b",
    re.IGNORECASE,
)
_RECALL_QUESTION = re.compile(r"(?:do|did)\s+you\s+remember\b", re.IGNORECASE)
_ONLY_REMEMBER = re.compile(
    r"(?:please\s+)?(?:remember|don'?t forget|do not forget|keep in mind|make a note of|"
    r"note|take note of)(?:\s+(?:this|that|it|these|those))?(?:\s+please)?\W*",
    re.IGNORECASE,
)
_FIRST_PERSON = re.compile(r"\bI\b|\bI'(?:m|ve|d|ll)\b|(?i:\b(?:my|mine|myself|we|our|ours)\b)")
_NAME = re.compile(r"(?<=[a-z0-9,;:] )[A-Z][a-z]+")
_CODE = re.compile(r"[=(){}\[\]`<>]|^(?:def|class|import|from|return|for|if|while)\b")


def _sentences(text: str) -> list[str]:
    """``text`` split into sentences: by line, then after ``.``/``!``/``?`` and a space; list
    markers stripped, whitespace collapsed."""
    found = []
    for line in text.splitlines():
        for part in _SENTENCE_END.split(_LIST_MARKER.sub("", line)):
            sentence = " ".join(part.split())
            if sentence:
                found.append(sentence)
    return found


def _asks_to_remember(sentence: str) -> bool:
    return bool(_REMEMBER.search(sentence)) and not _RECALL_QUESTION.match(sentence)


def _is_fact(sentence: str) -> bool:
    """The rules of :func:`stated_facts` for one sentence, in order."""
    remember = _asks_to_remember(sentence)
    if remember and _ONLY_REMEMBER.fullmatch(sentence):
        return False  # "Please remember this." states nothing itself
    if sentence.endswith("?"):
        if not _POLITE_REMEMBER.match(sentence):
            return False
    elif _QUESTION_OPENER.match(sentence) and not remember:
        return False
    if remember:
        return True
    if _REQUEST_OPENER.match(sentence):
        return False
    if _FIRST_PERSON.search(sentence):
        return True
    if _CODE.search(sentence):
        return False
    return any(c.isdigit() for c in sentence) or bool(_NAME.search(sentence))


def stated_facts(text: str) -> list[str]:
    """The sentences of ``text`` (a user's message) that state something to keep, verbatim
    (whitespace collapsed), in order.

    A sentence ends at a line break or after ``.``/``!``/``?`` and a space (list markers are
    stripped). The rules, first match wins:

    1. a sentence that only asks to remember ("Please remember this.") is dropped: it states
       nothing itself;
    2. a question is dropped: it ends with ``?`` (except a polite request to remember, "Could
       you remember that ...?") or opens with what/who/how/which/is/are/do/can/... (except a
       request to remember, "Do remember ...");
    3. a request to remember ("remember", "don't forget", "keep in mind", "note that") is kept;
    4. a request ("Explain ...", "Tell me ...", "Help ...") is dropped;
    5. a sentence about the user (I, my, we, our) is kept;
    6. a sentence that looks like code (``= ( ) [ ] { } ` < >``) is dropped;
    7. a sentence with a number or a code (``X7-4431``), or a capitalised word past its first
       (a name: "The review is with Bob."), is kept; anything else (greetings, thanks,
       remarks) is dropped.
    """
    return [sentence for sentence in _sentences(text) if _is_fact(sentence)]


def _fact_key(fact: str) -> str:
    return fact.casefold().rstrip(" .!")


def previous_facts(summary: str) -> list[str]:
    """The facts a previous boundary kept: the ``- `` lines of a key-facts summary; a summary
    of another form (written before the chain switched strategies) is read as a user's text."""
    lines = summary.strip().splitlines()
    if lines and lines[0].strip() == KEY_FACTS_HEADER:
        return [
            line[2:].strip() for line in lines[1:] if line.startswith("- ") and line[2:].strip()
        ]
    return stated_facts(summary)


def render_key_facts(facts: Sequence[str]) -> str:
    """``facts`` as a key-facts summary: :data:`KEY_FACTS_HEADER`, then one ``- `` line each
    ("" for none)."""
    if not facts:
        return ""
    return "\n".join([KEY_FACTS_HEADER, *(f"- {fact}" for fact in facts)])


def select_facts(facts: Sequence[str], max_tokens: int) -> list[str]:
    """The facts that fit in ``max_tokens`` (estimated, header included): those asking to be
    remembered first, then the others, each group earliest first; a fact that does not fit is
    skipped and smaller ones after it may still go in. Returned in their original order."""
    budget = max_tokens - _ESTIMATOR.estimate(KEY_FACTS_HEADER + "\n")
    order = sorted(range(len(facts)), key=lambda i: (not _asks_to_remember(facts[i]), i))
    chosen: set[int] = set()
    for index in order:
        cost = _ESTIMATOR.estimate(f"- {facts[index]}\n")
        if cost <= budget:
            chosen.add(index)
            budget -= cost
    return [fact for index, fact in enumerate(facts) if index in chosen]


def deduplicated(facts: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    unique = []
    for fact in facts:
        key = _fact_key(fact)
        if key not in seen:
            seen.add(key)
            unique.append(fact)
    return unique
