"""The chain admin page: inline advisor rows, validation, the lint, and the playground."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.test import Client

from advisors_app.core import HIGHEST_PRECEDENCE
from advisors_app.core.tools import tool
from advisors_app.definition import check_draft
from advisors_app.definition.registry import advisor_types
from advisors_app.definition.runtime import clear_cache
from advisors_app.definition.tools import tool_registry
from advisors_app.models import AdvisorChain, CallLog, Collection
from tests.admin.forms import chain_form
from tests.factories import make_chain, scripted_model

pytestmark = pytest.mark.django_db

ADD = "/admin/advisors_app/advisorchain/add/"


def change_url(chain: AdvisorChain) -> str:
    return f"/admin/advisors_app/advisorchain/{chain.pk}/change/"


def playground_url(chain: AdvisorChain) -> str:
    return f"/admin/advisors_app/advisorchain/{chain.pk}/playground/"


def diff_url(chain: AdvisorChain) -> str:
    return f"/admin/advisors_app/advisorchain/{chain.pk}/diff/"


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    clear_cache()
    yield
    clear_cache()


def test_add_and_change_pages_render_with_the_type_reference(admin_client: Client) -> None:
    page = admin_client.get(ADD).content.decode()
    assert 'name="advisors-TOTAL_FORMS"' in page
    assert "<code>safe_guard</code>" in page and "<code>append</code>" in page
    assert "<code>text</code> (string, required): The suffix." in page
    chain = make_chain(advisors=(("append", {"text": "!"}),))
    page = admin_client.get(change_url(chain)).content.decode()
    assert "Playground" in page and 'id="playground"' in page
    assert "No findings." in page
    assert admin_client.get("/admin/advisors_app/advisorchain/").status_code == 200


def test_a_chain_with_advisor_rows_is_created_from_the_admin(admin_client: Client) -> None:
    model = scripted_model()
    data = chain_form(
        chat_model=model.pk,
        rows=[
            {"advisor_type": "append", "params": {"text": "!"}, "order": "HIGHEST+100"},
            {"advisor_type": "safe_guard", "params": {"words": ["bomb"]}},
        ],
    )
    response = admin_client.post(ADD, data)
    assert response.status_code == 302, response.context["errors"]
    chain = AdvisorChain.objects.get(slug="support")
    rows = list(chain.advisors.order_by("id").values_list("advisor_type", "order", "params"))
    assert rows == [
        ("append", HIGHEST_PRECEDENCE + 100, {"text": "!"}),
        ("safe_guard", None, {"words": ["bomb"]}),
    ]
    assert not chain.versions.exists()  # a draft until someone publishes it
    page = admin_client.get(change_url(chain)).content.decode()
    assert 'value="HIGHEST+100"' in page
    assert "Not published yet." in page


def test_bad_params_are_a_form_error_naming_the_field(admin_client: Client) -> None:
    data = chain_form(
        rows=[
            {"advisor_type": "append", "params": {"text": 5}},
            {"advisor_type": "safe_guard", "params": {"scope": "everything"}},
            {"advisor_type": "append", "params": "{not json"},
            {"advisor_type": "append", "params": "[" * 5000 + "]" * 5000},
            {"advisor_type": "append", "params": '{"text": "!", "\\ud800": 1}'},
        ]
    )
    response = admin_client.post(ADD, data)
    assert response.status_code == 200
    forms = response.context["inline_admin_formsets"][0].formset.forms
    assert forms[0].errors == {"params": ["text: 5 is not of type 'string'"]}
    assert forms[1].errors["params"] == ["scope: 'everything' is not one of ['user', 'prompt']"]
    assert forms[2].errors["params"] == ["Enter a valid JSON."]
    assert forms[3].errors["params"] == ["The JSON is nested too deeply to read."]
    assert forms[4].errors["params"][0] == "\\ud800: Unpaired surrogate characters are not allowed."
    assert "&quot;\\ud800&quot;: 1" in response.content.decode()  # redisplayed as typed
    assert not AdvisorChain.objects.exists()


def test_an_unknown_type_is_refused(admin_client: Client) -> None:
    response = admin_client.post(ADD, chain_form(rows=[{"advisor_type": "os.system"}]))
    forms = response.context["inline_admin_formsets"][0].formset.forms
    assert "Select a valid choice" in forms[0].errors["advisor_type"][0]
    assert not AdvisorChain.objects.exists()


def test_an_order_that_is_not_a_number_is_refused(admin_client: Client) -> None:
    rows = [{"advisor_type": "append", "params": {"text": "!"}, "order": "first"}]
    forms = (
        admin_client.post(ADD, chain_form(rows=rows))
        .context["inline_admin_formsets"][0]
        .formset.forms
    )
    assert forms[0].errors == {"order": ["Enter a whole number, HIGHEST+N or LOWEST-N."]}
    rows[0]["order"] = str(2**31)
    forms = (
        admin_client.post(ADD, chain_form(rows=rows))
        .context["inline_admin_formsets"][0]
        .formset.forms
    )
    assert "(LOWEST)" in forms[0].errors["order"][0]


def test_lint_errors_block_saving(admin_client: Client) -> None:
    chain = make_chain(advisors=(("append", {"text": "!"}),))
    row = chain.advisors.get()
    data = chain_form(
        chain,
        rows=[{"id": row.pk, "advisor_type": "append", "params": {"text": "!", "note": "nope"}}],
    )
    response = admin_client.post(change_url(chain), data)
    assert response.status_code == 200
    errors = response.context["inline_admin_formsets"][0].formset.non_form_errors()
    assert "params.note: no sensitive-word list with slug 'nope'" in errors[0]
    row.refresh_from_db()
    assert row.params == {"text": "!"}


def test_lint_warnings_are_shown_after_saving(admin_client: Client) -> None:
    rows = [
        {"advisor_type": "message_chat_memory", "params": {}},
        {"advisor_type": "safe_guard", "params": {"words": ["bomb"]}, "order": "0"},
    ]
    response = admin_client.post(
        ADD, chain_form(chat_model=scripted_model().pk, rows=rows), follow=True
    )
    shown = [str(m) for m in response.context["messages"]]
    assert any(m.startswith("advisors_app.W103: advisor #2 (safe_guard)") for m in shown)
    chain = AdvisorChain.objects.get()
    assert "advisors_app.W103" in admin_client.get(change_url(chain)).content.decode()


def test_w104_says_memory_would_store_the_retrieved_excerpts(admin_client: Client) -> None:
    Collection.objects.create(slug="docs", name="Docs")
    rows = [
        {
            "advisor_type": "question_answer",
            "params": {"collection": "docs"},
            "order": "HIGHEST+250",
        },
        {"advisor_type": "message_chat_memory", "params": {}, "order": "HIGHEST+260"},
    ]
    data = chain_form(chat_model=scripted_model().pk, rows=rows)
    response = admin_client.post(ADD, data, follow=True)
    [shown] = [str(m) for m in response.context["messages"] if "W104" in str(m)]
    assert shown.startswith(
        "advisors_app.W104: advisor #1 (question_answer) at order HIGHEST+250 runs outside "
        "advisor #2 (message_chat_memory) at order HIGHEST+260: memory receives the prompt "
        "after retrieval and stores the whole augmented prompt (the user's message plus every "
        "retrieved excerpt) as the user's message"
    )


def test_deleting_a_row_in_the_admin_changes_the_draft_not_production(
    admin_client: Client,
) -> None:
    chain = make_chain(advisors=(("append", {"text": "!"}),))
    production = chain.labels.get(name="production").version
    row = chain.advisors.get()
    data = chain_form(
        chain,
        rows=[{"id": row.pk, "advisor_type": "append", "params": {"text": "!"}, "delete": True}],
    )
    assert admin_client.post(change_url(chain), data).status_code == 302
    assert not chain.advisors.exists()
    assert check_draft(chain).snapshot_hash != production.snapshot_hash
    assert chain.labels.get(name="production").version == production
    diff = admin_client.get(f"{diff_url(chain)}?from=production&to=draft").context["diff"]
    assert diff["advisors"] == ["removed append"]


def test_playground_round_trip_on_the_scripted_model(admin_client: Client) -> None:
    model = scripted_model(responses=("Hello from the script.",))
    chain = make_chain(
        model=model, advisors=(("append", {"text": " (be nice)"}),), system_prompt="Be brief."
    )
    response = admin_client.post(playground_url(chain), {"message": "hi there", "params": ""})
    assert response.status_code == 200
    page = response.content.decode()
    assert "Hello from the script." in page
    assert "hi there (be nice)" in page  # the final prompt, after the advisor
    assert "Be brief." in page
    assert "AppendAdvisor" in page
    result = response.context["result"]
    log = CallLog.objects.get(trace_id=result.trace_id)
    assert response.context["log_url"] == f"/admin/advisors_app/calllog/{log.pk}/change/"
    assert response.context["form"].initial["conversation_id"] == result.conversation_id
    rows = response.context["trace_rows"]
    assert [(r["name"], r["depth"], r["status"]) for r in rows] == [
        ("AppendAdvisor", 0, "ok"),
        ("call", 1, "ok"),
    ]
    # Continue the conversation from the prefilled id.
    again = admin_client.post(
        playground_url(chain), {"message": "more", "conversation_id": result.conversation_id}
    )
    assert again.context["result"].conversation_id == result.conversation_id


def test_playground_shows_refusals_and_failures(admin_client: Client) -> None:
    chain = make_chain(advisors=(("append", {"text": "!"}),))
    response = admin_client.post(
        playground_url(chain), {"message": "hi", "params": '{"colour": 1}'}
    )
    assert response.context["refused"].errors == {
        "params.colour": ["Unknown field. Known fields: append_flag, options."]
    }
    assert "params.colour" in response.content.decode()
    empty = make_chain("empty", model=scripted_model("empty-model", responses=(), repeat=False))
    response = admin_client.post(playground_url(empty), {"message": "hi"})
    assert response.context["failure"]["type"] == "AdvisorStateError"
    assert "internal_error" in response.content.decode()


def test_the_playground_needs_change_permission(client: Client, django_user_model) -> None:
    chain = make_chain()
    viewer = django_user_model.objects.create_user("viewer", password="pw", is_staff=True)
    client.force_login(viewer)
    assert client.post(playground_url(chain), {"message": "hi"}).status_code == 403


def test_tools_are_chosen_from_the_tool_registry(admin_client: Client) -> None:
    @tool(description="Current time")
    def now() -> str:
        return "noon"

    tool_registry.register(now)
    try:
        page = admin_client.get(ADD).content.decode()
        assert 'value="now"' in page
        data = chain_form(chat_model=scripted_model().pk, tools=["now"])
        assert admin_client.post(ADD, data).status_code == 302
        assert AdvisorChain.objects.get().tools == ["now"]
        refused = admin_client.post(ADD, chain_form(slug="other", tools=["rm_rf"]))
        assert "rm_rf is not one of the available choices" in str(
            refused.context["adminform"].form.errors["tools"]
        )
    finally:
        tool_registry.unregister("now")


def test_the_chain_list_links_the_name(admin_client: Client) -> None:
    chain = make_chain()
    AdvisorChain.objects.filter(pk=chain.pk).update(name="Customer support")
    page = admin_client.get("/admin/advisors_app/advisorchain/").content.decode()
    assert f'<a href="{change_url(chain)}">Customer support</a>' in page


def test_the_page_carries_each_types_params_form(admin_client: Client) -> None:
    Collection.objects.create(slug="handbook", name="Handbook")
    chain = make_chain(advisors=(("message_chat_memory", {}),))
    response = admin_client.get(change_url(chain))
    page = response.content.decode()
    assert '<script id="advisor-params-forms" type="application/json">' in page
    assert "advisors_app/chain-editor.js" in page and "django_jsonform/react-json-form.js" in page
    assert 'data-advisor-type="message_chat_memory"' in page
    forms = response.context["params_forms"]
    assert set(forms) == {t.key for t in advisor_types}
    collection = forms["question_answer"]["schema"]["properties"]["collection"]
    assert collection["choices"] == [{"value": "handbook", "title": "handbook (Handbook)"}]


def test_a_refused_param_is_marked_on_its_field(admin_client: Client) -> None:
    chain = make_chain(advisors=(("message_chat_memory", {}),))
    row = chain.advisors.get()
    data = chain_form(
        chain,
        rows=[{"id": row.pk, "advisor_type": "message_chat_memory", "params": {"max_messages": 0}}],
    )
    response = admin_client.post(change_url(chain), data)
    [form] = response.context["inline_admin_formsets"][0].formset.forms
    assert form.errors["params"] == ["max_messages: 0 is less than the minimum of 1"]
    widget = form.fields["params"].widget
    assert widget.error_map == {"max_messages": ["0 is less than the minimum of 1"]}
    assert 'data-errors="{&quot;max_messages&quot;: [&quot;0 is less' in response.content.decode()


def test_saving_the_form_stores_what_was_changed_not_the_defaults_it_showed(
    admin_client: Client,
) -> None:
    chain = make_chain(advisors=(("safe_guard", {"words": ["bomb"]}),))
    row = chain.advisors.get()
    shown = {
        "words": ["bomb"],
        "word_lists": [],
        "failure_response": "",
        "scope": "prompt",
        "whole_words": False,
        "case_sensitive": False,
        "normalize": True,
        "guard_output": False,
    }
    data = chain_form(chain, rows=[{"id": row.pk, "advisor_type": "safe_guard", "params": shown}])
    assert admin_client.post(change_url(chain), data).status_code == 302
    row.refresh_from_db()
    assert row.params == {"words": ["bomb"], "scope": "prompt"}


def test_an_empty_new_row_stays_unsaved(admin_client: Client) -> None:
    chain = make_chain(advisors=(("append", {"text": "!"}),))
    row = chain.advisors.get()
    data = chain_form(
        chain, rows=[{"id": row.pk, "advisor_type": "append", "params": {"text": "!"}}]
    )
    # The extra row as the editor leaves it: no type, params "{}".
    data.update(
        {"advisors-TOTAL_FORMS": "2", "advisors-1-advisor_type": "", "advisors-1-params": "{}"}
    )
    data.update({"advisors-1-id": "", "advisors-1-chain": chain.pk, "advisors-1-order": ""})
    data["advisors-1-enabled"] = "on"  # the new row's box starts ticked
    assert admin_client.post(change_url(chain), data).status_code == 302
    assert chain.advisors.count() == 1
