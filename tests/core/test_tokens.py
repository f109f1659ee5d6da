"""Token counting with offline cl100k_base."""

from __future__ import annotations

from advisors_app.core import AssistantMessage, ToolCall, UserMessage
from advisors_app.core.tokens import (
    MESSAGE_OVERHEAD_TOKENS,
    TiktokenTokenCountEstimator,
    TokenCountEstimator,
)


def test_counts_text_messages_and_lists():
    estimator = TiktokenTokenCountEstimator()
    assert isinstance(estimator, TokenCountEstimator)
    assert estimator.estimate("Hello, how are you doing today?") == 8
    assert estimator.estimate("") == 0
    assert estimator.estimate(UserMessage("hi")) == MESSAGE_OVERHEAD_TOKENS + 1
    call = AssistantMessage("", tool_calls=[ToolCall("t1", "weather", '{"city": "Oslo"}')])
    assert estimator.estimate(call) > MESSAGE_OVERHEAD_TOKENS + 4
    assert estimator.estimate([UserMessage("hi"), UserMessage("hi")]) == 2 * (
        MESSAGE_OVERHEAD_TOKENS + 1
    )


def test_special_token_text_is_counted_as_text():
    assert TiktokenTokenCountEstimator().estimate("<|endoftext|>") > 1
