"""Evaluation datasets in and out: the JSON shape of ``manage.py dataset_import`` and
``dataset_export`` (issue 22).

A file is a JSON list of items (or ``{"items": [...], "name"?, "description"?}``, the dataset's
own name and description: :func:`dataset_fields`)::

    [{"key"?: "refund-days",
      "input": {"message": "How long do refunds take?", "history"?: [...], "params"?: {...}},
      "expected": {"output"?: "...", "json"?: {...}, "documents"?: {"topic": ["refunds"]},
                   "tool_calls"?: [{"name": "lookup", "arguments"?: {...}}]},
      "tags"?: ["billing"]}]

:func:`parse_items` checks every entry and reports every problem at once (``ValueError``
naming the entry and field); an entry without ``key`` gets a stable one from its input
(:func:`input_key`). :func:`import_items` upserts by key in one transaction: a new key adds an
item, a changed one closes its current version and adds a new one (the dataset *as of* before
the import is unchanged), an unchanged one stays; with ``prune``, current items the file does
not name are closed. :func:`export_items` gives the same shape back, as of a time.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from advisors_app.models import Dataset, DatasetItem, items_as_of

__all__ = [
    "EXPECTED_KEYS",
    "INPUT_KEYS",
    "ImportReport",
    "dataset_fields",
    "export_items",
    "import_items",
    "input_key",
    "parse_items",
]

INPUT_KEYS = frozenset({"message", "history", "params"})
EXPECTED_KEYS = frozenset({"output", "json", "documents", "tool_calls"})
_ITEM_KEYS = frozenset({"key", "input", "expected", "tags"})
_ROLES = frozenset({"user", "assistant"})
MAX_KEY_LENGTH = 200
#: ``Dataset.name``'s length.
MAX_NAME_LENGTH = 200


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def input_key(item_input: dict[str, Any]) -> str:
    """A stable key for an item without one: 16 hex digits of the SHA-256 of its canonical
    input JSON (the same input always gets the same key)."""
    return hashlib.sha256(_canonical(item_input).encode()).hexdigest()[:16]


def _input_errors(value: Any) -> list[str]:
    if not isinstance(value, dict):
        return ["input: expected an object with a 'message'"]
    errors = [f"input: unknown field {name!r}" for name in sorted(set(value) - INPUT_KEYS)]
    message = value.get("message")
    if not isinstance(message, str) or not message.strip():
        errors.append("input.message: expected a non-blank string")
    history = value.get("history", [])
    if not isinstance(history, list) or not all(
        isinstance(turn, dict)
        and turn.get("role") in _ROLES
        and isinstance(turn.get("content"), str)
        for turn in history
    ):
        errors.append(
            'input.history: expected a list of {"role": "user"|"assistant", "content": str}'
        )
    if not isinstance(value.get("params", {}), dict):
        errors.append("input.params: expected an object")
    return errors


def _expected_errors(value: Any) -> list[str]:
    if not isinstance(value, dict):
        return ["expected: expected an object"]
    errors = [f"expected: unknown field {name!r}" for name in sorted(set(value) - EXPECTED_KEYS)]
    if "output" in value and not isinstance(value["output"], str):
        errors.append("expected.output: expected a string")
    documents = value.get("documents", {})
    if not isinstance(documents, dict) or not all(
        isinstance(accepted, list) for accepted in documents.values()
    ):
        errors.append("expected.documents: expected {<metadata key>: [accepted values]}")
    calls = value.get("tool_calls", [])
    if not isinstance(calls, list) or not all(
        isinstance(call, dict)
        and isinstance(call.get("name"), str)
        and isinstance(call.get("arguments", {}), dict)
        for call in calls
    ):
        errors.append('expected.tool_calls: expected a list of {"name": str, "arguments"?: {}}')
    return errors


def _dataset_errors(data: Any) -> list[str]:
    if not isinstance(data, dict):
        return []
    errors = []
    name = data.get("name")
    if name is not None and (not isinstance(name, str) or len(name) > MAX_NAME_LENGTH):
        errors.append(f"name: expected a string of at most {MAX_NAME_LENGTH} characters")
    if not isinstance(data.get("description", ""), str):
        errors.append("description: expected a string")
    return errors


def dataset_fields(data: Any) -> dict[str, str]:
    """The dataset's ``name`` and ``description`` a decoded file gives (its object form), those
    it gives; :func:`parse_items` checks them."""
    if not isinstance(data, dict):
        return {}
    return {
        field: value.strip()
        for field in ("name", "description")
        if isinstance(value := data.get(field), str) and value.strip()
    }


def parse_items(data: Any) -> list[dict[str, Any]]:
    """The items of a decoded file as ``{"key", "input", "expected", "tags"}``, keys filled in.

    Raises ``ValueError`` listing every problem (``item 3 (key 'x'): input.message: ...``),
    including a key used twice and, in the object form, a ``name`` or ``description`` that is
    no string.
    """
    entries = data.get("items") if isinstance(data, dict) else data
    if not isinstance(entries, list):
        raise ValueError('Expected a JSON list of items (or {"items": [...]}).')
    problems: list[str] = _dataset_errors(data)
    items: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for index, entry in enumerate(entries):
        where = f"item {index}"
        if not isinstance(entry, dict):
            problems.append(f"{where}: expected an object")
            continue
        errors = [f"unknown field {name!r}" for name in sorted(set(entry) - _ITEM_KEYS)]
        errors += _input_errors(entry.get("input"))
        expected = entry.get("expected", {})
        errors += _expected_errors(expected)
        tags = entry.get("tags", [])
        if not isinstance(tags, list) or not all(isinstance(tag, str) for tag in tags):
            errors.append("tags: expected a list of strings")
        key = entry.get("key")
        if key is not None and (not isinstance(key, str) or not key.strip()):
            errors.append("key: expected a non-blank string")
        elif isinstance(key, str) and len(key) > MAX_KEY_LENGTH:
            errors.append(f"key: at most {MAX_KEY_LENGTH} characters")
        if errors:
            if isinstance(key, str):
                where += f" (key {key!r})"
            problems += [f"{where}: {error}" for error in errors]
            continue
        key = key if key is not None else input_key(entry["input"])
        if key in seen:
            problems.append(f"{where}: key {key!r} is used by item {seen[key]} too")
            continue
        seen[key] = index
        items.append({"key": key, "input": entry["input"], "expected": expected, "tags": tags})
    if problems:
        raise ValueError("\n".join(problems))
    return items


@dataclass
class ImportReport:
    """What :func:`import_items` did, by key."""

    created: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    closed: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return (
            f"{len(self.created)} added, {len(self.changed)} changed, "
            f"{len(self.unchanged)} unchanged, {len(self.closed)} removed"
        )


def import_items(
    dataset: Dataset,
    items: Sequence[dict[str, Any]],
    *,
    prune: bool = False,
    at: datetime | None = None,
) -> ImportReport:
    """Upsert ``items`` (:func:`parse_items`' shape) into ``dataset`` by key, in one transaction
    (see the module docstring); ``at``: when the new versions start (default now)."""
    at = at or timezone.now()
    report = ImportReport()
    with transaction.atomic():
        current = {
            item.key: item
            for item in items_as_of(dataset).select_for_update()  # concurrent imports queue
        }
        new: list[DatasetItem] = []
        for entry in items:
            key = entry["key"]
            old = current.pop(key, None)
            if old is not None and _canonical(old.content()) == _canonical(entry):
                report.unchanged.append(key)
                continue
            if old is not None:
                DatasetItem.objects.filter(pk=old.pk).update(valid_to=at)
                report.changed.append(key)
            else:
                report.created.append(key)
            new.append(DatasetItem(dataset=dataset, valid_from=at, **entry))
        if prune and current:
            DatasetItem.objects.filter(pk__in=[i.pk for i in current.values()]).update(valid_to=at)
            report.closed = sorted(current)
        DatasetItem.objects.bulk_create(new)
        if new or report.closed:
            Dataset.objects.filter(pk=dataset.pk).update(updated_at=at)
    return report


def export_items(dataset: Dataset, at: datetime | None = None) -> list[dict[str, Any]]:
    """``dataset``'s items as of ``at`` (default now) in the import shape, by key (``tags``
    only when there are some)."""
    exported = []
    for item in items_as_of(dataset, at):
        entry: dict[str, Any] = {"key": item.key, "input": item.input, "expected": item.expected}
        if item.tags:
            entry["tags"] = item.tags
        exported.append(entry)
    return exported
