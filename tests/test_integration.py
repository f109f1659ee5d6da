"""The Python API for projects (``advisors_app.integration``), from synchronous code and from
async code: run a chain (call and stream), publish its draft, promote a version — and the two
views of docs/integration.md (``tests/integration_views.py``) served by Django."""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Permission
from django.core.exceptions import PermissionDenied, ValidationError
from django.test import AsyncClient, Client

from advisors_app.definition.runtime import ChainNotFound, clear_cache
from advisors_app.definition.versions import PublishError, VersionLookupError
from advisors_app.exceptions import TurnError
from advisors_app.integration import (
    acall_chain,
    apromote,
    apublish_chain,
    astream_chain,
    call_chain,
    promote,
    publish_chain,
    stream_chain,
)
from advisors_app.models import (
    AdvisorChain,
    CallLog,
    ChainLabel,
    ChainLabelEvent,
    Conversation,
)
from tests.factories import make_chain, scripted_model

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    clear_cache()
    yield
    clear_cache()


@pytest.fixture
def user(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("alice", password="pw")


@pytest.fixture
def chain() -> AdvisorChain:
    """``helper``: a published chain (v1, ``production``) answering ``Hello!`` in two chunks."""
    model = scripted_model("helper-model", responses=[["Hel", "lo!"]])
    return make_chain("helper", model=model, system_prompt="Be brief.")


def allow(user: Any, *codenames: str) -> Any:
    perms = Permission.objects.filter(
        content_type__app_label="advisors_app", codename__in=codenames
    )
    user.user_permissions.add(*perms)
    return type(user).objects.get(pk=user.pk)  # permissions are cached on the instance


def change_draft(chain: AdvisorChain, text: str) -> None:
    chain.system_prompt = text
    chain.save()


# -- sync ------------------------------------------------------------------------------------


def test_sync_call_answers_stores_the_turn_for_the_user_and_continues_it(
    chain: AdvisorChain, user: Any
) -> None:
    outcome = call_chain("helper", user, "hi")
    assert outcome.content == "Hello!" and outcome.stored and outcome.version == 1
    conversation = Conversation.objects.get(owner=user)  # stored under the owner's namespace
    again = call_chain("helper", user, "more", conversation_id=outcome.conversation_id)
    assert again.conversation_id == outcome.conversation_id
    assert conversation.messages.count() == 4


def test_sync_stream_yields_the_events_and_close_stops_the_turn(
    chain: AdvisorChain, user: Any
) -> None:
    events = stream_chain("helper", user, "hi")
    assert events.conversation_id and events.chain == "helper"
    kinds = [(e.type, getattr(e, "text", None)) for e in events]
    assert kinds == [("start", None), ("delta", "Hel"), ("delta", "lo!"), ("done", None)]
    assert events.final_event.outcome.content == "Hello!"
    with stream_chain("helper", user, "again") as early:
        assert next(early).type == "start"
    # Stopped before the chain ran, and finished as a cancel: logged, nothing left behind.
    assert early.final_event.reason == "cancelled"
    assert CallLog.objects.get(trace_id=early.trace_id).status == "cancelled"
    assert Conversation.objects.count() == 1


def test_sync_refusals_raise_before_anything_runs(chain: AdvisorChain, user: Any) -> None:
    with pytest.raises(TurnError) as refused:
        call_chain("nope", user, "hi")
    assert (refused.value.code, refused.value.http_status) == ("chain_not_found", 404)
    with pytest.raises(TurnError) as blank:
        stream_chain("helper", user, "   ")
    assert blank.value.http_status == 400 and "message" in blank.value.fields
    assert not Conversation.objects.exists()


def test_sync_publish_and_promote(chain: AdvisorChain, user: Any) -> None:
    version, created = publish_chain("helper", message="unchanged")
    assert (version.number, created) == (1, False)
    change_draft(chain, "Be very brief.")
    version, created = publish_chain("helper", message="briefer")
    assert (version.number, created) == (2, True)
    staging = promote("helper", 2, label="staging", reason="try it")
    assert (staging.name, staging.version.number) == ("staging", 2)
    production = promote("helper", "staging")  # what staging serves
    assert production.version.number == 2
    assert call_chain("helper", user, "hi").version == 2
    event = ChainLabelEvent.objects.filter(label=production).latest("at")
    assert (event.from_version.number, event.to_version.number, event.actor) == (1, 2, None)


def test_sync_publish_and_promote_refusals(chain: AdvisorChain, user: Any) -> None:
    with pytest.raises(ChainNotFound):
        publish_chain("nope")
    with pytest.raises(PermissionDenied):
        publish_chain("helper", user=user)
    change_draft(chain, "Other.")
    version, created = publish_chain("helper", user=allow(user, "add_chainversion"))
    assert created and version.created_by == user
    mover = allow(user, "change_chainlabel")
    assert promote("helper", 2, label="staging", user=mover).version.number == 2
    with pytest.raises(PermissionDenied):  # production also needs promote_production
        promote("helper", 2, user=mover)
    with pytest.raises(VersionLookupError):
        promote("helper", 9)
    with pytest.raises(VersionLookupError):
        promote("helper", "canary")
    with pytest.raises(ValidationError):
        promote("helper", 2, label="draft")
    assert ChainLabel.objects.get(chain=chain, name="production").version.number == 1
    chain.advisors.create(advisor_type="no_such_type", params={})
    with pytest.raises(PublishError) as broken:
        publish_chain("helper")
    assert broken.value.fields["draft"]


def test_the_documented_sync_view(chain: AdvisorChain, user: Any, settings: Any) -> None:
    settings.ROOT_URLCONF = "tests.integration_views"
    client = Client()
    client.force_login(user)
    response = client.post("/ask/", {"message": "hi"})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["answer"] == "Hello!"
    follow = client.post("/ask/", {"message": "and?", "conversation_id": body["conversation_id"]})
    assert follow.json()["conversation_id"] == body["conversation_id"]
    refused = client.post("/ask/", {"message": ""})
    assert refused.status_code == 400 and "message" in refused.json()["fields"]


# -- async -----------------------------------------------------------------------------------


async def test_async_call_and_stream(chain: AdvisorChain, user: Any) -> None:
    outcome = await acall_chain("helper", user, "hi", params={"options": {"max_tokens": 16}})
    assert outcome.content == "Hello!" and outcome.stored
    stream = await astream_chain("helper", user, "more", conversation_id=outcome.conversation_id)
    async with stream:
        types = [event.type async for event in stream]
    assert types == ["start", "delta", "delta", "done"]
    assert stream.final_event.conversation_id == outcome.conversation_id
    with pytest.raises(TurnError):
        await acall_chain("helper", user, "hi", version=7)


async def test_async_publish_and_promote(chain: AdvisorChain, user: Any) -> None:
    await sync_to_async(change_draft)(chain, "Be very brief.")
    version, created = await apublish_chain("helper", message="briefer")
    assert (version.number, created) == (2, True)
    label = await apromote("helper", 2, reason="better")
    assert label.version_id == version.pk
    assert (await acall_chain("helper", user, "hi")).version == 2
    with pytest.raises(PermissionDenied):
        await apromote("helper", 1, user=user)


async def test_the_documented_async_view(chain: AdvisorChain, user: Any, settings: Any) -> None:
    settings.ROOT_URLCONF = "tests.integration_views"
    client = AsyncClient()
    assert (await client.post("/ask-stream/", {"message": "hi"})).status_code == 401
    await sync_to_async(client.force_login)(user)
    response = await client.post("/ask-stream/", {"message": "hi"})
    assert response.status_code == 200
    body = b"".join([part async for part in response.streaming_content]).decode()
    events = [json.loads(line) for line in body.splitlines()]
    assert [e["type"] for e in events] == ["start", "delta", "delta", "done"]
    assert events[-1]["content"] == "Hello!"
    refused = await client.post("/ask-stream/", {"message": ""})
    assert refused.status_code == 400


def test_the_views_tested_here_are_the_ones_the_page_shows() -> None:
    root = Path(__file__).resolve().parents[1]
    page = (root / "docs" / "integration.md").read_text()
    shown = {}
    for block in page.split("\n```python\n")[1:]:  # the top-level blocks
        for node in ast.parse(block.split("```")[0]).body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                shown[node.name] = ast.dump(node)
    tested = {
        node.name: ast.dump(node)
        for node in ast.parse((root / "tests" / "integration_views.py").read_text()).body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    assert set(tested) == {"ask", "ask_stream"}
    for name, code in tested.items():
        assert shown[name] == code, name


async def test_the_documented_sync_view_under_asgi(
    chain: AdvisorChain, user: Any, settings: Any
) -> None:
    """A sync view served by the ASGI handler runs in a worker thread of the server's loop:
    ``call_chain`` runs the turn on that loop, its database work back on the view's thread."""
    settings.ROOT_URLCONF = "tests.integration_views"
    client = AsyncClient()
    await sync_to_async(client.force_login)(user)
    response = await client.post("/ask/", {"message": "hi"})
    assert response.status_code == 200, response.content
    assert response.json()["answer"] == "Hello!"
