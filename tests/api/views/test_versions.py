"""Chain versions and labels over REST: publish, diff, labels, rollback, restore, permissions."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from rest_framework.test import APIClient

from advisors_app.core import RecordingAdvisor
from advisors_app.definition.registry import AdvisorType, advisor_types
from advisors_app.models import (
    AdvisorChain,
    AdvisorConfig,
    ChainVersion,
    ChatModelConfig,
    Collection,
    PromptTemplate,
)
from tests.api.conftest import client_for
from tests.factories import make_chain, scripted_model

pytestmark = pytest.mark.django_db

RELEASE_PERMISSIONS = (
    "add_chainversion",
    "change_chainlabel",
    "promote_production",
    "change_advisorchain",
    "add_advisorconfig",
    "change_advisorconfig",
    "delete_advisorconfig",
)


def grant(user: Any, *codenames: str) -> Any:
    user.user_permissions.add(
        *Permission.objects.filter(content_type__app_label="advisors_app", codename__in=codenames)
    )
    return type(user).objects.get(pk=user.pk)  # a fresh object: permissions are cached


@pytest.fixture
def releaser(django_user_model: Any) -> Any:
    """Staff who may publish, move every label and restore."""
    user = django_user_model.objects.create_user("releaser", password="pw", is_staff=True)
    return grant(user, *RELEASE_PERMISSIONS)


@pytest.fixture
def ops(releaser: Any) -> APIClient:
    return client_for(releaser)


@pytest.fixture
def chain() -> AdvisorChain:
    """``support``: version 1 (production) on a model answering "one"."""
    return make_chain("support", model=scripted_model("support-model", responses=["one"]))


def edit_model(answer: str) -> None:
    """Change the chain's model configuration (a row its versions hold by content)."""
    ChatModelConfig.objects.filter(slug="support-model").update(
        settings={"responses": [answer], "repeat": True}
    )


def ask(client: APIClient, **choice: Any) -> str:
    response = client.post("/api/chains/support/call/", {"message": "hi", **choice}, format="json")
    assert response.status_code == 200, response.content
    return str(response.json()["content"])


# -- publish ---------------------------------------------------------------------------------


