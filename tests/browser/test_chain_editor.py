"""The chain editor in Chromium: params forms from each type's JSON Schema (selects, numbers,
reference pickers, a raw JSON toggle, errors on their field), reordering by drag and by
keyboard with the effective order shown live, and an axe-core check."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pytest
from playwright.sync_api import expect

from advisors_app.definition.registry import advisor_types
from advisors_app.demo.loader import MAIN_CHAIN, ensure_demo_rows
from advisors_app.models import (
    AdvisorChain,
    AdvisorConfig,
    Collection,
    PromptTemplate,
    SensitiveWordList,
)
from tests.browser.axe import axe_violations
from tests.browser.screenshots import save
from tests.factories import make_chain
from tests.live_server import LiveServer

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def chain(django_user_model: Any) -> AdvisorChain:
    django_user_model.objects.create_superuser("admin", password="pw")
    SensitiveWordList.objects.create(slug="weapons", name="Weapons", words=["bomb"])
    SensitiveWordList.objects.create(slug="slurs", name="Slurs", words=["x"])
    PromptTemplate.objects.create(
        slug="qa-short", name="Short QA", text="{query}\n{question_answer_context}"
    )
    Collection.objects.create(slug="handbook", name="Handbook")
    return make_chain(
        advisors=(
            ("safe_guard", {"words": ["bomb"]}, None),
            ("message_chat_memory", {}, None),
            ("question_answer", {"collection": "handbook"}, None),
        ),
        publish=False,
        description="Answers customers from the handbook and remembers the conversation.",
    )


def open_editor(page: Any, server: LiveServer, chain: AdvisorChain) -> None:
    path = f"/admin/advisors_app/advisorchain/{chain.pk}/change/"
    page.goto(f"{server.url}/accounts/login/?next={quote(path)}")
    page.get_by_label("Username").fill("admin")
    page.get_by_label("Password").fill("pw")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(server.url + path)
    page.evaluate("localStorage.setItem('django.admin.navSidebarIsOpen', 'false')")
    page.reload()
    expect(page.locator("#advisors-group .chain-order li")).to_have_count(3)


def row(page: Any, advisor_type: str) -> Any:
    """The inline row of the advisor of ``advisor_type``."""
    return page.locator("#advisors-group tr.form-row").filter(
        has=page.locator(f"select[name$='-advisor_type'] >> option[value='{advisor_type}']:checked")
    )


def save_chain(page: Any) -> None:
    page.get_by_role("button", name="Save and continue editing").click()
    page.wait_for_load_state()
    assert not page.locator(".exception_value").count(), page.locator("#summary").inner_text()
    expect(page.locator(".messagelist .success")).to_be_visible()


def params_form(tr: Any) -> Any:
    return tr.locator(".params-form")


def form_field(tr: Any, name: str) -> Any:
    """The input or select of param ``name`` in the row's params form."""
    return (
        params_form(tr)
        .locator(".rjf-form-row")
        .filter(has=tr.page.locator(f"label:text-is('{name}')"))
        .locator("input, select, textarea")
        .first
    )


def params_of(advisor_type: str) -> dict[str, Any]:
    return AdvisorConfig.objects.get(advisor_type=advisor_type).params


def order_of(advisor_type: str) -> int | None:
    return AdvisorConfig.objects.get(advisor_type=advisor_type).order


def test_a_select_and_a_number_are_edited_in_the_form_and_saved(
    chat_server: LiveServer, new_page: Any, chain: AdvisorChain
) -> None:
    page = new_page(viewport={"width": 1400, "height": 900})
    open_editor(page, chat_server, chain)
    guard, memory = row(page, "safe_guard"), row(page, "message_chat_memory")
    scope = form_field(guard, "scope")
    expect(scope).to_have_value("user")  # the schema's default, shown
    expect(guard).to_contain_text('Default: "user".')  # and said, after the description
    scope.select_option("prompt")
    expect(memory.locator("textarea.params-json")).to_be_hidden()  # the form, not the JSON
    form_field(memory, "max_messages").fill("8")
    save_chain(page)
    # Only what was edited is stored: the defaults the form showed are not pinned into the row.
    assert params_of("safe_guard") == {"words": ["bomb"], "scope": "prompt"}
    assert params_of("message_chat_memory") == {"max_messages": 8}
    page.reload()
    expect(form_field(row(page, "safe_guard"), "scope")).to_have_value("prompt")
    expect(form_field(row(page, "message_chat_memory"), "max_messages")).to_have_value("8")


