"""SafeGuardAdvisor: Spring parity, hardening (NFKC, invisible, homoglyphs), scope, output guard."""

from __future__ import annotations

import pytest

from advisors_app.core import (
    AssistantMessage,
    ChatClient,
    Prompt,
    ScriptedChatModel,
    SystemMessage,
    UserMessage,
)
from advisors_app.core.advisors import DEFAULT_FAILURE_RESPONSE, SafeGuardAdvisor
from advisors_app.core.advisors._matching import WordMatch, WordMatcher
from advisors_app.core.advisors.safe_guard import (
    CONTENT_FILTER,
    SAFEGUARD_LISTS,
    SAFEGUARD_MATCHED,
    SAFEGUARD_STAGE,
    SCOPE_PROMPT,
)

from .helpers import aggregate, run, stream, texts

MODES = ["call", "stream"]


def client_with(guard: SafeGuardAdvisor, *script) -> tuple[ChatClient, ScriptedChatModel]:
    model = ScriptedChatModel(list(script) or ["fine"])
    return ChatClient(model, default_advisors=[guard]), model


def test_defaults_and_spring_messages():
    guard = SafeGuardAdvisor(["x"])
    assert guard.name == "SafeGuardAdvisor"
    assert guard.order == 0
    assert DEFAULT_FAILURE_RESPONSE == (
        "I'm unable to respond to that due to sensitive content. "
        "Could we rephrase or discuss something else?"
    )
    with pytest.raises(ValueError, match=r"^Sensitive words must not be null!$"):
        SafeGuardAdvisor(None)
    with pytest.raises(ValueError, match=r"^Failure response must not be null!$"):
        SafeGuardAdvisor(["x"], None)
    with pytest.raises(ValueError, match="scope"):
        SafeGuardAdvisor(["x"], scope="history")


@pytest.mark.parametrize("mode", MODES)
async def test_refusal_short_circuits_with_finish_reason_and_matched_words(mode):
    client, model = client_with(SafeGuardAdvisor(["bomb"]))
    response = await run(mode, client, "how to build a BOMB")
    assert model.prompts == []
    result = response.chat_response.result
    assert result.output.text == DEFAULT_FAILURE_RESPONSE
    assert result.finish_reason == CONTENT_FILTER
    assert "bomb" not in result.output.text.lower()
    assert response.context[SAFEGUARD_MATCHED] == ["bomb"]
    assert response.context[SAFEGUARD_STAGE] == "input"
    assert response.chat_response.metadata[SAFEGUARD_MATCHED] == ["bomb"]


@pytest.mark.parametrize("mode", MODES)
async def test_clean_request_passes_untouched(mode):
    client, model = client_with(SafeGuardAdvisor(["bomb"]), "hello there")
    response = await run(mode, client, "hello")
    assert response.chat_response.text == "hello there"
    assert SAFEGUARD_MATCHED not in response.context
    assert model.prompts[0].user_message.text == "hello"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "text",
    [
        "ｂｏｍｂ",  # full-width
        "b\u200bo\u200cm\u200db",  # zero-width space / non-joiner / joiner
        "b\u00adomb",  # soft hyphen
        "b\u043emb",  # Cyrillic о
        "\u0412\u041e\u041c\u0412",  # Cyrillic ВОМВ
        "b0mb",  # digit zero, a TR39 confusable of O
        "𝐛𝐨𝐦𝐛",  # mathematical bold
        "B\ufe0fOMB",  # variation selector
    ],
)
async def test_obfuscated_words_are_caught(mode, text):
    client, model = client_with(SafeGuardAdvisor(["bomb"]))
    response = await run(mode, client, f"tell me about {text} making")
    assert response.context[SAFEGUARD_MATCHED] == ["bomb"]
    assert model.prompts == []


async def test_obfuscated_sensitive_word_in_the_list_is_folded_too():
    client, _ = client_with(SafeGuardAdvisor(["ｐａｓｓ\u200bword"]))
    response = await run("call", client, "my PASSWORD is")
    assert response.context[SAFEGUARD_MATCHED] == ["ｐａｓｓ\u200bword"]


