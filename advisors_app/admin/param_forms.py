"""Advisor params as forms: an advisor type's JSON Schema mapped to django-jsonform's schema.

The chain editor edits each advisor row's params with django-jsonform's editor
(``react-json-form``, driven by ``static/advisors_app/chain-editor.js``). Its schema language is
JSON Schema with a few differences, so :func:`form_spec` maps a type's ``params_schema``:

- ``description`` becomes ``help_text`` (with the ``default`` named), the param's name its
  ``title``; ``enum`` becomes a select (``choices``), an array of enums a multiselect;
- ``x-reference`` params become selects of the slugs of existing rows of that kind
  (:data:`advisors_app.definition.registry.reference_kinds`: templates, word lists, collections,
  models...),
  arrays of them multiselects;
- a nullable type (``["integer", "null"]``) becomes its non-null type, listed in ``nullable``
  (a cleared field sends ``null``);
- what the editor cannot draw (``oneOf``/``anyOf``, type lists of two real types, maps with
  ``additionalProperties`` schemas, free-form objects) becomes a JSON text box for that param,
  listed in ``raw``.

The server never trusts the form: params are validated against the type's real schema
(:func:`advisors_app.definition.registry.params_errors`), and :func:`error_map` places each error
on its field in the editor.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from django.apps import apps

from advisors_app.definition.registry import AdvisorType, reference_kinds
from advisors_app.validation import FieldErrors

__all__ = ["JOIN", "error_map", "form_spec", "form_specs", "prune_untouched", "reference_choices"]

#: django-jsonform's separator of a field's coordinates (``django_jsonform.constants``).
JOIN = "§"

_UNSUPPORTED = ("oneOf", "anyOf", "allOf", "not", "if", "$ref", "patternProperties")
_KEPT = (
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "uniqueItems",
    "multipleOf",
)


class _Raw(Exception):
    """Raised when a (nested) schema has no form; its top-level param becomes a JSON box."""


def reference_choices(kinds: Iterable[str]) -> dict[str, list[dict[str, str]]]:
    """``{kind: [{"value": slug, "title": "slug (name)"}, ...]}`` of existing rows, by slug."""
    found: dict[str, list[dict[str, str]]] = {}
    for key in sorted(set(kinds)):
        kind = reference_kinds.get(key)
        if kind is None:
            found[key] = []
            continue
        model = apps.get_model(kind.model)
        names = {f.name for f in model._meta.get_fields()}
        columns = ["slug", "name"] if "name" in names else ["slug"]
        rows = model._default_manager.order_by("slug").values_list(*columns)
        found[key] = [
            {"value": row[0], "title": f"{row[0]} ({row[1]})" if row[1:] and row[1] else row[0]}
            for row in rows
        ]
    return found


def _kinds(schema: Any) -> set[str]:
    """Every ``x-reference`` kind named anywhere in ``schema``."""
    if isinstance(schema, Mapping):
        found = {schema["x-reference"]} if isinstance(schema.get("x-reference"), str) else set()
        for value in schema.values():
            found |= _kinds(value)
        return found
    if isinstance(schema, list):
        return set().union(*(_kinds(v) for v in schema)) if schema else set()
    return set()


def _enum_type(values: list[Any]) -> str:
    kinds = {
        "boolean"
        if isinstance(v, bool)
        else "integer"
        if isinstance(v, int)
        else "number"
        if isinstance(v, float)
        else "string"
        if isinstance(v, str)
        else "other"
        for v in values
    }
    if kinds <= {"integer", "number"} and kinds:
        return "number" if "number" in kinds else "integer"
    if len(kinds) == 1 and "other" not in kinds:
        return kinds.pop()
    raise _Raw


def _help(prop: Mapping[str, Any]) -> str:
    text = str(prop.get("description", "")).strip()
    placeholders = prop.get("x-required-placeholders")
    if placeholders:
        text += " Needs placeholders: " + ", ".join(f"{{{p}}}" for p in placeholders) + "."
    if "default" in prop:
        text += f" Default: {_shown(prop['default'])}."
    return text.strip()


def _shown(value: Any) -> str:
    return "null" if value is None else json.dumps(value, ensure_ascii=False)


def _field(prop: Any, choices: Mapping[str, list[dict[str, str]]]) -> tuple[dict[str, Any], bool]:
    """The form schema of ``prop`` and whether it is nullable; :class:`_Raw` when it has none."""
    if not isinstance(prop, Mapping) or any(k in prop for k in _UNSUPPORTED):
        raise _Raw
    kind = prop.get("type")
    nullable = False
    if isinstance(kind, list):
        real = [k for k in kind if k != "null"]
        if len(real) != 1:
            raise _Raw
        nullable, kind = len(real) < len(kind), real[0]
    enum = prop.get("enum")
    if enum is not None:
        values = [v for v in enum if v is not None]
        nullable = nullable or len(values) < len(enum)
        kind = _enum_type(values)
    field: dict[str, Any] = {k: prop[k] for k in _KEPT if k in prop}
    if "default" in prop and prop["default"] is not None:
        field["default"] = prop["default"]
    reference = prop.get("x-reference")
    if kind == "object":
        extra = prop.get("additionalProperties", True)
        if not prop.get("properties") or isinstance(extra, Mapping):
            raise _Raw  # a free-form object or a map: no fixed fields to draw
        field["properties"] = {}
        for name, sub in prop["properties"].items():
            inner, inner_nullable = _field(sub, choices)
            if inner_nullable:
                raise _Raw  # nulls inside an object: only the JSON box can say them
            field["properties"][name] = {"title": name, **inner}
        field["additionalProperties"] = False
    elif kind == "array":
        items, items_nullable = _field(prop.get("items", {}), choices)
        if items_nullable:
            raise _Raw
        if "choices" in items:
            items["widget"] = "multiselect"
        field["items"] = items
    elif kind in ("string", "integer", "number", "boolean"):
        if enum is not None:
            field["choices"] = [v for v in enum if v is not None]
        elif isinstance(reference, str):
            field["choices"] = list(choices.get(reference, []))
    else:
        raise _Raw
    field["type"] = kind
    help_text = _help(prop)
    if help_text:
        field["help_text"] = help_text
    return field, nullable


def _reference(prop: Any) -> str | None:
    """The kind a param (or its items) references, for its picker's "(missing)" option."""
    if not isinstance(prop, Mapping):
        return None
    items = prop.get("items")
    for place in (prop, items if isinstance(items, Mapping) else {}):
        if isinstance(place.get("x-reference"), str):
            return str(place["x-reference"])
    return None


