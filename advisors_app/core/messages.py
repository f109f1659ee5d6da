"""Chat messages: the immutable values every prompt, memory and transport is made of.

Follows Spring AI's ``org.springframework.ai.chat.messages``. Messages are frozen dataclasses;
equality is on type, text and tool calls/responses, **not metadata** (fix for Spring AI defect
5.3.16: messages read back from a repository carry storage metadata and would otherwise never
equal the caller's copies, duplicating history).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar, TypeAlias

from .mappings import EMPTY, freeze, merged

__all__ = [
    "AssistantMessage",
    "Media",
    "Message",
    "MessageType",
    "SystemMessage",
    "ToolCall",
    "ToolResponse",
    "ToolResponseMessage",
    "UserMessage",
    "message_from_dict",
]


class MessageType(StrEnum):
    """The role of a message; values are the lower-case role names providers use."""

    USER = "user"
    ASSISTANT = "assistant"
    SYSTEM = "system"
    TOOL = "tool"


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call requested by the model.

    ``arguments`` is a JSON string (as OpenAI sends it). ``index`` is only used while merging
    streamed deltas (a delta without an ``id`` continues the call with the same index).
    """

    id: str
    name: str
    arguments: str = "{}"
    type: str = "function"
    index: int | None = field(default=None, compare=False)

    def parsed_arguments(self) -> Any:
        """The arguments decoded from JSON; blank arguments are ``{}`` (as Spring AI does)."""
        return json.loads(self.arguments) if self.arguments.strip() else {}

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments, "type": self.type}


@dataclass(frozen=True, slots=True)
class ToolResponse:
    """The result of one tool call; ``response_data`` is the text sent back to the model."""

    id: str
    name: str
    response_data: str

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "response_data": self.response_data}


@dataclass(frozen=True, slots=True)
class Media:
    """An attachment of a user message: a MIME type and either a URL or inline data."""

    mime_type: str
    data: str | bytes
    name: str = ""


def _init_metadata(message: Any, metadata: Mapping[str, Any] | None) -> None:
    object.__setattr__(message, "metadata", freeze(metadata))


class _MessageBase:
    """Behaviour shared by every message class (kept out of the dataclasses' fields)."""

    __slots__ = ()
    message_type: ClassVar[MessageType]

    def mutate(self, **changes: Any) -> Any:
        """Return a copy with ``changes`` applied (for example ``text=`` or ``metadata=``)."""
        return dataclasses.replace(self, **changes)  # type: ignore[type-var]

    def with_metadata(self, **entries: Any) -> Any:
        """Return a copy whose metadata has ``entries`` merged in."""
        return dataclasses.replace(self, metadata=merged(self.metadata, entries))  # type: ignore[attr-defined,type-var]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-compatible dict; :func:`message_from_dict` reverses it."""
        data: dict[str, Any] = {"type": self.message_type.value, "text": self.text}  # type: ignore[attr-defined]
        metadata = self.metadata  # type: ignore[attr-defined]
        if metadata:
            data["metadata"] = dict(metadata)
        return data


@dataclass(frozen=True, slots=True)
class SystemMessage(_MessageBase):
    """Instructions for the model (Spring AI ``SystemMessage``)."""

    text: str
    metadata: Mapping[str, Any] = field(default=EMPTY, compare=False)
    message_type: ClassVar[MessageType] = MessageType.SYSTEM

    def __post_init__(self) -> None:
        if self.text is None:
            raise ValueError("text cannot be null")
        _init_metadata(self, self.metadata)


@dataclass(frozen=True, slots=True)
class UserMessage(_MessageBase):
    """Input from the user (Spring AI ``UserMessage``); ``media`` holds attachments."""

    text: str
    metadata: Mapping[str, Any] = field(default=EMPTY, compare=False)
    media: tuple[Media, ...] = ()
    message_type: ClassVar[MessageType] = MessageType.USER

    def __post_init__(self) -> None:
        if self.text is None:
            raise ValueError("text cannot be null")
        _init_metadata(self, self.metadata)
        object.__setattr__(self, "media", tuple(self.media))


@dataclass(frozen=True, slots=True)
class AssistantMessage(_MessageBase):
    """Output of the model (Spring AI ``AssistantMessage``); may carry ``tool_calls``.

    ``text`` may be given as ``None`` (a pure tool-call message); it is stored as ``""``.
    ``reasoning`` is the model's reasoning part (OpenAI-compatible ``reasoning_content``),
    kept apart from the text: not content, not validated as output, left out of
    :meth:`to_dict` and so of chat memory, and of equality (the same answer reasoned
    differently is the same answer).
    """

    text: str = ""
    metadata: Mapping[str, Any] = field(default=EMPTY, compare=False)
    tool_calls: tuple[ToolCall, ...] = ()
    reasoning: str = field(default="", compare=False)
    message_type: ClassVar[MessageType] = MessageType.ASSISTANT

    def __post_init__(self) -> None:
        if self.text is None:
            object.__setattr__(self, "text", "")
        _init_metadata(self, self.metadata)
        object.__setattr__(self, "tool_calls", tuple(self.tool_calls))

    def has_tool_calls(self) -> bool:
        return bool(self.tool_calls)

    def to_dict(self) -> dict[str, Any]:
        data = _MessageBase.to_dict(self)
        if self.tool_calls:
            data["tool_calls"] = [call.to_dict() for call in self.tool_calls]
        return data


@dataclass(frozen=True, slots=True)
class ToolResponseMessage(_MessageBase):
    """The results of the tool calls of one round (Spring AI ``ToolResponseMessage``).

    ``text`` is always ``""``; the results are in ``responses``, in the model's call order.
    """

    responses: tuple[ToolResponse, ...]
    metadata: Mapping[str, Any] = field(default=EMPTY, compare=False)
    message_type: ClassVar[MessageType] = MessageType.TOOL

    def __post_init__(self) -> None:
        _init_metadata(self, self.metadata)
        object.__setattr__(self, "responses", tuple(self.responses))

    @property
    def text(self) -> str:
        return ""

    def to_dict(self) -> dict[str, Any]:
        data = _MessageBase.to_dict(self)
        data["responses"] = [response.to_dict() for response in self.responses]
        return data


Message: TypeAlias = SystemMessage | UserMessage | AssistantMessage | ToolResponseMessage


def message_from_dict(data: Mapping[str, Any]) -> Message:
    """Rebuild a message from :meth:`to_dict` output.

    Raises ``ValueError`` naming the field when the dict is not a valid message.
    """
    try:
        kind = MessageType(data["type"])
    except (KeyError, ValueError) as exc:
        raise ValueError(
            f"message type must be one of user/assistant/system/tool, got {data.get('type')!r}"
        ) from exc
    metadata = data.get("metadata") or EMPTY
    text = data.get("text", "")
    if kind is MessageType.SYSTEM:
        return SystemMessage(text, metadata)
    if kind is MessageType.USER:
        return UserMessage(text, metadata)
    if kind is MessageType.ASSISTANT:
        calls = tuple(
            ToolCall(c["id"], c["name"], c.get("arguments", "{}"), c.get("type", "function"))
            for c in data.get("tool_calls", ())
        )
        return AssistantMessage(text, metadata, calls)
    responses = tuple(
        ToolResponse(r["id"], r["name"], r["response_data"]) for r in data.get("responses", ())
    )
    return ToolResponseMessage(responses, metadata)