def test_a_reference_param_picks_an_existing_row(
    chat_server: LiveServer, new_page: Any, chain: AdvisorChain
) -> None:
    page = new_page(viewport={"width": 1400, "height": 900})
    open_editor(page, chat_server, chain)
    qa = row(page, "question_answer")
    picker = form_field(qa, "prompt_template")
    expect(picker.locator("option[value='qa-short']")).to_have_text("qa-short (Short QA)")
    picker.select_option("qa-short")
    save_chain(page)
    assert params_of("question_answer")["prompt_template"] == "qa-short"


def test_raw_json_toggle_edits_the_same_params(
    chat_server: LiveServer, new_page: Any, chain: AdvisorChain
) -> None:
    page = new_page(viewport={"width": 1400, "height": 900})
    open_editor(page, chat_server, chain)
    memory = row(page, "message_chat_memory")
    toggle = memory.get_by_role("button", name="Raw JSON")
    toggle.click()
    expect(toggle).to_have_attribute("aria-pressed", "true")
    raw = memory.get_by_role("textbox", name="Params (JSON): message_chat_memory")
    expect(raw).to_be_focused()
    raw.fill('{"max_messages": 5}')
    toggle.click()  # back to the form, which reads what was typed
    expect(form_field(memory, "max_messages")).to_have_value("5")
    toggle.click()
    raw.fill("{not json")
    toggle.click()  # refused: the JSON stays to be fixed
    expect(memory.get_by_role("status")).to_contain_text("Not valid JSON")
    raw.fill('{"max_messages": 6}')
    save_chain(page)
    assert params_of("message_chat_memory") == {"max_messages": 6}


def test_a_refused_param_shows_its_error_on_its_field(
    chat_server: LiveServer, new_page: Any, chain: AdvisorChain
) -> None:
    page = new_page(viewport={"width": 1400, "height": 900})
    open_editor(page, chat_server, chain)
    form_field(row(page, "message_chat_memory"), "max_messages").fill("0")
    page.get_by_role("button", name="Save and continue editing").click()
    expect(page.locator(".errornote")).to_be_visible()
    memory = row(page, "message_chat_memory")
    field_row = (
        params_form(memory)
        .locator(".rjf-form-row")
        .filter(has=page.locator("label:text-is('max_messages')"))
    )
    expect(field_row.locator(".rjf-error-text")).to_contain_text("less than the minimum of 1")
    assert params_of("message_chat_memory") == {}


def test_a_new_row_gets_the_form_of_the_type_chosen(
    chat_server: LiveServer, new_page: Any, chain: AdvisorChain
) -> None:
    page = new_page(viewport={"width": 1400, "height": 900})
    open_editor(page, chat_server, chain)
    new = page.locator("#advisors-group tr.form-row:not(.has_original):not(.empty-form)").first
    new.locator("select[name$='-advisor_type']").select_option("budget_guard")
    expect(form_field(new, "max_chars")).to_be_visible()
    expect(new.locator("input[name$='-order']")).to_have_attribute("placeholder", "HIGHEST+150")
    form_field(new, "max_chars").fill("2000")
    new.locator("select[name$='-advisor_type']").select_option("safe_guard")
    expect(form_field(new, "scope")).to_be_visible()  # another type, another form
    new.locator("select[name$='-advisor_type']").select_option("budget_guard")
    form_field(new, "max_chars").fill("3000")
    page.locator("#advisors-group .add-row a").click()  # a row added on the page
    added = page.locator("#advisors-group tr.form-row.dynamic-advisors").last
    added.locator("select[name$='-advisor_type']").select_option("tool_calling")
    form_field(added, "max_total_tool_calls").fill("12")
    expect(page.locator("#advisors-group .chain-order li")).to_have_count(5)
    save_chain(page)
    assert params_of("budget_guard") == {"max_chars": 3000}
    assert params_of("tool_calling") == {"max_total_tool_calls": 12}


