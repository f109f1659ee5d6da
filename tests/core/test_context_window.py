"""The budget check before every model call (issue 20): ``core.context_window``."""

from __future__ import annotations

import pytest

from advisors_app.core import (
    ChatClient,
    ChatOptions,
    ContextOverflowError,
    Prompt,
    ScriptedChatModel,
    SystemMessage,
    ToolCallingChatOptions,
    UserMessage,
)
from advisors_app.core.context_window import (
    DEFAULT_ANSWER_RESERVE,
    answer_reserve,
    check_context_window,
    context_window_of,
    estimate_prompt_tokens,
)
from advisors_app.core.testing import tool_call_response
from advisors_app.core.tokens import TiktokenTokenCountEstimator
from advisors_app.core.tools import tool

MODES = ["call", "stream"]
LONG = "tokens " * 400  # ~400 tokens


async def answer(spec, mode):
    if mode == "call":
        return (await spec.acall()).content()
    return "".join([t async for t in spec.stream().content()])


@tool
def big_report() -> str:
    """A report far longer than the model's window."""
    return "report " * 600


@pytest.mark.parametrize("mode", MODES)
async def test_prompt_over_the_window_is_refused_before_the_provider(mode):
    model = ScriptedChatModel(["never"], context_window=200)
    with pytest.raises(ContextOverflowError) as caught:
        await answer(ChatClient(model).prompt(LONG), mode)
    error = caught.value
    assert model.prompts == [] and model.events == []
    assert (error.context_window, error.max_tokens) == (200, DEFAULT_ANSWER_RESERVE)
    assert error.limit == 200 - DEFAULT_ANSWER_RESERVE
    assert error.prompt_tokens > 400
    assert f"The prompt needs {error.prompt_tokens:,} tokens" in str(error)
    assert "context window 200 minus 256 reserved for the answer" in str(error)


@pytest.mark.parametrize("mode", MODES)
async def test_a_model_without_a_window_is_not_checked(mode):
    model = ScriptedChatModel(["fine"])
    assert model.context_window is None
    assert await answer(ChatClient(model).prompt(LONG * 30), mode) == "fine"


@pytest.mark.parametrize("mode", MODES)
async def test_a_prompt_that_fits_reaches_the_model(mode):
    model = ScriptedChatModel(["fine"], context_window=1000)
    assert await answer(ChatClient(model).prompt(LONG), mode) == "fine"


@pytest.mark.parametrize("mode", MODES)
async def test_max_tokens_of_the_request_counts(mode):
    model = ScriptedChatModel(["fine"], repeat=True, context_window=1000)
    client = ChatClient(model)
    assert await answer(client.prompt(LONG), mode) == "fine"
    with pytest.raises(ContextOverflowError) as caught:
        await answer(client.prompt(LONG).options(ChatOptions(max_tokens=700)), mode)
    assert (caught.value.max_tokens, caught.value.limit) == (700, 300)
    assert len(model.prompts) == 1


async def test_max_tokens_of_the_models_defaults_and_of_the_client_count():
    model = ScriptedChatModel(
        ["fine"], repeat=True, context_window=1000, default_options=ChatOptions(max_tokens=700)
    )
    with pytest.raises(ContextOverflowError):
        await ChatClient(model).prompt(LONG).acall()
    # The request's figure wins over the model's default.
    spec = ChatClient(model).prompt(LONG).options(ChatOptions(max_tokens=100))
    assert (await spec.acall()).content() == "fine"
    client = ChatClient(ScriptedChatModel(["x"], context_window=1000), default_options=None)
    roomy = client.mutate(default_options=ChatOptions(max_tokens=900))
    with pytest.raises(ContextOverflowError):
        await roomy.prompt(LONG).acall()


@pytest.mark.parametrize("mode", MODES)
async def test_a_tool_round_over_the_window_is_refused_before_the_second_call(mode):
    model = ScriptedChatModel(
        [tool_call_response(("big_report", {})), "summary"], context_window=700
    )
    with pytest.raises(ContextOverflowError) as caught:
        await answer(ChatClient(model).prompt("report please").tools(big_report), mode)
    assert len(model.prompts) == 1  # the first round ran, the second never reached the model
    assert caught.value.prompt_tokens > 600