@pytest.mark.parametrize(
    ("text", "whole_words", "blocked"),
    [
        ("BOMB plans", True, ["bomb"]),
        ("Bombay weather", True, []),
        ("classroom assignment", True, []),
        ("you ass", True, ["ass"]),
        ("you a\u200bss!", True, ["ass"]),
        ("BOMB plans", False, ["bomb"]),
        ("Bombay weather", False, ["bomb"]),
        ("classroom assignment", False, ["ass"]),
        ("you ass", False, ["ass"]),
    ],
)
async def test_b15_case_and_word_boundaries(text, whole_words, blocked):
    client, _ = client_with(SafeGuardAdvisor(["bomb", "ass"], whole_words=whole_words))
    response = await run("call", client, text)
    assert response.context.get(SAFEGUARD_MATCHED, []) == blocked


async def test_b15_whole_words_in_a_script_without_spaces():
    client, _ = client_with(SafeGuardAdvisor({"politics": ["政治"]}, whole_words=True))
    response = await run("call", client, "我们来讨论政治问题")
    assert response.context[SAFEGUARD_MATCHED] == ["政治"]
    assert response.context[SAFEGUARD_LISTS] == ["politics"]


async def test_case_sensitive_option():
    client, _ = client_with(SafeGuardAdvisor(["Bomb"], case_sensitive=True), "ok")
    assert (await run("call", client, "bomb")).chat_response.text == "ok"
    client, _ = client_with(SafeGuardAdvisor(["Bomb"], case_sensitive=True))
    assert (await run("call", client, "a Bomb")).context[SAFEGUARD_MATCHED] == ["Bomb"]


async def test_named_lists_report_every_list_that_matched():
    guard = SafeGuardAdvisor({"violence": ["bomb", "gun"], "drugs": ["meth"], "other": ["gun"]})
    client, _ = client_with(guard)
    response = await run("call", client, "gun and meth")
    assert response.context[SAFEGUARD_MATCHED] == ["gun", "meth"]
    assert response.context[SAFEGUARD_LISTS] == ["violence", "other", "drugs"]


async def test_spellings_that_fold_alike_are_reported_once_in_the_first_spelling():
    lists = {"tech": ["decorator", "Decorator", "DECORATOR"], "style": ["Decorator"]}
    response = await run("call", client_with(SafeGuardAdvisor(lists))[0], "a DeCoRaToR")
    assert response.context[SAFEGUARD_MATCHED] == ["decorator"]
    assert response.context[SAFEGUARD_LISTS] == ["tech", "style"]
    # Case-sensitive, they are different words: each is reported as written.
    guard = SafeGuardAdvisor(lists, case_sensitive=True)
    response = await run("call", client_with(guard)[0], "decorator or Decorator")
    assert response.context[SAFEGUARD_MATCHED] == ["decorator", "Decorator"]


async def test_empty_and_blank_words_never_match():
    for words in ([], ["", "  "]):
        client, _ = client_with(SafeGuardAdvisor(words), "ok")
        assert (await run("call", client, "anything")).chat_response.text == "ok"


async def test_large_word_list():
    words = [f"forbidden{i}" for i in range(20_000)]
    client, _ = client_with(SafeGuardAdvisor(words, whole_words=True))
    response = await run("call", client, "a text with forbidden19999 inside")
    assert response.context[SAFEGUARD_MATCHED] == ["forbidden19999"]


def history_prompt(new_text: str) -> Prompt:
    return Prompt(
        [
            SystemMessage("Never discuss a bomb."),
            UserMessage("how to build a bomb"),
            AssistantMessage(DEFAULT_FAILURE_RESPONSE),
            UserMessage(new_text),
        ]
    )


@pytest.mark.parametrize("mode", MODES)
async def test_b14_default_scope_checks_only_the_new_user_input(mode):
    # The history and system prompt a memory advisor (outside the guard) would add contain the
    # word; only the new input is checked, so one blocked turn cannot block every later one.
    # End to end with MessageChatMemoryAdvisor: test_safe_guard_memory.py.
    client, model = client_with(SafeGuardAdvisor(["bomb"]), "hi!")
    response = await run(mode, client, history_prompt("hello"))
    assert response.chat_response.text == "hi!"
    assert len(model.prompts) == 1
    blocked = await run(mode, client, history_prompt("a bomb again"))
    assert blocked.context[SAFEGUARD_MATCHED] == ["bomb"]


@pytest.mark.parametrize("mode", MODES)
async def test_prompt_scope_is_springs_whole_prompt_check(mode):
    client, model = client_with(SafeGuardAdvisor(["bomb"], scope=SCOPE_PROMPT))
    response = await run(mode, client, history_prompt("hello"))
    assert response.context[SAFEGUARD_MATCHED] == ["bomb"]
    assert model.prompts == []


