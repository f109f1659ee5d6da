"""Admin forms: advisor rows with registry-driven choices, schema help and the chain lint."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib.postgres.forms import SimpleArrayField
from django.core.exceptions import ValidationError
from django.forms.fields import InvalidJSONInput
from django.forms.models import BaseInlineFormSet
from django.utils.html import format_html, format_html_join
from django.utils.text import Truncator

from advisors_app.admin.param_forms import error_map, prune_untouched
from advisors_app.admin.widgets import ParamsEditor, Textarea
from advisors_app.definition import LintMessage, check_draft
from advisors_app.definition.registry import advisor_types, params_errors, schema_help
from advisors_app.definition.runtime import DRAFT
from advisors_app.definition.tools import tool_registry
from advisors_app.models import AdvisorChain, AdvisorConfig, PromptTemplate, SensitiveWordList
from advisors_app.orders import clean_order, format_order
from advisors_app.validation import printable

__all__ = [
    "AdvisorChainForm",
    "AdvisorConfigForm",
    "AdvisorConfigFormSet",
    "OrderField",
    "ParamsField",
    "PlaygroundForm",
    "PromptTemplateForm",
    "SensitiveWordListForm",
    "params_help",
    "ref_choices",
]


class BlankJSONField(forms.JSONField):
    """A JSON field that shows nothing (not ``null``) when it has no value, and refuses JSON
    nested deeper than Python's parser can read (a form error, not a server error)."""

    def prepare_value(self, value: Any) -> Any:
        # printable(): redisplaying refused input with an unpaired surrogate must not fail.
        return "" if value is None else printable(super().prepare_value(value))

    def to_python(self, value: Any) -> Any:
        try:
            return super().to_python(value)
        except RecursionError:
            raise ValidationError("The JSON is nested too deeply to read.") from None

    def bound_data(self, data: Any, initial: Any) -> Any:
        try:
            return super().bound_data(data, initial)
        except RecursionError:  # redisplayed as typed, like any other invalid JSON
            return InvalidJSONInput(data)


class OrderField(forms.CharField):
    """An advisor order: an integer, ``HIGHEST+N`` or ``LOWEST-N``; blank = type default."""

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, int):
            return format_order(value)
        return value

    def to_python(self, value: Any) -> int | None:
        try:
            return clean_order(str(value or ""))
        except ValueError as exc:
            raise ValidationError(str(exc), code="invalid") from None


def params_help(key: str) -> str:
    """HTML help for an advisor type's params, generated from its JSON Schema."""
    advisor_type = advisor_types.get(key)
    if advisor_type is None:
        return ""
    rows = schema_help(advisor_type.params_schema)
    if not rows:
        return "No params."
    return format_html_join(
        "; ",
        "<code>{}</code> ({}{}{}){}",
        (
            (
                row["name"],
                row["reference"] or row["type"],
                ", required" if row["required"] else "",
                f", default {row['default']}" if row["default"] else "",
                f": {row['description']}" if row["description"] else "",
            )
            for row in rows
        ),
    )


class ParamsField(BlankJSONField):
    """An advisor row's params; no params and ``{}`` are the same (an empty row is unchanged)."""

    def has_changed(self, initial: Any, data: Any) -> bool:
        if not initial and str(data or "").strip() in ("", "{}"):
            return False
        return super().has_changed(initial, data)