def test_tool_definitions_count():
    prompt = Prompt("hi", ToolCallingChatOptions(tool_callbacks=(big_report,)))
    assert estimate_prompt_tokens(prompt) > estimate_prompt_tokens(Prompt("hi"))


def test_the_limit_is_inclusive_and_fast_path_agrees_with_the_count():
    prompt = Prompt([SystemMessage("Be brief. " * 50), UserMessage("héllo wörld " * 40)])
    tokens = estimate_prompt_tokens(prompt)
    exact = ScriptedChatModel(context_window=tokens + DEFAULT_ANSWER_RESERVE)
    check_context_window(exact, prompt)
    check_context_window(exact, prompt, estimator=TiktokenTokenCountEstimator())
    short = ScriptedChatModel(context_window=tokens + DEFAULT_ANSWER_RESERVE - 1)
    for estimator in (None, TiktokenTokenCountEstimator()):
        with pytest.raises(ContextOverflowError) as caught:
            check_context_window(short, prompt, estimator=estimator)
        assert caught.value.prompt_tokens == tokens


def test_a_window_smaller_than_the_reserve_refuses_everything():
    model = ScriptedChatModel(context_window=100)
    with pytest.raises(ContextOverflowError) as caught:
        check_context_window(model, Prompt("hi"))
    assert "accepts 0 (context window 100 minus 256" in str(caught.value)


def test_answer_reserve_and_window_reading():
    model = ScriptedChatModel(default_options=ChatOptions(max_tokens=64), context_window=512)
    assert answer_reserve(model, None) == 64
    assert answer_reserve(model, ChatOptions(max_tokens=8)) == 8
    assert answer_reserve(object(), None) == DEFAULT_ANSWER_RESERVE
    assert context_window_of(model) == 512
    assert context_window_of(object()) is None


@pytest.mark.parametrize("bad", [0, -5, 1.5, True, "4096"])
def test_models_refuse_a_bad_window(bad):
    with pytest.raises(ValueError, match="context_window"):
        ScriptedChatModel(context_window=bad)


# --- counting with the model's own tokenizer --------------------------------------------------

DIGITS = "1234567890 " * 50  # SmolLM2 reads one token per digit: twice cl100k_base's count


async def test_the_embedded_model_counts_its_prompt_exactly_and_the_check_uses_it():
    from advisors_app.core.providers.embedded_smollm2 import SmolLm2ChatModel

    prompt = Prompt([SystemMessage("Be brief."), UserMessage(DIGITS)])
    counting = SmolLm2ChatModel(default_options=ChatOptions(max_tokens=1))
    exact = await counting.count_prompt_tokens(prompt)
    answered = await counting.call(prompt)
    assert exact == answered.metadata.usage.prompt_tokens
    estimate = estimate_prompt_tokens(prompt)
    assert estimate < exact
    # A window between the two: the estimate would let the prompt through, the count does not.
    window = (estimate + exact) // 2 + 8
    model = SmolLm2ChatModel(context_window=window, default_options=ChatOptions(max_tokens=8))
    check_context_window(model, prompt)
    with pytest.raises(ContextOverflowError) as caught:
        await ChatClient(model).prompt(prompt).acall()
    assert caught.value.prompt_tokens == exact


class CountingModel(ScriptedChatModel):
    def __init__(self, count, **kwargs):
        super().__init__(["fine"], repeat=True, **kwargs)
        self._count = count

    async def count_prompt_tokens(self, prompt):
        if isinstance(self._count, Exception):
            raise self._count
        return self._count


async def test_a_models_own_count_wins_and_a_failing_counter_falls_back_to_the_estimate():
    client = ChatClient(CountingModel(5000, context_window=1000))
    with pytest.raises(ContextOverflowError) as caught:
        await client.prompt(LONG * 2).acall()
    assert caught.value.prompt_tokens == 5000
    # Not asked when the prompt's bytes already fit.
    assert (await client.prompt("hi").acall()).content() == "fine"
    broken = ChatClient(CountingModel(OSError("down"), context_window=2000))
    assert (await broken.prompt(LONG * 2).acall()).content() == "fine"  # ~800 tokens: fits
    with pytest.raises(ContextOverflowError) as caught:
        await broken.prompt(LONG * 5).acall()
    assert caught.value.prompt_tokens == estimate_prompt_tokens(Prompt(LONG * 5))
