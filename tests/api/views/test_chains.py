"""Chains over REST: users read enabled chains; staff write them, validated by the registry."""

from __future__ import annotations

from typing import Any

import pytest

from advisors_app.core.advisor import HIGHEST_PRECEDENCE
from advisors_app.models import AdvisorChain, AdvisorConfig, PromptTemplate
from tests.api.conftest import client_for
from tests.factories import make_chain, scripted_model

pytestmark = pytest.mark.django_db

PUBLIC_FIELDS = {
    "slug",
    "name",
    "description",
    "enabled",
    "tools",
    "params_schema",
}
#: Where a chain's versions stand: shown to staff only.
VERSION_STATE = {"labels", "latest_version", "draft_changed"}


@pytest.fixture
def chains() -> None:
    make_chain("support", advisors=(("append", {"text": "!"}),), description="Help desk.")
    make_chain("retired", enabled=False)


def test_users_list_enabled_chains_with_their_params_schema(chains: None, api: Any) -> None:
    body = api.get("/api/chains/").json()
    assert [c["slug"] for c in body["results"]] == ["support"]
    [support] = body["results"]
    assert set(support) == PUBLIC_FIELDS
    assert support["description"] == "Help desk."
    schema = support["params_schema"]
    assert set(schema["properties"]) == {"options", "append_flag"}
    assert schema["properties"]["append_flag"] == {"type": "boolean"}
    assert api.get("/api/chains/support/").json() == support
    assert api.get("/api/chains/retired/").status_code == 404
    assert client_for(None).get("/api/chains/").status_code == 401


def test_staff_see_every_chain_with_its_configuration(chains: None, staff: Any) -> None:
    body = client_for(staff).get("/api/chains/").json()
    assert [c["slug"] for c in body["results"]] == ["retired", "support"]
    support = body["results"][1]
    assert set(support) >= VERSION_STATE
    assert support["labels"] == {"production": 1} and support["latest_version"] == 1
    assert support["draft_changed"] is False
    assert support["chat_model"] == "support-model"
    assert support["advisors"] == [
        {
            "id": support["advisors"][0]["id"],
            "advisor_type": "append",
            "order": None,
            "enabled": True,
            "params": {"text": "!"},
        }
    ]
    assert support["lint"] == [] and support["version_policy"] == "pin"
    assert (support["labels"], support["latest_version"]) == ({"production": 1}, 1)


def new_chain(**fields: Any) -> dict[str, Any]:
    scripted_model("writer-model", responses=["Written."])
    return {
        "slug": "writer",
        "name": "Writer",
        "chat_model": "writer-model",
        "system_prompt": "Be brief.",
        "default_options": {"temperature": 0.3},
        "advisors": [{"advisor_type": "append", "order": "HIGHEST+10", "params": {"text": "?"}}],
        **fields,
    }


