"""The demo's knowledge: the Python Language Reference topics of ``pydoc_data.topics``.

The standard library ships the reference as the text of ``help("with")`` and friends: one
topic per keyword or subject (79 topics, ~465 KB on Python 3.11), written by the Python
documentation team. :func:`python_reference_topics` turns it into :class:`Topic` values ready
to embed:

* the reStructuredText underlines (``*****``, ``=====``) are dropped: they carry no meaning
  and only spend tokens of a small model's context;
* each topic's first line is its human title (``The "with" statement``);
* **every passage is kept once**, in the most specific topic. Chapter topics repeat the text
  of narrower ones verbatim (``compound`` holds ``if``, ``while``, ``with``, ``try``...;
  ``specialnames`` holds ``customization``, ``context-managers``...; ``else`` is ``if``): a
  narrower topic's section (its heading plus body) is removed from the wider one, and a topic
  identical to another becomes an alias (skipped). Otherwise a search returns the same
  paragraph two or three times, filling a small ``top_k`` with copies and citing a chapter
  instead of the section that answers.
"""

from __future__ import annotations

import hashlib
import re
import sys
from dataclasses import dataclass

__all__ = ["CORPUS", "Topic", "corpus_fingerprint", "python_reference_topics"]

#: Metadata value of ``corpus`` on every chunk of the demo collection.
CORPUS = "python-reference"

_UNDERLINE = re.compile(r"^([=\-*~^#])\1*$")
_BLANK_RUNS = re.compile(r"\n{3,}")


@dataclass(frozen=True, slots=True)
class Topic:
    """One ``pydoc`` topic: its key (``"with"``), human title and cleaned text (no title)."""

    name: str
    title: str
    text: str


def _without_underlines(text: str) -> str:
    lines = text.strip("\n").splitlines()
    kept: list[str] = []
    for index, line in enumerate(lines):
        above = lines[index - 1].strip() if index else ""
        mark = line.strip()
        if above and _UNDERLINE.match(mark) and len(mark) == len(above):
            continue
        kept.append(line.rstrip())
    return "\n".join(kept)


def _split_title(text: str) -> tuple[str, str]:
    title, _, body = _without_underlines(text).partition("\n")
    return title.strip(), body.strip("\n")


def python_reference_topics(topics: dict[str, str] | None = None) -> list[Topic]:
    """The reference's topics, de-duplicated (see the module docstring), sorted by name.

    ``topics`` defaults to ``pydoc_data.topics.topics`` of the running Python; topics that
    end up empty (aliases, or chapters made only of narrower topics) are left out.
    """
    if topics is None:
        from pydoc_data.topics import topics as stdlib_topics

        topics = stdlib_topics
    parsed = {name: _split_title(text) for name, text in topics.items()}
    # Narrowest first, so each passage stays with the smallest topic that holds it; between
    # identical topics, the one whose name is its title's keyword wins ("if" over "else").
    order = sorted(
        parsed,
        key=lambda n: (len(parsed[n][1]), f'"{n}"' not in parsed[n][0], n),
    )
    kept: dict[str, str] = {}
    for name in order:
        body = parsed[name][1]
        for narrower in kept:
            narrow_title, narrow_body = parsed[narrower]
            if not narrow_body:
                continue
            if body == narrow_body:
                body = ""
                break
            section = f"{narrow_title}\n\n{narrow_body}"
            body = body.replace(section, "") if section in body else body
        kept[name] = _BLANK_RUNS.sub("\n\n\n", body).strip()
    return [Topic(name, parsed[name][0], kept[name]) for name in sorted(kept) if kept[name].strip()]


def corpus_fingerprint(topics: list[Topic]) -> str:
    """SHA-256 (hex) of the topics' names, titles and texts, and the Python version."""
    digest = hashlib.sha256(f"{sys.version_info[:2]}".encode())
    for topic in topics:
        digest.update(f"\0{topic.name}\0{topic.title}\0{topic.text}".encode())
    return digest.hexdigest()
