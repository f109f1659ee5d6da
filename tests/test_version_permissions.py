"""Drafts and versions other than production are for staff who may view (or change) chains, on
every transport (issue 36 item 6): staff without the model permission get 403
``permission_denied`` over REST, SSE and the websocket as a user does; MCP takes no version at
all. With ``view_advisorchain`` staff run them; users keep production."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from advisors_app.definition import publish
from advisors_app.definition.runtime import clear_cache
from advisors_app.models import AdvisorChain, CallLog
from advisors_app.turn.choose import may_try_versions
from tests.factories import make_chain, scripted_model
from tests.test_consumers import open_socket

pytestmark = pytest.mark.django_db(transaction=True)

CHOICES = ({"version": "draft"}, {"version": 1})


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    clear_cache()
    yield
    clear_cache()


@pytest.fixture
def chain() -> AdvisorChain:
    """Version 1 answers "one", version 2 (production) "two", the draft "draft"."""
    from advisors_app.definition import move_label

    chain = make_chain("gated", model=scripted_model("g-one", responses=("one",)))
    chain.chat_model = scripted_model("g-two", responses=("two",))
    chain.save()
    two, _ = publish(chain, message="answers two")
    move_label(chain, "production", two)
    chain.chat_model = scripted_model("g-draft", responses=("draft",))
    chain.save()
    return chain


@pytest.fixture
def bare_staff(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("sam", password="pw", is_staff=True)


def viewer(django_user_model: Any, codename: str) -> Any:
    user = django_user_model.objects.create_user(codename, password="pw", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename=codename))
    return user


def rest(user: Any, path: str, **choice: Any) -> Any:
    client = Client()
    client.force_login(user)
    return client.post(
        f"/api/chains/gated/{path}/", {"message": "hi", **choice}, content_type="application/json"
    )


def test_staff_without_the_permission_are_refused_over_rest_and_sse(
    chain: AdvisorChain, bare_staff: Any
) -> None:
    for path in ("call", "stream"):
        for choice in CHOICES:
            answer = rest(bare_staff, path, **choice)
            assert answer.status_code == 403, (path, choice)
            assert answer.json()["error"]["code"] == "permission_denied"
    assert rest(bare_staff, "call").json()["content"] == "two"  # production, as anyone
    assert CallLog.objects.count() == 1


def test_staff_who_may_view_or_change_chains_run_drafts_and_versions(
    chain: AdvisorChain, django_user_model: Any
) -> None:
    for codename in ("view_advisorchain", "change_advisorchain"):
        staff = viewer(django_user_model, codename)
        assert may_try_versions(staff)
        assert rest(staff, "call", version="draft").json()["content"] == "draft"
        assert rest(staff, "call", version=1).json()["content"] == "one"
        assert rest(staff, "stream", version=1).status_code == 200


def test_users_keep_production_even_with_the_permission(
    chain: AdvisorChain, django_user_model: Any
) -> None:
    user = django_user_model.objects.create_user("alice", password="pw")
    user.user_permissions.add(Permission.objects.get(codename="view_advisorchain"))
    assert not may_try_versions(user)  # not staff
    for choice in CHOICES:
        answer = rest(user, "call", **choice)
        assert (answer.status_code, answer.json()["error"]["code"]) == (403, "permission_denied")
    assert rest(user, "call").json()["content"] == "two"


async def test_staff_without_the_permission_are_refused_on_the_websocket(
    chain: AdvisorChain, bare_staff: Any
) -> None:
    socket = await open_socket(bare_staff, "gated")
    try:
        for choice in CHOICES:
            await socket.send_json_to({"type": "message", "text": "hi", **choice})
            frame = await socket.receive_json_from(timeout=10)
            assert (frame["type"], frame["code"]) == ("error", "permission_denied")
    finally:
        await socket.disconnect()
    assert await CallLog.objects.acount() == 0


async def test_the_websocket_runs_a_draft_for_staff_who_may_view_chains(
    chain: AdvisorChain, django_user_model: Any
) -> None:
    from asgiref.sync import sync_to_async

    staff = await sync_to_async(viewer)(django_user_model, "view_advisorchain")
    socket = await open_socket(staff, "gated")
    try:
        await socket.send_json_to({"type": "message", "text": "hi", "version": "draft"})
        frames = [await socket.receive_json_from(timeout=10)]
        while frames[-1]["type"] not in ("done", "error"):
            frames.append(await socket.receive_json_from(timeout=10))
        assert frames[-1]["type"] == "done" and frames[-1]["content"] == "draft"
    finally:
        await socket.disconnect()
