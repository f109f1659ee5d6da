"""The chat page's approval card: tool calls that wait for the user's decision, resumed in place.

The demo's ``notes`` chain (``ensure_demo_rows``: no embedding) runs on the scripted model's
tool rules: "Save a note: <text>" asks for ``save_note``, which needs approval, and after the
tool round the model repeats what the tool answered. The live daphne process registers the
demo's tools itself (the demo app is installed), so approving a call writes a real
:class:`~advisors_app.demo.models.DemoNote`.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from playwright.sync_api import expect

from advisors_app.demo.loader import NOTES_CHAIN, ensure_demo_rows
from advisors_app.demo.models import DemoNote
from advisors_app.models import ToolApproval
from tests.browser.test_chat_page import connected, last_reply, log_in, send
from tests.live_server import LiveServer

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

HOSTILE = '<img src=x onerror="window.pwned=1">'


@pytest.fixture
def notes(django_user_model: Any) -> Any:
    """The demo's rows (the ``notes`` chain among them) and the user ``alice``."""
    ensure_demo_rows()
    return django_user_model.objects.create_user("alice", password="pw")


def open_notes(page: Any, server: LiveServer) -> list[dict[str, Any]]:
    """Log in as alice on the notes chain; the frames the page sends, as they are sent."""
    sent: list[dict[str, Any]] = []
    page.on(
        "websocket",
        lambda ws: ws.on("framesent", lambda payload: sent.append(json.loads(payload))),
    )
    log_in(page, server, "alice", f"/chat/?chain={NOTES_CHAIN}")
    connected(page)
    return sent


def approval_card(page: Any) -> Any:
    card = last_reply(page).locator(".approval-card")
    expect(card).to_have_count(1)
    return card


def resumed(page: Any) -> Any:
    """The resumed turn under the card, once it has ended (its meta line is shown)."""
    segment = last_reply(page).locator(".msg-resumed")
    expect(segment.locator(".msg-meta")).to_be_visible()
    return segment


