"""``Prompt`` and chat options.

Spring AI ``Prompt``, ``ChatOptions`` and ``ToolCallingChatOptions``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from .mappings import EMPTY, freeze, merged
from .messages import AssistantMessage, Message, SystemMessage, ToolResponseMessage, UserMessage

__all__ = ["ChatOptions", "Prompt", "ToolCallingChatOptions", "merge_options"]


@dataclass(frozen=True, slots=True)
class ChatOptions:
    """Portable model options; ``None`` means "use the model's default".

    ``max_tokens`` counts completion tokens. ``response_format`` is an OpenAI-style dict (for
    example ``{"type": "json_schema", "json_schema": {...}}``). ``extra`` carries
    provider-specific options passed through unchanged.
    """

    model: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None
    stop: tuple[str, ...] | None = None
    top_k: int | None = None
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    seed: int | None = None
    response_format: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = field(default=EMPTY)

    def __post_init__(self) -> None:
        object.__setattr__(self, "extra", freeze(self.extra))
        if self.stop is not None:
            object.__setattr__(self, "stop", tuple(self.stop))

    def mutate(self, **changes: Any) -> ChatOptions:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """The JSON-compatible options that are set (tool callbacks are not serialisable)."""
        data: dict[str, Any] = {}
        for f in fields(ChatOptions):
            value = getattr(self, f.name)
            if f.name == "extra":
                if value:
                    data["extra"] = dict(value)
            elif value is not None:
                data[f.name] = list(value) if isinstance(value, tuple) else value
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> ChatOptions:
        """Build options from a dict; raises ``ValueError`` naming an unknown option."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data or ()) - known)
        if unknown:
            raise ValueError(
                f"unknown chat option(s): {', '.join(unknown)}; known: {', '.join(sorted(known))}"
            )
        return cls(**dict(data or {}))


@dataclass(frozen=True, slots=True)
class ToolCallingChatOptions(ChatOptions):
    """Options that enable tool calling (Spring AI ``ToolCallingChatOptions``).

    ``tool_callbacks`` are :class:`~advisors_app.core.tools.ToolCallback` objects;
    ``tool_names`` name tools to resolve from a registry; ``tool_context`` is handed to tools
    and never sent to the model; ``internal_tool_execution_enabled=False`` returns tool calls
    to the caller instead of running them.
    """

    tool_callbacks: tuple[Any, ...] = ()
    tool_names: tuple[str, ...] = ()
    tool_context: Mapping[str, Any] = field(default=EMPTY, compare=False)
    internal_tool_execution_enabled: bool | None = None

    def __post_init__(self) -> None:
        ChatOptions.__post_init__(self)
        object.__setattr__(self, "tool_callbacks", tuple(self.tool_callbacks))
        object.__setattr__(self, "tool_names", tuple(self.tool_names))
        object.__setattr__(self, "tool_context", freeze(self.tool_context))


_MERGED_MAPPINGS = frozenset({"extra", "tool_context"})
_JOINED_TOOLS = frozenset({"tool_callbacks", "tool_names"})


def merge_options(base: ChatOptions | None, override: ChatOptions | None) -> ChatOptions | None:
    """Merge two option sets: every field set (not ``None``/empty) in ``override`` wins.

    The result is a :class:`ToolCallingChatOptions` when either input is one; ``extra`` and
    ``tool_context`` are merged key by key, and the tools of both are kept (``tool_callbacks``
    and ``tool_names`` are joined, the base's first, without repeats), as Spring AI merges a
    request's tools with its options' callbacks.
    """
    if base is None or override is None:
        return override if base is None else base
    cls = (
        ToolCallingChatOptions
        if isinstance(base, ToolCallingChatOptions) or isinstance(override, ToolCallingChatOptions)
        else ChatOptions
    )
    values: dict[str, Any] = {}
    for f in fields(cls):
        old = getattr(base, f.name, None)
        new = getattr(override, f.name, None)
        if f.name in _MERGED_MAPPINGS:
            values[f.name] = merged(old, new)
        elif f.name in _JOINED_TOOLS:
            values[f.name] = tuple(dict.fromkeys((*(old or ()), *(new or ()))))
        elif new is None or (isinstance(new, tuple) and not new):
            values[f.name] = old if old is not None else new
        else:
            values[f.name] = new
    return cls(**values)


MessageInput = str | Message | Iterable[Message] | None