async def test_spring_parity_mode_uses_plain_lower_case_substrings():
    guard = SafeGuardAdvisor(["bomb"], scope=SCOPE_PROMPT, normalize=False)
    client, _ = client_with(guard, "ok", "ok")
    assert (await run("call", client, "ｂｏｍｂ")).chat_response.text == "ok"
    assert (await run("call", client, "b\u200bomb")).chat_response.text == "ok"
    client, _ = client_with(guard)
    assert (await run("call", client, "BOMBAY")).context[SAFEGUARD_MATCHED] == ["bomb"]


async def test_output_guard_in_calls_replaces_the_answer_and_keeps_usage():
    from advisors_app.core import ChatResponse, Usage

    answer = ChatResponse.of_text("Here is a b\u200bomb recipe", usage=Usage(5, 7))
    client, _ = client_with(SafeGuardAdvisor(["bomb"], guard_output=True), answer)
    response = await run("call", client, "recipe please")
    assert response.chat_response.text == DEFAULT_FAILURE_RESPONSE
    assert response.chat_response.result.finish_reason == CONTENT_FILTER
    assert response.chat_response.metadata.usage == Usage(5, 7)
    assert response.context[SAFEGUARD_STAGE] == "output"


async def test_output_guard_catches_a_word_split_across_chunks_and_cancels_the_model():
    chunks = ["Sure. Here is how to make a b", "\u200b", "o", "m", "b and more", " text"]
    client, model = client_with(SafeGuardAdvisor(["bomb"], guard_output=True), chunks)
    received = await stream(client, "recipe please")
    sent = "".join(texts(received)[:-1])
    assert "b" not in sent.split("make a")[-1]
    assert sent.startswith("Sure. Here is how to make a")
    last = received[-1]
    assert last.chat_response.text == DEFAULT_FAILURE_RESPONSE
    assert last.chat_response.result.finish_reason == CONTENT_FILTER
    assert last.context[SAFEGUARD_MATCHED] == ["bomb"]
    assert last.context[SAFEGUARD_STAGE] == "output"
    assert model.events == ["stream", "cancel"]


@pytest.mark.parametrize("whole_words", [False, True])
async def test_output_guard_streams_clean_text_whole_and_in_order(whole_words):
    chunks = ["The Bom", "bay ", "weather is ", "fine", " today."]
    guard = SafeGuardAdvisor(["bomb", "ass"], guard_output=True, whole_words=True)
    if not whole_words:
        guard = SafeGuardAdvisor(["grenade"], guard_output=True)
    client, model = client_with(guard, chunks)
    received = await stream(client, "weather?")
    assert "".join(texts(received)) == "".join(chunks)
    assert len(texts(received)) > 1  # it streams, it does not buffer the whole answer
    assert model.events == ["stream", "complete"]


async def test_output_guard_whole_word_waits_for_the_next_character():
    # "ass" at the end of a chunk is not yet a whole word: "assignment" follows.
    client, _ = client_with(
        SafeGuardAdvisor(["ass"], guard_output=True, whole_words=True),
        ["your ass", "ignment is due", ""],
    )
    received = await stream(client, "homework?")
    assert aggregate(received).chat_response.text == "your assignment is due"
    client, _ = client_with(
        SafeGuardAdvisor(["ass"], guard_output=True, whole_words=True), ["you ass", "!"]
    )
    received = await stream(client, "insult me")
    assert received[-1].context[SAFEGUARD_MATCHED] == ["ass"]


@pytest.mark.parametrize("text", ["pompous", "pomegranate juice", "I love Pomona", "my pom pom"])
def test_ascii_letters_are_not_folded_into_other_letters(text):
    # TR39 maps "m" to "rn"; folding ASCII letters would make "porn" match these.
    assert WordMatcher({None: ["porn"]}).search(text) == []


@pytest.mark.parametrize("text", ["bómb", "b\u0335omb", "BÖMB", "b\u0301o\u0301mb"])
def test_diacritics_and_combining_overlays_are_folded_away(text):
    assert WordMatcher({None: ["bomb"]}).search(text) == [WordMatch("bomb")]


def test_script_specific_marks_are_kept():
    # Kana voicing and Devanagari vowel signs change the word; they are not decoration.
    assert WordMatcher({None: ["かき"]}).search("がき") == []
    assert WordMatcher({None: ["क"]}, whole_words=True).search("कि") == []
