"""ChatClient: request assembly, accessors, params, defaults, mode checks, entity."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from advisors_app.core import (
    CONVERSATION_ID,
    AdvisorStateError,
    BaseAdvisor,
    CallAdvisor,
    ChatClient,
    ChatOptions,
    Prompt,
    RecordingAdvisor,
    ScriptedChatModel,
    StreamAdvisor,
    SystemMessage,
    ToolAdvisor,
    UserMessage,
)


def test_messages_are_system_then_messages_then_user():
    model = ScriptedChatModel(["ok"])
    client = ChatClient(model, default_system="You are helpful")
    client.prompt().messages(UserMessage("earlier")).user("now").call().content()
    assert model.prompts[0].instructions == (
        SystemMessage("You are helpful"),
        UserMessage("earlier"),
        UserMessage("now"),
    )


def test_templates_render_only_with_params_and_never_reinterpret_values():
    model = ScriptedChatModel(["ok", "ok"])
    client = ChatClient(model)
    client.prompt().system("Speak {lang}", lang="French").user(
        "Say {word}", word="{lang}"
    ).call().content()
    assert model.prompts[0].instructions == (
        SystemMessage("Speak French"),
        UserMessage("Say {lang}"),
    )
    client.prompt().user("literal {braces} stay").call().content()
    assert model.prompts[1].user_message.text == "literal {braces} stay"


def test_several_accessors_run_the_chain_once():
    log: list[str] = []
    model = ScriptedChatModel(["only once"])
    response = (
        ChatClient(model, default_advisors=[RecordingAdvisor("r", 0, log)]).prompt("q").call()
    )
    assert response.content() == "only once"
    assert response.chat_response().result.output.text == "only once"
    assert response.chat_client_response().chat_response.text == "only once"
    assert log == ["r:before", "r:after"]
    assert len(model.prompts) == 1


async def test_async_twins_and_concurrent_accessors_share_one_execution():
    model = ScriptedChatModel(["once"], chunk_delay=0)
    spec = ChatClient(model).prompt("q").call()
    texts = await asyncio.gather(spec.acontent(), spec.acontent(), spec.achat_response())
    assert texts[0] == texts[1] == "once"
    assert len(model.prompts) == 1
    assert (await ChatClient(ScriptedChatModel(["a"])).prompt("q").acall()).content() == "a"


async def test_sync_facade_refuses_to_run_inside_an_event_loop():
    spec = ChatClient(ScriptedChatModel(["a"])).prompt("q").call()
    with pytest.raises(RuntimeError, match="await its async twin"):
        spec.content()


def test_params_validation_and_merging():
    model = ScriptedChatModel(["ok"])
    seen = {}

    class Peek(BaseAdvisor):
        def before(self, request, chain):
            seen.update(request.context)
            return request

    client = ChatClient(model, default_advisors=[Peek()], default_advisor_params={"a": 1, "b": 1})
    client.prompt("q").advisor_param("b", 2).advisor_params(
        {CONVERSATION_ID: "c1"}
    ).call().content()
    assert seen == {"a": 1, "b": 2, CONVERSATION_ID: "c1"}
    spec = client.prompt("q")
    with pytest.raises(ValueError, match="key cannot be null or empty"):
        spec.advisor_param("", 1)
    with pytest.raises(ValueError, match="value cannot be null"):
        spec.advisor_param("k", None)
    with pytest.raises(ValueError, match="advisors cannot contain null elements"):
        spec.advisors(None)


def test_mutate_keeps_params_without_default_advisors():
    client = ChatClient(ScriptedChatModel([]), default_advisor_params={"tenant": "t1"})
    assert client.mutate().default_advisor_params == {"tenant": "t1"}
    assert client.mutate(default_system="S").default_system == "S"
    with pytest.raises(TypeError, match="unknown ChatClient setting"):
        client.mutate(colour="red")


def test_options_merge_request_over_defaults():
    model = ScriptedChatModel(["ok"])
    client = ChatClient(model, default_options=ChatOptions(model="m", temperature=0.1))
    client.prompt("q").options(ChatOptions(temperature=0.7)).call().content()
    assert model.prompts[0].options == ChatOptions(model="m", temperature=0.7)


def test_prompt_object_keeps_messages_and_options():
    model = ScriptedChatModel(["ok"])
    prompt = Prompt([SystemMessage("s"), UserMessage("u")], ChatOptions(max_tokens=5))
    ChatClient(model, default_system="ignored").prompt(prompt).call().content()
    assert model.prompts[0] == prompt


def test_two_tool_advisors_raise_springs_error():
    class Loop(ToolAdvisor, BaseAdvisor):
        def __init__(self, name):
            self._name = name

        @property
        def name(self):
            return self._name

    client = ChatClient(ScriptedChatModel(["ok"]))
    with pytest.raises(
        AdvisorStateError, match=r"At most one ToolAdvisor .* found 2: \[one \(order=0\)"
    ):
        client.prompt("q").advisors(Loop("one"), Loop("two")).call().content()


class CallOnly(CallAdvisor):
    async def advise_call(self, request, chain):
        return await chain.next_call(
            request.mutate(prompt=request.prompt.augment_system_message("CTX"))
        )


class StreamOnly(StreamAdvisor):
    async def advise_stream(self, request, chain):
        async for chunk in chain.next_stream(request):
            yield chunk


async def test_advisor_missing_the_mode_fails_assembly_with_its_name():
    model = ScriptedChatModel(["ok", "ok"])
    client = ChatClient(model)
    with pytest.raises(AdvisorStateError, match="Advisor 'CallOnly' implements only CallAdvisor"):
        async for _ in client.prompt("q").advisors(CallOnly()).stream().content():
            pass
    with pytest.raises(
        AdvisorStateError, match="Advisor 'StreamOnly' implements only StreamAdvisor"
    ):
        await client.prompt("q").advisors(StreamOnly()).acall()
    assert model.prompts == []
    assert (await client.prompt("q").advisors(CallOnly()).acall()).content() == "ok"


async def test_client_without_advisors_works_in_both_modes():
    client = ChatClient(ScriptedChatModel(["call", "stream"]))
    assert (await client.prompt("q").acall()).content() == "call"
    assert [t async for t in client.prompt("q").stream().content()] == ["stream"]


@dataclasses.dataclass
class Person:
    name: str
    age: int


def test_entity_adds_format_instructions_and_parses():
    model = ScriptedChatModel(['```json\n{"name": "John", "age": 42}\n```'])
    person = ChatClient(model).prompt("Tell me about John").call().entity(Person)
    assert person == Person("John", 42)
    user_text = model.prompts[0].user_message.text
    assert user_text.startswith("Tell me about John\n")
    assert "Your response should be in JSON format" in user_text
    assert '"age"' in user_text


async def test_stream_entity_adds_the_same_format_instructions():
    model = ScriptedChatModel([['{"name": "Ann", ', '"age": 7}']])
    person = await ChatClient(model).prompt("Tell me about Ann").stream().entity(Person)
    assert person == Person("Ann", 7)
    assert "Your response should be in JSON format" in model.prompts[0].user_message.text


def test_entity_after_content_parses_without_a_second_call():
    model = ScriptedChatModel(['{"name": "Bo", "age": 3}'])
    spec = ChatClient(model).prompt("q").call()
    assert spec.content() == '{"name": "Bo", "age": 3}'
    assert spec.entity(Person) == Person("Bo", 3)
    assert len(model.prompts) == 1
    assert "JSON" not in model.prompts[0].user_message.text


def test_native_structured_output_sends_response_format():
    from advisors_app.core import STRUCTURED_OUTPUT_NATIVE

    model = ScriptedChatModel(['{"name": "N", "age": 1}'])
    ChatClient(model).prompt("q").advisor_param(STRUCTURED_OUTPUT_NATIVE, True).call().entity(
        Person
    )
    prompt = model.prompts[0]
    assert prompt.user_message.text == "q"
    assert prompt.options.response_format["type"] == "json_schema"
    assert prompt.options.response_format["json_schema"]["schema"]["required"] == ["name", "age"]


def test_sync_errors_keep_their_type():
    class Boom(Exception):
        pass

    with pytest.raises(Boom):
        ChatClient(ScriptedChatModel([Boom()])).prompt("q").call().content()


def test_memory_advisor_inside_the_tool_loop_warns_at_assembly_b09():
    from advisors_app.core import DEFAULT_TOOL_CALLING_ORDER, MemoryAdvisor
    from advisors_app.core.client import MemoryInsideToolLoopWarning

    class InnerMemory(MemoryAdvisor, BaseAdvisor):
        order = DEFAULT_TOOL_CALLING_ORDER + 1

    client = ChatClient(ScriptedChatModel(["ok", "ok"]), default_advisors=[InnerMemory()])
    with pytest.warns(MemoryInsideToolLoopWarning, match="runs inside Tool Calling Advisor"):
        assert client.prompt("q").call().content() == "ok"


def test_client_chain_is_assembled_once_and_observers_stay_per_call():
    seen: list[str] = []

    class Observer:
        async def observe_call(self, advisor, request, proceed):
            seen.append(advisor.name)
            return await proceed(request)

    client = ChatClient(
        ScriptedChatModel(["a", "b", "c"]), default_advisors=[RecordingAdvisor("r")]
    )
    first = client.prompt("q")._chain(CallAdvisor)
    assert client.prompt("q")._chain(CallAdvisor) is first
    assert client.prompt("q").call().content() == "a"
    assert client.prompt("q").observer(Observer()).call().content() == "b"
    assert seen == ["Tool Calling Advisor", "r", "call"]
    assert client.prompt("q").call().content() == "c"
    assert len(seen) == 3


def test_explicit_system_leads_even_when_messages_bring_one():
    model = ScriptedChatModel(["ok", "ok"])
    client = ChatClient(model, default_system="default")
    client.prompt().system("S").messages(SystemMessage("M"), UserMessage("u")).call().content()
    assert [m.text for m in model.prompts[0].instructions] == ["S", "M", "u"]
    client.prompt().messages(SystemMessage("M"), UserMessage("u")).call().content()
    assert [m.text for m in model.prompts[1].instructions] == ["M", "u"]


def test_template_params_may_be_called_text():
    model = ScriptedChatModel(["ok"])
    ChatClient(model).prompt().user("Say {text}", text="hi").call().content()
    assert model.prompts[0].user_message.text == "Say hi"


def test_request_tools_join_the_tools_of_the_options():
    from advisors_app.core import ToolCallingChatOptions
    from advisors_app.core.tools import tool

    @tool
    def first() -> str:
        """One."""
        return "1"

    @tool("second")
    def other() -> str:
        """Two."""
        return "2"

    model = ScriptedChatModel(["ok"])
    options = ToolCallingChatOptions(tool_callbacks=(first,))
    ChatClient(model, default_options=options).prompt("q").tools(other).call().content()
    assert [cb.name for cb in model.prompts[0].options.tool_callbacks] == ["first", "second"]


def test_chat_options_positional_order_follows_the_api():
    assert ChatOptions("m", 0.5, 10, 0.9, ["x"]) == ChatOptions(
        model="m", temperature=0.5, max_tokens=10, top_p=0.9, stop=("x",)
    )


def test_response_metadata_is_a_read_only_mapping_of_its_extras():
    from collections.abc import Mapping

    from advisors_app.core import ChatResponseMetadata

    metadata = ChatResponseMetadata(id="r", extra={"qa_retrieved_documents": []})
    assert isinstance(metadata, Mapping)
    assert len(metadata) == 1 and dict(metadata) == {"qa_retrieved_documents": []}
    assert metadata.get("missing") is None


def test_content_of_a_response_without_generations_is_none():
    from advisors_app.core import ChatResponse

    assert ChatClient(ScriptedChatModel([ChatResponse()])).prompt("q").call().content() is None
