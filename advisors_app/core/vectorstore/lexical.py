"""What keyword search indexes and asks for: words, and identifiers exactly as written.

PostgreSQL's default text search parser cuts code identifiers apart or hides their parts:
``co_varnames`` becomes the two words ``co`` and ``varnames`` (``_`` separates words), so
``co_names`` and ``co_varnames`` share a word; ``__init_subclass__`` becomes ``init`` and
``subclass``; ``str.casefold`` becomes one ``host`` token, so a question about ``casefold``
does not find it. This module gives a store what to add so that identifiers match as written:

* :func:`identifier_terms`: the identifiers of a text that hold ``_`` or ``.`` (lower-cased),
  each dotted name also as its dotted tails (``os.path.join`` → ``path.join``, ``join``);
* :func:`exact_term`: one identifier as a single token any parser keeps whole and no
  dictionary changes (letters and digits only: ``z`` → ``zz``, ``_`` → ``zu``, ``.`` → ``zd``,
  so different identifiers never give the same token);
* :class:`LexicalText`: a chunk's (or a query's) text split into what a store indexes with the
  collection's language (the words, and the parts of dotted names the parser would hide) and
  the exact identifier tokens, indexed with PostgreSQL's ``simple`` configuration.

A store indexes and queries through the same function, so a question and a chunk that name
``co_varnames`` share the token ``cozuvarnames`` whatever the language configuration.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["LexicalText", "exact_term", "identifier_terms", "lexical_text"]

# A name, optionally dotted: ``str.casefold``, ``__aenter__``, ``a.__class__.__mro__``.
_NAME = re.compile(r"(?<![\w.])[^\W\d]\w*(?:\.[^\W\d]\w*)*")
_ESCAPES = str.maketrans({"z": "zz", "_": "zu", ".": "zd"})


def identifier_terms(text: str) -> list[str]:
    """The identifiers in ``text`` holding ``_`` or ``.``, lower-cased, in order of first use,
    each dotted name followed by its dotted tails (``str.casefold`` → ``str.casefold``,
    ``casefold``). Plain words are left to the language's parser."""
    terms: dict[str, None] = {}
    for match in _NAME.finditer(text):
        name = match.group().lower()
        if "_" not in name and "." not in name:
            continue
        parts = name.split(".")
        for start in range(len(parts)):
            terms.setdefault(".".join(parts[start:]), None)
    return list(terms)


def exact_term(identifier: str) -> str:
    """``identifier`` as one token of letters and digits (see the module docstring)."""
    return identifier.lower().translate(_ESCAPES)


@dataclass(frozen=True, slots=True)
class LexicalText:
    """A text as a store indexes or searches it.

    ``words``: the text, then the parts of its dotted names (the parser reads ``str.casefold``
    as one token and would never match ``casefold``), for the collection's language
    configuration. ``exact``: the :func:`exact_term` of each identifier holding ``_`` or ``.``,
    space-separated, for PostgreSQL's ``simple`` configuration.
    """

    words: str
    exact: str


def lexical_text(text: str) -> LexicalText:
    """``text`` split for indexing or searching (see :class:`LexicalText`)."""
    terms = identifier_terms(text)
    # The last parts of dotted names (``casefold`` of ``str.casefold``); the parser finds the
    # words of underscored names itself.
    parts = [term for term in terms if "." not in term and "_" not in term]
    exact = [exact_term(term) for term in terms if "_" in term or "." in term]
    words = text if not parts else f"{text}\n{' '.join(parts)}"
    return LexicalText(words, " ".join(exact))
