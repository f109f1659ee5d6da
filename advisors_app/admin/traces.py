"""Per-advisor traces (``core.tracing.CallTrace.to_dict()``) as rows for admin tables, and
stored token usage as one line."""

from __future__ import annotations

from typing import Any

from advisors_app.orders import format_order

__all__ = ["trace_rows", "usage_line"]


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def usage_line(usage: Any) -> str:
    """A stored ``Usage.to_dict()`` as one line: ``"31 prompt + 9 completion = 40 tokens"``,
    ``"40 tokens"`` when only the total is known, ``""`` when nothing is (or not a dict)."""
    usage = usage if isinstance(usage, dict) else {}
    prompt, completion, total = (
        usage.get(k) for k in ("prompt_tokens", "completion_tokens", "total_tokens")
    )
    if _is_number(prompt) and _is_number(completion):
        return f"{prompt} prompt + {completion} completion" + (
            f" = {total} tokens" if _is_number(total) else " tokens"
        )
    return f"{total} tokens" if _is_number(total) else ""


def _ms(seconds: Any) -> str:
    return "" if seconds is None else f"{seconds * 1000:.1f} ms"


def trace_rows(trace: dict[str, Any] | None) -> list[dict[str, Any]]:
    """One row per advisor invocation, in start order, with its nesting depth and timings."""
    entries = (trace or {}).get("entries") or []
    depth: dict[int, int] = {}
    rows = []
    for entry in entries:
        parent = entry.get("parent")
        depth[entry["index"]] = 0 if parent is None else depth.get(parent, 0) + 1
        usage = entry.get("usage") or {}
        rows.append(
            {
                "depth": depth[entry["index"]],
                "indent": depth[entry["index"]] * 16,
                "name": entry.get("name", ""),
                "order": format_order(entry.get("order")),
                "mode": entry.get("mode", ""),
                "started": _ms(entry.get("started")),
                "duration": _ms(entry.get("duration")),
                "self_duration": _ms(entry.get("self_duration")),
                "first_chunk": _ms(entry.get("first_chunk")),
                "chunks": entry.get("chunks") or "",
                "status": entry.get("status", ""),
                "error": entry.get("error") or "",
                "tokens": usage.get("total_tokens", ""),
            }
        )
    return rows