def test_staff_create_a_chain_that_users_can_call_once_published(
    staff: Any, superuser: Any, api: Any
) -> None:
    response = client_for(staff).post("/api/chains/", new_chain(), format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["advisors"][0]["order"] == HIGHEST_PRECEDENCE + 10
    assert (body["labels"], body["latest_version"], body["draft_changed"]) == ({}, None, True)
    assert body["params_schema"] is None  # nothing served yet
    chain = AdvisorChain.objects.get(slug="writer")
    assert chain.default_options == {"temperature": 0.3}
    unpublished = api.post("/api/chains/writer/call/", {"message": "hi"}, format="json")
    assert unpublished.status_code == 404, unpublished.content

    published = client_for(superuser).post("/api/chains/writer/versions/", {}, format="json")
    assert published.status_code == 201, published.content
    answer = api.post("/api/chains/writer/call/", {"message": "hi"}, format="json")
    assert answer.json()["content"] == "Written."
    assert client_for(staff).get("/api/chains/writer/").json()["labels"] == {"production": 1}
    assert "labels" not in api.get("/api/chains/writer/").json()


@pytest.mark.parametrize(
    ("change", "fields"),
    [
        (
            {"advisors": [{"advisor_type": "append", "params": {"text": 3}}]},
            {"advisors.0.params.text": ["3 is not of type 'string'"]},
        ),
        (
            {"advisors": [{"advisor_type": "shout", "params": {}}]},
            {"advisors.0.advisor_type": ["Unknown advisor type 'shout'."]},
        ),
        (
            {"advisors": [{"advisor_type": "append", "order": "MIDDLE", "params": {"text": "!"}}]},
            {"advisors.0.order": ["Enter a whole number, HIGHEST+N or LOWEST-N."]},
        ),
        (
            {"advisors": [{"advisor_type": "tool_calling"}, {"advisor_type": "tool_calling"}]},
            {"advisors": ["advisors_app.E101: At most one ToolAdvisor is allowed"]},
        ),
        (
            {"advisors": [{"advisor_type": "append", "params": {"text": "!", "note": "gone"}}]},
            {"advisors": ["advisors_app.E110: advisor #1 (append): params.note: no"]},
        ),
        ({"default_options": {"temperature": 7}}, {"default_options": ["temperature: 7 is"]}),
        ({"tools": ["no_such_tool"]}, {"tools": ["Unknown tool(s): no_such_tool."]}),
        ({"chat_model": "missing"}, {"chat_model": ["Object with slug=missing does not exist."]}),
        ({"slug": "not a slug"}, {"slug": ['Enter a valid "slug"']}),
        # PostgreSQL stores no NUL: refused as field errors, never a failed query.
        ({"chat_model": "m\x00"}, {"chat_model": ["Null characters are not allowed."]}),
        ({"system_template": "t\x00"}, {"system_template": ["Null characters are not allowed."]}),
        (
            {"default_options": {"stop": ["\x00"]}},
            {"default_options": ["stop.0: Null characters are not allowed."]},
        ),
        (
            {"advisors": [{"advisor_type": "append", "params": {"text": "\x00"}}]},
            {"advisors.0.params.text": ["Null characters are not allowed."]},
        ),
    ],
)
def test_invalid_configurations_are_field_errors_and_store_nothing(
    staff: Any, change: dict[str, Any], fields: dict[str, list[str]]
) -> None:
    response = client_for(staff).post("/api/chains/", new_chain(**change), format="json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert set(error["fields"]) == set(fields)
    for field, [start] in fields.items():
        assert error["fields"][field][0].startswith(start), error["fields"]
    assert not AdvisorChain.objects.exists() and not AdvisorConfig.objects.exists()


def test_a_template_with_an_unpaired_brace_is_refused(staff: Any) -> None:
    # Saved by code (the admin refuses it), then named by a chain written over the API.
    PromptTemplate.objects.create(slug="typo", text="{instructions}\n{memory} {oops")
    advisors = [
        {"advisor_type": "prompt_chat_memory", "params": {"system_prompt_template": "typo"}}
    ]
    chain = new_chain(advisors=advisors)
    response = client_for(staff).post("/api/chains/", chain, format="json")
    [error] = response.json()["error"]["fields"]["advisors"]
    assert error.startswith(
        "advisors_app.E123: advisor #1 (prompt_chat_memory): params.system_prompt_template: "
        "template 'typo': Unbalanced \"{\" at line 2, column 10 ('{oops')"
    )
    chain.update(system_prompt="", system_template="typo", advisors=[])
    response = client_for(staff).post("/api/chains/", chain, format="json")
    [error] = response.json()["error"]["fields"]["system_template"]
    assert error.startswith("Template 'typo': Unbalanced \"{\" at line 2, column 10")
    assert not AdvisorChain.objects.exists()


def test_staff_change_and_delete_chains(chains: None, staff: Any) -> None:
    admin = client_for(staff)
    before = AdvisorChain.objects.get(slug="support")
    renamed = admin.patch("/api/chains/support/", {"name": "Support desk"}, format="json")
    assert renamed.status_code == 200
    assert [a["params"] for a in renamed.json()["advisors"]] == [{"text": "!"}]  # kept

    replaced = admin.put(
        "/api/chains/support/",
        {
            "slug": "support",
            "name": "Support",
            "advisors": [
                {"advisor_type": "message_chat_memory"},
                {"advisor_type": "safe_guard", "order": 0, "params": {"words": ["x"]}},
            ],
        },
        format="json",
    )
    assert replaced.status_code == 200, replaced.content
    body = replaced.json()
    assert [a["advisor_type"] for a in body["advisors"]] == ["message_chat_memory", "safe_guard"]
    assert [m["id"] for m in body["lint"]] == ["advisors_app.W103"]  # warnings do not block
    assert body["draft_changed"] is True and body["labels"] == {"production": 1}
    assert before.versions.get().snapshot["advisors"][0]["type"] == "append"  # still served

    assert admin.delete("/api/chains/support/").status_code == 204
    assert not AdvisorChain.objects.filter(slug="support").exists()
    assert admin.delete("/api/chains/support/").status_code == 404


def test_only_staff_may_write(chains: None, api: Any) -> None:
    for response in (
        api.post("/api/chains/", {"slug": "mine", "name": "Mine"}, format="json"),
        api.patch("/api/chains/support/", {"name": "Hacked"}, format="json"),
        api.delete("/api/chains/support/"),
    ):
        assert response.status_code == 403
        assert response.json()["error"]["code"] == "permission_denied"
    anonymous = client_for(None).delete("/api/chains/support/")
    assert anonymous.status_code == 401
    assert AdvisorChain.objects.get(slug="support").name == "Support"


def test_callers_see_the_tools_production_serves_not_the_drafts(chains: None, api: Any) -> None:
    AdvisorChain.objects.filter(slug="support").update(tools=["get_weather"])  # a draft edit
    assert api.get("/api/chains/support/").json()["tools"] == []


def test_chain_writes_need_the_model_permissions_as_in_the_admin(
    chains: None, bare_staff: Any
) -> None:
    client = client_for(bare_staff)
    assert client.get("/api/chains/support/").status_code == 200
    for method, path, body in (
        ("post", "/api/chains/", new_chain()),
        ("patch", "/api/chains/support/", {"system_prompt": "Changed."}),
        ("delete", "/api/chains/support/", None),
    ):
        response = getattr(client, method)(path, body, format="json")
        assert response.status_code == 403, (method, response.content)
        assert "_advisorchain" in response.json()["error"]["message"]
    assert AdvisorChain.objects.get(slug="support").system_prompt == ""
