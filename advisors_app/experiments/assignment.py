"""Which arm a unit gets: a pure function of the experiment's salt and the unit's key.

:func:`bucket` hashes ``(salt, key)`` with BLAKE2b into one of 10,000 buckets — the same in
every process, across restarts, with no table — and :func:`arm_at` walks the arms' cumulative
weights (basis points) to the bucket's arm. Changing weights moves only the buckets between the
old and new bounds; a conversation keeps its first arm anyway (:mod:`.serving`).

Targeting rules run first, in order; the first that matches names the arm:

* ``{"arm": "b", "users": ["alice", 42]}`` — users by username or id (a QA user forced into an
  arm is such a rule);
* ``{"arm": "b", "groups": ["beta"]}`` — members of a group (one query, only for turns that
  reach the rule);
* ``{"arm": "b", "param": "region", "equals": "eu"}`` or ``{..., "in": ["eu", "uk"]}`` — a
  param of the turn's request.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["BUCKETS", "arm_at", "bucket", "matches", "rule_errors"]

#: Buckets a unit hashes into: one per basis point of weight (imports nothing of Django, so a
#: plain interpreter computes the same assignment).
BUCKETS = 10_000

_RULE_KINDS = ("users", "groups", "param")


def bucket(salt: str, key: str) -> int:
    """The unit's bucket in ``[0, 10000)``: BLAKE2b-64 of ``salt`` and ``key``, modulo 10,000
    (the bias of a 64-bit value modulo 10,000 is below 10⁻¹⁵)."""
    digest = hashlib.blake2b(f"{salt}\x00{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % BUCKETS


def arm_at(uppers: Sequence[int], at: int) -> int:
    """The index of the arm whose cumulative weight bound (``uppers``, increasing, the last
    10,000) first exceeds bucket ``at``."""
    for index, upper in enumerate(uppers):
        if at < upper:
            return index
    return len(uppers) - 1


def matches(rule: Mapping[str, Any], user: Any, params: Mapping[str, Any]) -> bool:
    """Whether ``rule`` (validated by :func:`rule_errors`) picks this turn; blocking for a
    ``groups`` rule (one query)."""
    if "users" in rule:
        names = rule["users"]
        return user.pk in names or getattr(user, "username", None) in names
    if "groups" in rule:
        return bool(user.groups.filter(name__in=rule["groups"]).exists())
    value = params.get(rule["param"]) if isinstance(params, Mapping) else None
    if "in" in rule:
        return value in rule["in"]
    return value == rule.get("equals") and rule["param"] in params


def rule_errors(rules: Any, arm_names: Sequence[str]) -> list[str]:
    """What is wrong with a ``targeting`` list (empty: nothing)."""
    if not isinstance(rules, list):
        return ["Enter a list of rules."]
    errors = []
    for at, rule in enumerate(rules):
        where = f"rule {at}"
        if not isinstance(rule, dict):
            errors.append(f"{where}: enter an object.")
            continue
        if rule.get("arm") not in arm_names:
            errors.append(f"{where}: 'arm' must name an arm ({', '.join(arm_names)}).")
        kinds = [kind for kind in _RULE_KINDS if kind in rule]
        if len(kinds) != 1:
            errors.append(f"{where}: give exactly one of 'users', 'groups', 'param'.")
            continue
        kind = kinds[0]
        if kind in ("users", "groups"):
            if not isinstance(rule[kind], list) or not rule[kind]:
                errors.append(f"{where}: '{kind}' must be a non-empty list.")
        elif not isinstance(rule["param"], str) or not rule["param"]:
            errors.append(f"{where}: 'param' must name a param.")
        elif ("equals" in rule) == ("in" in rule):
            errors.append(f"{where}: give exactly one of 'equals' and 'in'.")
        elif "in" in rule and not isinstance(rule["in"], list):
            errors.append(f"{where}: 'in' must be a list.")
    return errors