def test_a_json_box_param_is_stored_as_json(
    chat_server: LiveServer, new_page: Any, chain: AdvisorChain
) -> None:
    """A param the editor cannot draw as fields (a free-form object) is a JSON box in the form."""
    page = new_page(viewport={"width": 1400, "height": 900})
    open_editor(page, chat_server, chain)
    new = page.locator("#advisors-group tr.form-row:not(.has_original):not(.empty-form)").first
    new.locator("select[name$='-advisor_type']").select_option("structured_output_validation")
    box = form_field(new, "output_json_schema *")
    expect(box).to_have_js_property("tagName", "TEXTAREA")
    box.fill('{"type": "object", "required": ["answer"]}')
    form_field(new, "max_repeat_attempts").fill("1")
    save_chain(page)
    assert params_of("structured_output_validation") == {
        "output_json_schema": {"type": "object", "required": ["answer"]},
        "max_repeat_attempts": 1,
    }


def running_order(page: Any) -> list[str]:
    return page.locator("#advisors-group .chain-order li code").all_inner_texts()


def drag(page: Any, handle: Any, onto: Any, before_drop: Any = None) -> None:
    """Drag ``handle`` with the mouse, in steps (as a hand does), up over ``onto``'s top half."""
    onto.evaluate("row => row.scrollIntoView()")  # its top, and the handle below, in view
    start, target = handle.bounding_box(), onto.bounding_box()
    x, y = start["x"] + start["width"] / 2, start["y"] + start["height"] / 2
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x, y - 10, steps=5)  # past Sortable's threshold: the drag starts
    page.mouse.move(x, target["y"] + target["height"] / 2, steps=30)
    page.mouse.move(x, target["y"] + 10, steps=10)
    if before_drop is not None:
        before_drop()
    page.mouse.up()


def test_drag_reorders_and_saves_the_orders(
    chat_server: LiveServer, new_page: Any, chain: AdvisorChain
) -> None:
    page = new_page(viewport={"width": 1400, "height": 1400})  # both rows in view
    open_editor(page, chat_server, chain)
    assert running_order(page) == ["safe_guard", "message_chat_memory", "question_answer"]

    def while_dragging() -> None:  # the list follows the row as it is dragged
        expect(page.locator(".chain-order li").first).to_have_text("question_answer (moving)")

    handle = row(page, "question_answer").locator(".drag-handle")
    drag(page, handle, row(page, "safe_guard"), while_dragging)
    assert running_order(page) == ["question_answer", "safe_guard", "message_chat_memory"]
    expect(row(page, "question_answer").locator("input[name$='-order']")).to_have_value("HIGHEST")
    save_chain(page)
    assert order_of("question_answer") == -(2**31)


def test_keyboard_reorders_and_saves_the_orders(
    chat_server: LiveServer, new_page: Any, chain: AdvisorChain
) -> None:
    page = new_page(viewport={"width": 1400, "height": 900})
    open_editor(page, chat_server, chain)
    up = page.get_by_role("button", name="Move question_answer up")
    up.focus()
    page.keyboard.press("Enter")
    expect(up).to_be_focused()
    assert running_order(page) == ["safe_guard", "question_answer", "message_chat_memory"]
    expect(page.locator(".chain-order [role=status]")).to_contain_text(
        "question_answer moved up, now runs at HIGHEST+150"
    )
    save_chain(page)
    assert order_of("question_answer") == -(2**31) + 150


