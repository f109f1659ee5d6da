"""The ChatMemoryRepository contract, run against every backend.

Backends: ``InMemoryChatMemoryRepository``, ``DjangoChatMemoryRepository`` (the embedded
PostgreSQL, ``transactional_db`` because the async twins use other threads' connections), and a
repository implementing only Spring AI's four operations, which exercises the contract's
default ``append``/``find_last``/``find_system_messages``.
"""

from __future__ import annotations

import threading

import pytest

from advisors_app.core import Media, UserMessage
from advisors_app.core.memory import (
    ChatMemoryRepository,
    InMemoryChatMemoryRepository,
    MessageWindowChatMemory,
    check_conversation_id,
)
from advisors_app.core.memory.repository import check_messages
from tests.core.memory.messages import A, S, T, U, call


class SpringOnlyRepository(ChatMemoryRepository):
    """Only Spring AI's four operations, over a dict (like Spring's in-memory repository)."""

    def __init__(self):
        self._data = {}
        self._lock = threading.Lock()

    def find_conversation_ids(self):
        return list(self._data)

    def find_by_conversation_id(self, conversation_id):
        return list(self._data.get(check_conversation_id(conversation_id), ()))

    def save_all(self, conversation_id, messages):
        with self._lock:
            self._data[check_conversation_id(conversation_id)] = check_messages(messages)

    def delete_by_conversation_id(self, conversation_id):
        self._data.pop(check_conversation_id(conversation_id), None)


@pytest.fixture(
    params=[
        "in_memory",
        pytest.param("django", marks=pytest.mark.django_db(transaction=True)),
        "spring_only",
    ]
)
def repository(request):
    if request.param == "django":
        from advisors_app.stores.memory import DjangoChatMemoryRepository

        return DjangoChatMemoryRepository()
    if request.param == "spring_only":
        return SpringOnlyRepository()
    return InMemoryChatMemoryRepository()


EVERY_KIND = [
    S("You are helpful"),
    UserMessage("Look", {"lang": "en"}, (Media("image/png", b"\x89PNG"), Media("text/uri", "u"))),
    call("t1", "t2"),
    T("t1", "t2", data='{"temp": 5}'),
    A("It is 5C").with_metadata(usage={"tokens": [1, 2]}, interrupted=True),
]


def test_unknown_conversations_read_as_empty(repository):
    assert repository.find_by_conversation_id("nope") == []
    assert repository.find_last("nope", 5) == []
    assert repository.find_system_messages("nope") == []
    repository.delete_by_conversation_id("nope")


def test_every_message_kind_round_trips_with_metadata(repository):
    repository.save_all("c1", EVERY_KIND)
    stored = repository.find_by_conversation_id("c1")
    assert stored == EVERY_KIND
    assert [dict(m.metadata) for m in stored] == [dict(m.metadata) for m in EVERY_KIND]
    assert stored[1].media == EVERY_KIND[1].media
    assert stored[2].tool_calls == EVERY_KIND[2].tool_calls


def test_save_all_replaces_and_stores_a_copy(repository):
    repository.save_all("c1", [U("1"), A("1")])
    messages = [U("2")]
    repository.save_all("c1", messages)
    messages.append(A("leaked?"))
    assert repository.find_by_conversation_id("c1") == [U("2")]


def test_conversation_ids_and_delete(repository):
    repository.save_all("a", [U("1")])
    repository.append("b", [U("2")])
    assert sorted(repository.find_conversation_ids()) == ["a", "b"]
    repository.delete_by_conversation_id("a")
    assert repository.find_conversation_ids() == ["b"]
    assert repository.find_by_conversation_id("a") == []


def test_append_adds_at_the_end(repository):
    repository.append("c1", [U("1"), A("1")])
    repository.append("c1", [])
    repository.append("c1", (U("2"), call("t1"), T("t1"), A("2")))
    assert repository.find_by_conversation_id("c1") == [
        U("1"),
        A("1"),
        U("2"),
        call("t1"),
        T("t1"),
        A("2"),
    ]


