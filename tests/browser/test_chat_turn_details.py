"""What a reply shows besides its text, live and reopened: tool cards, sources, the meta line.

The chain's model is an OpenAI-compatible server on loopback (``ScriptedOpenAiServer``), so the
live daphne process gets real tool calls from a real HTTP stream: one round with two calls of
the demo calculator (one that works, one that fails), then the answer. The chain retrieves from
a small collection, so the turn has sources too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from advisors_app.ingestion.pipeline import ingest_text
from advisors_app.models import ChatMessage, ChatModelConfig, Collection
from tests.browser.test_chat_page import connected, last_reply, log_in, send, wait_done
from tests.core.providers.openai_server import Completion, ScriptedOpenAiServer, SseReply
from tests.factories import make_chain
from tests.live_server import LiveServer

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ANSWER = "6 times 7 is **42**; `6*` is not a complete expression."
#: One tool round: two calls of the calculator, the second with arguments it cannot compute.
TOOL_CALLS = [
    {"id": "call_ok", "function": {"name": "calculator", "arguments": '{"expression": "6*7"}'}},
    {"id": "call_bad", "function": {"name": "calculator", "arguments": '{"expression": "6*"}'}},
]

#: Records, at every change of the page, the state of the last reply: its tool cards' states
#: and whether any answer text had arrived (the typing indicator is gone), deduplicated.
RECORD_REPLY_STATES = """
window.__replyStates = [];
new MutationObserver(() => {
  const replies = document.querySelectorAll(".msg-assistant");
  if (!replies.length) return;
  const reply = replies[replies.length - 1];
  const cards = [...reply.querySelectorAll(".tool-card")].map((c) => c.dataset.state);
  const state = cards.join(",") + "|" + (reply.querySelector(".msg-typing") ? "no text" : "text");
  const seen = window.__replyStates;
  if (seen[seen.length - 1] !== state) seen.push(state);
}).observe(document, { subtree: true, childList: true, attributes: true, characterData: true });
"""


@pytest.fixture
def model_server() -> Iterator[ScriptedOpenAiServer]:
    server = ScriptedOpenAiServer()
    yield server
    server.stop()


@pytest.fixture
def tool_chain(django_user_model: Any, model_server: ScriptedOpenAiServer) -> str:
    """Users and the ``tools`` chain: memory, handbook retrieval and the tool loop."""
    django_user_model.objects.create_user("alice", password="pw")
    django_user_model.objects.create_superuser("admin", password="pw")
    handbook = Collection.objects.create(slug="handbook", name="Handbook")
    ingest_text(handbook, "arithmetic.md", "The calculator tool computes products like 6*7.")
    ingest_text(handbook, "refunds.md", "Refunds are paid to the original payment method.")
    model = ChatModelConfig.objects.create(
        slug="loopback",
        provider="openai",
        model="scripted-model",
        base_url=model_server.base_url,
        max_retries=0,
        settings={"include_usage": True},
    )
    make_chain(
        "tools",
        model=model,
        tools=["calculator"],
        advisors=(
            ("message_chat_memory", {"max_messages": 20}),
            ("question_answer", {"collection": "handbook", "top_k": 2}),
            ("tool_calling", {}),
        ),
    )
    return "tools"


def script_tool_turn(server: ScriptedOpenAiServer, answer_delay: float = 0.0) -> None:
    """The model's two requests of one turn: the tool round, then the answer (streamed after
    ``answer_delay`` seconds, so the page shows the tool results before any text)."""
    server.add(Completion(tool_calls=TOOL_CALLS, finish_reason="tool_calls"))
    answer = Completion(text=ANSWER).render(streaming=True)
    assert isinstance(answer, SseReply)
    server.add(SseReply([answer_delay, *answer.events]))


def test_a_live_reply_shows_each_tool_call_as_a_card_with_its_result(
    chat_server: LiveServer, new_page: Any, tool_chain: str, model_server: ScriptedOpenAiServer
) -> None:
    # Long enough that the checks below see the results before the answer on a busy machine
    # (at 0.5 s, CI once saw the answer arrive first).
    script_tool_turn(model_server, answer_delay=3.0)
    page = new_page()
    page.add_init_script(RECORD_REPLY_STATES)
    frames: list[dict[str, Any]] = []
    page.on(
        "websocket",
        lambda ws: ws.on("framereceived", lambda payload: frames.append(json.loads(payload))),
    )
    log_in(page, chat_server, "alice", f"/chat/?chain={tool_chain}")
    connected(page)
    send(page, "What is 6*7, and 6*?")

    reply = last_reply(page)
    cards = reply.locator(".tool-card")
    # The results are shown while the answer is still to come.
    expect(cards).to_have_count(2)
    expect(cards.nth(0)).to_have_attribute("data-state", "ok")
    expect(cards.nth(1)).to_have_attribute("data-state", "error")
    expect(reply.locator(".msg-typing")).to_be_visible()
    wait_done(page)

    ok, failed = cards.nth(0), cards.nth(1)
    expect(ok.locator(".tool-name")).to_have_text("calculator")
    expect(ok.locator(".tool-status")).to_have_text(re.compile(r"^ok · [\d.]+ m?s$"))
    expect(failed.locator(".tool-status")).to_have_text(re.compile(r"^failed · [\d.]+ m?s$"))
    expect(failed.locator(".tool-error")).to_contain_text("not an arithmetic expression")
    # Arguments are collapsed, pretty-printed JSON as the model sent it.
    arguments = ok.locator(".tool-args pre")
    expect(arguments).to_be_hidden()
    ok.get_by_text("Arguments").click()
    expect(arguments).to_be_visible()
    assert json.loads(arguments.inner_text()) == {"expression": "6*7"}
    # The cards sit above the answer, which arrived after them.
    expect(reply.locator(".msg-body strong")).to_have_text("42")
    assert reply.evaluate(
        "r => r.querySelector('.msg-tools').compareDocumentPosition("
        "r.querySelector('.msg-body')) === Node.DOCUMENT_POSITION_FOLLOWING"
    )
    # Each card appeared running at its tool_call, before any text, and turned into its
    # result at its tool_result.
    states = page.evaluate("window.__replyStates")
    assert states[0] == "|no text", states
    assert "running|no text" in states or "running,running|no text" in states, states
    assert states.index("ok,error|no text") < states.index("ok,error|text"), states
    assert states[-1] == "ok,error|text", states
    # What the page drew from: the round's calls, then their results, and the sources, all
    # before the first text (the server sends sources with the first text, after the tools).
    kinds = [f["type"] for f in frames if f["type"] != "conversation"]
    first_delta = kinds.index("delta")
    assert kinds[0] == "start" and kinds[1:first_delta].count("sources") == 1, kinds
    # The provider streams each call's arguments: tool_call_delta frames come first (issue 43).
    tool_events = [k for k in kinds[:first_delta] if k.startswith("tool_")]
    streamed = [k for k in tool_events if k == "tool_call_delta"]
    assert streamed and tool_events[: len(streamed)] == streamed, kinds
    assert tool_events[len(streamed) :] == [
        "tool_call",
        "tool_call",
        "tool_result",
        "tool_result",
    ], kinds
    assert set(kinds[first_delta:-1]) == {"delta"} and kinds[-1] == "done", kinds
    # The model got both results, the error text included, in its second request.
    tool_messages = [m for m in model_server.bodies[1]["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == ["call_ok", "call_bad"]


def reply_view(reply: Any) -> dict[str, Any]:
    """What a reply shows, part by part (text as the user sees it)."""
    return {
        "tools": reply.locator(".tool-card .tool-head").all_inner_texts(),
        "sources": reply.locator(".msg-sources li").all_inner_texts(),
        "meta": reply.locator(".msg-meta").inner_text(),
        "body": reply.locator(".msg-body").inner_text(),
        "all": reply.inner_text(),
    }


def test_a_reopened_conversation_shows_each_reply_as_it_was_live(
    chat_server: LiveServer, new_page: Any, tool_chain: str, model_server: ScriptedOpenAiServer
) -> None:
    script_tool_turn(model_server)
    model_server.add(Completion(text="Anything else?"))  # a second turn: no tools
    page = new_page()
    log_in(page, chat_server, "admin", f"/chat/?chain={tool_chain}")
    connected(page)
    send(page, "What is 6*7, and 6*?")
    wait_done(page)
    send(page, "Thanks")
    expect(page.locator(".msg-assistant .msg-meta")).to_have_count(2)
    live = [reply_view(page.locator(".msg-assistant").nth(i)) for i in range(2)]

    first = live[0]
    assert len(first["tools"]) == 2 and "failed" in first["tools"][1]
    assert first["sources"] and "arithmetic.md" in first["sources"][0]
    assert re.search(r"arithmetic\.md\s+\d\.\d\d", first["sources"][0])
    meta = first["meta"]
    assert re.fullmatch(
        r"first token \d+\.\d\d s · total \d+\.\d\d s · \d+ prompt \+ \d+ completion tokens"
        r" · finish \S+",
        meta,
    ), meta
    assert "Trace" in first["all"]  # staff: the trace button, live and reopened
    stored = ChatMessage.objects.filter(message_type="assistant", text__contains="42").get()
    assert {"sources", "tools", "usage", "timings", "finish_reason"} <= set(stored.metadata)

    page.wait_for_url(re.compile(r"/chat/c/\w+/$"))
    conversation_url = page.url
    page.reload()
    connected(page)
    replies = page.locator(".msg-assistant")
    expect(replies).to_have_count(2)
    assert [reply_view(replies.nth(i)) for i in range(2)] == live

    # Opened from the sidebar of a new chat: the same again.
    page.get_by_role("link", name="New chat").click()
    expect(page.locator(".msg-assistant")).to_have_count(0)
    page.locator(f'#conversation-list a[href="{conversation_url[len(chat_server.url) :]}"]').click()
    page.wait_for_url(conversation_url)
    connected(page)
    expect(replies).to_have_count(2)
    assert [reply_view(replies.nth(i)) for i in range(2)] == live
