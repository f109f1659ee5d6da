"""LastMaxTokenSizeContentPurger keeps the newest items within a token budget."""

from __future__ import annotations

import pytest

from advisors_app.core import UserMessage
from advisors_app.core.advisors import LastMaxTokenSizeContentPurger
from advisors_app.core.tokens import TiktokenTokenCountEstimator

ESTIMATOR = TiktokenTokenCountEstimator()


def test_drops_from_the_front_until_the_budget_fits():
    messages = [UserMessage("one two three four five"), UserMessage("six seven"), UserMessage("x")]
    purger = LastMaxTokenSizeContentPurger(ESTIMATOR, 10)
    assert purger.purge_excess(messages, ESTIMATOR.estimate(messages)) == [messages[2]]
    assert purger.purge_excess(messages, 10) == messages
    assert purger.purge_excess([], 99) == []


def test_never_returns_nothing_for_a_non_empty_input():
    messages = [UserMessage("word " * 50)]
    assert LastMaxTokenSizeContentPurger(ESTIMATOR, 5).purge_excess(messages, 60) == messages


def test_arguments_are_checked():
    with pytest.raises(ValueError, match="tokenCountEstimator cannot be null"):
        LastMaxTokenSizeContentPurger(None, 5)
    with pytest.raises(ValueError, match="maxTokenSize must be greater than 0"):
        LastMaxTokenSizeContentPurger(ESTIMATOR, 0)
