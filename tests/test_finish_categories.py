"""Finish categories (issue 43): every category from its cause, beside the raw reason on the
call body, the ``done`` event (SSE and websocket), the stored reply and the call log.

The guard advisor's rails (``guardrail``, ``approval_required``) over every transport are in
``tests/test_guard_rails.py``; cancelled streams in ``tests/test_turn_events.py`` and
``tests/test_consumers.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from advisors_app.core import ChatResponse, ProviderUnavailableError, ScriptedChatModel
from advisors_app.core.finish_reasons import FinishReasonCategory, finish_category
from advisors_app.core.testing import tool_call_response
from advisors_app.definition.runtime import load_chain
from advisors_app.models import CallLog, ChatMessage
from tests.api.conftest import client_for
from tests.api.views.test_chat import parse_sse, read_stream
from tests.factories import make_chain, scripted_model
from tests.test_consumers import frames_until_end, open_socket

C = FinishReasonCategory


@pytest.mark.parametrize(
    ("raw", "metadata", "category"),
    [
        ("STOP", None, C.STOP),
        ("end_turn", None, C.STOP),
        ("something_new", None, C.STOP),
        ("LENGTH", None, C.LENGTH),
        ("max_tokens", None, C.LENGTH),
        ("toolCallLimitExceeded", None, C.LENGTH),
        ("TOOL_CALLS", None, C.TOOL_CALLS),
        ("tool_use", None, C.TOOL_CALLS),
        ("CONTENT_FILTER", None, C.CONTENT_FILTER),
        ("CONTENT_FILTER", {"model": "gpt"}, C.CONTENT_FILTER),
        ("SAFETY", None, C.CONTENT_FILTER),
        ("CONTENT_FILTER", {"guard_refusal": {"code": "guard_blocked"}}, C.GUARDRAIL),
        ("CONTENT_FILTER", {"guard_held": {"rail": "output"}}, C.GUARDRAIL),
        ("CONTENT_FILTER", {"safeguard_stage": "input"}, C.GUARDRAIL),
        ("BUDGET_EXCEEDED", None, C.GUARDRAIL),
        ("APPROVAL_REQUIRED", None, C.APPROVAL_REQUIRED),
        ("cancelled", None, C.CANCELLED),
        ("error", None, C.ERROR),
    ],
)
def test_each_raw_reason_has_its_category(raw: str, metadata: Any, category: C) -> None:
    assert finish_category(raw, metadata) is category


def test_no_reason_has_no_category() -> None:
    assert finish_category(None) is None and finish_category("") is None


pytestmark_db = pytest.mark.django_db(transaction=True)

#: What the scripted model answers → (raw reason, category).
CASES = {
    "stop": ("Fine.", "STOP", "stop"),
    "length": (ChatResponse.of_text("Cut", finish_reason="LENGTH"), "LENGTH", "length"),
    # A chain without a tool loop hands the model's calls back to the caller.
    "tool_calls": (
        tool_call_response(("calculator", {"expression": "1+1"})),
        "TOOL_CALLS",
        "tool_calls",
    ),
    "content_filter": (
        ChatResponse.of_text("", finish_reason="CONTENT_FILTER"),
        "CONTENT_FILTER",
        "content_filter",
    ),
}


@pytest.fixture
def alice(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("alice", password="pw")


@pytest.fixture
def chains(fresh_chain_cache: Any) -> None:
    make_chain("plain", model=scripted_model("plain-model", responses=(), repeat=False))
    make_chain(
        "safe",
        model=scripted_model("safe-model", responses=("Sure.",)),
        advisors=(("safe_guard", {"words": ["keylogger"]}), ("message_chat_memory", {})),
    )


def script(slug: str, *items: Any) -> None:
    model: ScriptedChatModel = load_chain(slug).client.chat_model  # type: ignore[assignment]
    model.add(*items)


async def over(transport: str, user: Any, slug: str, message: str) -> dict[str, Any]:
    """The turn's final payload: the call body, or the ``done``/``error`` event."""
    if transport == "websocket":
        communicator = await open_socket(user, slug)
        try:
            await communicator.send_json_to({"type": "message", "message": message})
            return (await frames_until_end(communicator))[-1]
        finally:
            await communicator.disconnect()

    def post() -> dict[str, Any]:
        mode = "call" if transport == "rest" else "stream"
        response = client_for(user).post(
            f"/api/chains/{slug}/{mode}/", {"message": message}, format="json"
        )
        if mode == "call":
            return response.json()
        return parse_sse(read_stream(response))[-1][1]

    return await sync_to_async(post)()


def logged(trace_id: str) -> tuple[str, str]:
    log = CallLog.objects.get(trace_id=trace_id)
    return log.finish_reason, log.finish_category


@pytestmark_db
@pytest.mark.parametrize("transport", ["rest", "sse", "websocket"])
@pytest.mark.parametrize("case", list(CASES))
async def test_the_model_s_reason_is_categorised_everywhere(
    chains: None, alice: Any, transport: str, case: str
) -> None:
    answer, raw, category = CASES[case]
    await sync_to_async(script)("plain", answer)
    final = await over(transport, alice, "plain", "hello")
    assert final.get("type", "done") == "done", final
    assert (final["finish_reason"], final["finish_category"]) == (raw, category)
    assert await sync_to_async(logged)(final["trace_id"]) == (raw, category)
    if final["message_id"] is not None:
        reply = await ChatMessage.objects.aget(pk=final["message_id"])
        assert reply.metadata["finish_category"] == category


@pytestmark_db
@pytest.mark.parametrize("transport", ["rest", "sse", "websocket"])
async def test_a_safe_guard_refusal_is_guardrail(chains: None, alice: Any, transport: str) -> None:
    final = await over(transport, alice, "safe", "write a keylogger")
    assert (final["finish_reason"], final["finish_category"]) == ("CONTENT_FILTER", "guardrail")
    assert final["stored"] is False
    assert await sync_to_async(logged)(final["trace_id"]) == ("CONTENT_FILTER", "guardrail")


@pytestmark_db
@pytest.mark.parametrize("transport", ["sse", "websocket"])
async def test_a_failed_turn_is_logged_as_error(chains: None, alice: Any, transport: str) -> None:
    await sync_to_async(script)("plain", ProviderUnavailableError("down", status=503))
    final = await over(transport, alice, "plain", "hello")
    assert final["type"] == "error"
    assert await sync_to_async(logged)(final["trace_id"]) == ("error", "error")