class Prompt:
    """An ordered, immutable list of messages plus options (Spring AI ``Prompt``).

    ``Prompt("text")`` is one user message; ``Prompt([msg, ...])`` keeps the order given.
    Accessors follow Spring AI: :attr:`system_message` and :attr:`user_message` return an
    empty message when there is none. Divergence: :meth:`augment_user_message` appends a user
    message when the prompt has none, even for an empty prompt (fix for Spring AI defect 5.1.9).
    """

    __slots__ = ("_instructions", "_options")

    def __init__(
        self, messages_or_text: MessageInput = None, options: ChatOptions | None = None
    ) -> None:
        if messages_or_text is None:
            instructions: tuple[Message, ...] = ()
        elif isinstance(messages_or_text, str):
            instructions = (UserMessage(messages_or_text),)
        elif isinstance(messages_or_text, tuple):
            instructions = messages_or_text
        elif isinstance(
            messages_or_text, (SystemMessage, UserMessage, AssistantMessage, ToolResponseMessage)
        ):
            instructions = (messages_or_text,)
        else:
            instructions = tuple(messages_or_text)
        if any(m is None for m in instructions):
            raise ValueError("messages cannot contain null elements")
        self._instructions = instructions
        self._options = options

    @property
    def instructions(self) -> tuple[Message, ...]:
        return self._instructions

    @property
    def options(self) -> ChatOptions | None:
        return self._options

    @property
    def contents(self) -> str:
        """Every message's text concatenated with no separator (Spring AI ``getContents``)."""
        return "".join(m.text for m in self._instructions)

    @property
    def system_message(self) -> SystemMessage:
        """The first system message, or ``SystemMessage("")`` when there is none."""
        for message in self._instructions:
            if isinstance(message, SystemMessage):
                return message
        return SystemMessage("")

    @property
    def user_message(self) -> UserMessage:
        """The last user message, or ``UserMessage("")`` when there is none."""
        for message in reversed(self._instructions):
            if isinstance(message, UserMessage):
                return message
        return UserMessage("")

    @property
    def user_messages(self) -> tuple[UserMessage, ...]:
        return tuple(m for m in self._instructions if isinstance(m, UserMessage))

    @property
    def last_user_or_tool_response_message(self) -> UserMessage | ToolResponseMessage:
        """The last user or tool-response message, or ``UserMessage("")`` when there is none."""
        for message in reversed(self._instructions):
            if isinstance(message, (UserMessage, ToolResponseMessage)):
                return message
        return UserMessage("")

    def mutate(self, *, messages: Iterable[Message] | None = None, options: Any = ...) -> Prompt:
        """A copy with new ``messages`` and/or ``options`` (``options=None`` clears them)."""
        return Prompt(
            tuple(messages) if messages is not None else self._instructions,
            self._options if options is ... else options,
        )

    def copy(self) -> Prompt:
        return Prompt(self._instructions, self._options)

    def augment_user_message(
        self, text_or_fn: str | Callable[[UserMessage], UserMessage | str]
    ) -> Prompt:
        """Replace the last user message (a new one is appended when there is none).

        ``text_or_fn`` is the new text, or a function from the old message to a new message or text.
        """
        messages = list(self._instructions)
        for i in range(len(messages) - 1, -1, -1):
            if isinstance(messages[i], UserMessage):
                messages[i] = _apply(messages[i], text_or_fn)
                return Prompt(tuple(messages), self._options)
        messages.append(_apply(UserMessage(""), text_or_fn))
        return Prompt(tuple(messages), self._options)

    def augment_system_message(
        self, text_or_fn: str | Callable[[SystemMessage], SystemMessage | str]
    ) -> Prompt:
        """Replace the first system message (one is inserted at index 0 when there is none)."""
        messages = list(self._instructions)
        for i, message in enumerate(messages):
            if isinstance(message, SystemMessage):
                messages[i] = _apply(message, text_or_fn)
                return Prompt(tuple(messages), self._options)
        messages.insert(0, _apply(SystemMessage(""), text_or_fn))
        return Prompt(tuple(messages), self._options)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Prompt):
            return NotImplemented
        return self._instructions == other._instructions and self._options == other._options

    def __hash__(self) -> int:
        return hash(self._instructions)

    def __repr__(self) -> str:
        return f"Prompt(messages={list(self._instructions)!r}, options={self._options!r})"


def _apply(message: Any, text_or_fn: Any) -> Any:
    if isinstance(text_or_fn, str):
        return message.mutate(text=text_or_fn)
    result = text_or_fn(message)
    return message.mutate(text=result) if isinstance(result, str) else result
