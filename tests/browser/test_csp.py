"""The site's Content-Security-Policy in Chromium (issue 36): the chat page streams a turn over its
websocket, the chain editor loads its forms and asks before a rollback, the admin and the API docs
work — with the header on each page and not one violation reported, by the page's
``securitypolicyviolation`` events or in the console."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

import pytest
from playwright.sync_api import expect

from advisors_app.definition.versions import move_label, publish
from advisors_app.models import AdvisorChain, AdvisorConfig, ChainLabel, Collection
from tests.browser.admin_session import admin_log_in, watch
from tests.factories import make_chain, scripted_model
from tests.live_server import LiveServer

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ANSWER = "Refunds go back to the **original payment method** within five business days."

#: Runs before any script of each page (Playwright's init scripts are not the page's, so the
#: policy lets them run): keeps every violation the page reports.
RECORD_VIOLATIONS = """
window.cspViolations = [];
document.addEventListener("securitypolicyviolation", (event) => {
  window.cspViolations.push(
    `${event.effectiveDirective} blocked ${event.blockedURI || "inline"} ` +
    `(${event.sourceFile}:${event.lineNumber})`
  );
});
"""


class Violations:
    """What a page reported against the policy: its violation events and console lines."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.console: list[str] = []
        page.add_init_script(RECORD_VIOLATIONS)
        page.on(
            "console",
            lambda m: self.console.append(m.text) if "Content Security Policy" in m.text else None,
        )

    def reported(self) -> list[str]:
        return [*self.page.evaluate("window.cspViolations || []"), *self.console]


def policy_of(response: Any) -> dict[str, str]:
    header = response.headers["content-security-policy"]
    return dict(part.strip().split(" ", 1) for part in header.split(";") if part.strip())


def check_policy(response: Any) -> None:
    policy = policy_of(response)
    assert policy["script-src"] == "'self'"
    assert policy["connect-src"] == "'self'"


@pytest.fixture
def users(django_user_model: Any) -> None:
    django_user_model.objects.create_user("alice", password="pw")
    django_user_model.objects.create_superuser("admin", password="pw")


def test_a_chat_turn_streams_with_no_violation(
    chat_server: LiveServer, new_page: Any, users: None
) -> None:
    model = scripted_model("support-model", responses=[re.findall(r"\S+\s*", ANSWER)])
    model.settings["chunk_delay"] = 0.03
    model.save()
    make_chain("support", model=model, advisors=(("message_chat_memory", {}),))
    page = new_page()
    violations = Violations(page)
    page.goto(f"{chat_server.url}/accounts/login/?next={quote('/chat/')}")
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill("pw")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(chat_server.url + "/chat/")
    check_policy(page.reload())
    expect(page.locator("#connection")).to_have_text("Connected")  # the websocket passed
    page.get_by_role("textbox", name="Message").fill("How do refunds work?")
    page.get_by_role("textbox", name="Message").press("Enter")
    reply = page.locator(".msg-assistant").last
    expect(reply).to_contain_text("Refunds go back")  # streaming...
    expect(reply.locator(".msg-meta")).to_be_visible()  # ...to its end
    expect(reply.locator("strong")).to_have_text("original payment method")  # markdown drawn
    assert violations.reported() == []


@pytest.fixture
def published_twice(users: None) -> AdvisorChain:
    """A chain with retrieval, memory and a guard (each advisor's params form), whose production
    label moved from v1 to v2, so the editor offers to roll it back."""
    Collection.objects.create(slug="handbook", name="Handbook")
    chain = make_chain(
        advisors=(
            ("safe_guard", {"words": ["bomb"]}),
            ("message_chat_memory", {}),
            ("question_answer", {"collection": "handbook"}),
        )
    )
    AdvisorConfig.objects.filter(chain=chain, advisor_type="safe_guard").update(
        params={"words": ["bomb", "keylogger"]}
    )
    second, _ = publish(chain, message="more words")
    move_label(chain, "production", second, reason="test")
    return chain


def test_the_chain_editor_loads_and_asks_before_a_rollback_with_no_violation(
    chat_server: LiveServer, new_page: Any, published_twice: AdvisorChain
) -> None:
    page = new_page()
    violations = Violations(page)
    problems = watch(page, chat_server)
    path = f"/admin/advisors_app/advisorchain/{published_twice.pk}/change/"
    admin_log_in(page, chat_server, path)
    check_policy(page.reload())
    expect(page.locator("#advisors-group .chain-order li")).to_have_count(3)
    expect(page.locator("#advisors-group .params-form").first).to_be_visible()
    asked: list[str] = []

    def dismiss(dialog: Any) -> None:
        asked.append(dialog.message)
        dialog.dismiss()

    page.once("dialog", dismiss)
    page.get_by_role("button", name="Roll back production to v1").click()
    assert asked == ["Point production back at v1?"]
    assert ChainLabel.objects.get(chain=published_twice, name="production").version.number == 2
    assert violations.reported() == []
    assert problems.errors == [] and problems.elsewhere == []


def test_the_admin_and_the_api_docs_work_with_no_violation(
    chat_server: LiveServer, new_page: Any, users: None
) -> None:
    make_chain("support")
    page = new_page()
    violations = Violations(page)
    problems = watch(page, chat_server)
    admin_log_in(page, chat_server, "/admin/")
    for path in ("/admin/advisors_app/advisorchain/", "/admin/advisors_app/", "/"):
        check_policy(page.goto(chat_server.url + path))
        page.wait_for_load_state("networkidle")
    check_policy(page.goto(chat_server.url + "/api/docs/"))
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("advisors_app API")
    expect(page.locator(".opblock-tag-section").first).to_be_visible()  # the schema was read
    assert violations.reported() == []
    assert problems.errors == [] and problems.elsewhere == []