def test_append_can_replace_the_system_messages(repository):
    repository.append("c1", [S("old"), U("1"), S("older"), A("1")])
    repository.append("c1", [S("new"), U("2")], replace_system=True)
    assert repository.find_system_messages("c1") == [S("new")]
    assert repository.find_by_conversation_id("c1") == [U("1"), A("1"), S("new"), U("2")]


def test_find_last_returns_the_newest_non_system_messages_oldest_first(repository):
    repository.append("c1", [S("s"), U("1"), A("1"), U("2"), S("s2"), A("2"), U("3")])
    assert repository.find_last("c1", 3) == [U("2"), A("2"), U("3")]
    assert repository.find_last("c1", 100) == [U("1"), A("1"), U("2"), A("2"), U("3")]
    assert repository.find_last("c1", 0) == []
    assert repository.find_system_messages("c1") == [S("s"), S("s2")]
    with pytest.raises(ValueError, match="limit must be an integer >= 0"):
        repository.find_last("c1", -1)


@pytest.mark.parametrize(
    ("conversation_id", "message"),
    [
        (None, r"^conversationId cannot be null$"),
        ("", r"^conversationId cannot be null or empty$"),
        (" ", r"^conversationId cannot be null or empty$"),
        ("x" * 256, r"at most 255 characters"),
    ],
)
def test_conversation_ids_are_checked(repository, conversation_id, message):
    for method, args in (
        (repository.find_by_conversation_id, ()),
        (repository.save_all, ([U("x")],)),
        (repository.delete_by_conversation_id, ()),
        (repository.append, ([U("x")],)),
        (repository.find_last, (1,)),
        (repository.find_system_messages, ()),
    ):
        with pytest.raises(ValueError, match=message):
            method(conversation_id, *args)


def test_ids_of_255_characters_are_accepted(repository):
    long_id = "é" + "x" * 254
    repository.append(long_id, [U("hi")])
    assert repository.find_by_conversation_id(long_id) == [U("hi")]


def test_messages_are_checked(repository):
    with pytest.raises(ValueError, match=r"^messages cannot be null$"):
        repository.save_all("c1", None)
    with pytest.raises(ValueError, match=r"^messages cannot contain null elements$"):
        repository.append("c1", [U("x"), None])
    assert repository.find_by_conversation_id("c1") == []


async def test_async_twins(repository):
    await repository.aappend("c1", [S("s"), U("1"), A("1")])
    await repository.aappend("c1", [S("t"), U("2")], replace_system=True)
    assert await repository.afind_system_messages("c1") == [S("t")]
    assert await repository.afind_last("c1", 2) == [A("1"), U("2")]
    assert await repository.afind_by_conversation_id("c1") == [U("1"), A("1"), S("t"), U("2")]
    await repository.asave_all("c2", [U("x")])
    assert sorted(await repository.afind_conversation_ids()) == ["c1", "c2"]
    await repository.adelete_by_conversation_id("c1")
    assert await repository.afind_conversation_ids() == ["c2"]


def test_a_message_window_over_the_backend(repository):
    memory = MessageWindowChatMemory(repository, max_messages=3)
    for message in (S("sys"), U("Weather?"), call("t1"), T("t1"), A("Sunny"), U("Tomorrow?")):
        memory.add("c1", message)
    assert memory.get("c1") == [S("sys"), U("Tomorrow?")]
    assert len(repository.find_by_conversation_id("c1")) == 6


def test_a_window_keeps_a_greeting_until_it_trims(repository):
    memory = MessageWindowChatMemory(repository, max_messages=3)
    memory.add("c1", [S("sys"), A("Welcome!"), U("Hi"), A("Hello")])
    assert memory.get("c1") == [S("sys"), A("Welcome!"), U("Hi"), A("Hello")]
    memory.add("c1", U("Bye"))
    assert memory.get("c1") == [S("sys"), U("Hi"), A("Hello"), U("Bye")]


def test_find_last_reaches_past_many_system_messages(repository):
    repository.append("c1", [U("1"), A("1")])
    repository.append("c1", [S(f"s{i}") for i in range(60)])
    repository.append("c1", [U("2")])
    assert repository.find_last("c1", 3) == [U("1"), A("1"), U("2")]
    assert len(repository.find_system_messages("c1")) == 60
