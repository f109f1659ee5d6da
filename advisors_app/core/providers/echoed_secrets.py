"""Known secret values out of a provider's *successful* replies (issue 36).

A provider (or a proxy in front of it) that echoes the request's API key in a reply — "your
key sk-… has 3 requests left" — would show the key to the user and have it stored with the
conversation. Errors never carried it (the Django layer redacts them), replies did.

:class:`SecretFilter` replaces every occurrence of known secret values (literals, not shapes:
a reply that *explains* what an ``sk-`` key looks like is left alone) with :data:`MARKER`.
Streams are filtered with :meth:`SecretFilter.stream`: a key split across chunks must still be
caught, so a chunk's end that could be the start of a secret (at most ``len(longest secret) -
1`` characters) is held back; it goes out with the next chunk, or — redacted — when the stream
finishes.

What is secret: the model's own key, always, plus what the process declares through
:func:`set_known_secrets` (the Django layer's configured keys, ``SECRET_KEY``, …:
:mod:`advisors_app.security.redaction`). Values shorter than :data:`MIN_LENGTH` are ignored:
they are no real keys, and replacing them would garble ordinary text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

__all__ = [
    "MARKER",
    "MIN_LENGTH",
    "SecretFilter",
    "StreamFilter",
    "reply_filter",
    "set_known_secrets",
]

#: What a secret is replaced with (the Django layer's marker).
MARKER = "[REDACTED]"

#: Shorter values are no real keys.
MIN_LENGTH = 8


class SecretFilter:
    """Replaces a fixed set of secret values in text (longest first, so a value holding
    another is replaced whole)."""

    __slots__ = ("_firsts", "_pattern", "_prefixes")

    def __init__(self, secrets: Iterable[str]) -> None:
        values = sorted({s for s in secrets if len(s) >= MIN_LENGTH}, key=lambda s: (-len(s), s))
        self._pattern = re.compile("|".join(map(re.escape, values))) if values else None
        #: Every proper prefix of every secret, and their first characters: what a stream
        #: must hold back at a piece's end.
        self._prefixes = frozenset(v[:n] for v in values for n in range(1, len(v)))
        self._firsts = frozenset(v[0] for v in values)

    def text(self, text: str) -> str:
        """``text`` with every secret replaced by :data:`MARKER`."""
        if self._pattern is None or len(text) < MIN_LENGTH:
            return text
        return self._pattern.sub(MARKER, text)

    def stream(self) -> StreamFilter:
        """A filter for one stream of text pieces."""
        return StreamFilter(self)


class StreamFilter:
    """One stream's pieces through a :class:`SecretFilter`: :meth:`feed` each piece, then
    :meth:`flush` what was held back at its end.

    Only what could still become a secret is held back — the longest end of the text so far
    that begins some secret (at most ``len(longest secret) - 1`` characters) — so a reply
    that mentions no secret streams as it comes."""

    __slots__ = ("_filter", "_pending")

    def __init__(self, secret_filter: SecretFilter) -> None:
        self._filter = secret_filter
        self._pending = ""

    def feed(self, piece: str) -> str:
        """What of ``piece`` (after what was held back) can be sent now, redacted."""
        secrets = self._filter
        if secrets._pattern is None:
            return piece
        text = self._pending + piece
        prefixes = secrets._prefixes
        out: list[str] = []
        position = 0
        for match in secrets._pattern.finditer(text):
            if text[match.start() :] in prefixes:  # may still grow into a longer secret
                break
            out += (text[position : match.start()], MARKER)
            position = match.end()
        hold = len(text)
        firsts = secrets._firsts
        for index in range(position, len(text)):
            if text[index] in firsts and text[index:] in prefixes:
                hold = index
                break
        out.append(text[position:hold])
        self._pending = text[hold:]
        return "".join(out)

    def flush(self) -> str:
        """What was held back, redacted (the stream ended)."""
        rest, self._pending = self._pending, ""
        return self._filter.text(rest)


_known: Callable[[], Iterable[str]] = tuple
_last: tuple[frozenset[str], SecretFilter] = (frozenset(), SecretFilter(()))


def set_known_secrets(source: Callable[[], Iterable[str]]) -> None:
    """Declare where this process's secret values come from (called at each model call, so a
    rotated key is known at once); the Django app installs its configured secrets here."""
    global _known
    _known = source


def reply_filter(*own: str | None) -> SecretFilter:
    """The filter for one model call: the known secrets and ``own`` (the model's key)."""
    global _last
    try:
        known = set(_known())
    except Exception:  # a source that fails must not fail the call: the model's own key stays
        known = set()
    secrets = frozenset(known | {value for value in own if value})
    if secrets != _last[0]:
        _last = (secrets, SecretFilter(secrets))
    return _last[1]
