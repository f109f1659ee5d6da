"""Text folding and many-word matching for the guard advisors (``SafeGuardAdvisor``).

Folding makes look-alike texts equal before matching, the same way for the sensitive words and
for the text searched:

1. Unicode NFKC (full-width ``ｂｏｍｂ`` → ``bomb``, ligatures, compatibility forms);
2. removal of invisible characters: every format character (general category Cf: zero-width
   space/joiners, soft hyphen, bidi controls, tag characters) plus the other
   Default_Ignorable_Code_Point characters of Unicode's DerivedCoreProperties (variation
   selectors, combining grapheme joiner, Hangul fillers, Khmer inherent vowels);
3. homoglyph folding with the Unicode TR39 confusables data shipped by the
   ``confusable-homoglyphs`` package (Cyrillic ``о`` → ``o``, digit ``0`` → ``O``): each
   character that the data maps to a prototype is replaced by that prototype, repeated with
   NFKC and case folding until stable. ASCII letters are never folded into other letters:
   TR39 maps ``m`` to ``rn``, which would make the word "porn" match "pompous";
3b. diacritics removed: accented Latin, Greek and Cyrillic letters fold to their base letter
   (``bómb`` → ``bomb``) and combining diacritical marks left after NFKC are dropped
   (``b̵omb`` → ``bomb``); marks of other scripts (Indic vowel signs, kana voicing) are kept;
4. case folding (``str.casefold``, locale-independent; skipped when case-sensitive), after
   the homoglyphs (Cyrillic ``В`` looks like ``B``, its lower case ``в`` not like ``b``),
   then step 3 again for what case folding produced.

Where the confusables data pairs exactly two characters without saying which is the prototype,
the ASCII one (else the lower code point) represents both: matching only needs both sides
folded alike.

Matching uses an Aho-Corasick automaton (``pyahocorasick``), so its cost grows with the text
length, not with the number of words: large word lists stay fast.
"""

from __future__ import annotations

import sys
import threading
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache

import ahocorasick

__all__ = ["WordMatch", "WordMatcher", "fold_text"]

# Default_Ignorable_Code_Point characters that are not Cf (DerivedCoreProperties.txt).
_IGNORABLE_RANGES = (
    (0x034F, 0x034F),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFFA0, 0xFFA0),
    (0xE0100, 0xE01EF),
)
# The confusables data wraps right-to-left characters in these marks for display.
_DISPLAY_MARKS = str.maketrans("", "", "\u200e\u200f")
# Scripts written without spaces: a word boundary cannot be asked for next to them.
_UNSPACED_PREFIXES = (
    "CJK",
    "HIRAGANA",
    "KATAKANA",
    "HALFWIDTH KATAKANA",
    "IDEOGRAPHIC",
    "THAI",
    "LAO",
    "KHMER",
    "MYANMAR",
    "TIBETAN",
)

_lock = threading.Lock()
_tables: dict[bool, dict[int, str | None]] = {}


def _invisible() -> dict[int, None]:
    table: dict[int, None] = {
        cp: None for cp in range(sys.maxunicode + 1) if unicodedata.category(chr(cp)) == "Cf"
    }
    for low, high in _IGNORABLE_RANGES:
        table.update(dict.fromkeys(range(low, high + 1)))
    return table


def _prototypes() -> dict[str, str]:
    """Single characters → their TR39 prototype, from the ``confusable-homoglyphs`` data."""
    from confusable_homoglyphs.confusables import confusables_data

    def clean(text: str) -> str:
        return text.translate(_DISPLAY_MARKS)

    mapping: dict[str, str] = {}
    for key, entries in confusables_data.items():
        source = clean(key)
        if len(source) != 1 or len(entries) != 1:
            continue  # a prototype (it lists its many sources) or a multi-character sequence
        target = clean(entries[0]["c"])
        if not target or target == source:
            continue
        back = confusables_data.get(entries[0]["c"], ())
        if len(target) == 1 and len(back) == 1 and clean(back[0]["c"]) == source:
            # Two characters naming only each other: pick one representative for both.
            keep = min((source, target), key=lambda c: (not c.isascii(), ord(c)))
            if keep == source:
                continue
        mapping[source] = target
    return mapping


# Blocks of generic combining diacritics (accents, overlays) — not script-specific marks.
_DIACRITIC_RANGES = (
    (0x0300, 0x036F),
    (0x1AB0, 0x1AFF),
    (0x1DC0, 0x1DFF),
    (0x20D0, 0x20FF),
    (0xFE20, 0xFE2F),
)
# Latin, Greek and Cyrillic letters with precomposed accents all lie below U+2000.
_ACCENTED_LETTERS_END = 0x2000


def _is_diacritic(char: str) -> bool:
    code = ord(char)
    return any(low <= code <= high for low, high in _DIACRITIC_RANGES)


def _build_table(case_sensitive: bool) -> dict[int, str | None]:
    prototypes = {
        source: target
        for source, target in _prototypes().items()
        if not (source.isascii() and source.isalpha())
    }

    def settle(text: str) -> str:
        for _ in range(8):
            step = unicodedata.normalize("NFKC", "".join(prototypes.get(c, c) for c in text))
            if not case_sensitive:
                step = step.casefold()
            if step == text:
                break
            text = step
        return text

    table: dict[int, str | None] = {}
    for char in prototypes:
        folded = settle(char)
        if folded != char:
            table[ord(char)] = folded
    for code in range(0x80, _ACCENTED_LETTERS_END):
        decomposed = unicodedata.normalize("NFD", chr(code))
        if code not in table and len(decomposed) > 1 and all(map(_is_diacritic, decomposed[1:])):
            table[code] = settle(decomposed[0])
    for low, high in _DIACRITIC_RANGES:
        table.update(dict.fromkeys(range(low, high + 1)))
    table.update(_invisible())
    return table


