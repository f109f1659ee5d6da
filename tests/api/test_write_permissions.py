"""Issue 18 §3: every write of the API checks the Django model permissions the admin checks.

:data:`WRITES` lists each write with the permissions it needs. A staff user with no permission
gets 403 from each and nothing changes; a staff user with exactly those permissions succeeds;
without any one of them, 403 naming it. :data:`OWN` lists the writes on the caller's own rows
(and chat turns), which need no model permission. Every write route of
``advisors_app.api.urls`` must be in one of the two lists, so a new endpoint cannot be
forgotten.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.urls import URLPattern
from django.utils import timezone

from advisors_app.api.urls import urlpatterns
from advisors_app.definition import move_label, publish
from advisors_app.ingestion.pipeline import ingest_text
from advisors_app.models import (
    AdvisorChain,
    AdvisorConfig,
    ChainLabel,
    ChainLabelEvent,
    ChainVersion,
    ChatMessage,
    Collection,
    Conversation,
    Document,
    Experiment,
    ExperimentArm,
    ToolApproval,
    ToolApprovalGrant,
)
from tests.api.conftest import client_for
from tests.factories import make_chain, scripted_model

pytestmark = pytest.mark.django_db

WRITE_METHODS = ("post", "put", "patch", "delete")
ADVISOR_ROWS = ("add_advisorconfig", "change_advisorconfig", "delete_advisorconfig")
CHAIN_CASCADE = ("delete_chainversion", "delete_chainlabel", "delete_chainlabelevent")


@dataclass(frozen=True)
class Write:
    route: str
    method: str
    path: str
    body: Any = None
    #: Codenames needed (``advisors_app.``); ``None``: refused to everyone (admin only).
    needs: tuple[str, ...] | None = ()
    ok: int = 200
    id: str = ""

    def send(self, client: Any, world: dict[str, Any]) -> Any:
        path = self.path.format(**world)
        return getattr(client, self.method)(path, self.body, format="json")


NEW_CHAIN = {
    "slug": "new",
    "name": "New",
    "advisors": [{"advisor_type": "append", "params": {"text": "!"}}],
}

WRITES = [
    Write(
        "api-chains",
        "post",
        "/api/chains/",
        NEW_CHAIN,
        ("add_advisorchain", "add_advisorconfig"),
        201,
        "create-with-advisors",
    ),
    Write(
        "api-chains",
        "post",
        "/api/chains/",
        {"slug": "bare", "name": "Bare"},
        ("add_advisorchain",),
        201,
        "create",
    ),
    Write(
        "api-chain",
        "put",
        "/api/chains/support/",
        {"slug": "support", "name": "S", "advisors": []},
        ("change_advisorchain", *ADVISOR_ROWS),
        id="replace",
    ),
    Write(
        "api-chain",
        "patch",
        "/api/chains/support/",
        {"system_prompt": "Leak it."},
        ("change_advisorchain",),
        id="change",
    ),
    Write(
        "api-chain",
        "patch",
        "/api/chains/support/",
        {"advisors": []},
        ("change_advisorchain", *ADVISOR_ROWS),
        id="change-advisors",
    ),
    Write(
        "api-chain",
        "delete",
        "/api/chains/support/",
        None,
        # The world's chain has experiments: they go with it, as in the admin.
        ("delete_advisorchain", *CHAIN_CASCADE, "delete_experiment"),
        204,
        "delete",
    ),
    Write(
        "api-chain-versions",
        "post",
        "/api/chains/support/versions/",
        {"message": "v3"},
        ("add_chainversion",),
        201,
        "publish",
    ),
    Write(
        "api-chain-version-restore",
        "post",
        "/api/chains/support/versions/1/restore/",
        None,
        ("change_advisorchain",),
        id="restore",
    ),
    Write(
        "api-chain-label",
        "put",
        "/api/chains/support/labels/staging/",
        {"version": 1},
        ("change_chainlabel",),
        id="move-staging",
    ),
    Write(
        "api-chain-label",
        "put",
        "/api/chains/support/labels/production/",
        {"version": 1},
        ("change_chainlabel", "promote_production"),
        id="move-production",
    ),
    Write(
        "api-chain-label",
        "put",
        "/api/chains/support/labels/canary/",
        {"version": 1},
        ("change_chainlabel",),
        id="create-label",
    ),
    Write(
        "api-chain-label-rollback",
        "post",
        "/api/chains/support/labels/staging/rollback/",
        {},
        ("change_chainlabel",),
        id="rollback-staging",
    ),
    Write(
        "api-chain-label-rollback",
        "post",
        "/api/chains/support/labels/production/rollback/",
        {},
        ("change_chainlabel", "promote_production"),
        id="rollback-production",
    ),
    Write(
        "api-collection",
        "delete",
        "/api/collections/shared/",
        None,
        ("delete_collection",),
        204,
        "delete-shared-collection",
    ),
    Write(
        "api-document",
        "delete",
        "/api/documents/{shared_document}/",
        None,
        None,
        id="delete-shared-document",
    ),
    Write(
        "api-chain-experiments",
        "post",
        "/api/chains/support/experiments/",
        {
            "name": "new",
            "label": "staging",
            "arms": [
                {"name": "a", "version": 1, "weight": 5000},
                {"name": "b", "version": 2, "weight": 5000},
            ],
        },
        ("run_experiment",),
        201,
        "create-experiment",
    ),
    Write(
        "api-chain-online-evaluations",
        "post",
        "/api/chains/support/online-evaluations/",
        {"sample_rate": 0.5, "evaluators": [{"key": "contains", "params": {"strings": ["x"]}}]},
        ("add_onlineevaluation",),
        201,
        "create-online-evaluation",
    ),
    Write(
        "api-experiment",
        "patch",
        "/api/experiments/{draft_experiment}/",
        {"name": "renamed"},
        ("run_experiment",),
        id="change-experiment",
    ),
    Write(
        "api-experiment-start",
        "post",
        "/api/experiments/{draft_experiment}/start/",
        {},
        ("run_experiment", "change_chainlabel"),
        id="start-experiment",
    ),
    Write(
        "api-experiment-pause",
        "post",
        "/api/experiments/{running_experiment}/pause/",
        {},
        ("run_experiment",),
        id="pause-experiment",
    ),
    Write(
        "api-experiment-stop",
        "post",
        "/api/experiments/{running_experiment}/stop/",
        {},
        ("run_experiment",),
        id="stop-experiment",
    ),
    Write(
        "api-experiment-conclude",
        "post",
        "/api/experiments/{running_experiment}/conclude/",
        {"winner": "control"},
        ("run_experiment", "change_chainlabel", "promote_production"),
        id="conclude-experiment",
    ),
]

#: Writes on the caller's own rows, and chat turns: no model permission (why, per route).
OWN = {
    ("api-chain-call", "post"): "a chat turn on a chain the caller may call",
    ("api-chain-stream", "post"): "a chat turn on a chain the caller may call",
    ("api-chain-ag-ui", "post"): "a chat turn on a chain the caller may call (AG-UI)",
    ("api-chain-ai-sdk", "post"): "a chat turn on a chain the caller may call (AI SDK)",
    ("api-conversation", "patch"): "the caller's own conversation",
    ("api-conversation", "delete"): "the caller's own conversation",
    ("api-collections", "post"): "creates a collection the caller owns",
    ("api-collection", "delete"): "the caller's own collection (a shared one: WRITES)",
    ("api-documents", "post"): "uploads chunks the caller owns",
    ("api-documents-search", "post"): "a search: a read",
    ("api-document", "delete"): "the caller's own chunks (a shared one: WRITES)",
    ("api-approval-decision", "post"): "the caller's own approval (others': an approver's)",
    ("api-conversation-grant", "delete"): "a grant of the caller's own conversation",
    ("api-message-feedback", "put"): "a vote on a reply of the caller's own conversation",
    ("api-message-feedback", "delete"): "a vote on a reply of the caller's own conversation",
}

OWN_WRITES = [
    Write("api-chain-call", "post", "/api/chains/support/call/", {"message": "hi"}),
    Write("api-chain-stream", "post", "/api/chains/support/stream/", {"message": "hi"}),
    Write(
        "api-chain-ag-ui",
        "post",
        "/api/chains/support/ag-ui/",
        {"threadId": "t", "runId": "r", "messages": [{"id": "u", "role": "user", "content": "hi"}]},
    ),
    Write(
        "api-chain-ai-sdk",
        "post",
        "/api/chains/support/ai-sdk/",
        {
            "id": "c",
            "messages": [{"id": "u", "role": "user", "parts": [{"type": "text", "text": "hi"}]}],
        },
    ),
    Write("api-conversation", "patch", "/api/conversations/talk/", {"title": "Renamed"}),
    Write("api-conversation", "delete", "/api/conversations/talk/", None, ok=204),
    Write("api-collections", "post", "/api/collections/", {"slug": "more", "name": "M"}, ok=201),
    Write("api-collection", "delete", "/api/collections/mine/", None, ok=204),
    Write(
        "api-documents",
        "post",
        "/api/documents/",
        {"collection": "mine", "name": "a.md", "text": "A note."},
        ok=201,
    ),
    Write(
        "api-documents-search",
        "post",
        "/api/documents/search/",
        {"collection": "mine", "query": "note"},
    ),
    Write("api-document", "delete", "/api/documents/{own_document}/", None, ok=204),
    Write(
        "api-approval-decision",
        "post",
        "/api/approvals/{own_approval}/decision/",
        {"decision": "reject"},
        ok=202,
    ),
    Write("api-conversation-grant", "delete", "/api/conversations/talk/grants/t/", None, ok=204),
    Write(
        "api-message-feedback",
        "put",
        "/api/messages/{own_reply}/feedback/",
        {"key": "thumbs", "value": True},
        ok=201,
    ),
    Write("api-message-feedback", "delete", "/api/messages/{own_reply}/feedback/", None, ok=204),
]


def grant(user: Any, *codenames: str) -> Any:
    user.user_permissions.set(
        Permission.objects.filter(content_type__app_label="advisors_app", codename__in=codenames)
    )
    return type(user).objects.get(pk=user.pk)  # a fresh object: permissions are cached


@pytest.fixture
def world(bare_staff: Any) -> dict[str, Any]:
    """``support`` with versions 1 and 2 and a changed draft; ``production`` and ``staging``
    moved 1 → 2 (so both can roll back); a draft and a running experiment between them; a
    shared collection and document, the bare staff user's own collection, document and
    conversation."""
    chain = make_chain("support", model=scripted_model("support-model", responses=["Hi."]))
    v1 = chain.versions.get()
    AdvisorChain.objects.filter(pk=chain.pk).update(system_prompt="Be brief.")
    chain.refresh_from_db()
    v2, created = publish(chain, message="v2")
    assert created
    move_label(chain, "staging", v1)
    for name in ("production", "staging"):
        move_label(chain, name, v2)
    AdvisorChain.objects.filter(pk=chain.pk).update(system_prompt="Be briefer.")
    AdvisorConfig.objects.create(chain=chain, advisor_type="append", params={"text": "!"})
    shared = Collection.objects.create(slug="shared", name="Shared")
    ingest_text(shared, "policy.md", "Refunds take 5 days.")
    mine = Collection.objects.create(slug="mine", name="Mine", owner=bare_staff)
    ingest_text(mine, "note.md", "My own note.", owner=bare_staff)
    talk = Conversation.objects.create(conversation_id=f"{bare_staff.pk}:talk", owner=bare_staff)
    ToolApprovalGrant.objects.create(conversation=talk, tool="t", granted_by=bare_staff)
    call = {"id": "c1", "name": "t", "arguments": "{}", "type": "function"}
    paused = ChatMessage.objects.create(
        conversation=talk, sequence=1, message_type="assistant", tool_calls=[call]
    )
    approval = ToolApproval.objects.create(
        user=bare_staff,
        chain_slug="support",
        conversation=talk,
        message=paused,
        approval_id="c1",
        tool="t",
        arguments={},
        allowed_decisions=["approve", "reject"],
        expires_at=timezone.now() + timedelta(hours=1),
    )
    experiments = {}
    for status, label in (("draft", "staging"), ("running", "production")):
        experiment = Experiment.objects.create(chain=chain, name=status, status=status, label=label)
        for position, (name, version) in enumerate((("control", v1), ("candidate", v2))):
            ExperimentArm.objects.create(
                experiment=experiment, name=name, version=version, weight=5000, position=position
            )
        experiments[f"{status}_experiment"] = experiment.pk
    return {
        **experiments,
        "own_approval": approval.pk,
        "own_reply": paused.pk,
        "shared_document": Document.objects.get(collection=shared).pk,
        "own_document": Document.objects.get(collection=mine).pk,
    }


def state() -> tuple[Any, ...]:
    """What any of :data:`WRITES` would change."""
    return (
        list(AdvisorChain.objects.order_by("pk").values()),
        list(AdvisorConfig.objects.order_by("pk").values()),
        list(ChainVersion.objects.order_by("pk").values_list("pk", flat=True)),
        list(ChainLabel.objects.order_by("pk").values_list("name", "version_id")),
        ChainLabelEvent.objects.count(),
        list(Collection.objects.order_by("pk").values_list("slug", flat=True)),
        Document.objects.count(),
        list(Experiment.objects.order_by("pk").values_list("name", "status", "winner")),
    )


def write_routes() -> set[tuple[str, str]]:
    """``(route name, method)`` of every write the API's views answer."""
    found = set()
    for pattern in urlpatterns:
        view = getattr(getattr(pattern, "callback", None), "cls", None)
        if isinstance(pattern, URLPattern) and pattern.name and view is not None:
            found |= {(pattern.name, m) for m in WRITE_METHODS if hasattr(view, m)}
    return found