def form_spec(
    advisor_type: AdvisorType, choices: Mapping[str, list[dict[str, str]]] | None = None
) -> dict[str, Any]:
    """What the editor needs for one type: ``schema`` (django-jsonform's), the names of its
    ``raw`` (JSON text) and ``nullable`` params, its ``references`` (``{param: kind}``: the
    editor adds a stored slug whose row is gone as a "slug (missing)" choice, so it stays picked
    and saving an unrelated change keeps it), its ``default_order`` and ``label``."""
    schema = advisor_type.params_schema
    if choices is None:
        choices = reference_choices(_kinds(schema))
    required = set(schema.get("required", ()))
    properties: dict[str, Any] = {}
    raw: list[str] = []
    nullable: list[str] = []
    references: dict[str, str] = {}
    for name, prop in schema.get("properties", {}).items():
        title = f"{name} *" if name in required else name
        try:
            field, is_nullable = _field(prop, choices)
        except _Raw:
            raw.append(name)
            help_text = _help(prop) if isinstance(prop, Mapping) else ""
            field = {"type": "string", "widget": "textarea", "help_text": f"JSON. {help_text}"}
            is_nullable = False
        if is_nullable:
            nullable.append(name)
        kind = _reference(prop)
        if kind and name not in raw:
            references[name] = kind
        properties[name] = {"title": title, **field}
    return {
        "schema": {"type": "object", "properties": properties, "additionalProperties": False},
        "raw": raw,
        "nullable": nullable,
        "references": references,
        "default_order": advisor_type.default_order,
        "label": advisor_type.label,
    }


def form_specs(types: Iterable[AdvisorType]) -> dict[str, dict[str, Any]]:
    """:func:`form_spec` of every type, the reference choices read once for all of them."""
    types = list(types)
    choices = reference_choices(set().union(*(_kinds(t.params_schema) for t in types)))
    return {t.key: form_spec(t, choices) for t in types}


def error_map(advisor_type: AdvisorType | None, errors: FieldErrors) -> dict[str, list[str]]:
    """``{"params.top_k": [...]}`` → django-jsonform's ``{"top_k": [...]}`` (``"words§0"`` for
    an item); an error inside a JSON-text param goes on that param, naming its place."""
    raw = set(form_spec(advisor_type, {})["raw"]) if advisor_type else set()
    found: dict[str, list[str]] = {}
    for path, messages in errors.items():
        parts = path.split(".")[1:] if path.startswith("params") else []
        if not parts:
            continue  # about the whole value: shown above the editor
        if parts[0] in raw:
            inner = ".".join(parts[1:])
            texts = [f"{inner}: {m}" if inner else m for m in messages]
            found.setdefault(parts[0], []).extend(texts)
        else:
            found.setdefault(JOIN.join(parts), []).extend(messages)
    return found


def prune_untouched(
    advisor_type: AdvisorType, params: Mapping[str, Any], before: Mapping[str, Any]
) -> dict[str, Any]:
    """``params`` less what the editor filled in by itself: a param the row did not have
    ``before`` whose value is its schema default, or blank (``""``, ``null``, ``[]``, ``{}``,
    an unticked box) when it has no default. Required params stay (their error is clearer).

    The editor shows every param, defaults filled in; saving an untouched row must not pin the
    type's defaults into it (a later default would then never reach it).
    """
    schema = advisor_type.params_schema
    properties = schema.get("properties", {})
    required = set(schema.get("required", ()))
    kept: dict[str, Any] = {}
    for name, value in params.items():
        prop = properties.get(name)
        if name in before or name in required or not isinstance(prop, Mapping):
            kept[name] = value
            continue
        if "default" in prop:
            if value == prop["default"] and type(value) is type(prop["default"]):
                continue
        elif value in ("", None, [], {}) or value is False:
            continue
        kept[name] = value
    return kept
