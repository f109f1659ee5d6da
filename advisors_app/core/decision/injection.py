"""The offline prompt-injection classifier shipped with the app.

:func:`prompt_injection_classifier` loads ``data/prompt_injection.npz`` from this package (never
from a hub): a :class:`~.linear.LinearClassifier` over :class:`~.features.HashedNgramFeatures`,
trained by :mod:`advisors_app.guards.training` on public labelled sets of known licence and on
our own examples of instructions hidden in documents and tool results (sources and figures in
``docs/guards.md``). It reads a text in overlapping windows and also reads what base64 and
hex payloads in it decode to (:func:`decoded_views`), and answers ``"attack"`` from a
probability of :data:`INJECTION_THRESHOLD`. Hashed n-grams rather than MiniLM embeddings: on the
same data MiniLM scored lower (``docs/guards.md``), takes ~3 ms a sentence and ~20 ms for 256
tokens on two cores (the n-grams and cues: ~4-5 ms for 512 tokens), and is English-first.
"""

from __future__ import annotations

import base64
import binascii
import re
import threading
from importlib import resources

from .classifier import ClassifierDecisionModel, Windows

__all__ = [
    "ATTACK",
    "BENIGN",
    "INJECTION_THRESHOLD",
    "PROMPT_INJECTION_QUESTION",
    "decoded_views",
    "prompt_injection_classifier",
]

ATTACK = "attack"
BENIGN = "benign"
#: The question the shipped classifier answers.
PROMPT_INJECTION_QUESTION = (
    "Does this text try to give instructions to an AI assistant (a prompt injection)?"
)
WEIGHTS = "prompt_injection.npz"
#: The probability of an attack from which the classifier answers :data:`ATTACK`: chosen on
#: the shipped guard dataset (precision and recall in ``docs/guards.md``).
INJECTION_THRESHOLD = 0.6

_BASE64 = re.compile(r"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/_-]{16,}={0,2}(?![A-Za-z0-9+/=_-])")
_HEX = re.compile(r"(?<![0-9A-Fa-f])(?:[0-9A-Fa-f]{2}){12,}(?![0-9A-Fa-f])")
# Decoded bytes count as text when nearly all are printable (letters, digits, punctuation).
_PRINTABLE_SHARE = 0.9
_MAX_VIEWS = 8


def _as_text(raw: bytes) -> str | None:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if len(text) < 8:
        return None
    printable = sum(ch.isprintable() or ch in "\n\r\t" for ch in text)
    return text if printable >= _PRINTABLE_SHARE * len(text) else None


def decoded_views(text: str) -> list[str]:
    """What base64 (standard or URL-safe) and hex runs of ``text`` decode to, when that is
    readable text: at most eight, in order. An instruction hidden as ``aWdub3Jl...`` is then
    read as plain words."""
    views: list[str] = []
    for match in _BASE64.finditer(text):
        run = match.group().replace("-", "+").replace("_", "/")
        if run.isalnum() and (run.isdigit() or run.isalpha()):
            continue  # a long word or number, not an encoding
        try:
            raw = base64.b64decode(run + "=" * (-len(run) % 4), validate=True)
        except (binascii.Error, ValueError):
            continue
        if (decoded := _as_text(raw)) is not None:
            views.append(decoded)
        if len(views) >= _MAX_VIEWS:
            return views
    for match in _HEX.finditer(text):
        if (decoded := _as_text(bytes.fromhex(match.group()))) is not None:
            views.append(decoded)
        if len(views) >= _MAX_VIEWS:
            break
    return views


_lock = threading.Lock()
_loaded: ClassifierDecisionModel | None = None


def prompt_injection_classifier() -> ClassifierDecisionModel:
    """The shipped classifier (loaded once per process, ~30 ms; thread-safe), answering
    :data:`ATTACK` from a probability of :data:`INJECTION_THRESHOLD`."""
    global _loaded
    if _loaded is None:
        with _lock:
            if _loaded is None:
                source = resources.files(__package__).joinpath("data", WEIGHTS)
                with resources.as_file(source) as path:
                    _loaded = ClassifierDecisionModel.load(
                        path,
                        question=PROMPT_INJECTION_QUESTION,
                        positive=ATTACK,
                        threshold=INJECTION_THRESHOLD,
                        windows=Windows(),
                        views=decoded_views,
                    )
    return _loaded
