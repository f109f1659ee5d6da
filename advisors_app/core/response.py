"""Model output values (Spring AI ``ChatResponse``, ``Generation``, metadata and ``Usage``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from .mappings import EMPTY, freeze, merged
from .messages import AssistantMessage

__all__ = [
    "ChatGenerationMetadata",
    "ChatResponse",
    "ChatResponseMetadata",
    "Generation",
    "Usage",
]


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts of one model call, in tokens.

    ``total_tokens=None`` means prompt + completion. ``cached_prompt_tokens`` is the part of
    the prompt served from the provider's cache, when reported. ``native`` keeps the
    provider's own usage object (as a mapping) so nothing it reported is lost.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int | None = None
    cached_prompt_tokens: int | None = None
    native: Mapping[str, Any] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.total_tokens is None:
            object.__setattr__(self, "total_tokens", self.prompt_tokens + self.completion_tokens)
        if self.native is not None:
            object.__setattr__(self, "native", freeze(self.native))

    @property
    def is_empty(self) -> bool:
        """True when no token count is known (every count is zero).

        Divergence: Spring AI looks at ``totalTokens`` only, so a usage with prompt tokens but
        a zero total counts as empty there (defect 5.4.32).
        """
        return not (self.prompt_tokens or self.completion_tokens or self.total_tokens)

    def __add__(self, other: Usage | None) -> Usage:
        if other is None:
            return self
        cached: int | None = None
        if self.cached_prompt_tokens is not None or other.cached_prompt_tokens is not None:
            cached = (self.cached_prompt_tokens or 0) + (other.cached_prompt_tokens or 0)
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            (self.total_tokens or 0) + (other.total_tokens or 0),
            cached,
        )

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
        }
        if self.cached_prompt_tokens is not None:
            data["cached_prompt_tokens"] = self.cached_prompt_tokens
        return data


class _ExtraMapping(Mapping[str, Any]):
    """Read-only mapping over a metadata object's ``extra`` entries (Spring's metadata map).

    Note that, as a mapping, such an object is falsy when it has no extra entries.
    """

    __slots__ = ()
    extra: Mapping[str, Any]

    def __getitem__(self, key: str) -> Any:
        return self.extra[key]

    def __contains__(self, key: object) -> bool:
        return key in self.extra

    def __iter__(self) -> Iterator[str]:
        return iter(self.extra)

    def __len__(self) -> int:
        return len(self.extra)


@dataclass(frozen=True, slots=True)
class ChatGenerationMetadata(_ExtraMapping):
    """Per-generation metadata: the finish reason (``"STOP"``, ``"LENGTH"``, ...) and extras."""

    finish_reason: str | None = None
    extra: Mapping[str, Any] = field(default=EMPTY)

    def __post_init__(self) -> None:
        object.__setattr__(self, "extra", freeze(self.extra))

    def with_extra(self, **entries: Any) -> ChatGenerationMetadata:
        return dataclasses.replace(self, extra=merged(self.extra, entries))


_EMPTY_GENERATION_METADATA = ChatGenerationMetadata()


@dataclass(frozen=True, slots=True)
class Generation:
    """One candidate answer: an :class:`AssistantMessage` and its metadata."""

    output: AssistantMessage
    metadata: ChatGenerationMetadata = field(default=None)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.metadata is None:
            object.__setattr__(self, "metadata", _EMPTY_GENERATION_METADATA)

    @property
    def finish_reason(self) -> str | None:
        return self.metadata.finish_reason

    @property
    def text(self) -> str:
        return self.output.text


@dataclass(frozen=True, slots=True)
class ChatResponseMetadata(_ExtraMapping):
    """Response-level metadata; ``usage=None`` means the provider reported no usage (unknown).

    ``extra`` holds everything else advisors attach, readable as a mapping
    (``metadata["qa_retrieved_documents"]``, ``metadata.get(key)``), as Spring AI's metadata map.
    """

    id: str = ""
    model: str = ""
    usage: Usage | None = None
    rate_limit: Any = None
    extra: Mapping[str, Any] = field(default=EMPTY)

    def __post_init__(self) -> None:
        object.__setattr__(self, "extra", freeze(self.extra))

    def with_extra(self, **entries: Any) -> ChatResponseMetadata:
        return dataclasses.replace(self, extra=merged(self.extra, entries))

    def mutate(self, **changes: Any) -> ChatResponseMetadata:
        return dataclasses.replace(self, **changes)


_EMPTY_RESPONSE_METADATA = ChatResponseMetadata()


@dataclass(frozen=True, slots=True)
class ChatResponse:
    """A model response: zero or more generations plus metadata (never ``None``)."""

    generations: tuple[Generation, ...] = ()
    metadata: ChatResponseMetadata = field(default=None)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        object.__setattr__(self, "generations", tuple(self.generations))
        if self.metadata is None:
            object.__setattr__(self, "metadata", _EMPTY_RESPONSE_METADATA)

    @classmethod
    def of_text(
        cls,
        text: str,
        *,
        finish_reason: str | None = "STOP",
        usage: Usage | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> ChatResponse:
        """A one-generation response with ``text`` (a convenience for advisors and fakes)."""
        return cls(
            (Generation(AssistantMessage(text), ChatGenerationMetadata(finish_reason)),),
            ChatResponseMetadata(usage=usage, extra=metadata or EMPTY),
        )

    @property
    def result(self) -> Generation | None:
        """The first generation, or ``None`` when there is none."""
        return self.generations[0] if self.generations else None

    @property
    def results(self) -> tuple[Generation, ...]:
        return self.generations

    @property
    def text(self) -> str:
        """The text of every generation joined with ``"\\n"`` (one generation in the usual case)."""
        if len(self.generations) == 1:
            return self.generations[0].output.text
        return "\n".join(g.output.text for g in self.generations)

    def has_tool_calls(self) -> bool:
        return any(g.output.tool_calls for g in self.generations)

    def has_finish_reasons(self, *reasons: str) -> bool:
        wanted = {r.lower() for r in reasons}
        return any((g.finish_reason or "").lower() in wanted for g in self.generations)

    def mutate(self, **changes: Any) -> ChatResponse:
        return dataclasses.replace(self, **changes)

    def with_metadata(self, **entries: Any) -> ChatResponse:
        """Return a copy whose response metadata has ``entries`` merged into ``extra``."""
        return dataclasses.replace(self, metadata=self.metadata.with_extra(**entries))

    def with_usage(self, usage: Usage | None) -> ChatResponse:
        return dataclasses.replace(self, metadata=dataclasses.replace(self.metadata, usage=usage))
