"""JSON-compatible views of requests, responses and context values (for logs and traces).

Used by ``SimpleLoggerAdvisor`` (Spring AI's Jackson pretty-printing of a ``ChatResponse``) and
by the per-call trace in :mod:`advisors_app.core.tracing`. Values that have no JSON form (model
objects, callbacks) become their ``repr``; nothing here raises on unknown types.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Mapping
from typing import Any

from .prompt import ChatOptions, Prompt
from .requests import ChatClientRequest, ChatClientResponse
from .response import ChatResponse, Generation, Usage

__all__ = [
    "chat_response_to_dict",
    "request_to_dict",
    "response_to_dict",
    "to_json",
    "to_jsonable",
]


def to_jsonable(value: Any, max_text: int | None = None) -> Any:
    """``value`` as JSON-compatible data; strings longer than ``max_text`` chars are cut."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        if max_text is not None and len(value) > max_text:
            return value[:max_text] + f"… [{len(value) - max_text} more chars]"
        return value
    if isinstance(value, ChatClientRequest):
        return request_to_dict(value, max_text)
    if isinstance(value, ChatClientResponse):
        return response_to_dict(value, max_text)
    if isinstance(value, ChatResponse):
        return chat_response_to_dict(value, max_text)
    if isinstance(value, Prompt):
        return _prompt_to_dict(value, max_text)
    if isinstance(value, Usage):
        return value.to_dict()
    if isinstance(value, ChatOptions):
        return to_jsonable(value.to_dict(), max_text)
    if isinstance(value, enum.Enum):
        return to_jsonable(value.value, max_text)
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict) and not isinstance(value, type):
        try:
            return to_jsonable(to_dict(), max_text)
        except Exception:  # a foreign to_dict() that fails still gets a repr below
            pass
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v, max_text) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_jsonable(v, max_text) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: to_jsonable(getattr(value, f.name), max_text) for f in dataclasses.fields(value)
        }
    return to_jsonable(repr(value), max_text)


def _prompt_to_dict(prompt: Prompt, max_text: int | None) -> dict[str, Any]:
    data: dict[str, Any] = {
        "messages": [to_jsonable(m.to_dict(), max_text) for m in prompt.instructions]
    }
    if prompt.options is not None:
        data["options"] = to_jsonable(prompt.options.to_dict(), max_text)
    return data


def _generation_to_dict(generation: Generation, max_text: int | None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"finish_reason": generation.metadata.finish_reason}
    if generation.metadata.extra:
        metadata.update(to_jsonable(generation.metadata.extra, max_text))
    return {"output": to_jsonable(generation.output.to_dict(), max_text), "metadata": metadata}


def chat_response_to_dict(response: ChatResponse | None, max_text: int | None = None) -> Any:
    """A ``ChatResponse`` as a dict: ``results`` (output + finish reason) and ``metadata``."""
    if response is None:
        return None
    metadata = response.metadata
    meta: dict[str, Any] = {
        "id": metadata.id,
        "model": metadata.model,
        "usage": metadata.usage.to_dict() if metadata.usage is not None else None,
    }
    if metadata.rate_limit is not None:
        meta["rate_limit"] = to_jsonable(metadata.rate_limit, max_text)
    if metadata.extra:
        meta.update(to_jsonable(metadata.extra, max_text))
    return {
        "results": [_generation_to_dict(g, max_text) for g in response.generations],
        "metadata": meta,
    }


def request_to_dict(request: ChatClientRequest, max_text: int | None = None) -> dict[str, Any]:
    """A ``ChatClientRequest`` as ``{"prompt": {...}, "context": {...}}``."""
    return {
        "prompt": _prompt_to_dict(request.prompt, max_text),
        "context": to_jsonable(request.context, max_text),
    }


def response_to_dict(response: ChatClientResponse, max_text: int | None = None) -> dict[str, Any]:
    """A ``ChatClientResponse`` as ``{"chat_response": {...} | None, "context": {...}}``."""
    return {
        "chat_response": chat_response_to_dict(response.chat_response, max_text),
        "context": to_jsonable(response.context, max_text),
    }


def to_json(value: Any, *, indent: int | None = 2) -> str:
    """``value`` as JSON text (pretty-printed by default, non-ASCII kept readable)."""
    return json.dumps(to_jsonable(value), indent=indent, ensure_ascii=False)
