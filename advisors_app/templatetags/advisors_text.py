"""Template filters for names people chose: ``{% load advisors_text %}``."""

from __future__ import annotations

from typing import Any

from django import template

from advisors_app.security.bidi import without_bidi_controls as _without_bidi_controls

__all__ = ["register", "without_bidi_controls"]

register = template.Library()


@register.filter
def without_bidi_controls(value: Any) -> str:
    """The value as text, without bidi control characters (:mod:`advisors_app.security.bidi`); put
    it in an element with ``dir="auto"`` (or a ``<bdi>``) to isolate it from the text around it."""
    return _without_bidi_controls(str(value))
