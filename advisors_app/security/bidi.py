"""Names people chose, shown safely: bidi control characters out, the name isolated.

A conversation title or a file name may hold Unicode's explicit directional formatting characters
(embeddings, overrides and isolates: U+202A–U+202E, U+2066–U+2069). Shown as they are, an
override reverses what follows it (``invoice<U+202E>fdp.exe`` reads as ``invoiceexe.pdf``) and,
left open, reorders the text around the name too (the score after a source's title, the rest of
a line in the admin). They are never needed to show a name right: Hebrew or Arabic text takes
its direction from its own letters. So where the app shows such a name it drops them
(:func:`without_bidi_controls`) and isolates the name from its surroundings (``<bdi>``, or
``dir="auto"``, which isolates too). The stored value is left as it was. Left- and right-to-left
marks (U+200E, U+200F, U+061C) stay: they only nudge punctuation next to them.
"""

from __future__ import annotations

import re

from django.utils.html import format_html
from django.utils.safestring import SafeString

__all__ = ["BIDI_CONTROLS", "isolated", "without_bidi_controls"]

#: LRE, RLE, PDF, LRO, RLO and LRI, RLI, FSI, PDI.
BIDI_CONTROLS = re.compile("[\u202a-\u202e\u2066-\u2069]")


def without_bidi_controls(text: str) -> str:
    """``text`` without explicit directional formatting characters (see the module docstring)."""
    return BIDI_CONTROLS.sub("", text)


def isolated(text: str) -> SafeString:
    """``text`` without bidi controls, HTML-escaped in a ``<bdi>`` element."""
    return format_html("<bdi>{}</bdi>", without_bidi_controls(text))