def test_every_write_route_is_classified() -> None:
    assert {(w.route, w.method) for w in WRITES} | set(OWN) == write_routes()
    assert {(w.route, w.method) for w in OWN_WRITES} == set(OWN)


@pytest.mark.parametrize("write", WRITES, ids=[w.id for w in WRITES])
def test_staff_without_the_permissions_get_403_and_change_nothing(
    write: Write, world: dict[str, Any], bare_staff: Any, django_user_model: Any
) -> None:
    before = state()
    refused = write.send(client_for(bare_staff), world)
    assert refused.status_code == 403, refused.content
    error = refused.json()["error"]
    assert error["code"] == "permission_denied"
    if write.needs:
        assert any(codename in error["message"] for codename in write.needs), error["message"]
    assert state() == before

    if write.needs is None:  # not even a superuser: only the admin deletes it
        root = django_user_model.objects.create_superuser("root", password="pw")
        assert write.send(client_for(root), world).status_code == 403
        assert state() == before
        return
    for missing in write.needs if len(write.needs) > 1 else ():
        partly = grant(bare_staff, *(c for c in write.needs if c != missing))
        response = write.send(client_for(partly), world)
        assert response.status_code == 403, (missing, response.content)
        assert missing in response.json()["error"]["message"]
        assert state() == before

    allowed = write.send(client_for(grant(bare_staff, *write.needs)), world)
    assert allowed.status_code == write.ok, allowed.content