def _table(case_sensitive: bool) -> dict[int, str | None]:
    table = _tables.get(case_sensitive)
    if table is None:
        with _lock:
            table = _tables.get(case_sensitive)
            if table is None:
                table = _tables[case_sensitive] = _build_table(case_sensitive)
    return table


def fold_text(text: str, *, case_sensitive: bool = False, normalize: bool = True) -> str:
    """``text`` folded for matching (module docstring); the result is never shown to users.

    With ``normalize=False`` only case is folded, with ``str.lower()`` (Spring AI's
    ``toLowerCase(Locale.ROOT)``), or nothing at all when ``case_sensitive`` too.
    """
    if not normalize:
        return text if case_sensitive else text.lower()
    table = _table(case_sensitive)
    folded = unicodedata.normalize("NFKC", text).translate(table)
    if case_sensitive:
        return folded
    # Homoglyphs first, then case: Cyrillic "В" is a look-alike of "B", but its lower case "в"
    # is not one of "b". The second pass folds what case folding produced.
    return folded.casefold().translate(table)


def _is_word_char(char: str) -> bool:
    return char.isalnum() or char == "_" or unicodedata.category(char).startswith("M")


@lru_cache(maxsize=4096)
def _needs_boundary(char: str) -> bool:
    if not _is_word_char(char):
        return False
    return not unicodedata.name(char, "").startswith(_UNSPACED_PREFIXES)


@dataclass(frozen=True, slots=True)
class WordMatch:
    """A sensitive word found in a text: the word as configured and the list it came from."""

    word: str
    list_name: str | None = None


class WordMatcher:
    """Finds configured words in texts, after folding both (see the module docstring).

    ``lists`` maps a list name (or ``None``) to its words; blank words are ignored; words that
    fold to the same text are one word, named by the spelling met first (in ``lists`` order). With
    ``whole_words`` a match must not continue a word on either side (letters, digits, ``_``
    and combining marks continue a word); the check is skipped at a word edge written in a
    script without spaces (Chinese, Japanese, Thai ...), where every position is a boundary.
    Immutable and safe to share between threads and concurrent requests.
    """

    __slots__ = (
        "_automaton",
        "_case_sensitive",
        "_entries",
        "_normalize",
        "_whole_words",
        "max_length",
    )

    def __init__(
        self,
        lists: Mapping[str | None, Iterable[str]],
        *,
        case_sensitive: bool = False,
        whole_words: bool = False,
        normalize: bool = True,
    ) -> None:
        self._case_sensitive = case_sensitive
        self._whole_words = whole_words
        self._normalize = normalize
        entries: dict[str, list[WordMatch]] = {}
        for list_name, words in lists.items():
            for word in words:
                if word is None:
                    raise ValueError("Sensitive words must not contain null elements!")
                folded = self.fold(word) if word.strip() else ""
                if not folded.strip():
                    continue
                bucket = entries.setdefault(folded, [])
                # Spellings that fold alike are one word ("decorator" and "Decorator" unless
                # case-sensitive): it is reported once, in the spelling configured first.
                found = WordMatch(bucket[0].word if bucket else word, list_name)
                if found not in bucket:
                    bucket.append(found)
        self._entries = entries
        #: Length of the longest folded word (0 without words), in folded characters.
        self.max_length = max(map(len, entries), default=0)
        self._automaton: ahocorasick.Automaton | None = None
        if entries:
            automaton = ahocorasick.Automaton()
            for folded in entries:
                automaton.add_word(folded, folded)
            automaton.make_automaton()
            self._automaton = automaton

    def __bool__(self) -> bool:
        return self._automaton is not None

    def fold(self, text: str) -> str:
        return fold_text(text, case_sensitive=self._case_sensitive, normalize=self._normalize)

    def folded_length(self, char: str) -> int:
        """Folded characters ``char`` adds to a text (0 for invisible characters and marks)."""
        return _folded_length(char, self._case_sensitive, self._normalize)

    def search(self, text: str) -> list[WordMatch]:
        """Every configured word found in ``text``, in order of first occurrence, no duplicates."""
        return self.search_folded(self.fold(text)) if self._automaton is not None else []

    def search_folded(
        self, folded: str, *, min_end: int = 0, open_end: bool = False
    ) -> list[WordMatch]:
        """As :meth:`search`, for a text already folded with :meth:`fold`.

        For texts that arrive in pieces: matches ending at or before ``min_end`` were judged
        already and are skipped; with ``open_end`` the text may continue, so a whole-word match
        that touches its end is left undecided (not reported) until more text arrives.
        """
        if self._automaton is None or not folded:
            return []
        found: list[WordMatch] = []
        seen: set[str] = set()
        for last, word in self._automaton.iter(folded):
            end = last + 1
            if end <= min_end or word in seen:
                continue
            if not self._acceptable(folded, end - len(word), end, word, open_end):
                continue
            seen.add(word)
            found.extend(self._entries[word])
        return found

    def _acceptable(self, text: str, start: int, end: int, word: str, open_end: bool) -> bool:
        if not self._whole_words:
            return True
        if start > 0 and _needs_boundary(word[0]) and _is_word_char(text[start - 1]):
            return False
        if end == len(text):
            return not (open_end and _needs_boundary(word[-1]))
        return not (_needs_boundary(word[-1]) and _is_word_char(text[end]))


@lru_cache(maxsize=8192)
def _folded_length(char: str, case_sensitive: bool, normalize: bool) -> int:
    if unicodedata.category(char).startswith("M"):
        return 0
    return len(fold_text(char, case_sensitive=case_sensitive, normalize=normalize))
