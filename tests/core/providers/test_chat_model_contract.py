"""One contract every ``ChatModel`` passes, run against each backend we ship.

Backends: the shipped ``ScriptedChatModel``; ``OpenAiCompatibleChatModel`` against a scripted
loopback server; and the embedded default (SmolLM2 on llama.cpp, through the same
``OpenAiCompatibleChatModel`` HTTP path, tool calls emulated). Each backend supplies factories
for a model that answers, one that calls the ``get_weather`` tool, and one whose request is bad.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import jsonschema
import pytest

from advisors_app.core import (
    TOOL_CALLING_AUTO_REGISTER,
    AssistantMessage,
    BadRequestError,
    ChatClient,
    ChatGenerationMetadata,
    ChatModel,
    ChatOptions,
    ChatResponse,
    ChatResponseAccumulator,
    ChatResponseMetadata,
    Generation,
    Prompt,
    ScriptedChatModel,
    SystemMessage,
    ToolCall,
    ToolCallingChatOptions,
    Usage,
    UserMessage,
)
from advisors_app.core.providers.embedded_smollm2 import EmbeddedLlamaServer, SmolLm2ChatModel
from advisors_app.core.providers.openai_compatible import OpenAiCompatibleChatModel
from advisors_app.core.streams import closing_stream
from tests.core.providers.openai_server import Completion, JsonReply, ScriptedOpenAiServer
from tests.core.providers.tools import QUESTION, WEATHER, WEATHER_SCHEMA

Factory = Callable[[], tuple[ChatModel, Prompt]]

USAGE = Usage(12, 5)


class ChatModelContract:
    """The tests; subclasses provide the ``answering``, ``tool_calling`` and ``bad_request``
    factories (each call gives a fresh model and prompt)."""

    async def test_is_a_chat_model(self, answering: Factory) -> None:
        model, _ = answering()
        assert isinstance(model, ChatModel)
        assert model.default_options is None or isinstance(model.default_options, ChatOptions)

    async def test_call_answers_with_text_a_finish_reason_and_usage(
        self, answering: Factory
    ) -> None:
        model, prompt = answering()
        response = await model.call(prompt)
        assert len(response.results) == 1
        assert response.result.output.text.strip()
        assert response.result.finish_reason in {"STOP", "LENGTH"}
        assert_usage(response)

    async def test_stream_delivers_text_incrementally_and_reports_usage(
        self, answering: Factory
    ) -> None:
        model, prompt = answering()
        accumulator = ChatResponseAccumulator()
        deltas = []
        async with closing_stream(model.stream(prompt)) as chunks:
            async for chunk in chunks:
                accumulator.add(chunk)
                if chunk.generations and chunk.text:
                    deltas.append(chunk.text)
        assert len(deltas) >= 2
        aggregated = accumulator.result()
        assert aggregated.text == "".join(deltas)
        assert aggregated.result.finish_reason in {"STOP", "LENGTH"}
        assert_usage(aggregated)

    async def test_closing_a_stream_early_is_clean(self, answering: Factory) -> None:
        model, prompt = answering()
        stream = model.stream(prompt)
        first = await anext(stream)
        assert isinstance(first, ChatResponse)
        await stream.aclose()

    async def test_tool_call_through_chat_client_in_call(self, tool_calling: Factory) -> None:
        model, _ = tool_calling()
        spec = await tool_request(model).acall()
        assert_weather_call(await spec.achat_response())

    async def test_tool_call_through_chat_client_in_stream(self, tool_calling: Factory) -> None:
        model, _ = tool_calling()
        aggregated = await tool_request(model).stream().aggregate()
        assert_weather_call(aggregated.chat_response)

    async def test_bad_request_raises_the_same_error_in_call_and_stream(
        self, bad_request: Factory
    ) -> None:
        model, prompt = bad_request()
        with pytest.raises(BadRequestError) as called:
            await model.call(prompt)
        model, prompt = bad_request()
        with pytest.raises(BadRequestError) as streamed:
            async with closing_stream(model.stream(prompt)) as chunks:
                async for _ in chunks:
                    pass
        assert streamed.value.status == called.value.status
        assert streamed.value.message == called.value.message


def tool_request(model: ChatModel):
    return (
        ChatClient(model)
        .prompt()
        .user(QUESTION)
        .tools(WEATHER)
        .advisor_param(TOOL_CALLING_AUTO_REGISTER, False)
        .options(
            ToolCallingChatOptions(
                internal_tool_execution_enabled=False, temperature=0.0, max_tokens=80
            )
        )
    )


def assert_usage(response: ChatResponse) -> None:
    usage = response.metadata.usage
    assert usage is not None
    assert usage.prompt_tokens > 0
    assert usage.completion_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens


def assert_weather_call(response: ChatResponse | None) -> None:
    assert response is not None and response.has_tool_calls()
    (call,) = response.result.output.tool_calls
    assert call.id and call.name == "get_weather"
    arguments = json.loads(call.arguments)
    jsonschema.validate(arguments, WEATHER_SCHEMA)
    assert "paris" in arguments["city"].lower()
    assert response.result.finish_reason == "TOOL_CALLS"
    assert_usage(response)


def _scripted_chunk(
    text: str = "", *, calls: tuple[ToolCall, ...] = (), finish: str | None = None
) -> ChatResponse:
    return ChatResponse(
        (Generation(AssistantMessage(text, None, calls), ChatGenerationMetadata(finish)),)
    )


USAGE_CHUNK = ChatResponse((), ChatResponseMetadata(usage=USAGE))


class TestScriptedChatModel(ChatModelContract):
    @pytest.fixture
    def answering(self) -> Factory:
        chunks = ["The capital", " of France", " is Paris.", _scripted_chunk(finish="STOP")]
        return lambda: (ScriptedChatModel([[*chunks, USAGE_CHUNK]]), Prompt("Capital of France?"))

    @pytest.fixture
    def tool_calling(self) -> Factory:
        chunks = [
            _scripted_chunk(calls=(ToolCall("call_1", "get_weather", "", index=0),)),
            _scripted_chunk(calls=(ToolCall("", "", '{"city": ', index=0),)),
            _scripted_chunk(calls=(ToolCall("", "", '"Paris"}', index=0),)),
            _scripted_chunk(finish="TOOL_CALLS"),
            USAGE_CHUNK,
        ]
        return lambda: (ScriptedChatModel([chunks]), Prompt(QUESTION))

    @pytest.fixture
    def bad_request(self) -> Factory:
        error = BadRequestError("messages.0: unknown field 'foo'", status=400)
        return lambda: (ScriptedChatModel([error]), Prompt("hi"))


class TestOpenAiCompatibleOnScriptedServer(ChatModelContract):
    @pytest.fixture
    def model_for(self, openai_server: ScriptedOpenAiServer) -> Callable[..., ChatModel]:
        def make(*replies: object) -> ChatModel:
            openai_server.add(*replies)
            return OpenAiCompatibleChatModel(
                model="scripted-model", base_url=openai_server.base_url, max_retries=0
            )

        return make

    @pytest.fixture
    def answering(self, model_for: Callable[..., ChatModel]) -> Factory:
        reply = Completion("The capital of France is Paris.")
        return lambda: (model_for(reply), Prompt("Capital of France?"))

    @pytest.fixture
    def tool_calling(self, model_for: Callable[..., ChatModel]) -> Factory:
        call = {
            "id": "call_1",
            "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
        }
        reply = Completion(tool_calls=[call], finish_reason="tool_calls")
        return lambda: (model_for(reply), Prompt(QUESTION))

    @pytest.fixture
    def bad_request(self, model_for: Callable[..., ChatModel]) -> Factory:
        body = {"error": {"message": "messages.0: unknown field 'foo'"}}
        return lambda: (model_for(JsonReply(body, 400)), Prompt("hi"))


class TestEmbeddedSmolLm2(ChatModelContract):
    """The real model: greedy decoding and short answers keep it deterministic and quick."""

    @pytest.fixture
    def model(self, llama_server: EmbeddedLlamaServer) -> SmolLm2ChatModel:
        return SmolLm2ChatModel(default_options=ChatOptions(temperature=0.0, max_tokens=24))

    @pytest.fixture
    def answering(self, model: SmolLm2ChatModel) -> Factory:
        prompt = Prompt(
            [SystemMessage("You are a helpful assistant."), UserMessage("Capital of France?")]
        )
        return lambda: (model, prompt)

    @pytest.fixture
    def tool_calling(self, model: SmolLm2ChatModel) -> Factory:
        return lambda: (model, Prompt(QUESTION))

    @pytest.fixture
    def bad_request(self, model: SmolLm2ChatModel) -> Factory:
        # More tokens than a slot's context: llama.cpp answers 400 before generating.
        return lambda: (model, Prompt("word " * 5000))
