"""Costs and budgets over every transport: the REST call, the SSE stream and the websocket.

A user whose ``block`` budget is used up is refused with ``budget_exceeded`` and the reset time
(REST and SSE: 429 with ``Retry-After``, before a stream opens; the websocket: an ``error``
frame); a refusal inside the chain (the next call's worst case does not fit) is a 429 for a call
and an ``error`` event or frame for a stream; a soft limit is a ``budget_warning`` event and the
``budget_warnings`` of the REST body and the ``done`` event; ``cost`` is in both.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from advisors_app.core import Usage
from advisors_app.core.testing import tool_call_response
from advisors_app.costs.budgets import clear_budget_cache, money, period_bounds
from advisors_app.costs.pricing import clear_price_cache
from advisors_app.definition.runtime import load_chain
from advisors_app.models import Budget, BudgetCounter, CallLog, ModelPrice
from advisorsite.asgi import application
from tests.factories import make_chain, scripted_model

pytestmark = pytest.mark.django_db(transaction=True)

ANSWER = "Fine."
#: A call whose message alone fits what :func:`nearly_used_up` leaves (40 answer tokens at 2
#: per million and the message's bound: 0.000104), while the whole prompt with :data:`SYSTEM`
#: does not (0.000209): it passes the check before the turn runs and is refused inside the
#: chain.
LARGE = {"params": {"options": {"max_tokens": 40}}}
#: The chains' system text: about 30 tokens.
SYSTEM = "Be brief. " * 10


@pytest.fixture(autouse=True)
def fresh_prices_and_budgets() -> Iterator[None]:
    clear_price_cache()
    clear_budget_cache()
    yield
    clear_price_cache()
    clear_budget_cache()


@pytest.fixture
def chain() -> Any:
    """A chain on a scripted model priced by an admin price: 1 per million input tokens,
    2 per million output tokens (USD)."""
    model = scripted_model("priced", responses=(ANSWER,))
    model.pricing = "manual"
    model.save()
    ModelPrice.objects.create(
        chat_model=model, input_per_million=Decimal(1), output_per_million=Decimal(2)
    )
    return make_chain(model=model, system_prompt=SYSTEM)


@pytest.fixture
def tool_chain() -> Any:
    """A chain with the calculator tool on a model priced as :func:`chain`'s; its first round
    asks for the tool and reports 900 completion tokens (0.0018 USD)."""
    model = scripted_model("priced-tools", responses=(), repeat=False)
    model.pricing = "manual"
    model.save()
    ModelPrice.objects.create(
        chat_model=model, input_per_million=Decimal(1), output_per_million=Decimal(2)
    )
    chain = make_chain("tools", model=model, advisors=(("tool_calling", {}),), tools=["calculator"])
    round_ = tool_call_response(("calculator", {"expression": "6 * 7"}), usage=Usage(50, 900))
    load_chain(chain.slug).client.chat_model.add(round_, "It is 42.")
    return chain


@pytest.fixture
def one_round(alice: Any) -> Budget:
    """Room for the first round's worst case (the prompt and 1,000 answer tokens: 0.002 and a
    little), not for the tool round's after it cost 0.00185."""
    return Budget.objects.create(
        name="daily", period="day", limit=Decimal("0.0025"), soft_limit_percent=None
    )


ONE_ROUND = {"message": "What is 6 * 7?", "params": {"options": {"max_tokens": 1000}}}


def spent(budget: Budget, user: Any, amount: Decimal) -> BudgetCounter:
    """``user``'s counter of ``budget`` with ``amount`` spent in the current period."""
    return BudgetCounter.objects.create(
        budget=budget,
        subject=f"user:{user.pk}",
        period_start=period_bounds(budget.period)[0],
        spent=amount,
    )


@pytest.fixture
def used_up(alice: Any) -> Budget:
    """A daily ``block`` budget for each user, which alice has used up."""
    budget = Budget.objects.create(name="daily", period="day", limit=Decimal("0.001"))
    spent(budget, alice, budget.limit)
    return budget


@pytest.fixture
def nearly_used_up(alice: Any) -> Budget:
    """A daily ``block`` budget with room for a short answer, not for :data:`LARGE`'s worst
    case: the turn passes the check before it runs and is refused inside the chain (no soft
    limit, so no warning comes first)."""
    budget = Budget.objects.create(
        name="daily", period="day", limit=Decimal("0.001"), soft_limit_percent=None
    )
    spent(budget, alice, Decimal("0.0008"))
    return budget


@pytest.fixture
def watched(alice: Any) -> Budget:
    """A ``warn`` budget alice is past the soft limit of (10 %) already."""
    budget = Budget.objects.create(
        name="watch", period="month", limit=Decimal("0.01"), soft_limit_percent=10, action="warn"
    )
    spent(budget, alice, Decimal("0.005"))
    return budget


def payload(event: dict[str, Any]) -> dict[str, Any]:
    """An event's payload without its type and event id (what the done event lists)."""
    return {k: v for k, v in event.items() if k not in ("type", "id", "event_id")}