def test_the_params_forms_for_the_readme(
    chat_server: LiveServer, new_page: Any, chain: AdvisorChain
) -> None:
    """The README's image of the chain editor's advisor rows: params forms, order, reordering."""
    page = new_page(viewport={"width": 1400, "height": 1200})
    open_editor(page, chat_server, chain)
    page.locator("#advisors-group").scroll_into_view_if_needed()
    page.evaluate("document.getElementById('advisors-group').scrollIntoView()")
    save(page, "chain-editor-params", readme=True)


def test_the_chain_editor_has_no_serious_accessibility_violations(
    chat_server: LiveServer, new_page: Any, chain: AdvisorChain
) -> None:
    page = new_page(viewport={"width": 1400, "height": 900})
    open_editor(page, chat_server, chain)
    assert axe_violations(page) == []
    # Every column header has text (axe's minor empty-table-header: the move column's).
    headers = page.locator("#advisors-group thead th").all_text_contents()
    assert all(text.strip() for text in headers), headers
    row(page, "message_chat_memory").get_by_role("button", name="Raw JSON").click()
    assert axe_violations(page) == []
    # The demo chain: lists, multiselects of references, JSON boxes.
    ensure_demo_rows()
    demo = AdvisorChain.objects.get(slug=MAIN_CHAIN)
    page.goto(f"{chat_server.url}/admin/advisors_app/advisorchain/{demo.pk}/change/")
    expect(page.locator("#advisors-group .chain-order li").first).to_be_visible()
    assert axe_violations(page) == []


def test_a_deleted_reference_stays_picked_as_missing(
    chat_server: LiveServer, new_page: Any, chain: AdvisorChain
) -> None:
    """A draft's reference to a row deleted since stays, shown "(missing)": saving another change
    in the row keeps it, so lint E110 refuses the save naming it, where it used to be dropped."""
    guard = AdvisorConfig.objects.get(advisor_type="safe_guard")
    guard.params = {"words": ["bomb"], "word_lists": ["gone-words", "weapons"]}
    guard.save()
    qa = AdvisorConfig.objects.get(advisor_type="question_answer")
    qa.params = {"collection": "handbook", "prompt_template": "gone-tmpl"}
    qa.save()
    page = new_page(viewport={"width": 1400, "height": 900})
    open_editor(page, chat_server, chain)
    picker = form_field(row(page, "question_answer"), "prompt_template")
    expect(picker).to_have_value("gone-tmpl")
    expect(picker.locator("option:checked")).to_have_text("gone-tmpl (missing)")
    expect(row(page, "safe_guard").locator(".rjf-multiselect-field-input")).to_contain_text(
        "gone-words (missing)"
    )
    form_field(row(page, "question_answer"), "top_k").fill("3")
    page.get_by_role("button", name="Save and continue editing").click()
    # Refused by the lint naming both (before, the blanks saved and the advisor fell back to
    # its default template); the form, as sent back, still shows them.
    expect(page.locator(".errornote").locator("..")).to_contain_text("'gone-tmpl'")
    expect(page.locator(".errornote").locator("..")).to_contain_text("'gone-words'")
    expect(form_field(row(page, "question_answer"), "prompt_template")).to_have_value("gone-tmpl")
    assert params_of("question_answer") == {
        "collection": "handbook",
        "prompt_template": "gone-tmpl",
    }
    # An unknown collection typed in the raw JSON: the form shows it, as missing.
    qa_row = row(page, "question_answer")
    toggle = qa_row.locator(".params-toggle")
    toggle.click()
    qa_row.locator("textarea.params-json").fill('{"collection": "typo-coll"}')
    toggle.click()
    expect(form_field(qa_row, "collection *").locator("option:checked")).to_have_text(
        "typo-coll (missing)"
    )


