"""What a rule's JSON fields may hold, checked for the admin's form (errors by field)."""

from __future__ import annotations

from typing import Any

from advisors_app.evaluation.evaluators import evaluator_registry

__all__ = ["evaluators_errors", "filters_errors"]

_FILTERS = {"outcome", "groups", "params"}
_OUTCOMES = {"complete", "error", "cancelled"}


def evaluators_errors(value: Any) -> list[str]:
    """Problems of an ``evaluators`` list: each ``{"key", "params"?}`` must build from the
    evaluator registry (an unknown key or params its schema refuses are named), and no two
    may store their scores under one key."""
    if not isinstance(value, list) or not value:
        return ['Enter a JSON list of {"key", "params"} objects (at least one).']
    errors, keys = [], []
    for index, entry in enumerate(value):
        if not isinstance(entry, dict) or not isinstance(entry.get("key"), str):
            errors.append(f'Evaluator {index}: expected {{"key", "params"?}}.')
            continue
        params = entry.get("params") or {}
        for field, problems in evaluator_registry.params_errors(entry["key"], params).items():
            errors.append(f"Evaluator {index} ({entry['key']}): {field}: {' '.join(problems)}")
        if isinstance(params, dict):
            keys.append(params.get("key") or entry["key"])
    if len(set(keys)) != len(keys):
        errors.append('Two evaluators store their scores under one key: give one a params "key".')
    return errors


def filters_errors(value: Any) -> list[str]:
    """Problems of a ``filters`` object: ``outcome`` (complete/error/cancelled), ``groups``
    (group names), ``params`` (an object of request context values)."""
    if not isinstance(value, dict):
        return ["Enter a JSON object."]
    errors = [
        f"Unknown filter {name!r} (known: outcome, groups, params)."
        for name in value
        if name not in _FILTERS
    ]
    outcome = value.get("outcome")
    if outcome is not None:
        outcomes = [outcome] if isinstance(outcome, str) else outcome
        if not isinstance(outcomes, list) or not set(outcomes) <= _OUTCOMES:
            errors.append("outcome: one or more of complete, error, cancelled.")
    groups = value.get("groups")
    if groups is not None and not (
        isinstance(groups, list) and all(isinstance(g, str) for g in groups)
    ):
        errors.append("groups: a list of group names.")
    if "params" in value and not isinstance(value["params"], dict):
        errors.append("params: an object of request values.")
    return errors