def decisions(sent: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    return [frame["decisions"] for frame in sent if "decisions" in frame]


def notes_of(user: Any) -> list[str]:
    return list(DemoNote.objects.filter(owner=user).values_list("text", flat=True))


def test_approving_runs_the_tool_once_and_the_answer_continues_under_the_card(
    chat_server: LiveServer, new_page: Any, notes: Any
) -> None:
    page = new_page()
    sent = open_notes(page, chat_server)
    send(page, "Save a note: buy milk")

    card = approval_card(page)
    expect(card.locator(".tool-name")).to_have_text("save_note")
    assert json.loads(card.locator(".approval-args").inner_text()) == {"text": "buy milk"}
    expect(card.get_by_role("button")).to_have_text(["Approve", "Edit", "Reject"])
    expect(card.get_by_role("checkbox")).to_have_accessible_name(
        "Allow save_note for this conversation"
    )
    assert notes_of(notes) == []  # nothing ran yet
    expect(page.locator(".msg-assistant")).to_have_count(1)

    card.get_by_role("button", name="Approve").click()
    segment = resumed(page)
    expect(segment.locator(".msg-body")).to_contain_text("Saved note #")
    expect(segment.locator(".msg-body")).to_contain_text("buy milk")
    # The call that ran shows as a tool card of the resumed turn.
    expect(segment.locator(".tool-card .tool-name")).to_have_text("save_note")
    expect(segment.locator(".tool-card")).to_have_attribute("data-state", "ok")
    # The card is decided for good; still one reply on the page.
    expect(card.locator(".approval-status")).to_have_text("Approved")
    expect(card.get_by_role("button", name="Approve")).to_be_hidden()
    expect(page.locator(".msg-assistant")).to_have_count(1)
    assert notes_of(notes) == ["buy milk"]
    [[decision]] = decisions(sent)
    assert decision["decision"] == "approve" and "grant" not in decision
    resume = next(f for f in sent if "decisions" in f)
    assert page.url.endswith(f"/chat/c/{resume['conversation_id']}/")
    # The composer is usable again.
    expect(page.get_by_role("textbox", name="Message")).to_be_enabled()


def test_rejecting_with_a_reason_runs_nothing_and_the_model_reads_the_reason(
    chat_server: LiveServer, new_page: Any, notes: Any
) -> None:
    page = new_page()
    sent = open_notes(page, chat_server)
    send(page, "Save a note: buy milk")
    card = approval_card(page)

    card.get_by_role("button", name="Reject").click()
    reason = card.get_by_label("Why not? (optional; the assistant reads it)")
    expect(reason).to_be_focused()
    reason.fill("We have milk already")
    card.get_by_role("button", name="Reject the call").click()

    segment = resumed(page)
    expect(segment.locator(".msg-body")).to_contain_text("rejected the call")
    expect(segment.locator(".msg-body")).to_contain_text("We have milk already")
    expect(card.locator(".approval-status")).to_have_text("Rejected: We have milk already")
    assert notes_of(notes) == []
    assert decisions(sent) == [
        [
            {
                "approval_id": card.get_attribute("data-approval-id"),
                "decision": "reject",
                "reason": "We have milk already",
            }
        ]
    ]
    assert ToolApproval.objects.get().status == ToolApproval.Status.REJECTED


def test_editing_the_arguments_runs_the_tool_with_them_after_checking_the_json(
    chat_server: LiveServer, new_page: Any, notes: Any
) -> None:
    page = new_page()
    sent = open_notes(page, chat_server)
    send(page, "Save a note: buy milk")
    card = approval_card(page)

    card.get_by_role("button", name="Edit").click()
    editor = card.get_by_label("Arguments to run save_note with (a JSON object)")
    expect(editor).to_be_focused()
    assert json.loads(editor.input_value()) == {"text": "buy milk"}
    run = card.get_by_role("button", name="Run with these arguments")
    for bad, problem in (("{'text': 1}", "not valid JSON"), ('["buy"]', "must be a JSON object")):
        editor.fill(bad)
        run.click()
        expect(card.locator(".approval-field-error")).to_contain_text(problem)
        expect(editor).to_have_attribute("aria-invalid", "true")
    assert decisions(sent) == []  # nothing was sent for the invalid ones

    editor.fill('{"text": "buy oat milk"}')
    card.get_by_role("checkbox").check()
    run.click()
    segment = resumed(page)
    expect(segment.locator(".msg-body")).to_contain_text("buy oat milk")
    expect(card.locator(".approval-status")).to_have_text(
        "Approved with edited arguments; allowed for this conversation"
    )
    assert notes_of(notes) == ["buy oat milk"]
    [[decision]] = decisions(sent)
    assert decision["decision"] == "edit" and decision["arguments"] == {"text": "buy oat milk"}
    assert decision["grant"] is True


def test_a_reopened_conversation_shows_the_pending_card_and_resumes_from_it(
    chat_server: LiveServer, new_page: Any, notes: Any
) -> None:
    page = new_page()
    open_notes(page, chat_server)
    send(page, "Save a note: buy milk")
    approval_card(page)
    page.wait_for_url(re.compile(r"/chat/c/[\w-]+/$"))

    page.reload()
    connected(page)
    card = approval_card(page)
    expect(card.locator(".tool-name")).to_have_text("save_note")
    assert json.loads(card.locator(".approval-args").inner_text()) == {"text": "buy milk"}
    # The pending row's allowed decisions and reason, as live.
    expect(card.get_by_role("button")).to_have_text(["Approve", "Edit", "Reject"])
    expect(page.locator(".msg-user")).to_have_count(1)

    card.get_by_role("button", name="Approve").click()
    segment = resumed(page)
    expect(segment.locator(".msg-body")).to_contain_text("Saved note #")
    assert notes_of(notes) == ["buy milk"]

    # Reopened once more: decided, so no card; the answer is a reply of its own.
    page.reload()
    connected(page)
    expect(page.locator(".approval")).to_have_count(0)
    expect(last_reply(page).locator(".msg-body")).to_contain_text("Saved note #")


def test_a_refused_decision_is_shown_next_to_the_card_which_stays_usable_unless_gone(
    chat_server: LiveServer, new_page: Any, notes: Any
) -> None:
    page = new_page()
    open_notes(page, chat_server)
    send(page, "Save a note: buy milk")
    card = approval_card(page)
    box = last_reply(page).locator(".approval")

    # Only holders of a permission alice lacks may decide: refused, the card stays usable.
    ToolApproval.objects.update(approver_permission="advisors_app.nobody_has_this")
    card.get_by_role("button", name="Approve").click()
    expect(box.locator(".msg-error-code")).to_have_text("permission_denied")
    expect(card.get_by_role("button", name="Approve")).to_be_enabled()
    expect(last_reply(page).locator(".msg-resumed")).to_have_count(0)
    expect(page.get_by_role("textbox", name="Message")).to_be_enabled()

    # Allowed again: the same card works.
    ToolApproval.objects.update(approver_permission="")
    card.get_by_role("button", name="Approve").click()
    expect(resumed(page).locator(".msg-body")).to_contain_text("Saved note #")
    expect(box.locator(".msg-error")).to_have_count(0)
    assert notes_of(notes) == ["buy milk"]


def test_an_expired_approval_is_reported_and_its_card_closes(
    chat_server: LiveServer, new_page: Any, notes: Any
) -> None:
    page = new_page()
    open_notes(page, chat_server)
    send(page, "Save a note: buy milk")
    card = approval_card(page)
    ToolApproval.objects.update(expires_at="2000-01-01T00:00:00Z")

    card.get_by_role("button", name="Reject").click()
    card.get_by_role("button", name="Reject the call").click()
    box = last_reply(page).locator(".approval")
    expect(box.locator(".msg-error")).to_contain_text("expired")
    expect(box.locator(".approval-note")).to_have_text("These calls no longer wait for a decision.")
    expect(card.get_by_role("button", name="Approve")).to_be_disabled()
    assert notes_of(notes) == []


def test_arguments_with_markup_are_shown_as_text_on_a_phone_by_keyboard(
    chat_server: LiveServer, new_page: Any, notes: Any
) -> None:
    page = new_page(viewport={"width": 390, "height": 844})
    open_notes(page, chat_server)
    send(page, f"Save a note: {HOSTILE}")

    card = approval_card(page)
    assert json.loads(card.locator(".approval-args").inner_text()) == {"text": HOSTILE}
    assert page.locator(".approval img").count() == 0
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    box = card.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390

    # Keyboard only: the Edit panel opens and closes, then Approve.
    card.get_by_role("button", name="Edit").focus()
    page.keyboard.press("Enter")
    expect(card.get_by_role("textbox")).to_be_focused()
    card.get_by_role("button", name="Cancel").focus()
    page.keyboard.press("Enter")
    expect(card.get_by_role("button", name="Edit")).to_be_focused()
    page.keyboard.press("Shift+Tab")
    expect(card.get_by_role("button", name="Approve")).to_be_focused()
    page.keyboard.press("Enter")

    segment = resumed(page)
    expect(segment.locator(".msg-body")).to_contain_text(HOSTILE)
    assert page.locator(".msg img").count() == 0
    assert page.evaluate("window.pwned") is None
    assert notes_of(notes) == [HOSTILE]
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def test_a_turn_resumed_elsewhere_is_drawn_under_the_card_of_the_open_conversation_only(
    chat_server: LiveServer, new_page: Any, notes: Any
) -> None:
    """Frames flagged ``resumed_elsewhere`` (another tab, the admin) are injected into the
    page's socket, as the server sends them to every socket of the user."""
    page = new_page()
    routes: list[Any] = []

    def route(ws: Any) -> None:
        ws.connect_to_server()  # everything else is forwarded both ways
        routes.append(ws)

    page.route_web_socket(re.compile(r"/ws/chat/"), route)
    open_notes(page, chat_server)
    send(page, "Save a note: buy milk")
    card = approval_card(page)
    page.wait_for_url(re.compile(r"/chat/c/[\w-]+/$"))
    conversation = page.url.rstrip("/").rsplit("/", 1)[1]

    def push(conversation_id: str, *frames: dict[str, Any]) -> None:
        for frame in frames:
            payload = {**frame, "resumed_elsewhere": True, "conversation_id": conversation_id}
            routes[-1].send(json.dumps(payload))

    call = {"id": "call_x", "name": "save_note"}
    turn = (
        {"type": "start", "chain": NOTES_CHAIN, "trace_id": "t-1", "version": 1},
        {"type": "tool_call", **call, "arguments": '{"text": "buy milk"}'},
        {"type": "tool_result", **call, "ok": True, "error": None, "duration_ms": 3.0},
        {"type": "delta", "text": f"Saved elsewhere: {HOSTILE}"},
        {
            "type": "done",
            "reason": "complete",
            "message_id": 9,
            "stored": True,
            "content": f"Saved elsewhere: {HOSTILE}",
            "finish_reason": "STOP",
            "tools": [],
            "sources": [],
            "timings": {"latency_ms": 12.0},
        },
    )
    push("another-conversation", *turn)  # not the open one: ignored
    push(conversation, *turn)

    segment = resumed(page)
    expect(segment.locator(".msg-body")).to_have_text(f"Saved elsewhere: {HOSTILE}")
    expect(segment.locator(".tool-card")).to_have_attribute("data-state", "ok")
    expect(last_reply(page).locator(".msg-resumed")).to_have_count(1)
    expect(last_reply(page).locator(".approval-note")).to_have_text(
        "Decided elsewhere; the reply continues below."
    )
    expect(card.get_by_role("button", name="Approve")).to_be_disabled()
    assert page.evaluate("window.pwned") is None
    expect(page.get_by_role("textbox", name="Message")).to_be_enabled()