def test_publish_creates_a_version_once_and_lists_it(chain: AdvisorChain, ops: APIClient) -> None:
    edit_model("two")
    response = ops.post("/api/chains/support/versions/", {"message": "new answer"}, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["number"] == 2
    assert (body["message"], body["created_by"], body["parent"]) == ("new answer", "releaser", None)
    assert body["labels"] == []  # production stays on v1 until promoted
    assert len(body["snapshot_hash"]) == 64
    assert "two" in json.dumps(body["snapshot"]["references"]["chat_model:support-model"])

    again = ops.post("/api/chains/support/versions/", {"message": "same"}, format="json")
    assert again.status_code == 200
    assert again.json()["number"] == 2 and again.json()["message"] == "new answer"
    assert chain.versions.count() == 2

    listing = ops.get("/api/chains/support/versions/").json()
    assert listing["count"] == 2
    assert [(v["number"], v["labels"], v["message"]) for v in listing["results"]] == [
        (2, [], "new answer"),
        (1, ["production"], "factory"),
    ]
    assert set(listing["results"][0]) == {
        "number",
        "snapshot_hash",
        "message",
        "created_by",
        "created_at",
        "parent",
        "labels",
    }
    detail = ops.get("/api/chains/support/versions/1/").json()
    assert detail["snapshot"] == ChainVersion.objects.get(chain=chain, number=1).snapshot
    assert ops.get("/api/chains/support/versions/7/").status_code == 404
    assert ops.get("/api/chains/support/versions/99999999999999999999/").status_code == 404
    assert ops.get("/api/chains/nothing/versions/").status_code == 404


@pytest.fixture
def refusing_type() -> Iterator[str]:
    """An advisor type whose factory always fails, registered for one test."""

    def refuse(spec: object) -> RecordingAdvisor:
        raise RuntimeError("the factory refuses")

    advisor_types.register(AdvisorType(key="t_refuses", label="Refuses", factory=refuse))
    yield "t_refuses"
    advisor_types.unregister("t_refuses")


def test_publish_refuses_a_draft_whose_advisor_cannot_be_built(
    chain: AdvisorChain, refusing_type: str, ops: APIClient
) -> None:
    AdvisorConfig.objects.create(chain=chain, advisor_type=refusing_type, params={})
    response = ops.post("/api/chains/support/versions/", {"message": "broken"}, format="json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid"
    [message] = error["fields"]["draft"]
    assert message.startswith("advisors_app.E113: ")
    assert "t_refuses" in message and "RuntimeError: the factory refuses" in message
    assert chain.versions.count() == 1


def test_invalid_publish_bodies_are_field_errors(chain: AdvisorChain, ops: APIClient) -> None:
    for body, field in (({"message": "x" * 501}, "message"), ({"message": "a\x00"}, "message")):
        response = ops.post("/api/chains/support/versions/", body, format="json")
        assert response.status_code == 400
        assert set(response.json()["error"]["fields"]) == {field}
    assert chain.versions.count() == 1


def test_versions_are_immutable(chain: AdvisorChain, superuser: Any) -> None:
    root = client_for(superuser)
    for method in ("put", "patch", "delete"):
        response = getattr(root, method)("/api/chains/support/versions/1/", {}, format="json")
        assert response.status_code == 405, method
        assert response.json()["error"]["code"] == "method_not_allowed"
    assert root.delete("/api/chains/support/versions/").status_code == 405
    assert chain.versions.get().message == "factory"


# -- diff ------------------------------------------------------------------------------------


def test_diff_shows_a_referenced_template_edit_between_production_and_draft(
    ops: APIClient,
) -> None:
    template = PromptTemplate.objects.create(slug="persona", text="Be kind.\nAnswer briefly.")
    make_chain("support", system_template=template, system_prompt="")
    template.text = "Be kind.\nAnswer in detail."
    template.save()

    response = ops.get("/api/chains/support/diff/", {"from": "production", "to": "draft"})
    assert response.status_code == 200, response.content
    diff = response.json()
    assert (diff["from"], diff["to"], diff["changed"]) == ("production (v1)", "draft", True)
    [persona] = diff["templates"]
    assert persona["slug"] == "persona"
    assert "-Answer briefly." in persona["diff"] and "+Answer in detail." in persona["diff"]
    assert "Answer in detail." in diff["text"]
    assert diff["advisors"] == {"added": [], "removed": [], "reordered": False, "changed": []}

    same = ops.get("/api/chains/support/diff/", {"from": "1", "to": "production"}).json()
    assert (same["from"], same["changed"], same["text"], same["templates"]) == (
        "v1",
        False,
        "",
        [],
    )
    chain_json = ops.get("/api/chains/support/").json()
    assert chain_json["draft_changed"] is True


@pytest.mark.parametrize(
    ("query", "fields"),
    [
        ({}, {"from": "Name a version number", "to": "Name a version number"}),
        ({"from": "1", "to": "staging"}, {"to": "chain 'support' has no version or label"}),
        ({"from": "9", "to": "draft"}, {"from": "chain 'support' has no version 9"}),
        ({"from": "9999999999", "to": "draft"}, {"from": "chain 'support' has no version"}),
        ({"from": "1", "to": "99999999999"}, {"to": "'99999999999' is not a version number"}),
        ({"from": "Prod Uction", "to": "1"}, {"from": "'Prod Uction' is not a version number"}),
        ({"from": "²", "to": "1"}, {"from": "'²' is not a version number"}),
    ],
)
def test_diff_refs_must_name_something(
    chain: AdvisorChain, ops: APIClient, query: dict[str, str], fields: dict[str, str]
) -> None:
    response = ops.get("/api/chains/support/diff/", query)
    assert response.status_code == 400
    error = response.json()["error"]
    assert set(error["fields"]) == set(fields)
    for field, start in fields.items():
        assert error["fields"][field][0].startswith(start), error["fields"]


# -- labels ----------------------------------------------------------------------------------


def test_moving_labels_is_recorded_with_actor_and_reason(
    chain: AdvisorChain, ops: APIClient
) -> None:
    edit_model("two")
    ops.post("/api/chains/support/versions/", {"message": "v2"}, format="json")
    staged = ops.put(
        "/api/chains/support/labels/staging/", {"version": 1, "reason": "try"}, format="json"
    )
    assert staged.status_code == 200, staged.content
    assert (staged.json()["name"], staged.json()["version"]) == ("staging", 1)
    moved = ops.put(
        "/api/chains/support/labels/staging/", {"version": 2, "reason": "next"}, format="json"
    )
    assert moved.json()["version"] == 2

    labels = ops.get("/api/chains/support/labels/").json()["results"]
    assert [(label["name"], label["version"]) for label in labels] == [
        ("production", 1),
        ("staging", 2),
    ]
    assert ops.get("/api/chains/support/labels/staging/").json()["version"] == 2
    history = ops.get("/api/chains/support/labels/staging/history/").json()["results"]
    assert [(e["from"], e["to"], e["actor"], e["reason"]) for e in history] == [
        (1, 2, "releaser", "next"),
        (None, 1, "releaser", "try"),
    ]
    assert ops.get("/api/chains/support/labels/canary/history/").status_code == 404
    chain_json = ops.get("/api/chains/support/").json()
    assert chain_json["labels"] == {"production": 1, "staging": 2}
    assert chain_json["latest_version"] == 2


@pytest.mark.parametrize(
    ("name", "body", "field"),
    [
        ("staging", {"version": 9}, "version"),
        ("staging", {"version": "two"}, "version"),
        ("staging", {}, "version"),
        ("Staging", {"version": 1}, "name"),
        ("draft", {"version": 1}, "name"),
        ("staging", {"version": 1, "reason": "r" * 501}, "reason"),
    ],
)
def test_invalid_label_moves_are_field_errors(
    chain: AdvisorChain, ops: APIClient, name: str, body: dict[str, Any], field: str
) -> None:
    response = ops.put(f"/api/chains/support/labels/{name}/", body, format="json")
    assert response.status_code == 400
    assert set(response.json()["error"]["fields"]) == {field}
    assert list(chain.labels.values_list("name", flat=True)) == ["production"]


def test_a_production_move_changes_the_next_call_and_rollback_restores_it(
    chain: AdvisorChain, ops: APIClient, api: APIClient
) -> None:
    assert ask(api) == "one"
    edit_model("two")
    ops.post("/api/chains/support/versions/", {"message": "answer two"}, format="json")
    assert ask(api) == "one"  # published, not promoted

    promoted = ops.put(
        "/api/chains/support/labels/production/",
        {"version": 2, "reason": "release"},
        format="json",
    )
    assert promoted.status_code == 200, promoted.content
    assert ask(api) == "two"

    rolled = ops.post(
        "/api/chains/support/labels/production/rollback/", {"reason": "bad"}, format="json"
    )
    assert rolled.status_code == 200, rolled.content
    assert rolled.json()["version"] == 1
    assert ask(api) == "one"
    assert chain.versions.count() == 2  # a rollback makes no version
    [latest, *_] = ops.get("/api/chains/support/labels/production/history/").json()["results"]
    assert (latest["from"], latest["to"], latest["actor"], latest["reason"]) == (
        2,
        1,
        "releaser",
        "bad",
    )
    # The one move is undone: a second roll back has nothing left to undo (the docs say so).
    again = ops.post("/api/chains/support/labels/production/rollback/", {}, format="json")
    assert again.status_code == 409
    assert "every move was rolled back already" in again.json()["error"]["message"]
    assert ask(api) == "one"


def test_rollback_needs_an_earlier_version(chain: AdvisorChain, ops: APIClient) -> None:
    response = ops.post("/api/chains/support/labels/production/rollback/", {}, format="json")
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "conflict"
    assert "nothing to roll back to" in response.json()["error"]["message"]
    missing = ops.post("/api/chains/support/labels/canary/rollback/", {}, format="json")
    assert missing.status_code == 404


# -- restore ---------------------------------------------------------------------------------


def test_restore_copies_a_version_into_the_draft(chain: AdvisorChain, ops: APIClient) -> None:
    changed = ops.patch(
        "/api/chains/support/",
        {"advisors": [{"advisor_type": "append", "params": {"text": "?"}}]},
        format="json",
    )
    assert changed.json()["draft_changed"] is True
    ops.post("/api/chains/support/versions/", {"message": "append"}, format="json")

    response = ops.post("/api/chains/support/versions/1/restore/")
    assert response.status_code == 200, response.content
    assert response.json() == {"version": 1, "notes": []}
    assert not chain.advisors.exists()
    assert ops.get("/api/chains/support/").json()["draft_changed"] is False
    # Publishing the restored draft makes a new version naming where it came from.
    published = ops.post("/api/chains/support/versions/", {"message": "back"}, format="json")
    assert (published.json()["number"], published.json()["parent"]) == (3, 1)
    assert ops.post("/api/chains/support/versions/9/restore/").status_code == 404


# -- permissions -----------------------------------------------------------------------------

READS = (
    "/api/chains/support/versions/",
    "/api/chains/support/versions/1/",
    "/api/chains/support/diff/?from=1&to=draft",
    "/api/chains/support/labels/",
    "/api/chains/support/labels/production/",
    "/api/chains/support/labels/production/history/",
)
WRITES = (
    ("post", "/api/chains/support/versions/", {"message": "m"}),
    ("post", "/api/chains/support/versions/1/restore/", None),
    ("put", "/api/chains/support/labels/staging/", {"version": 1}),
    ("put", "/api/chains/support/labels/production/", {"version": 1}),
    ("post", "/api/chains/support/labels/production/rollback/", {}),
)


def test_users_who_are_not_staff_see_nothing(chain: AdvisorChain, api: APIClient) -> None:
    for path in READS:
        response = api.get(path)
        assert response.status_code == 404, path
        assert response.json()["error"]["code"] == "not_found"
    for method, path, body in WRITES:
        assert getattr(api, method)(path, body, format="json").status_code == 404, path
    for path in READS:
        assert client_for(None).get(path).status_code == 401, path


def test_staff_read_and_write_only_with_permissions(chain: AdvisorChain, bare_staff: Any) -> None:
    client = client_for(bare_staff)
    for path in READS:  # as the admin: viewing chains needs the permission to
        assert client.get(path).status_code == 403, path
    # The chain itself reads as any caller's: what production serves, not the draft.
    assert "labels" not in client.get("/api/chains/support/").json()
    viewer = client_for(grant(bare_staff, "view_advisorchain"))
    for path in READS:
        assert viewer.get(path).status_code == 200, path
    assert "labels" in viewer.get("/api/chains/support/").json()
    for method, path, body in WRITES:
        response = getattr(client, method)(path, body, format="json")
        assert response.status_code == 403, path
        assert response.json()["error"]["code"] == "permission_denied"
    assert chain.versions.count() == 1 and chain.labels.count() == 1

    # Moving a label other than production needs change_chainlabel only.
    labeller = client_for(grant(bare_staff, "change_chainlabel"))
    staged = labeller.put("/api/chains/support/labels/staging/", {"version": 1}, format="json")
    assert staged.status_code == 200
    promoted = labeller.put("/api/chains/support/labels/production/", {"version": 1}, format="json")
    assert promoted.status_code == 403
    assert "promote_production" in promoted.json()["error"]["message"]


# -- deletes that versions refuse --------------------------------------------------------------


def test_a_collection_a_labelled_version_searches_cannot_be_deleted(
    superuser: Any, alice: Any
) -> None:
    Collection.objects.create(slug="kb", name="KB")
    Collection.objects.create(slug="spare", name="Spare")
    make_chain("rag", advisors=(("question_answer", {"collection": "kb"}),))
    root = client_for(superuser)

    refused = root.delete("/api/collections/kb/")
    assert refused.status_code == 409
    error = refused.json()["error"]
    assert error["code"] == "protected"
    assert "chain 'rag' v1 (production)" in error["message"]
    assert Collection.objects.filter(slug="kb").exists()
    assert root.get("/api/collections/kb/").json()["slug"] == "kb"

    assert client_for(alice).delete("/api/collections/spare/").status_code == 403  # shared
    assert root.delete("/api/collections/spare/").status_code == 204
    Collection.objects.create(slug="mine", name="Mine", owner=alice)
    assert client_for(alice).delete("/api/collections/mine/").status_code == 204
    assert root.delete("/api/collections/mine/").status_code == 404


def test_a_chain_whose_versions_served_turns_cannot_be_deleted(
    chain: AdvisorChain, superuser: Any, api: APIClient
) -> None:
    ask(api)
    refused = client_for(superuser).delete("/api/chains/support/")
    assert refused.status_code == 409
    error = refused.json()["error"]
    assert error["code"] == "protected"
    assert "refer to its versions v1" in error["message"]
    assert AdvisorChain.objects.filter(slug="support").exists()
