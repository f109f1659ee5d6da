"""What the AG-UI and AI SDK translations share: field-error names, tool outputs, the result."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from advisors_app.exceptions import TurnError
from advisors_app.validation import FieldErrors

__all__ = ["invalid", "rename_fields", "run_result", "tool_output"]


def invalid(errors: FieldErrors) -> TurnError:
    """The ``invalid`` refusal (400) of a protocol body, with its field errors."""
    return TurnError("invalid", "The request is invalid.", errors=errors)


def rename_fields(
    fields: Mapping[str, Sequence[str]], names: Mapping[str, str]
) -> dict[str, list[str]]:
    """``fields`` (the turn's field errors: ``message``, ``params.options.temperature``, …)
    under the names the protocol's client sent them as (``names``: the turn's top-level field
    → the protocol's path); a field the protocol has no name for keeps its own."""
    renamed: dict[str, list[str]] = {}
    for name, messages in fields.items():
        head, dot, rest = name.partition(".")
        key = f"{names[head]}{dot}{rest}" if head in names else name
        renamed.setdefault(key, []).extend(messages)
    return renamed


def tool_output(frame: Mapping[str, Any]) -> dict[str, Any]:
    """What a stream says a tool call returned: whether it ran and how long it took. The
    tool's result itself stays on the server (the model reads it; the turn's own stream never
    carries it either), so a protocol's tool output is this summary."""
    return {"ok": frame["ok"], "duration_ms": frame["duration_ms"]}


def run_result(done: Mapping[str, Any]) -> dict[str, Any]:
    """The ``done`` frame as a run's result: the REST ``call`` body without the content (the
    protocol streamed it) and the frame's own envelope."""
    skip = {"type", "reason", "content", "event_id"}
    return {key: value for key, value in done.items() if key not in skip}
