"""SimpleLoggerAdvisor: Spring's log lines, one aggregated line per stream, nothing altered."""

from __future__ import annotations

import contextlib
import logging

import pytest

from advisors_app.core import ChatClient, ChatResponse, ScriptedChatModel, Usage
from advisors_app.core.advisors import SimpleLoggerAdvisor

from .helpers import call, stream

LOGGER = "advisors_app.core.advisors.simple_logger"


def lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER]


def test_name_order_and_repr():
    advisor = SimpleLoggerAdvisor(order=7)
    assert (advisor.name, advisor.order, repr(advisor)) == (
        "SimpleLoggerAdvisor",
        7,
        "SimpleLoggerAdvisor",
    )
    assert SimpleLoggerAdvisor().order == 0


async def test_call_logs_request_and_response_and_returns_the_same_objects(caplog):
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    answer = ChatResponse.of_text("Paris", usage=Usage(3, 1)).mutate(
        metadata=ChatResponse.of_text("x").metadata.mutate(id="resp-1", model="m1")
    )
    client = ChatClient(ScriptedChatModel([answer]), default_advisors=[SimpleLoggerAdvisor()])
    response = await call(client, "Capital of France?")
    assert response.chat_response is answer
    request_line, response_line = lines(caplog)
    assert request_line.startswith("request: ChatClientRequest")
    assert "Capital of France?" in request_line
    assert response_line.startswith("response: ")
    assert '"finish_reason": "STOP"' in response_line
    assert '"id": "resp-1"' in response_line and "Paris" in response_line


async def test_stream_logs_one_aggregated_response_and_passes_chunks_unchanged(caplog):
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    chunks = [
        ChatResponse.of_text("Par", finish_reason=None),
        ChatResponse.of_text("is", finish_reason="STOP", usage=Usage(3, 2)),
    ]
    client = ChatClient(ScriptedChatModel([chunks]), default_advisors=[SimpleLoggerAdvisor()])
    received = await stream(client, "Capital?")
    assert [c.chat_response for c in received] == chunks
    assert all(r is c for r, c in zip((c.chat_response for c in received), chunks, strict=True))
    request_line, response_line = lines(caplog)
    assert "Capital?" in request_line
    assert '"text": "Paris"' in response_line and '"prompt_tokens": 3' in response_line


async def test_custom_formatters():
    seen: list[str] = []
    advisor = SimpleLoggerAdvisor(
        request_to_string=lambda r: seen.append("req") or "REQ",
        response_to_string=lambda r: seen.append("resp") or "RESP",
    )
    client = ChatClient(ScriptedChatModel(["a", "b"]), default_advisors=[advisor])
    logger = logging.getLogger(LOGGER)
    logger.setLevel(logging.DEBUG)
    try:
        await call(client, "x")
        await stream(client, "y")
    finally:
        logger.setLevel(logging.NOTSET)
    assert seen == ["req", "resp", "req", "resp"]


@pytest.mark.parametrize("mode", ["call", "stream"])
async def test_nothing_is_formatted_when_debug_is_off(mode, caplog):
    caplog.set_level(logging.INFO, logger=LOGGER)
    calls: list[str] = []
    advisor = SimpleLoggerAdvisor(
        lambda r: calls.append("x") or "", lambda r: calls.append("y") or ""
    )
    client = ChatClient(ScriptedChatModel(["ok"]), default_advisors=[advisor])
    if mode == "call":
        assert (await call(client, "x")).chat_response.text == "ok"
    else:
        assert [c.chat_response.text for c in await stream(client, "x")] == ["ok"]
    assert calls == [] and lines(caplog) == []


async def test_stream_closed_early_logs_interrupted(caplog):
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    model = ScriptedChatModel([["a", "b", "c"]])
    client = ChatClient(model, default_advisors=[SimpleLoggerAdvisor()])
    async with contextlib.aclosing(client.prompt("x").stream().content()) as texts:
        async for _ in texts:
            break
    assert lines(caplog)[-1] == "response: <interrupted>"
    assert model.events[-1] == "cancel"