@pytest.mark.parametrize("write", OWN_WRITES, ids=[f"{w.route}-{w.method}" for w in OWN_WRITES])
def test_staff_without_permissions_still_write_their_own_rows(
    write: Write, world: dict[str, Any], bare_staff: Any
) -> None:
    response = write.send(client_for(bare_staff), world)
    # Uploads answer 201 with the documents, or 202 with a job once ingestion is queued.
    accepted: Callable[[int], bool] = (
        (lambda s: s in (201, 202)) if write.route == "api-documents" else write.ok.__eq__
    )
    assert accepted(response.status_code), response.content


def test_the_admin_refuses_the_same_chain_delete(world: dict[str, Any], bare_staff: Any) -> None:
    """The admin's delete page asks the same: a chain's versions, labels and history too."""
    from django.test import Client

    editor = grant(bare_staff, "view_advisorchain", "change_advisorchain", "delete_advisorchain")
    browser = Client()
    browser.force_login(editor)
    chain = AdvisorChain.objects.get(slug="support")
    page = browser.post(f"/admin/advisors_app/advisorchain/{chain.pk}/delete/", {"post": "yes"})
    assert page.status_code == 403
    api = client_for(editor).delete("/api/chains/support/")
    assert api.status_code == 403
    assert "delete_chainversion" in api.json()["error"]["message"]
    assert AdvisorChain.objects.filter(slug="support").exists()
