"""A chain with no published version is nobody's business but staff's (issue 36): users do not
see its name or description in the REST chain list and detail, the chat page's chain picker or
the MCP server's tool list; staff who may view chains keep seeing its draft where they did."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from advisors_app.mcp_server.chains import chain_for_tool, chain_tools
from advisors_app.models import ChainLabel
from tests.api.conftest import client_for
from tests.factories import make_chain

pytestmark = pytest.mark.django_db

SECRET = "Merger plans for Q3 (not announced)."


@pytest.fixture
def chains() -> None:
    make_chain("support", description="Help desk.")
    make_chain("merger", description=SECRET, publish=False)
    # Published once, then its production label taken away: nothing serves users either.
    ChainLabel.objects.filter(chain=make_chain("withdrawn", description=SECRET)).delete()


@pytest.fixture
def viewer(django_user_model: Any) -> Any:
    """Staff who may view chains (what the admin's chain pages ask for reading)."""
    user = django_user_model.objects.create_user("viewer", password="pw", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_advisorchain"))
    return user


def logged_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_users_list_and_read_only_chains_with_a_production_version(
    chains: None, api: Any, bare_staff: Any
) -> None:
    for caller in (api, client_for(bare_staff)):
        listed = caller.get("/api/chains/")
        assert [c["slug"] for c in listed.json()["results"]] == ["support"]
        assert SECRET not in listed.content.decode()
        for slug in ("merger", "withdrawn"):
            hidden = caller.get(f"/api/chains/{slug}/")
            missing = caller.get("/api/chains/no-such-chain/")
            assert hidden.status_code == missing.status_code == 404
            assert SECRET not in hidden.content.decode()


def test_staff_who_may_view_chains_still_see_drafts(chains: None, viewer: Any) -> None:
    listed = client_for(viewer).get("/api/chains/").json()["results"]
    assert [c["slug"] for c in listed] == ["merger", "support", "withdrawn"]
    draft = client_for(viewer).get("/api/chains/merger/").json()
    assert draft["description"] == SECRET and draft["labels"] == {}


def test_the_chat_pages_picker_offers_users_only_published_chains(
    chains: None, alice: Any, viewer: Any
) -> None:
    response = logged_in(alice).get("/chat/?chain=merger")
    assert [c["slug"] for c in response.context["chains"]] == ["support"]
    assert response.context["chain"] == "support"
    page = response.content.decode()
    assert SECRET not in page and "Merger" not in page and "Withdrawn" not in page
    staff_page = logged_in(viewer).get("/chat/")
    assert [c["slug"] for c in staff_page.context["chains"]] == ["merger", "support", "withdrawn"]


def test_mcp_offers_only_published_chains_to_everyone(
    chains: None, alice: Any, viewer: Any
) -> None:
    for user in (alice, viewer):
        tools = chain_tools(user)
        assert [t.slug for t in tools] == ["support"]
        assert all(SECRET not in t.description for t in tools)
        assert chain_for_tool(user, "ask_merger") is None
        assert chain_for_tool(user, "ask_withdrawn") is None


def test_running_a_chain_nobody_published_answers_as_a_missing_chain(
    chains: None, api: Any, bare_staff: Any, viewer: Any
) -> None:
    """A user's turn on an unpublished chain learns nothing of it (no "publish it in the admin"
    hint): the same code and message as a slug that does not exist, with the slug asked."""
    for caller in (api, client_for(bare_staff)):
        for slug in ("merger", "no-such-chain"):
            answer = caller.post(
                f"/api/chains/{slug}/call/", {"message": "hi"}, content_type="application/json"
            )
            assert answer.status_code == 404
            assert answer.json()["error"]["code"] == "chain_not_found"
            assert "publish" not in answer.content.decode()
    told = client_for(viewer).post(
        "/api/chains/merger/call/", {"message": "hi"}, content_type="application/json"
    )
    assert told.json()["error"]["code"] == "version_not_found"