def read_stream(response: Any) -> str:
    async def read() -> bytes:
        return b"".join([part async for part in response.streaming_content])

    return async_to_sync(read)().decode()


def parse_sse(body: str) -> list[tuple[str, dict[str, Any]]]:
    """``[(event type, data)]`` of a Server-Sent Events body (comments skipped)."""
    events = []
    for block in body.split("\n\n"):
        if block.strip() and not block.startswith(":"):
            fields = dict(line.split(": ", 1) for line in block.split("\n"))
            events.append((fields["event"], json.loads(fields["data"])))
    return events


def reset_at(budget: Budget) -> str:
    end = period_bounds(budget.period)[1]
    assert end is not None
    return end.isoformat()


def model_calls(slug: str) -> int:
    return len(load_chain(slug).client.chat_model.prompts)


def assert_refusal(error: dict[str, Any], budget: Budget) -> None:
    assert error["code"] == "budget_exceeded"
    assert error["reset_at"] == reset_at(budget)
    assert 1 <= error["retry_after"] <= 86400
    assert f"'{budget.name}'" in error["message"] and "resets at" in error["message"]


def expected_cost(log: CallLog) -> dict[str, Any]:
    return {
        "input": money(log.input_cost),
        "output": money(log.output_cost),
        "total": money(log.total_cost),
        "currency": "USD",
        "price_source": "override",
    }


# -- REST call --------------------------------------------------------------------------


def test_call_a_used_up_budget_is_a_429_with_the_reset_time(
    chain: Any, used_up: Budget, api: Any
) -> None:
    response = api.post(f"/api/chains/{chain.slug}/call/", {"message": "hi"}, format="json")
    assert response.status_code == 429, response.content
    error = response.json()["error"]
    assert_refusal(error, used_up)
    assert response["Retry-After"] == str(math.ceil(error["retry_after"]))
    assert model_calls(chain.slug) == 0
    assert not CallLog.objects.exists()  # refused before the turn ran


def test_call_refused_inside_the_chain_is_a_429_too(
    chain: Any, nearly_used_up: Budget, api: Any
) -> None:
    body = {"message": "hi", **LARGE}
    response = api.post(f"/api/chains/{chain.slug}/call/", body, format="json")
    assert response.status_code == 429, response.content
    error = response.json()["error"]
    assert_refusal(error, nearly_used_up)
    assert response["Retry-After"] == str(math.ceil(error["retry_after"]))
    assert model_calls(chain.slug) == 0  # refused before the model call
    log = CallLog.objects.get()
    assert (log.status, log.error_type) == ("error", "BudgetExceededError")
    assert error["trace_id"] == log.trace_id
    counter = BudgetCounter.objects.get(budget=nearly_used_up)
    assert (counter.spent, counter.reserved) == (Decimal("0.0008"), 0)
    # A short answer still fits.
    fits = {"message": "hi", "params": {"options": {"max_tokens": 5}}}
    assert api.post(f"/api/chains/{chain.slug}/call/", fits, format="json").status_code == 200


def test_call_refused_at_the_tool_round_is_a_429_and_pays_the_first_round(
    tool_chain: Any, one_round: Budget, api: Any
) -> None:
    response = api.post(f"/api/chains/{tool_chain.slug}/call/", ONE_ROUND, format="json")
    assert response.status_code == 429, response.content
    assert_refusal(response.json()["error"], one_round)
    assert model_calls(tool_chain.slug) == 1  # the tool round was refused before its call
    log = CallLog.objects.get()
    assert log.total_cost == (50 * 1 + 900 * 2) / Decimal(1_000_000)
    assert len(log.cost_rounds) == 1
    counter = BudgetCounter.objects.get(budget=one_round)
    assert (counter.spent, counter.reserved) == (log.total_cost, 0)


