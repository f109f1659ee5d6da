"""Admin textareas: line breaks typed in a browser (sent as CRLF) are stored as ``"\\n"``."""

from __future__ import annotations

import pytest
from django import forms
from django.contrib import admin
from django.test import Client, RequestFactory

from advisors_app.admin.forms import PlaygroundForm
from advisors_app.admin.widgets import ParamsEditor, Textarea
from advisors_app.models import AdvisorChain, PromptTemplate, SensitiveWordList
from tests.admin.forms import chain_form
from tests.factories import make_chain, scripted_model

pytestmark = pytest.mark.django_db


def test_crlf_from_the_browser_is_stored_as_lf(admin_client: Client) -> None:
    data = chain_form(
        chat_model=scripted_model().pk,
        description="First line\r\nsecond line",
        system_prompt="Be brief.\r\nBe kind.\rBe honest.",
        default_options='{\r\n  "temperature": 0.2\r\n}',
    )
    assert admin_client.post("/admin/advisors_app/advisorchain/add/", data).status_code == 302
    chain = AdvisorChain.objects.get()
    assert chain.system_prompt == "Be brief.\nBe kind.\nBe honest."
    assert chain.description == "First line\nsecond line"

    template = {"slug": "qa", "text": "Context:\r\n{context}\r\n\r\nQuestion: {query}"}
    template["placeholders"] = "context,query"
    assert admin_client.post("/admin/advisors_app/prompttemplate/add/", template).status_code == 302
    assert PromptTemplate.objects.get().text == "Context:\n{context}\n\nQuestion: {query}"

    words = {"slug": "bad", "words": "bomb\r\nsawn-off shotgun\r\n\r\ngun\rknife"}
    assert admin_client.post("/admin/advisors_app/sensitivewordlist/add/", words).status_code == 302
    assert SensitiveWordList.objects.get().words == ["bomb", "sawn-off shotgun", "gun", "knife"]


def test_the_playground_sends_the_message_with_lf(admin_client: Client) -> None:
    chain = make_chain(advisors=(("append", {"text": "!"}),))
    url = f"/admin/advisors_app/advisorchain/{chain.pk}/playground/"
    response = admin_client.post(url, {"message": "two\r\nlines"})
    [user] = [m for m in response.context["prompt_messages"] if m["type"] == "user"]
    assert user["text"] == "two\nlines!"


def textarea_fields(form_class: type[forms.BaseForm]) -> dict[str, forms.Widget]:
    return {
        name: field.widget
        for name, field in form_class.base_fields.items()
        if isinstance(field.widget, forms.Textarea)
    }


def test_every_textarea_of_the_admin_folds_line_breaks(admin_user) -> None:
    request = RequestFactory().get("/admin/")
    request.user = admin_user
    found: dict[str, forms.Widget] = {}
    for model, model_admin in admin.site._registry.items():
        if model._meta.app_label != "advisors_app":
            continue
        form_class = model_admin.get_form(request)
        found |= {f"{model.__name__}.{n}": w for n, w in textarea_fields(form_class).items()}
        for formset, inline in model_admin.get_formsets_with_inlines(request):
            fields = textarea_fields(formset.form)
            found |= {f"{inline.model.__name__}.{n}": w for n, w in fields.items()}
    found |= {f"playground.{n}": w for n, w in textarea_fields(PlaygroundForm).items()}
    # The check covers the fields the tester found, so it cannot pass by finding nothing.
    assert {
        "AdvisorChain.system_prompt",
        "AdvisorChain.description",
        "AdvisorConfig.params",
        "PromptTemplate.text",
        "SensitiveWordList.words",
        "ChatModelConfig.settings",
        "Collection.description",
        "playground.message",
    } <= set(found)
    assert [name for name, widget in found.items() if not isinstance(widget, Textarea)] == []


def test_the_params_editor_is_a_textarea_with_its_type_and_errors() -> None:
    """The params textarea stays what is submitted (CRLF folded); the editor's data ride along."""
    editor = ParamsEditor(attrs={"id": "id_advisors-0-params"})
    editor.advisor_type = "safe_guard"
    editor.error_map = {"scope": ["'everything' is not one of ['user', 'prompt']"]}
    html = editor.render("advisors-0-params", '{"scope": "everything"}')
    assert 'data-advisor-type="safe_guard"' in html
    assert 'data-errors="{&quot;scope&quot;: [&quot;&#x27;everything&#x27; is not' in html
    assert 'id="id_advisors-0-params_jsonform" hidden' in html
    assert '<textarea name="advisors-0-params"' in html
    assert "django_jsonform/react-json-form.js" in str(editor.media)
    data = {"advisors-0-params": '{\r\n"scope": "user"\r\n}'}
    assert editor.value_from_datadict(data, {}, "advisors-0-params") == '{\n"scope": "user"\n}'
