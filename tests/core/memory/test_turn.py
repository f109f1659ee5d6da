"""``TurnMemory``: a host that stores turns itself hands the memory advisors the conversation it
read, and gets what they would store — without a ``TurnMemory`` nothing changes."""

from __future__ import annotations

from contextlib import aclosing

import pytest

from advisors_app.core import CONVERSATION_ID, ChatClient, ScriptedChatModel
from advisors_app.core.advisors import (
    MessageChatMemoryAdvisor,
    PromptChatMemoryAdvisor,
    session_advisors,
)
from advisors_app.core.attributes import TURN_MEMORY
from advisors_app.core.exceptions import ProviderError
from advisors_app.core.memory import (
    ChatMemory,
    CompactionPolicy,
    InMemoryChatMemoryRepository,
    InMemorySessionRepository,
    MessageWindowChatMemory,
    ReadAhead,
    TurnCountTrigger,
    TurnMemory,
    WindowCompactionStrategy,
    turn_memory_of,
)
from advisors_app.core.memory.ids import FINISH_REASON, INTERRUPTED
from tests.core.memory.messages import A, S, U

MODES = ["call", "stream"]


class Recording(InMemoryChatMemoryRepository):
    """Notes every read and write that reaches it."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple] = []

    def find_last(self, conversation_id, limit):
        self.calls.append(("find_last", limit))
        return super().find_last(conversation_id, limit)

    def find_system_messages(self, conversation_id):
        self.calls.append(("find_system_messages",))
        return super().find_system_messages(conversation_id)

    def append(self, conversation_id, messages, *, replace_system=False):
        self.calls.append(("append", len(messages)))
        super().append(conversation_id, messages, replace_system=replace_system)


def stored(repository: Recording) -> Recording:
    repository.append("c1", [S("Be brief."), U("one"), A("1"), U("two"), A("2")])
    repository.calls.clear()
    return repository


def texts(messages) -> list[str]:
    return [m.text for m in messages]


def test_reads_come_from_the_read_ahead_and_the_appends_it_holds() -> None:
    repository = stored(Recording())
    held = TurnMemory("c1", ReadAhead((S("Be brief."),), (U("one"), A("1"), U("two"), A("2"))))
    memory = MessageWindowChatMemory(repository, max_messages=4).for_turn(held)
    assert texts(memory.get("c1")) == ["Be brief.", "one", "1", "two", "2"]
    memory.add("c1", [U("three"), A("3")])
    assert texts(memory.get("c1")) == ["Be brief.", "two", "2", "three", "3"]
    assert repository.calls == []  # nothing read, nothing written
    assert [texts(append.messages) for append in held.appends] == [["three", "3"]]
    assert texts(held.held()) == ["three", "3"]


def test_a_read_past_the_read_ahead_reads_the_store_then_puts_the_held_after() -> None:
    repository = stored(Recording())
    held = TurnMemory("c1", ReadAhead((S("Be brief."),), (A("2"),), complete=False))
    held.append([U("three")])
    view = held.repository(repository)
    assert texts(view.find_last("c1", 3)) == ["two", "2", "three"]
    assert repository.calls == [("find_last", 2)]  # the older two; the held one is newest
    assert texts(view.find_last("c1", 1)) == ["three"]
    assert texts(view.find_by_conversation_id("c1")) == [
        *("Be brief.", "one", "1", "two", "2"),
        "three",
    ]


def test_without_a_read_ahead_every_read_goes_to_the_store() -> None:
    repository = stored(Recording())
    held = TurnMemory("c1")
    view = held.repository(repository)
    assert texts(view.find_system_messages("c1")) == ["Be brief."]
    assert texts(view.find_last("c1", 2)) == ["two", "2"]
    assert repository.calls == [("find_system_messages",), ("find_last", 2)]


def test_a_held_append_that_replaces_the_system_messages_is_read_so() -> None:
    held = TurnMemory("c1", ReadAhead((S("Old."),), ()))
    view = held.repository(InMemoryChatMemoryRepository())
    view.append("c1", [S("New."), U("hi")], replace_system=True)
    assert texts(view.find_system_messages("c1")) == ["New."]
    assert held.appends[0].replace_system is True


def test_other_conversations_go_to_the_store_at_once() -> None:
    repository = stored(Recording())
    view = TurnMemory("c2", ReadAhead()).repository(repository)
    view.append("c1", [U("three")])
    assert texts(view.find_last("c1", 1)) == ["three"]
    assert ("append", 1) in repository.calls


def test_the_context_names_the_turn_memory_of_its_conversation_only() -> None:
    held = TurnMemory("c1")
    assert turn_memory_of({TURN_MEMORY: held}, "c1") is held
    assert turn_memory_of({TURN_MEMORY: held}, "c2") is None
    assert turn_memory_of({}, "c1") is None


def test_a_chat_memory_of_your_own_is_used_as_it_is() -> None:
    class Own(ChatMemory):
        pass

    own = Own()
    assert own.for_turn(TurnMemory("c1")) is own


async def run(client: ChatClient, text: str, mode: str, held: TurnMemory | None) -> str:
    spec = client.prompt().user(text).advisor_param(CONVERSATION_ID, "c1")
    if held is not None:
        spec = spec.advisor_param(TURN_MEMORY, held)
    if mode == "call":
        return (await spec.acall()).content()
    async with aclosing(spec.stream().content()) as deltas:
        return "".join([delta async for delta in deltas])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("advisor", [MessageChatMemoryAdvisor, PromptChatMemoryAdvisor])
async def test_memory_advisors_hand_the_turn_what_they_would_store(advisor, mode) -> None:
    repository = stored(Recording())
    model = ScriptedChatModel(["3"])
    client = ChatClient(model, default_advisors=[advisor(MessageWindowChatMemory(repository))])
    held = TurnMemory("c1", ReadAhead((S("Be brief."),), (U("one"), A("1"), U("two"), A("2"))))
    assert await run(client, "three", mode, held) == "3"
    assert repository.calls == []
    assert [texts(append.messages) for append in held.appends] == [["three", "3"]]
    sent = " ".join(texts(model.prompts[-1].instructions))
    assert "one" in sent and "two" in sent  # the history came from the read-ahead


async def test_an_interrupted_stream_hands_the_turn_its_partial_reply() -> None:
    repository = stored(Recording())
    model = ScriptedChatModel([["par", "tial", ProviderError("down", status=503)]])
    client = ChatClient(
        model, default_advisors=[MessageChatMemoryAdvisor(MessageWindowChatMemory(repository))]
    )
    held = TurnMemory("c1", ReadAhead())
    with pytest.raises(ProviderError):
        await run(client, "hi", "stream", held)
    [append] = held.appends
    assert texts(append.messages) == ["hi", "partial"]
    assert append.messages[-1].metadata == {INTERRUPTED: True, FINISH_REASON: "error"}
    assert repository.calls == []


@pytest.mark.parametrize("mode", MODES)
async def test_session_memory_hands_the_turn_its_messages_and_its_compaction(mode) -> None:
    repository = InMemorySessionRepository()
    await repository.aappend("c1", [U("zero"), A("0")])
    policy = CompactionPolicy(TurnCountTrigger(1), WindowCompactionStrategy(last_turns=1))
    model = ScriptedChatModel(["one"])
    client = ChatClient(model, default_advisors=list(session_advisors(repository, policy)))
    held = TurnMemory("c1")
    assert await run(client, "first", mode, held) == "one"
    assert texts(repository.log("c1")) == ["zero", "0"]  # held: the host writes it
    assert [texts(append.messages) for append in held.appends] == [["first", "one"]]
    [request] = held.compactions  # two turns now: asked of the host, not run
    assert repository.boundaries("c1") == []
    await repository.aappend("c1", held.held())  # the host writes the turn, then compacts
    await request.submit()
    assert [b.covers_up_to for b in repository.boundaries("c1")] == [2]


@pytest.mark.parametrize("mode", MODES)
async def test_without_a_turn_memory_the_advisors_store_as_before(mode) -> None:
    repository = stored(Recording())
    client = ChatClient(
        ScriptedChatModel(["3"]),
        default_advisors=[MessageChatMemoryAdvisor(MessageWindowChatMemory(repository))],
    )
    await run(client, "three", mode, None)
    assert ("append", 2) in repository.calls
    assert texts(repository.find_last("c1", 2)) == ["three", "3"]
