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

import json
from collections.abc import Mapping
from typing import Any

from django import forms
from django.db import models
from django.utils.text import normalize_newlines

__all__ = ["TEXTAREA_OVERRIDES", "ParamsEditor", "Textarea"]


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


class ParamsEditor(Textarea):
    """An advisor row's params: a form drawn from the type's JSON Schema, over the JSON textarea.

    The textarea holds the params as JSON and is what the form submits; ``chain-editor.js``
    draws django-jsonform's editor above it for the row's type (the schemas are on the page once,
    :func:`advisors_app.admin.param_forms.form_specs`), keeps the textarea in step, and offers a
    "Raw JSON" toggle back to the textarea. Without JavaScript the textarea is all there is.
    ``advisor_type`` picks the schema; ``error_map`` places server-side errors on their fields.
    """

    template_name = "admin/advisors_app/widgets/params_editor.html"

    def __init__(self, attrs: dict[str, Any] | None = None) -> None:
        super().__init__(attrs)
        self.advisor_type = ""
        self.error_map: dict[str, list[str]] = {}

    def get_context(self, name: str, value: Any, attrs: dict[str, Any] | None) -> dict[str, Any]:
        context = super().get_context(name, value, attrs)
        context["widget"]["advisor_type"] = self.advisor_type
        context["widget"]["error_map"] = json.dumps(self.error_map, ensure_ascii=False)
        return context

    class Media:
        css = {"all": ["django_jsonform/style.css"]}
        js = [
            "django_jsonform/vendor/react.production.min.js",
            "django_jsonform/vendor/react-dom.production.min.js",
            "django_jsonform/vendor/react-modal.min.js",
            "django_jsonform/react-json-form.js",
            "advisors_app/vendor/sortablejs/Sortable.min.js",
            "advisors_app/chain-editor.js",
        ]