def test_the_reference_multiselect_works_by_keyboard(
    chat_server: LiveServer, new_page: Any, chain: AdvisorChain
) -> None:
    page = new_page(viewport={"width": 1400, "height": 900})
    open_editor(page, chat_server, chain)
    guard = row(page, "safe_guard")
    picker = guard.locator(".rjf-multiselect-field-input")
    picker.focus()
    page.keyboard.press("Enter")
    first = guard.locator(".rjf-multiselect-field-options-container input").first
    expect(first).to_be_focused()
    page.keyboard.press("ArrowDown")  # slurs, weapons: to weapons
    page.keyboard.press("Space")
    page.keyboard.press("Escape")
    expect(picker).to_be_focused()
    expect(picker).to_contain_text("weapons (Weapons)")
    save_chain(page)
    assert params_of("safe_guard")["word_lists"] == ["weapons"]


def test_json_boxes_show_their_text_and_rows_name_their_controls(
    chat_server: LiveServer, new_page: Any, chain: AdvisorChain
) -> None:
    ensure_demo_rows()
    demo = AdvisorChain.objects.get(slug="python-docs")
    page = new_page(viewport={"width": 1400, "height": 900})
    open_editor(page, chat_server, chain)
    page.goto(f"{chat_server.url}/admin/advisors_app/advisorchain/{demo.pk}/change/")
    memory = row(page, "session_memory")
    trigger = form_field(memory, "trigger")
    expect(trigger).to_be_visible()
    box = trigger.bounding_box()
    assert box is not None and box["height"] >= 60, box  # not collapsed to 12 px
    assert trigger.evaluate("b => b.scrollHeight <= b.clientHeight + 4")  # the whole text shows
    place = 1 + page.locator("#advisors-group tr.form-row").evaluate_all(
        "rows => rows.filter(r => !r.classList.contains('empty-form'))"
        ".findIndex(r => r.querySelector(\"option[value='session_memory']:checked\"))"
    )
    name = f"advisor {place}: {advisor_types['session_memory'].label}"
    expect(memory.get_by_role("button", name=f"Raw JSON for {name}")).to_be_visible()
    select = memory.locator("select[name$='-advisor_type']").bounding_box()
    assert select is not None and select["width"] >= 200  # "Session memory (session_memory)"


def test_moving_to_the_top_keeps_orders_readable(
    chat_server: LiveServer, new_page: Any, chain: AdvisorChain
) -> None:
    """Moving between HIGHEST+N and 0 stores HIGHEST+N+100, not the middle (-1073741724)."""
    AdvisorConfig.objects.filter(advisor_type="question_answer").update(order=0)
    AdvisorConfig.objects.filter(advisor_type="message_chat_memory").update(order=500)
    page = new_page(viewport={"width": 1400, "height": 900})
    open_editor(page, chat_server, chain)
    assert running_order(page) == ["safe_guard", "question_answer", "message_chat_memory"]
    page.get_by_role("button", name="Move message_chat_memory up").click()
    assert running_order(page) == ["safe_guard", "message_chat_memory", "question_answer"]
    expect(row(page, "message_chat_memory").locator("input[name$='-order']")).to_have_value(
        "HIGHEST+200"
    )


def test_a_huge_integer_is_reported_as_typed(
    chat_server: LiveServer, new_page: Any, chain: AdvisorChain
) -> None:
    page = new_page(viewport={"width": 1400, "height": 900})
    open_editor(page, chat_server, chain)
    form_field(row(page, "message_chat_memory"), "max_messages").fill("99999999999999999999999")
    page.get_by_role("button", name="Save and continue editing").click()
    expect(page.locator(".errornote")).to_be_visible()
    field_row = (
        params_form(row(page, "message_chat_memory"))
        .locator(".rjf-form-row")
        .filter(has=page.locator("label:text-is('max_messages')"))
    )
    expect(field_row.locator(".rjf-error-text")).to_contain_text(
        "99999999999999999999999 is greater than the maximum"
    )
