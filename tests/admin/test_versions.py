"""The version workflow in the admin: publish, diff, promote, roll back, restore, the chain
page's banner and lists, permissions, the read-only version admins and protected deletes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import Permission
from django.test import Client

from advisors_app.definition import publish
from advisors_app.definition.registry import AdvisorType, advisor_types
from advisors_app.definition.runtime import clear_cache
from advisors_app.models import (
    AdvisorChain,
    AdvisorConfig,
    ChainLabel,
    ChainLabelEvent,
    ChatModelConfig,
    Collection,
    PromptTemplate,
)
from advisors_app.turn import call_turn
from tests.admin.forms import chain_form
from tests.factories import make_chain, scripted_model

pytestmark = pytest.mark.django_db

BASE = "/admin/advisors_app/advisorchain"


def url(chain: AdvisorChain, view: str) -> str:
    return f"{BASE}/{chain.pk}/{view}/"


def answer(chain: AdvisorChain, user, **target) -> str:
    return async_to_sync(call_turn)(chain.slug, user, "hi", **target).content


def shown(response) -> list[str]:
    return [str(m) for m in response.context["messages"]]


def staff(django_user_model, name: str, *codenames: str):
    user = django_user_model.objects.create_user(name, password="pw", is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(content_type__app_label="advisors_app", codename__in=codenames)
    )
    return user


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    clear_cache()
    yield
    clear_cache()


@pytest.fixture
def two_models() -> tuple[ChatModelConfig, ChatModelConfig]:
    return scripted_model("one", responses=("one",)), scripted_model("two", responses=("two",))


def switch_model(admin: Client, chain: AdvisorChain, model: ChatModelConfig) -> None:
    """Edit the draft in the admin: the chain now runs on ``model``."""
    response = admin.post(url(chain, "change"), chain_form(chain, chat_model=model.pk))
    assert response.status_code == 302, response.context and response.context["errors"]


def test_publishing_from_the_admin_stores_versions_and_skips_an_unchanged_draft(
    admin_client: Client, admin_user, two_models
) -> None:
    one, two = two_models
    chain = make_chain(model=one, publish=False)
    page = admin_client.get(url(chain, "publish"))
    assert page.status_code == 200 and "First version" in page.content.decode()
    response = admin_client.post(url(chain, "publish"), {"message": "first"}, follow=True)
    assert shown(response) == ["Published v1."]
    v1 = chain.versions.get()
    assert (v1.number, v1.message, v1.created_by) == (1, "first", admin_user)
    assert chain.labels.get(name="production").version == v1

    switch_model(admin_client, chain, two)
    page = admin_client.get(url(chain, "publish")).content.decode()
    assert "What the draft changes since v1" in page and "chat_model" in page
    admin_client.post(url(chain, "publish"), {"message": "second model"})
    assert list(chain.versions.values_list("number", flat=True)) == [2, 1]
    assert chain.labels.get(name="production").version == v1  # publishing is not promoting
    response = admin_client.post(url(chain, "publish"), {"message": "again"}, follow=True)
    assert shown(response)[-1] == "The draft is unchanged since v2: nothing new."
    assert chain.versions.count() == 2


def test_a_template_that_lost_its_placeholder_blocks_publishing_with_its_code(
    admin_client: Client, admin_user
) -> None:
    Collection.objects.create(slug="kb", name="KB")
    template = PromptTemplate.objects.create(
        slug="qa",
        text="{query}\n\nContext:\n{question_answer_context}",
        placeholders=["query", "question_answer_context"],
    )
    params = {"collection": "kb", "prompt_template": "qa"}
    chain = make_chain(advisors=(("question_answer", params),))
    edit = {"slug": "qa", "name": "", "text": "Answer: {query}", "placeholders": "query"}
    tpl_url = f"/admin/advisors_app/prompttemplate/{template.pk}/change/"
    assert admin_client.post(tpl_url, edit).status_code == 302

    response = admin_client.post(url(chain, "publish"), {"message": "new template"})
    assert response.status_code == 200
    [error] = response.context["form"].non_field_errors()
    assert error.startswith("advisors_app.E106: ") and "question_answer_context" in error
    assert "The draft cannot be published" in response.content.decode()
    assert chain.versions.count() == 1
    assert answer(chain, admin_user) == "Hello!"  # production still serves v1


def test_an_advisor_factory_that_fails_blocks_publishing_with_e113(admin_client: Client) -> None:
    def broken(spec):
        raise RuntimeError("the factory refuses")

    advisor_types.register(AdvisorType(key="t_broken_admin", label="Broken", factory=broken))
    try:
        chain = make_chain(publish=False)
        AdvisorConfig.objects.create(chain=chain, advisor_type="t_broken_admin", params={})
        response = admin_client.post(url(chain, "publish"), {"message": "try"})
        [error] = response.context["form"].non_field_errors()
        assert error.startswith("advisors_app.E113: the chain cannot be built: advisor #1")
        assert "RuntimeError: the factory refuses" in error
        assert not chain.versions.exists()
    finally:
        advisor_types.unregister("t_broken_admin")


def test_the_diff_page_shows_a_template_text_change(admin_client: Client) -> None:
    template = PromptTemplate.objects.create(slug="sys", text="You are terse.\nAnswer briefly.")
    chain = make_chain(system_template=template)
    PromptTemplate.objects.filter(pk=template.pk).update(text="You are chatty.\nAnswer briefly.")
    response = admin_client.get(url(chain, "diff"))  # default: production → draft
    assert response.context["names"] == ("production (v1)", "draft")
    diff = response.context["diff"]
    assert [t["slug"] for t in diff["templates"]] == ["sys"]
    assert ("diff-del", "-You are terse.") in diff["templates"][0]["lines"]
    assert ("diff-add", "+You are chatty.") in diff["templates"][0]["lines"]
    page = response.content.decode()
    assert '<span class="diff-line diff-add">+You are chatty.</span>' in page
    assert "Template <code>sys</code>: text changed" in page
    same = admin_client.get(url(chain, "diff") + "?from=1&to=production")
    assert "No differences" in same.content.decode()
    bad = admin_client.get(url(chain, "diff") + "?from=7&to=draft")
    assert "from" in bad.context["form"].errors and bad.context["diff"] is None


def test_promote_then_roll_back_change_the_next_answer_and_are_recorded(
    admin_client: Client, admin_user, two_models
) -> None:
    one, two = two_models
    chain = make_chain(model=one)
    switch_model(admin_client, chain, two)
    admin_client.post(url(chain, "publish"), {"message": "model two"})
    assert answer(chain, admin_user) == "one"

    preview = admin_client.get(url(chain, "promote") + "?label=production&version=2")
    assert preview.context["preview"]["current"].number == 1
    assert preview.context["preview"]["diff"]["chain_fields"] == ["chat_model"]
    # "Show what changes" posts the form (a GET would carry its CSRF token into the URL)...
    page = preview.content.decode()
    assert 'formmethod="get"' not in page and 'name="preview"' in page
    shown_changes = admin_client.post(
        url(chain, "promote"), {"label": "production", "version": "2", "preview": "1"}
    )
    assert shown_changes.status_code == 200  # ...and moves nothing
    assert shown_changes.context["preview"]["diff"]["chain_fields"] == ["chat_model"]
    assert ChainLabel.objects.get(chain=chain, name="production").version.number == 1
    response = admin_client.post(
        url(chain, "promote"),
        {"label": "production", "version": "2", "reason": "try model two"},
        follow=True,
    )
    assert shown(response) == ["Moved production from v1 to v2."]
    assert answer(chain, admin_user) == "two"

    response = admin_client.post(
        url(chain, "labels/production/rollback"), {"reason": "two is worse"}, follow=True
    )
    assert shown(response) == ["Rolled production back from v2 to v1."]
    assert answer(chain, admin_user) == "one"
    assert chain.versions.count() == 2  # a rollback makes no version

    page = response.content.decode()  # the chain page, after the redirect
    history = [
        (e.label.name, str(e.from_version), str(e.to_version), e.actor, e.reason)
        for e in response.context["label_events"]
    ]
    assert history[:2] == [
        ("production", "v2", "v1", admin_user, "two is worse"),
        ("production", "v1", "v2", admin_user, "try model two"),
    ]
    assert "two is worse" in page and "try model two" in page
    assert admin_client.get(url(chain, "labels/production/rollback")).status_code == 405


def test_promote_creates_a_new_label_and_the_playground_runs_labels_and_versions(
    admin_client: Client, two_models
) -> None:
    one, two = two_models
    chain = make_chain(model=one)
    switch_model(admin_client, chain, two)
    admin_client.post(url(chain, "publish"), {"message": "model two"})
    preview = admin_client.get(url(chain, "promote") + "?label=staging")  # the newest version
    assert preview.context["preview"]["version"].number == 2
    assert preview.context["preview"]["current"] is None
    assert "promoting creates it" in preview.content.decode()
    response = admin_client.post(url(chain, "promote"), {"label": "staging", "version": "2"})
    assert response.status_code == 302
    assert ChainLabel.objects.get(chain=chain, name="staging").version.number == 2
    refused = admin_client.post(url(chain, "promote"), {"label": "draft", "version": "2"})
    assert "not 'draft'" in refused.context["form"].errors["label"][0]

    def play(run: str | None) -> tuple[str, str]:
        data = {"message": "hi"} if run is None else {"message": "hi", "run": run}
        context = admin_client.post(url(chain, "playground"), data).context
        return context["result"].content, context["ran"]

    assert play(None) == ("two", "the draft")
    assert play("production") == ("one", "v1 (label production)")
    assert play("staging") == ("two", "v2 (label staging)")
    assert play("1") == ("one", "v1")
    page = admin_client.get(url(chain, "change")).content.decode()
    assert '<option value="staging">staging (v2)</option>' in page


def test_restore_to_draft_copies_a_version_back_and_shows_the_notes(
    admin_client: Client, two_models
) -> None:
    one, two = two_models
    template = PromptTemplate.objects.create(slug="sys", text="Version one text.")
    chain = make_chain(model=one, system_template=template)
    v1 = chain.versions.get()
    switch_model(admin_client, chain, two)
    PromptTemplate.objects.filter(pk=template.pk).update(text="Edited since.")
    response = admin_client.post(url(chain, "versions/1/restore"), follow=True)
    assert shown(response)[-2:] == [
        "The draft now holds v1's definition; publishing it makes a new version whose parent "
        "is v1.",
        "template 'sys' differs from the snapshot's; left as it is",
    ]
    chain.refresh_from_db()
    assert chain.chat_model == one and chain.restored_from == v1
    assert admin_client.post(url(chain, "versions/9/restore")).status_code == 404
    assert admin_client.get(url(chain, "versions/1/restore")).status_code == 405


def test_the_banner_appears_after_editing_the_draft(admin_client: Client, two_models) -> None:
    one, two = two_models
    chain = make_chain(model=one)
    page = admin_client.get(url(chain, "change")).content.decode()
    assert "Production serves v1, the same definition as the draft." in page
    assert "chain-draft-differs" not in page
    switch_model(admin_client, chain, two)
    page = admin_client.get(url(chain, "change")).content.decode()
    assert "The draft differs from what production serves (v1)." in page
    assert f"{url(chain, 'diff')}?from=production&amp;to=draft" in page
    admin_client.post(url(chain, "publish"), {"message": "two"})
    page = admin_client.get(url(chain, "change")).content.decode()
    assert "The draft is v2" in page and "?label=production&amp;version=2" in page


def test_the_chain_page_lists_versions_labels_and_history(
    admin_client: Client, admin_user, two_models
) -> None:
    one, two = two_models
    chain = make_chain(model=one)
    switch_model(admin_client, chain, two)
    admin_client.post(url(chain, "publish"), {"message": "model two"})
    admin_client.post(url(chain, "promote"), {"label": "production", "version": "2"})
    response = admin_client.get(url(chain, "change"))
    rows = [
        (r["version"].number, r["version"].message, r["labels"])
        for r in response.context["versions"]
    ]
    assert rows == [(2, "model two", ["production"]), (1, "factory", [])]
    [label] = response.context["labels"]
    assert label["label"].name == "production" and label["rollback"]
    page = response.content.decode()
    assert "Roll back production" in page and "Restore to draft" in page
    assert 'id="label-history"' in page and str(admin_user) in page


@pytest.mark.parametrize(
    ("method", "view", "data"),
    [
        ("get", "publish", None),
        ("post", "publish", {"message": "x"}),
        ("get", "promote", None),
        ("post", "promote", {"label": "production", "version": "1"}),
        ("post", "labels/production/rollback", {"reason": "x"}),
        ("post", "versions/1/restore", None),
        ("get", "diff", None),
    ],
)
def test_staff_without_the_permissions_get_403(
    client: Client, django_user_model, method: str, view: str, data
) -> None:
    chain = make_chain()
    client.force_login(staff(django_user_model, "viewer"))
    assert getattr(client, method)(url(chain, view), data or {}).status_code == 403
    assert (
        chain.versions.count() == 1
        and not ChainLabelEvent.objects.exclude(reason="first version").exists()
    )


def test_moving_production_needs_its_own_permission_and_buttons_follow(
    client: Client, django_user_model, two_models
) -> None:
    one, two = two_models
    chain = make_chain(model=one)
    AdvisorChain.objects.filter(pk=chain.pk).update(chat_model=two)
    chain.refresh_from_db()
    publish(chain, message="two")
    editor = staff(
        django_user_model, "editor", "view_advisorchain", "change_advisorchain", "change_chainlabel"
    )
    client.force_login(editor)
    page = client.get(url(chain, "change")).content.decode()
    assert f'href="{url(chain, "publish")}"' not in page  # no add_chainversion
    assert f'href="{url(chain, "promote")}"' in page
    assert client.post(url(chain, "publish"), {"message": "x"}).status_code == 403
    production = {"label": "production", "version": "2"}
    assert client.post(url(chain, "promote"), production).status_code == 403
    preview = client.get(url(chain, "promote") + "?label=production&version=2")
    assert not preview.context["preview"]["allowed"]
    assert 'value="Promote"' not in preview.content.decode()
    staging = {"label": "staging", "version": "2"}
    assert client.post(url(chain, "promote"), staging).status_code == 302
    assert client.post(url(chain, "promote"), {**staging, "version": "1"}).status_code == 302
    page = client.get(url(chain, "change")).content.decode()
    assert "Roll back staging" in page and "Roll back production" not in page

    editor.user_permissions.add(Permission.objects.get(codename="promote_production"))
    client.force_login(django_user_model.objects.get(pk=editor.pk))
    assert client.post(url(chain, "promote"), production).status_code == 302
    assert chain.labels.get(name="production").version.number == 2


def test_versions_labels_and_history_are_read_only_in_the_admin(admin_client: Client) -> None:
    chain = make_chain()
    make_chain("other")
    version = chain.versions.get()
    label = chain.labels.get()
    listing = admin_client.get(f"/admin/advisors_app/chainversion/?chain__id__exact={chain.pk}")
    assert [str(v.chain) for v in listing.context["cl"].result_list] == [str(chain)]
    assert "production" in listing.content.decode()
    assert "delete_selected" not in listing.content.decode()
    page = admin_client.get(f"/admin/advisors_app/chainversion/{version.pk}/change/")
    assert page.status_code == 200 and version.snapshot_hash in page.content.decode()
    assert 'name="_save"' not in page.content.decode()
    for model, pk in (("chainversion", version.pk), ("chainlabel", label.pk)):
        assert admin_client.get(f"/admin/advisors_app/{model}/add/").status_code == 403
        assert admin_client.get(f"/admin/advisors_app/{model}/{pk}/delete/").status_code == 403
        assert admin_client.post(f"/admin/advisors_app/{model}/{pk}/change/").status_code == 403
    assert admin_client.get("/admin/advisors_app/chainlabel/").status_code == 200
    events = admin_client.get("/admin/advisors_app/chainlabelevent/")
    assert "first version" in events.content.decode()


def test_a_chain_with_versions_can_still_be_deleted(admin_client: Client) -> None:
    chain = make_chain()
    page = admin_client.get(url(chain, "delete"))
    assert not page.context["perms_lacking"] and not page.context["protected"]
    assert admin_client.post(url(chain, "delete"), {"post": "yes"}).status_code == 302
    assert not AdvisorChain.objects.exists() and not ChainLabel.objects.exists()


def test_deleting_what_a_labelled_version_refers_to_is_refused_on_the_delete_page(
    admin_client: Client,
) -> None:
    collection = Collection.objects.create(slug="kb", name="KB")
    template = PromptTemplate.objects.create(slug="qa", text="{query} {question_answer_context}")
    params = {"collection": "kb", "prompt_template": "qa"}
    chain = make_chain(advisors=(("question_answer", params),))
    chain.advisors.all().delete()  # the draft no longer needs them; production (v1) does
    spare = PromptTemplate.objects.create(slug="spare", text="Unused.")
    for model, obj in (("collection", collection), ("prompttemplate", template)):
        delete = f"/admin/advisors_app/{model}/{obj.pk}/delete/"
        page = admin_client.get(delete)
        assert page.status_code == 200
        [message] = page.context["protected"]
        assert f"{obj.slug!r}: chain 'support' v1 (production) refer to it" in message
        assert "chain &#x27;support&#x27; v1 (production)" in page.content.decode()
        assert admin_client.post(delete, {"post": "yes"}).status_code == 200
        assert type(obj).objects.filter(pk=obj.pk).exists()

    changelist = "/admin/advisors_app/prompttemplate/"
    bulk = {"action": "delete_selected", "_selected_action": [template.pk, spare.pk]}
    page = admin_client.post(changelist, bulk)
    [message] = page.context["protected"]
    assert message.startswith("Cannot delete prompt template 'qa'")
    admin_client.post(changelist, {**bulk, "post": "yes"})
    assert PromptTemplate.objects.count() == 2  # nothing deleted while one is protected
    bulk["_selected_action"] = [spare.pk]
    assert admin_client.post(changelist, {**bulk, "post": "yes"}).status_code == 302
    assert not PromptTemplate.objects.filter(pk=spare.pk).exists()
