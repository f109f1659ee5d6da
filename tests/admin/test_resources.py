"""Admin editors of model configurations, word lists and templates."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from advisors_app.models import (
    AdvisorChain,
    ChatModelConfig,
    Collection,
    PromptTemplate,
    SensitiveWordList,
)
from tests.admin.forms import chain_form
from tests.factories import make_chain, scripted_model

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "model", ["chatmodelconfig", "embeddingmodelconfig", "sensitivewordlist", "prompttemplate"]
)
def test_list_and_add_pages_render(admin_client: Client, model: str) -> None:
    assert admin_client.get(f"/admin/advisors_app/{model}/").status_code == 200
    assert admin_client.get(f"/admin/advisors_app/{model}/add/").status_code == 200


def test_model_config_shows_whether_the_key_variable_is_set_never_its_value(
    admin_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ADVISORS_ADMIN_TEST_KEY", "sk-very-secret")
    config = ChatModelConfig.objects.create(
        slug="gpt", provider="openai", api_key_env="ADVISORS_ADMIN_TEST_KEY"
    )
    ChatModelConfig.objects.create(
        slug="other", provider="openai", api_key_env="ADVISORS_UNSET_KEY"
    )
    listing = admin_client.get("/admin/advisors_app/chatmodelconfig/").content.decode()
    assert "ADVISORS_ADMIN_TEST_KEY is set" in listing
    assert "ADVISORS_UNSET_KEY is NOT set" in listing
    page = admin_client.get(f"/admin/advisors_app/chatmodelconfig/{config.pk}/change/").content
    assert b"sk-very-secret" not in page and b"sk-very-secret" not in listing.encode()


def test_a_model_config_refuses_a_key_in_the_variable_field(admin_client: Client) -> None:
    data = {
        "slug": "gpt",
        "provider": "openai",
        "api_key_env": "sk-proj-123",
        "options": "{}",
        "timeout": "60",
        "max_retries": "2",
    }
    response = admin_client.post("/admin/advisors_app/chatmodelconfig/add/", data)
    assert (
        "NAME of an environment variable"
        in response.context["adminform"].form.errors["api_key_env"][0]
    )
    assert not ChatModelConfig.objects.exists()


def test_json_with_a_nul_character_is_a_form_error(admin_client: Client) -> None:
    data = {
        "slug": "scripted",
        "provider": "scripted",
        "options": '{"stop": ["\\u0000"]}',
        "settings": '{"responses": ["\\u0000"]}',
        "timeout": "60",
        "max_retries": "2",
    }
    response = admin_client.post("/admin/advisors_app/chatmodelconfig/add/", data)
    errors = response.context["adminform"].form.errors
    assert errors["options"] == ["stop.0: Null characters are not allowed."]
    assert errors["settings"] == ["responses.0: Null characters are not allowed."]
    assert not ChatModelConfig.objects.exists()


def test_word_lists_are_edited_one_word_per_line(admin_client: Client) -> None:
    data = {"slug": "bad", "name": "Bad words", "words": "bomb\n  gun  \n\nbomb"}
    response = admin_client.post("/admin/advisors_app/sensitivewordlist/add/", data)
    assert response.status_code == 302
    assert SensitiveWordList.objects.get().words == ["bomb", "gun"]


def test_an_empty_word_list_is_refused(admin_client: Client) -> None:
    url = "/admin/advisors_app/sensitivewordlist/add/"
    response = admin_client.post(url, {"slug": "bad", "words": " \r\n\r\n"})
    [error] = response.context["adminform"].form.errors["words"]
    assert error.startswith("Enter at least one word: an empty list blocks nothing.")
    assert not SensitiveWordList.objects.exists()


def test_saving_a_guard_with_no_word_warns(admin_client: Client) -> None:
    rows = [{"advisor_type": "safe_guard", "params": {"word_lists": []}}]
    data = chain_form(chat_model=scripted_model().pk, rows=rows)
    response = admin_client.post("/admin/advisors_app/advisorchain/add/", data, follow=True)
    shown = [str(m) for m in response.context["messages"]]
    assert any(m.startswith("advisors_app.W112: advisor #1 (safe_guard)") for m in shown)
    assert AdvisorChain.objects.get().advisors.count() == 1


def test_words_differing_only_in_case_are_reported_once(admin_client: Client) -> None:
    words = {"slug": "tech", "words": "decorator\nDecorator\nDECORATOR"}
    assert admin_client.post("/admin/advisors_app/sensitivewordlist/add/", words).status_code == 302
    # Kept: a case-sensitive guard may use the same list.
    assert SensitiveWordList.objects.get().words == ["decorator", "Decorator", "DECORATOR"]
    chain = make_chain(advisors=(("safe_guard", {"word_lists": ["tech"]}),))
    url = f"/admin/advisors_app/advisorchain/{chain.pk}/playground/"
    response = admin_client.post(url, {"message": "What is a Decorator?"})
    assert json.loads(response.context["metadata"])["safeguard_matched"] == ["decorator"]


def test_template_placeholders_are_checked_against_the_text(admin_client: Client) -> None:
    url = "/admin/advisors_app/prompttemplate/add/"
    data = {"slug": "qa", "text": "Context: {context}\nQuestion: {query}", "placeholders": "query"}
    response = admin_client.post(url, data)
    errors = response.context["adminform"].form.errors["placeholders"]
    assert errors == ["The text uses placeholders that are not declared: context"]
    data["placeholders"] = "query,context"
    assert admin_client.post(url, data).status_code == 302
    assert PromptTemplate.objects.get().placeholders == ["query", "context"]


def test_a_template_with_an_unpaired_brace_is_refused_with_its_position(
    admin_client: Client,
) -> None:
    url = "/admin/advisors_app/prompttemplate/add/"
    data = {"slug": "qa", "text": "Question: {query}\r\nSay {oops to me", "placeholders": "query"}
    [error] = admin_client.post(url, data).context["adminform"].form.errors["text"]
    assert error == (
        'Unbalanced "{" at line 2, column 5 (\'{oops to me\'): close it with "}" or write "{{" '
        "for a literal brace."
    )
    data["text"] = 'Answer {query} as {"answer": {"text": "..."}}'
    [error] = admin_client.post(url, data).context["adminform"].form.errors["text"]
    assert "line 1, column 19" in error and '("}}" is one literal brace' in error
    data["text"] = 'Answer {query} as {{"answer": "..."}}, or {"k": 1}.'
    assert admin_client.post(url, data).status_code == 302


def test_editing_a_word_list_changes_the_drafts_that_use_it_not_production(
    admin_client: Client,
) -> None:
    words = SensitiveWordList.objects.create(slug="bad", words=["bomb"])
    chain = make_chain(advisors=(("safe_guard", {"word_lists": ["bad"]}),))
    production = chain.labels.get(name="production").version
    data = {"slug": "bad", "name": "", "words": "bomb\ngun"}
    url = f"/admin/advisors_app/sensitivewordlist/{words.pk}/change/"
    assert admin_client.post(url, data).status_code == 302
    diff_url = f"/admin/advisors_app/advisorchain/{chain.pk}/diff/?from=production&to=draft"
    diff = admin_client.get(diff_url).context["diff"]
    assert diff["word_lists"] == [{"slug": "bad", "added": ["gun"], "removed": []}]
    assert production.snapshot["references"]["word_list:bad"] == {"words": ["bomb"]}
    assert chain.labels.get(name="production").version == production


def test_saving_a_template_names_the_chain_drafts_that_use_it(admin_client: Client) -> None:
    template = PromptTemplate.objects.create(
        slug="qa",
        text="{question_answer_context} {query}",
        placeholders=["question_answer_context", "query"],
    )
    Collection.objects.create(slug="kb", name="KB")
    make_chain(
        "rag", advisors=(("question_answer", {"collection": "kb", "prompt_template": "qa"}),)
    )
    make_chain("persona", system_template=PromptTemplate.objects.create(slug="p", text="Hi."))
    url = f"/admin/advisors_app/prompttemplate/{template.pk}/change/"
    data = {
        "slug": "qa",
        "text": "{query} from {question_answer_context}",
        "placeholders": "query,question_answer_context",
    }
    response = admin_client.post(url, data, follow=True)
    notes = [str(m) for m in response.context["messages"]]
    assert any(n.startswith("The drafts of rag use this prompt template.") for n in notes), notes
    assert not any("persona" in n for n in notes)
