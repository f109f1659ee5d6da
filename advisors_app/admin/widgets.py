"""The admin's textarea: what an editor types is stored with ``"\\n"`` line breaks.

Browsers submit every line break of a ``<textarea>`` as ``"\\r\\n"`` (the HTML standard's form
submission encoding), so a system prompt, a prompt template or a word list typed in the admin
would otherwise be stored with CRLF, sent to the model that way and copied into stored
messages. Every textarea of the app's admin uses :class:`Textarea`: the declared form fields
name it, and :data:`TEXTAREA_OVERRIDES` (each ``ModelAdmin``'s ``formfield_overrides``) gives
it to the fields the admin generates from model fields. ``tests/admin/test_widgets.py`` checks
that no textarea is left out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django import forms
from django.db import models
from django.utils.text import normalize_newlines

__all__ = ["TEXTAREA_OVERRIDES", "Textarea"]


class Textarea(forms.Textarea):
    """A textarea whose submitted value has ``"\\n"`` line breaks (``"\\r\\n"``, ``"\\r"`` folded).

    Folding the submitted value, before any field parses it, serves every field alike: text
    fields, one-word-per-line lists (split on ``"\\n"``) and JSON.
    """

    def value_from_datadict(self, data: Mapping[str, Any], files: Any, name: str) -> Any:
        value = super().value_from_datadict(data, files, name)
        return normalize_newlines(value) if isinstance(value, str) else value


#: ``ModelAdmin.formfield_overrides`` giving generated text and JSON fields a :class:`Textarea`
#: (text fields keep the admin's ``vLargeTextField`` look).
TEXTAREA_OVERRIDES: dict[type[models.Field], dict[str, Any]] = {
    models.TextField: {"widget": Textarea(attrs={"class": "vLargeTextField"})},
    models.JSONField: {"widget": Textarea},
}
