"""What changed between two chain snapshots: a text diff, per-template diffs, an advisor summary.

Advisors carry no ids in a snapshot, so they are matched by type and occurrence (the second
``safe_guard`` of one snapshot pairs with the second of the other).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from .snapshot import canonical_json, snapshot_hash

__all__ = ["diff_snapshots"]

_CHAIN_FIELDS = ("chat_model", "system_prompt", "system_template", "default_options", "tools")


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=False)


def _unified(before: str, after: str, a: str, b: str) -> str:
    return "\n".join(difflib.unified_diff(_lines(before), _lines(after), a, b, lineterm=""))


def _keyed(advisors: list[Mapping[str, Any]]) -> list[tuple[str, int]]:
    seen: dict[str, int] = {}
    keys = []
    for advisor in advisors:
        seen[advisor["type"]] = seen.get(advisor["type"], 0) + 1
        keys.append((advisor["type"], seen[advisor["type"]]))
    return keys


def _advisor_summary(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, Any]:
    old, new = list(before["advisors"]), list(after["advisors"])
    old_keys, new_keys = _keyed(old), _keyed(new)
    old_by, new_by = dict(zip(old_keys, old, strict=True)), dict(zip(new_keys, new, strict=True))
    kept_old = [k for k in old_keys if k in new_by]
    kept_new = [k for k in new_keys if k in old_by]
    changed = []
    for key in kept_new:
        a, b = old_by[key], new_by[key]
        params = sorted(
            name
            for name in set(a["params"] or {}) | set(b["params"] or {})
            if (a["params"] or {}).get(name) != (b["params"] or {}).get(name)
        )
        fields = [f for f in ("order", "enabled") if a[f] != b[f]]
        if params or fields:
            changed.append(
                {"type": key[0], "occurrence": key[1], "params": params, "fields": fields}
            )
    return {
        "added": [{"type": k[0], "occurrence": k[1]} for k in new_keys if k not in old_by],
        "removed": [{"type": k[0], "occurrence": k[1]} for k in old_keys if k not in new_by],
        "reordered": kept_old != kept_new,
        "changed": changed,
    }


def _template_diffs(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[dict[str, Any]]:
    old, new = before["references"], after["references"]
    diffs = []
    for ref in sorted(set(old) | set(new)):
        kind, _, slug = ref.partition(":")
        if kind != "prompt_template":
            continue
        a = (old.get(ref) or {}).get("text", "")
        b = (new.get(ref) or {}).get("text", "")
        if a != b:
            diffs.append({"slug": slug, "diff": _unified(a, b, f"a/{slug}", f"b/{slug}")})
    return diffs


def _word_list_changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[dict[str, Any]]:
    old, new = before["references"], after["references"]
    changes = []
    for ref in sorted(set(old) | set(new)):
        kind, _, slug = ref.partition(":")
        if kind != "word_list":
            continue
        a = set((old.get(ref) or {}).get("words", ()))
        b = set((new.get(ref) or {}).get("words", ()))
        if a != b:
            changes.append({"slug": slug, "added": sorted(b - a), "removed": sorted(a - b)})
    return changes


def _mcp_tool_changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per MCP server: tools added, removed, and changed (description or input schema)."""
    old, new = before["references"], after["references"]
    changes = []
    for ref in sorted(set(old) | set(new)):
        kind, _, slug = ref.partition(":")
        if kind != "mcp_server":
            continue
        a = {t["name"]: t for t in (old.get(ref) or {}).get("tools") or ()}
        b = {t["name"]: t for t in (new.get(ref) or {}).get("tools") or ()}
        changed = sorted(name for name in set(a) & set(b) if a[name] != b[name])
        if set(a) != set(b) or changed:
            changes.append(
                {
                    "server": slug,
                    "added": sorted(set(b) - set(a)),
                    "removed": sorted(set(a) - set(b)),
                    "changed": changed,
                }
            )
    return changes


def diff_snapshots(
    before: Mapping[str, Any], after: Mapping[str, Any], *, names: tuple[str, str] = ("a", "b")
) -> dict[str, Any]:
    """The differences from ``before`` to ``after`` (JSON-compatible).

    ``{"from_hash", "to_hash", "changed", "text" (unified diff of the indented canonical
    JSON), "chain" (changed chain fields), "system_prompt" (unified diff of the system text,
    "" when equal), "advisors" ({"added", "removed", "reordered",
    "changed"}), "templates" ([{"slug", "diff"}]), "word_lists" ([{"slug", "added",
    "removed"}]), "mcp_tools" ([{"server", "added", "removed", "changed"}]: the pinned tool
    lists of MCP servers)}``.
    """
    a_hash, b_hash = snapshot_hash(before), snapshot_hash(after)
    text = ""
    if a_hash != b_hash:
        text = _unified(canonical_json(before, indent=2), canonical_json(after, indent=2), *names)
    prompt_a, prompt_b = before.get("system_prompt") or "", after.get("system_prompt") or ""
    return {
        "from_hash": a_hash,
        "to_hash": b_hash,
        "changed": a_hash != b_hash,
        "text": text,
        "chain": [f for f in _CHAIN_FIELDS if before.get(f) != after.get(f)],
        "system_prompt": _unified(prompt_a, prompt_b, "a/system_prompt", "b/system_prompt"),
        "advisors": _advisor_summary(before, after),
        "templates": _template_diffs(before, after),
        "word_lists": _word_list_changes(before, after),
        "mcp_tools": _mcp_tool_changes(before, after),
    }
