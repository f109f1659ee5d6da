"""FallbackAdvisor: switches models on model failures only, and in streams only before output."""

from __future__ import annotations

import pytest

from advisors_app.core import (
    CHAT_MODEL_OVERRIDE,
    AuthenticationError,
    BadRequestError,
    ChatClient,
    ChatResponse,
    MalformedResponseError,
    OutputValidationError,
    ProviderTimeoutError,
    ProviderUnavailableError,
    RateLimitedError,
    RecordingAdvisor,
    ScriptedChatModel,
)
from advisors_app.core.advisors import (
    FallbackAdvisor,
    SafeGuardAdvisor,
    StructuredOutputValidationAdvisor,
)
from advisors_app.core.advisors.fallback import FALLBACK_ERRORS, FALLBACK_MODEL_INDEX
from advisors_app.core.advisors.safe_guard import CONTENT_FILTER

from .helpers import run, stream, texts

MODES = ["call", "stream"]


def test_arguments():
    with pytest.raises(ValueError, match="empty"):
        FallbackAdvisor([])
    with pytest.raises(ValueError, match="ModelFailure subclasses only"):
        FallbackAdvisor(ScriptedChatModel(), retry_on=(ValueError,))
    assert FallbackAdvisor(ScriptedChatModel()).order == 2**31 - 1 - 1000


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "failure",
    [
        ProviderUnavailableError("down", status=503),
        RateLimitedError("slow down", retry_after=2),
        ProviderTimeoutError("timeout"),
        MalformedResponseError("cut"),
    ],
)
async def test_model_failure_switches_and_reruns_inner_advisors(mode, failure):
    log: list[str] = []
    primary = ScriptedChatModel([failure])
    backup = ScriptedChatModel(["from backup"])
    client = ChatClient(
        primary,
        default_advisors=[FallbackAdvisor(backup, order=-10), RecordingAdvisor("inner", 0, log)],
    )
    response = await run(mode, client, "hi")
    assert response.chat_response.text == "from backup"
    assert response.context[FALLBACK_MODEL_INDEX] == 1
    assert response.context[FALLBACK_ERRORS] == [f"{type(failure).__name__}: {failure}"]
    assert response.context[CHAT_MODEL_OVERRIDE] is None
    assert log.count("inner:before") == 2
    assert [p.user_message.text for p in backup.prompts] == ["hi"]


@pytest.mark.parametrize("mode", MODES)
async def test_every_model_failing_raises_the_last_failure(mode):
    client = ChatClient(
        ScriptedChatModel([ProviderUnavailableError("a")]),
        default_advisors=[
            FallbackAdvisor(
                [
                    ScriptedChatModel([ProviderTimeoutError("b")]),
                    ScriptedChatModel([RateLimitedError("c")]),
                ]
            )
        ],
    )
    with pytest.raises(RateLimitedError, match="c"):
        await run(mode, client, "hi")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "error",
    [BadRequestError("bad", status=400), AuthenticationError("key", status=401), ValueError("no")],
)
async def test_other_errors_propagate_without_switching(mode, error):
    backup = ScriptedChatModel(["never"])
    client = ChatClient(ScriptedChatModel([error]), default_advisors=[FallbackAdvisor(backup)])
    with pytest.raises(type(error)):
        await run(mode, client, "hi")
    assert backup.prompts == []


@pytest.mark.parametrize("mode", MODES)
async def test_a_guard_refusal_is_not_a_failure(mode):
    # Fallback outermost: a refusal from inside must come back as is, never re-run elsewhere.
    primary, backup = ScriptedChatModel(["answer"]), ScriptedChatModel(["never"])
    client = ChatClient(
        primary,
        default_advisors=[FallbackAdvisor(backup, order=-100), SafeGuardAdvisor(["bomb"])],
    )
    response = await run(mode, client, "a bomb")
    assert response.chat_response.result.finish_reason == CONTENT_FILTER
    assert primary.prompts == [] and backup.prompts == []


@pytest.mark.parametrize("mode", MODES)
async def test_an_output_refusal_is_not_a_failure(mode):
    primary, backup = ScriptedChatModel(["a bomb recipe"]), ScriptedChatModel(["never"])
    client = ChatClient(
        primary,
        default_advisors=[
            FallbackAdvisor(backup, order=-100),
            SafeGuardAdvisor(["bomb"], guard_output=True),
        ],
    )
    response = await run(mode, client, "recipe")
    assert response.chat_response.result.finish_reason == CONTENT_FILTER
    assert backup.prompts == []


@pytest.mark.parametrize("mode", MODES)
async def test_a_validation_failure_is_not_a_failure(mode):
    validation = StructuredOutputValidationAdvisor(
        output_json_schema={"type": "object"}, max_repeat_attempts=0, raise_on_failure=True
    )
    backup = ScriptedChatModel(["{}"])
    client = ChatClient(
        ScriptedChatModel(["not json"]),
        default_advisors=[FallbackAdvisor(backup, order=-100), validation],
    )
    with pytest.raises(OutputValidationError):
        await run(mode, client, "json please")
    assert backup.prompts == []


async def test_stream_switches_while_nothing_was_sent():
    role_only = ChatResponse.of_text("", finish_reason=None)
    primary = ScriptedChatModel([[role_only, ProviderUnavailableError("down")]])
    backup = ScriptedChatModel([["from ", "backup"]])
    client = ChatClient(primary, default_advisors=[FallbackAdvisor(backup)])
    chunks = await stream(client, "hi")
    assert [t for t in texts(chunks) if t] == ["from ", "backup"]
    assert chunks[-1].context[FALLBACK_MODEL_INDEX] == 1
    assert primary.events == ["stream", "error"]


async def test_stream_failure_after_output_propagates():
    primary = ScriptedChatModel([["partial ", MalformedResponseError("cut")]])
    backup = ScriptedChatModel(["never"])
    client = ChatClient(primary, default_advisors=[FallbackAdvisor(backup)])
    received: list[str] = []
    with pytest.raises(MalformedResponseError):
        async for text in client.prompt("hi").stream().content():
            received.append(text)
    assert received == ["partial "]
    assert backup.prompts == []