def test_call_body_has_the_cost_and_the_budget_warnings(
    chain: Any, watched: Budget, api: Any
) -> None:
    response = api.post(f"/api/chains/{chain.slug}/call/", {"message": "hi"}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    log = CallLog.objects.get(trace_id=body["trace_id"])
    assert log.total_cost is not None and log.total_cost > 0
    assert body["cost"] == expected_cost(log)
    (warning,) = body["budget_warnings"]
    assert warning == {
        "budget": "watch",
        "spent": warning["spent"],
        "limit": "0.01",
        "currency": "USD",
        "percent": warning["percent"],
        "reset_at": reset_at(watched),
        "over_limit": False,
        "downgraded_to": None,
    }
    assert Decimal(warning["spent"]) >= Decimal("0.005") and warning["percent"] >= 50


# -- SSE stream -------------------------------------------------------------------------


def test_stream_a_used_up_budget_is_refused_before_the_stream_opens(
    chain: Any, used_up: Budget, api: Any
) -> None:
    response = api.post(f"/api/chains/{chain.slug}/stream/", {"message": "hi"}, format="json")
    assert response.status_code == 429
    assert response["Content-Type"] == "application/json"
    error = response.json()["error"]
    assert_refusal(error, used_up)
    assert response["Retry-After"] == str(math.ceil(error["retry_after"]))
    assert not CallLog.objects.exists()


def test_stream_refused_inside_the_chain_ends_with_an_error_event(
    chain: Any, nearly_used_up: Budget, api: Any
) -> None:
    body = {"message": "hi", **LARGE}
    response = api.post(f"/api/chains/{chain.slug}/stream/", body, format="json")
    assert response.status_code == 200  # the stream had opened
    events = parse_sse(read_stream(response))
    assert [kind for kind, _ in events] == ["start", "error"]
    error = events[-1][1]
    assert_refusal(error, nearly_used_up)
    assert error["trace_id"] == events[0][1]["trace_id"]
    assert model_calls(chain.slug) == 0
    assert CallLog.objects.get().status == "error"


def test_stream_refused_at_the_tool_round_ends_with_an_error_event(
    tool_chain: Any, one_round: Budget, api: Any
) -> None:
    response = api.post(f"/api/chains/{tool_chain.slug}/stream/", ONE_ROUND, format="json")
    events = parse_sse(read_stream(response))
    assert [kind for kind, _ in events] == ["start", "tool_call", "tool_result", "error"]
    assert_refusal(events[-1][1], one_round)
    assert events[1][1]["name"] == "calculator" and events[2][1]["ok"] is True


def test_stream_warns_after_start_and_the_done_event_has_the_cost(
    chain: Any, watched: Budget, api: Any
) -> None:
    response = api.post(f"/api/chains/{chain.slug}/stream/", {"message": "hi"}, format="json")
    events = parse_sse(read_stream(response))
    kinds = [kind for kind, _ in events]
    assert (kinds[:2], kinds[-1]) == (["start", "budget_warning"], "done")
    assert kinds.count("budget_warning") == 1
    warning = events[1][1]
    assert (warning["budget"], warning["limit"], warning["reset_at"]) == (
        "watch",
        "0.01",
        reset_at(watched),
    )
    done = events[-1][1]
    assert done["budget_warnings"] == [payload(warning)]
    assert done["content"] == ANSWER
    assert done["cost"] == expected_cost(CallLog.objects.get(trace_id=done["trace_id"]))


# -- websocket --------------------------------------------------------------------------


@sync_to_async
def session_cookie(user: Any) -> tuple[bytes, bytes]:
    client = Client()
    client.force_login(user)
    return (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())


async def turn_frames(user: Any, frame: dict[str, Any]) -> list[dict[str, Any]]:
    """The frames answering ``frame`` on a new socket of ``user``, up to ``done`` or
    ``error`` (``conversation`` frames skipped)."""
    headers = [(b"host", b"127.0.0.1:8000"), (b"origin", b"http://127.0.0.1:8000")]
    headers.append(await session_cookie(user))
    communicator = WebsocketCommunicator(application, "/ws/chat/support/", headers=headers)
    connected, _ = await communicator.connect()
    assert connected
    try:
        await communicator.send_json_to(frame)
        frames = []
        while not frames or frames[-1]["type"] not in ("done", "error"):
            received = await communicator.receive_json_from(timeout=5)
            if received["type"] != "conversation":
                frames.append(received)
        return frames
    finally:
        await communicator.disconnect()


async def test_websocket_a_used_up_budget_is_an_error_frame(
    chain: Any, used_up: Budget, alice: Any
) -> None:
    frames = await turn_frames(alice, {"type": "message", "message": "hi"})
    assert [f["type"] for f in frames] == ["error"]
    assert_refusal(frames[0], used_up)
    assert not await CallLog.objects.aexists()


async def test_websocket_refused_inside_the_chain_is_an_error_frame(
    chain: Any, nearly_used_up: Budget, alice: Any
) -> None:
    frames = await turn_frames(alice, {"type": "message", "message": "hi", **LARGE})
    assert [f["type"] for f in frames] == ["start", "error"]
    assert_refusal(frames[-1], nearly_used_up)
    assert frames[-1]["trace_id"] == frames[0]["trace_id"]
    assert (await CallLog.objects.aget()).status == "error"


async def test_websocket_warns_after_start_and_the_done_frame_has_the_cost(
    chain: Any, watched: Budget, alice: Any
) -> None:
    frames = await turn_frames(alice, {"type": "message", "message": "hi"})
    kinds = [f["type"] for f in frames]
    assert (kinds[:2], kinds[-1]) == (["start", "budget_warning"], "done")
    assert kinds.count("budget_warning") == 1
    warning, done = frames[1], frames[-1]
    assert (warning["budget"], warning["reset_at"]) == ("watch", reset_at(watched))
    assert done["budget_warnings"] == [payload(warning)]
    log = await CallLog.objects.aget(trace_id=done["trace_id"])
    assert done["cost"] == expected_cost(log)