class AdvisorConfigForm(forms.ModelForm):
    """One advisor row: a registered type, an order, an enable toggle and its params.

    Params are edited through a form drawn from the type's JSON Schema (:class:`ParamsEditor`,
    with a raw JSON toggle) and checked against that schema by ``AdvisorConfig.clean()``; each
    error names the param (``"top_k: -1 is less than the minimum of 1"``) and is shown on its
    field in the editor too. Params the editor filled in by itself (defaults, blanks) are not
    stored (:func:`~advisors_app.admin.param_forms.prune_untouched`).
    """

    advisor_type = forms.ChoiceField(choices=())
    order = OrderField(required=False, help_text="Blank: the type's default. HIGHEST+N, LOWEST-N.")
    params = ParamsField(
        required=False,
        widget=ParamsEditor(attrs={"rows": 3, "cols": 48, "class": "vLargeTextField"}),
    )

    class Meta:
        model = AdvisorConfig
        fields = ["advisor_type", "order", "enabled", "params"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        choices = [("", "---------"), *advisor_types.choices()]
        current = self.instance.advisor_type
        if current and current not in advisor_types:
            choices.append((current, f"{current} (not registered)"))
        self.fields["advisor_type"].choices = choices
        self.fields["advisor_type"].widget.attrs["class"] = "advisor-type"
        self.fields["order"].widget.attrs["class"] = "advisor-order"
        if self.is_bound:
            current = str(self.data.get(self.add_prefix("advisor_type")) or "")
        self.fields["params"].widget.advisor_type = current
        default = advisor_types.get(current)
        if default is not None:
            self.fields["order"].widget.attrs["placeholder"] = format_order(default.default_order)

    def clean_params(self) -> Any:
        value = self.cleaned_data.get("params")
        value = {} if value is None else value
        advisor_type = advisor_types.get(str(self.data.get(self.add_prefix("advisor_type"))))
        if advisor_type is not None and isinstance(value, dict):
            value = prune_untouched(advisor_type, value, self.instance.params or {})
        return value

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        key = cleaned.get("advisor_type")
        if key in advisor_types and "params" in cleaned:
            errors = params_errors(key, cleaned["params"])
            widget: ParamsEditor = self.fields["params"].widget
            widget.error_map = error_map(advisor_types.get(key), errors)
        return cleaned


class AdvisorConfigFormSet(BaseInlineFormSet):
    """The chain's advisor rows; checks the draft (lint, then compile) as it would be saved."""

    lint_messages: list[LintMessage]

    def clean(self) -> None:
        super().clean()
        self.lint_messages = []
        if any(form.errors for form in self.forms):
            return  # row errors first: the lint needs valid rows
        rows = []
        for form in self.forms:
            if not form.has_changed() and form.instance.pk is None:
                continue
            if self.can_delete and self._should_delete_form(form):
                continue
            rows.append(form.instance)
        self.lint_messages = list(check_draft(self.instance, rows).messages)
        errors = [f"{m.id}: {m}" for m in self.lint_messages if m.is_error]
        if errors:
            raise ValidationError(errors)


class AdvisorChainForm(forms.ModelForm):
    """A chain's own fields; ``tools`` offers the names of
    ``advisors_app.definition.tools.tool_registry``."""

    tools = forms.MultipleChoiceField(
        choices=(),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text=(
            "Tools the model may call (registered in code with advisors_app.definition.tools)."
        ),
    )
    default_options = BlankJSONField(
        required=False,
        widget=Textarea(attrs={"rows": 3, "class": "vLargeTextField"}),
        help_text='Chat options, e.g. {"temperature": 0.2, "max_tokens": 512}.',
    )

    class Meta:
        model = AdvisorChain
        fields = [
            "slug",
            "name",
            "description",
            "enabled",
            "chat_model",
            "system_prompt",
            "system_template",
            "default_options",
            "tools",
            "version_policy",
        ]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        names = [(name, name) for name in tool_registry.names]
        names += [
            (n, f"{n} (not registered)")
            for n in self.instance.tools or ()
            if n not in tool_registry
        ]
        self.fields["tools"].choices = names

    def clean_default_options(self) -> Any:
        value = self.cleaned_data.get("default_options")
        return {} if value is None else value


class SensitiveWordListForm(forms.ModelForm):
    words = SimpleArrayField(
        forms.CharField(max_length=200, required=False),
        delimiter="\n",
        required=False,
        widget=Textarea(attrs={"rows": 12}),
        help_text="One word or phrase per line.",
    )

    class Meta:
        model = SensitiveWordList
        fields = ["slug", "name", "words"]

    def clean_words(self) -> list[str]:
        return [w.strip() for w in self.cleaned_data.get("words") or () if w.strip()]


class PromptTemplateForm(forms.ModelForm):
    class Meta:
        model = PromptTemplate
        fields = ["slug", "name", "text", "placeholders"]
        widgets = {"text": Textarea(attrs={"rows": 14, "class": "vLargeTextField"})}


def ref_choices(chain: AdvisorChain | None) -> list[tuple[str, Any]]:
    """Grouped choices of what of ``chain`` to run or compare: the draft, each label, each
    version (newest first).

    Values are the references :func:`advisors_app.definition.resolve_snapshot` reads:
    ``draft``, a label name or a version number.
    """
    choices: list[tuple[str, Any]] = [(DRAFT, "Draft (the saved rows)")]
    if chain is None or chain.pk is None:
        return choices
    labels = [
        (label.name, f"{label.name} (v{label.version.number})")
        for label in chain.labels.select_related("version").order_by("name")
    ]
    versions = [
        (str(number), f"v{number}: {Truncator(message).chars(60)}" if message else f"v{number}")
        for number, message in chain.versions.order_by("-number").values_list("number", "message")
    ]
    if labels:
        choices.append(("Labels", labels))
    if versions:
        choices.append(("Versions", versions))
    return choices


class PlaygroundForm(forms.Form):
    """A message sent from the chain's admin page through its draft, a label or a version."""

    run = forms.ChoiceField(
        required=False,
        initial=DRAFT,
        help_text="The draft runs the rows as saved, before publishing; a label runs the "
        "version it points at.",
    )
    message = forms.CharField(widget=Textarea(attrs={"rows": 3, "cols": 80}), strip=False)
    conversation_id = forms.CharField(
        required=False, help_text="Blank: a new conversation. Reuse the id to continue one."
    )
    params = BlankJSONField(
        required=False,
        widget=Textarea(attrs={"rows": 2, "cols": 80}),
        help_text='Request params, e.g. {"options": {"temperature": 0.2}}.',
    )

    def __init__(self, *args: Any, chain: AdvisorChain | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["run"].choices = ref_choices(chain)

    def clean_params(self) -> Any:
        value = self.cleaned_data.get("params")
        return {} if value is None else value

    def target(self) -> dict[str, Any]:
        """``call_turn``'s ``label`` or ``version`` for the chosen ``run`` (blank: the draft)."""
        ref = self.cleaned_data.get("run") or DRAFT
        if ref == DRAFT:
            return {"version": DRAFT}
        if ref.isdigit():
            return {"version": int(ref)}
        return {"label": ref}


def pretty_json(value: Any) -> str:
    """``value`` as indented JSON, for read-only admin displays."""
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def lint_list(messages: list[LintMessage]) -> str:
    """HTML list of lint findings (used on the chain page)."""
    if not messages:
        return "No findings."
    return format_html(
        "<ul>{}</ul>",
        format_html_join(
            "", "<li><strong>{}</strong> {} {}</li>", ((m.id, m.message, m.hint) for m in messages)
        ),
    )
