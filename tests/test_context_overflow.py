"""A prompt over the chat model's context window (issue 20): refused on every transport with
``context_overflow`` (HTTP 400) before the provider is called; only the call log is stored."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.core.exceptions import ValidationError
from django.test import Client

from advisors_app.core import ScriptedChatModel
from advisors_app.core.providers.embedded_smollm2 import SmolLm2ChatModel
from advisors_app.core.testing import tool_call_response
from advisors_app.core.tools import tool
from advisors_app.definition.runtime import clear_cache, load_chain
from advisors_app.definition.tools import tool_registry
from advisors_app.models import CallLog, ChatMessage, ChatModelConfig, Conversation
from advisorsite.asgi import application
from tests.api.conftest import client_for
from tests.api.views.test_chat import parse_sse, read_stream
from tests.factories import make_chain
from tests.test_consumers import HOST, ORIGIN, frames_until_end, session_cookie

pytestmark = pytest.mark.django_db(transaction=True)

#: ~200 tokens: never fits a window of 300 with 256 kept for the answer (44 left).
HUGE = "word " * 200


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    clear_cache()
    yield
    clear_cache()


@pytest.fixture
def alice(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("alice", password="pw")


def small_model(slug: str = "small", window: int | None = 300, **settings: Any) -> Any:
    return ChatModelConfig.objects.create(
        slug=slug,
        provider="scripted",
        context_window=window,
        settings={"responses": [], "repeat": False, **settings},
    )


@pytest.fixture
def chain() -> Any:
    return make_chain(model=small_model())


def script(slug: str, *items: Any) -> ScriptedChatModel:
    model: ScriptedChatModel = load_chain(slug).client.chat_model  # type: ignore[assignment]
    model.add(*items)
    return model


def assert_only_a_failed_call_log(error: dict[str, Any]) -> None:
    [log] = CallLog.objects.all()
    assert (log.status, log.error_type) == ("error", "ContextOverflowError")
    assert log.trace_id == error["trace_id"]
    assert not Conversation.objects.exists() and not ChatMessage.objects.exists()


# --- configuration --------------------------------------------------------------------------


def test_the_snapshot_carries_the_window_and_the_built_model_exposes_it(chain: Any) -> None:
    assert ChatModelConfig.objects.get(slug="small").to_config()["context_window"] == 300
    version = chain.versions.get()
    assert version.snapshot["references"]["chat_model:small"]["context_window"] == 300
    assert load_chain(chain.slug).client.chat_model.context_window == 300


def test_a_blank_window_is_the_providers_figure_and_leaves_the_config_alone() -> None:
    scripted = small_model("blank", window=None)
    embedded = ChatModelConfig.objects.create(slug="smol", provider="embedded")
    assert "context_window" not in scripted.to_config()
    assert "context_window" not in embedded.to_config()
    assert load_chain(make_chain(model=embedded).slug).client.chat_model.context_window == 4096
    assert load_chain(make_chain("b", model=scripted).slug).client.chat_model.context_window is None


def test_the_form_refuses_a_window_the_embedded_model_cannot_hold() -> None:
    row = ChatModelConfig(slug="smol", provider="embedded", context_window=8192)
    with pytest.raises(ValidationError) as caught:
        row.full_clean()
    assert "at most 4096" in caught.value.message_dict["context_window"][0]
    row.context_window = 8
    with pytest.raises(ValidationError, match="tokens from 16 to"):
        row.full_clean()


def test_the_admin_shows_the_field(admin_client: Client) -> None:
    small_model()
    assert (
        "context_window"
        in admin_client.get("/admin/advisors_app/chatmodelconfig/add/").content.decode()
    )
    listing = admin_client.get("/admin/advisors_app/chatmodelconfig/").content.decode()
    assert "column-context_window" in listing


# --- REST call ------------------------------------------------------------------------------


def test_a_call_that_can_never_fit_is_a_400_naming_the_sizes(chain: Any, alice: Any) -> None:
    model = script(chain.slug, "never")
    response = client_for(alice).post(
        f"/api/chains/{chain.slug}/call/", {"message": HUGE}, format="json"
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "context_overflow"
    assert error["message"].startswith("The prompt needs ")
    assert "accepts 44 (context window 300 minus 256 reserved for the answer)" in error["message"]
    assert model.prompts == []
    assert_only_a_failed_call_log(error)


def test_a_refusal_on_an_existing_conversation_names_it(chain: Any, alice: Any) -> None:
    script(chain.slug, "hi")
    api = client_for(alice)
    first = api.post(f"/api/chains/{chain.slug}/call/", {"message": "hi"}, format="json")
    conversation = first.json()["conversation_id"]
    refused = api.post(
        f"/api/chains/{chain.slug}/call/",
        {"message": HUGE, "conversation_id": conversation},
        format="json",
    )
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert (error["code"], error["conversation_id"]) == ("context_overflow", conversation)


def test_history_that_grows_past_the_window_refuses_without_an_orphan_message(
    alice: Any,
) -> None:
    chain = make_chain(
        "remembers",
        model=small_model(),
        advisors=(("message_chat_memory", {"max_messages": 10}),),
    )
    model = script(chain.slug, "long " * 40, "never")
    api = client_for(alice)
    first = api.post(f"/api/chains/{chain.slug}/call/", {"message": "hi"}, format="json").json()
    body = {"message": "and?", "conversation_id": first["conversation_id"]}
    response = api.post(f"/api/chains/{chain.slug}/call/", body, format="json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["code"], error["conversation_id"]) == (
        "context_overflow",
        first["conversation_id"],
    )
    assert len(model.prompts) == 1
    assert [m.text for m in ChatMessage.objects.order_by("sequence")] == ["hi", "long " * 40]
    assert list(CallLog.objects.order_by("created").values_list("status", flat=True)) == [
        "ok",
        "error",
    ]


def test_max_tokens_from_the_request_options_counts(alice: Any) -> None:
    chain = make_chain(model=small_model(window=1000))
    model = script(chain.slug, "fine", "never")
    api = client_for(alice)
    url = f"/api/chains/{chain.slug}/call/"
    assert api.post(url, {"message": HUGE}, format="json").status_code == 200
    body = {"message": HUGE, "params": {"options": {"max_tokens": 900}}}
    response = api.post(url, body, format="json")
    assert response.status_code == 400
    assert "context window 1,000 minus 900 reserved" in response.json()["error"]["message"]
    assert len(model.prompts) == 1


def test_a_model_without_a_window_is_not_checked(alice: Any) -> None:
    chain = make_chain(model=small_model(window=None))
    script(chain.slug, "fine")
    response = client_for(alice).post(
        f"/api/chains/{chain.slug}/call/", {"message": HUGE * 5}, format="json"
    )
    assert response.status_code == 200 and response.json()["content"] == "fine"


@pytest.fixture
def report_tool() -> Iterator[None]:
    @tool(description="The full report")
    def big_report() -> str:
        return "report " * 400

    tool_registry.register(big_report)
    yield
    tool_registry.unregister("big_report")


@pytest.mark.parametrize("mode", ["call", "stream"])
def test_a_tool_round_over_the_window_stops_before_the_second_provider_call(
    alice: Any, report_tool: None, mode: str
) -> None:
    chain = make_chain(
        model=small_model(window=300), advisors=(("tool_calling", {}),), tools=["big_report"]
    )
    model = script(chain.slug, tool_call_response(("big_report", {})), "never")
    body = {"message": "report", "params": {"options": {"max_tokens": 16}}}
    response = client_for(alice).post(f"/api/chains/{chain.slug}/{mode}/", body, format="json")
    if mode == "call":
        assert response.status_code == 400
        error = response.json()["error"]
    else:  # known only once the stream had started: its error event
        assert response.status_code == 200
        events = parse_sse(read_stream(response))
        assert [kind for kind, _ in events] == ["start", "tool_call", "tool_result", "error"]
        error = events[-1][1]
    assert error["code"] == "context_overflow"
    assert "context window 300 minus 16 reserved" in error["message"]
    assert len(model.prompts) == 1
    assert_only_a_failed_call_log(error)


# --- SSE and websocket ----------------------------------------------------------------------


def test_a_stream_that_can_never_fit_is_refused_before_it_opens(chain: Any, alice: Any) -> None:
    model = script(chain.slug, "never")
    response = client_for(alice).post(
        f"/api/chains/{chain.slug}/stream/", {"message": HUGE}, format="json"
    )
    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    error = response.json()["error"]
    assert error["code"] == "context_overflow" and error["trace_id"]
    assert model.prompts == []
    assert_only_a_failed_call_log(error)


async def test_the_websocket_answers_with_an_error_frame(chain: Any, alice: Any) -> None:
    from channels.testing import WebsocketCommunicator

    model = await sync_to_async(script)(chain.slug, "never")
    headers = [HOST, ORIGIN, await session_cookie(alice)]
    socket = WebsocketCommunicator(application, f"/ws/chat/{chain.slug}/", headers=headers)
    assert (await socket.connect())[0]
    try:
        await socket.send_json_to({"type": "message", "text": HUGE})
        [frame] = await frames_until_end(socket)
        assert (frame["type"], frame["code"]) == ("error", "context_overflow")
        assert "minus 256 reserved for the answer" in frame["message"]
        # The socket stays usable.
        await socket.send_json_to({"type": "message", "text": "hi"})
        frames = await frames_until_end(socket)
        assert frames[-1]["type"] == "done" and frames[-1]["content"] == "never"
    finally:
        await socket.disconnect()
    assert len(model.prompts) == 1
    logs = await sync_to_async(list)(CallLog.objects.order_by("created").values_list("status"))
    assert logs == [("error",), ("ok",)]


# --- the real embedded model ----------------------------------------------------------------


def test_the_embedded_model_refuses_a_message_beyond_its_4096_tokens(alice: Any) -> None:
    chain = make_chain(model=ChatModelConfig.objects.create(slug="smol", provider="embedded"))
    model = load_chain(chain.slug).client.chat_model
    assert isinstance(model, SmolLm2ChatModel) and model.context_window == 4096
    message = "漢字" * 4000  # 8,000 characters, the most a message may have
    response = client_for(alice).post(
        f"/api/chains/{chain.slug}/call/", {"message": message}, format="json"
    )
    assert response.status_code == 400
    error = response.json()["error"]
    # The embedded model keeps 512 tokens for the answer by default.
    assert "accepts 3,584 (context window 4,096 minus 512 reserved" in error["message"]
