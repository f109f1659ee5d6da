"""The MCP endpoint in process: the site's ASGI application driven by the SDK's client over
``httpx2.ASGITransport`` (no server process), for what needs this process's settings and
caches — the setting that turns the endpoint off, ``ALLOWED_HOSTS``, budgets — and the tool
names and schemas of :mod:`advisors_app.mcp_server.chains`."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from decimal import Decimal
from typing import Any, TypeVar

import httpx2
import pytest
from asgiref.sync import sync_to_async
from django.test import override_settings
from mcp.client import ClientSession
from mcp.client.streamable_http import streamable_http_client

from advisors_app.costs.budgets import clear_budget_cache, period_bounds
from advisors_app.costs.pricing import clear_price_cache
from advisors_app.mcp_server import stop_endpoints
from advisors_app.mcp_server.chains import MAX_TOOL_NAME, input_schema, tool_names
from advisors_app.models import Budget, BudgetCounter, CallLog, ModelPrice
from advisorsite.asgi import application
from tests.factories import make_chain, scripted_model
from tests.mcp_server.conftest import INITIALIZE_BODY, token_of

T = TypeVar("T")
HEADERS = {"Accept": "application/json, text/event-stream"}
ENABLED = {"MCP_ENDPOINT_ENABLED": True}


@pytest.fixture(autouse=True)
async def stopped_endpoint() -> AsyncIterator[None]:
    """Each test's event loop gets its own session manager; stop it with the loop."""
    yield
    await stop_endpoints()


def client(**headers: str) -> httpx2.AsyncClient:
    transport = httpx2.ASGITransport(app=application)
    return httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1", headers=headers)


async def in_process(token: str, use: Callable[[ClientSession], Awaitable[T]]) -> T:
    async with (
        client(Authorization=f"Token {token}") as http,
        streamable_http_client("http://127.0.0.1/mcp/", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        return await use(session)


@pytest.mark.django_db
@override_settings(ADVISORS={"MCP_ENDPOINT_ENABLED": False})
async def test_off_the_endpoint_answers_404_as_if_not_mounted() -> None:
    async with client() as http:
        answer = await http.post("/mcp/", json=INITIALIZE_BODY, headers=HEADERS)
    assert answer.status_code == 404
    assert answer.json()["error"]["code"] == "not_found"


@pytest.mark.django_db
@override_settings(ADVISORS=ENABLED, ALLOWED_HOSTS=["advisors.example"])
async def test_a_host_outside_allowed_hosts_is_refused() -> None:
    async with client(Authorization="Token whatever") as http:
        answer = await http.post("/mcp/", json=INITIALIZE_BODY, headers=HEADERS)
    assert answer.status_code == 400
    assert "ALLOWED_HOSTS" in answer.json()["error"]["message"]


@pytest.fixture
def fresh_budgets() -> Iterator[None]:
    clear_price_cache()
    clear_budget_cache()
    yield
    clear_price_cache()
    clear_budget_cache()


@pytest.fixture
def used_up(fresh_budgets: None, django_user_model: Any) -> str:
    """A priced chain and a daily budget carol has used up; her token."""
    carol = django_user_model.objects.create_user("carol", password="pw")
    model = scripted_model("priced", responses=("Fine.",))
    model.pricing = "manual"
    model.save()
    ModelPrice.objects.create(
        chat_model=model, input_per_million=Decimal(1), output_per_million=Decimal(2)
    )
    make_chain("priced", model=model)
    budget = Budget.objects.create(name="daily", period="day", limit=Decimal("0.001"))
    BudgetCounter.objects.create(
        budget=budget,
        subject=f"user:{carol.pk}",
        period_start=period_bounds(budget.period)[0],
        spent=budget.limit,
    )
    return token_of(carol)


@pytest.mark.django_db(transaction=True)
@override_settings(ADVISORS=ENABLED)
async def test_a_used_up_budget_is_a_tool_error(used_up: str) -> None:
    result = await in_process(used_up, lambda s: s.call_tool("ask_priced", {"message": "Hi"}))
    assert result.is_error
    assert result.structured_content["code"] == "budget_exceeded"
    assert result.structured_content["reset_at"]
    assert "Retry after" in result.content[0].text
    assert not await CallLog.objects.aexists()


def test_tool_names_are_valid_for_models_and_unique() -> None:
    long = "x" * 100
    names = tool_names(["help-desk", "a-b", "a_b", long, "plain"])
    assert set(names.values()) == {"help-desk", "a-b", "a_b", long, "plain"}
    assert names["ask_help_desk"] == "help-desk"
    assert names["ask_plain"] == "plain"
    assert "ask_a_b" not in names  # two slugs would share it: both get their own suffix
    assert all(len(name) <= MAX_TOOL_NAME for name in names)
    assert all(name.replace("_", "").isalnum() for name in names)
    # A name depends on its slug alone, not on the other chains.
    assert tool_names([long]) == {n: s for n, s in names.items() if s == long}


def test_the_input_schema_takes_message_conversation_and_params_only() -> None:
    schema = input_schema({"type": "object", "properties": {"options": {"type": "object"}}})
    assert schema["required"] == ["message"]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["params"]["properties"] == {"options": {"type": "object"}}
    assert schema["properties"]["message"]["maxLength"] == 8000


@pytest.mark.django_db
@override_settings(ADVISORS=ENABLED, ALLOWED_HOSTS=["advisors.example"], USE_X_FORWARDED_HOST=True)
async def test_behind_a_proxy_the_forwarded_host_is_checked() -> None:
    async with client(**{"X-Forwarded-Host": "advisors.example"}) as http:
        answer = await http.post("/mcp/", json=INITIALIZE_BODY, headers=HEADERS)
    assert answer.status_code == 401  # past the host check, refused for want of a token


@pytest.mark.django_db(transaction=True)
@override_settings(ADVISORS=ENABLED)
async def test_a_bad_token_is_called_invalid_and_get_is_405(django_user_model: Any) -> None:
    async with client(Authorization="Token not-a-token") as http:
        bad = await http.post("/mcp/", json=INITIALIZE_BODY, headers=HEADERS)
    assert bad.status_code == 401 and "Invalid token" in bad.json()["error"]["message"]
    async with client() as http:
        missing = await http.post("/mcp/", json=INITIALIZE_BODY, headers=HEADERS)
    assert "Send your API token" in missing.json()["error"]["message"]

    dave = await django_user_model.objects.acreate(username="dave")
    token = await sync_to_async(token_of)(dave)
    async with client(Authorization=f"Token {token}") as http:
        for method in ("GET", "DELETE"):
            # Answered at once: no endless keep-alive stream.
            answer = await http.request(method, "/mcp/", headers=HEADERS, timeout=5)
            assert answer.status_code == 405 and answer.headers["Allow"] == "POST"
            assert answer.json()["error"]["code"] == "method_not_allowed"
