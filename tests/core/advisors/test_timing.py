"""TimingAdvisor: time to first token and total time, in seconds, for calls and streams."""

from __future__ import annotations

import contextlib
import logging

from advisors_app.core import ChatClient, ScriptedChatModel
from advisors_app.core.advisors import TimingAdvisor
from advisors_app.core.advisors.timing import TIME_TO_FIRST_TOKEN, TOTAL_TIME

from .helpers import call, stream


async def test_call_records_total_time(caplog):
    caplog.set_level(logging.INFO, logger="advisors_app.core.advisors.timing")
    model = ScriptedChatModel(["ok"])
    response = await call(ChatClient(model, default_advisors=[TimingAdvisor()]), "hi")
    assert response.context[TIME_TO_FIRST_TOKEN] is None
    assert 0 <= response.context[TOTAL_TIME] < 5
    assert response.chat_response.metadata[TOTAL_TIME] == response.context[TOTAL_TIME]
    assert caplog.records[-1].getMessage().startswith("chat call elapsed=")


async def test_stream_records_first_token_and_total(caplog):
    caplog.set_level(logging.INFO, logger="advisors_app.core.advisors.timing")
    model = ScriptedChatModel([["a", "b", "c"]], chunk_delay=0.02)
    chunks = await stream(ChatClient(model, default_advisors=[TimingAdvisor()]), "hi")
    last = chunks[-1]
    assert last.chat_response.generations == ()
    first, total = last.context[TIME_TO_FIRST_TOKEN], last.context[TOTAL_TIME]
    assert 0.015 <= first < total
    assert total >= 0.055
    assert "signal=complete" in caplog.records[-1].getMessage()


async def test_cancelled_stream_is_logged_as_cancel(caplog):
    caplog.set_level(logging.INFO, logger="advisors_app.core.advisors.timing")
    client = ChatClient(ScriptedChatModel([["a", "b"]]), default_advisors=[TimingAdvisor()])
    async with contextlib.aclosing(client.prompt("hi").stream().content()) as texts:
        async for _ in texts:
            break
    assert "signal=cancel" in caplog.records[-1].getMessage()
