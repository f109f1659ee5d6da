"""BudgetGuardAdvisor: character and token budgets, refusal without a model call."""

from __future__ import annotations

import pytest

from advisors_app.core import HIGHEST_PRECEDENCE, ChatClient, ScriptedChatModel
from advisors_app.core.advisors import BudgetGuardAdvisor
from advisors_app.core.advisors.budget_guard import (
    BUDGET_EXCEEDED,
    DEFAULT_MESSAGE,
    REJECTION_REASON,
)

from .helpers import run

MODES = ["call", "stream"]


def test_defaults_and_validation():
    guard = BudgetGuardAdvisor()
    assert guard.order == HIGHEST_PRECEDENCE + 150
    assert guard.name == "BudgetGuardAdvisor"
    with pytest.raises(ValueError, match="max_chars"):
        BudgetGuardAdvisor(max_chars=-1)


@pytest.mark.parametrize("mode", MODES)
async def test_character_budget(mode):
    model = ScriptedChatModel(["ok"])
    client = ChatClient(model, default_system="be brief", default_advisors=[BudgetGuardAdvisor(20)])
    refused = await run(mode, client, "x" * 13)  # 8 + 13 characters
    assert refused.chat_response.text == DEFAULT_MESSAGE
    assert refused.chat_response.result.finish_reason == BUDGET_EXCEEDED
    assert refused.context[REJECTION_REASON] == "maxChars=20"
    assert refused.chat_response.metadata[REJECTION_REASON] == "maxChars=20"
    assert model.prompts == []
    allowed = await run(mode, client, "x" * 12)
    assert allowed.chat_response.text == "ok"


@pytest.mark.parametrize("mode", MODES)
async def test_token_budget(mode):
    model = ScriptedChatModel(["ok"])
    guard = BudgetGuardAdvisor(max_chars=None, max_tokens=10, message="too long")
    client = ChatClient(model, default_advisors=[guard])
    refused = await run(mode, client, "one two three four five six seven")  # 7 + 4 overhead
    assert (refused.chat_response.text, refused.context[REJECTION_REASON]) == (
        "too long",
        "maxTokens=10",
    )
    assert (await run(mode, client, "one two three")).chat_response.text == "ok"
