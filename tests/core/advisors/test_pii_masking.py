"""PiiMaskingAdvisor: masking before the model, restore after, split placeholders in streams."""

from __future__ import annotations

import re

import pytest

from advisors_app.core import (
    DEFAULT_CHAT_MEMORY_PRECEDENCE_ORDER,
    HIGHEST_PRECEDENCE,
    AssistantMessage,
    BaseAdvisor,
    ChatClient,
    ChatResponse,
    Generation,
    Prompt,
    RecordingAdvisor,
    ScriptedChatModel,
    ToolCall,
    UserMessage,
)
from advisors_app.core.advisors import PiiMaskingAdvisor
from advisors_app.core.advisors.pii_masking import PII_MASKED
from advisors_app.core.serialization import to_json

from .helpers import run, stream, texts

MODES = ["call", "stream"]
SECRET = b"test-secret"
TOKEN = re.compile(r"<[A-Z_]+_[0-9a-f]{8}>")

TEXT = (
    "Mail ann.lee@example.com or call +1 415-555-2671 / 13812345678; card 4111 1111 1111 1111, "
    "IBAN GB82 WEST 1234 5698 7654 32, ID 11010519491231002X, from 192.168.1.20 and 2001:db8::1."
)
VALUES = [
    "ann.lee@example.com",
    "+1 415-555-2671",
    "13812345678",
    "4111 1111 1111 1111",
    "GB82 WEST 1234 5698 7654 32",
    "11010519491231002X",
    "192.168.1.20",
    "2001:db8::1",
]


def echo(prompt: Prompt) -> str:
    return "You said: " + prompt.user_message.text


def test_masks_every_kind_and_keeps_other_text():
    advisor = PiiMaskingAdvisor(secret=SECRET)
    vault: dict[str, str] = {}
    counts: dict[str, int] = {}
    masked = advisor.mask(TEXT, vault, counts)
    assert not any(v in masked for v in VALUES)
    assert sorted(vault.values()) == sorted(VALUES)
    assert counts == {
        "EMAIL": 1,
        "IBAN": 1,
        "CREDIT_CARD": 1,
        "CN_RIC": 1,
        "IP_ADDRESS": 2,
        "PHONE": 2,
    }
    assert masked.startswith("Mail <EMAIL_") and "; card <CREDIT_CARD_" in masked


def test_no_false_positives_on_ordinary_numbers():
    advisor = PiiMaskingAdvisor(secret=SECRET)
    text = "Order 1234 5678 costs 12.50 on 2024-05-01 at 10:30:00, version 1.2.3.4.5"
    assert advisor.mask(text, {}, {}) == text


def test_placeholders_are_stable_per_value_and_distinct_between_values():
    advisor = PiiMaskingAdvisor(secret=SECRET)
    vault: dict[str, str] = {}
    first = advisor.mask("a@example.com b@example.com a@example.com", vault, {})
    tokens = TOKEN.findall(first)
    assert tokens[0] == tokens[2] != tokens[1]
    assert advisor.mask("a@example.com", {}, {}) == tokens[0]
    assert PiiMaskingAdvisor(secret=b"other").mask("a@example.com", {}, {}) != tokens[0]


@pytest.mark.parametrize("mode", MODES)
async def test_round_trip(mode):
    model = ScriptedChatModel([echo])
    log: list[str] = []
    client = ChatClient(
        model,
        default_advisors=[PiiMaskingAdvisor(secret=SECRET), RecordingAdvisor("inner", 0, log)],
    )
    response = await run(mode, client, TEXT)
    sent = model.prompts[0].user_message.text
    assert not any(v in sent for v in VALUES)
    assert response.chat_response.text == "You said: " + TEXT
    assert response.context[PII_MASKED]["IP_ADDRESS"] == 2
    assert not any(v in to_json(dict(response.context)) for v in VALUES)


async def test_stream_restores_placeholders_split_across_chunks():
    advisor = PiiMaskingAdvisor(secret=SECRET)
    email_token = advisor.mask("ann@example.com", {}, {})
    phone_token = advisor.mask("+1 415-555-2671", {}, {})
    reply = f"Write to {email_token} or ring {phone_token} < soon>"
    pieces = [reply[i : i + 3] for i in range(0, len(reply), 3)]  # every placeholder is cut
    model = ScriptedChatModel([pieces])
    client = ChatClient(model, default_advisors=[advisor])
    chunks = await stream(client, "I am ann@example.com, +1 415-555-2671")
    received = texts(chunks)
    assert "".join(received) == "Write to ann@example.com or ring +1 415-555-2671 < soon>"
    assert all(not TOKEN.search(t) and "<EMAIL" not in t for t in received)
    assert len([t for t in received if t]) > 5  # still streaming, not buffered


@pytest.mark.parametrize("mode", MODES)
async def test_unknown_placeholders_stay_and_restore_can_be_disabled(mode):
    client = ChatClient(
        ScriptedChatModel(["<EMAIL_0123abcd> and <PHONE_ffffffff>"]),
        default_advisors=[PiiMaskingAdvisor(secret=SECRET)],
    )
    response = await run(mode, client, "x@example.com")
    assert response.chat_response.text == "<EMAIL_0123abcd> and <PHONE_ffffffff>"
    model = ScriptedChatModel([echo])
    client = ChatClient(model, default_advisors=[PiiMaskingAdvisor(secret=SECRET, restore=False)])
    response = await run(mode, client, "x@example.com")
    assert TOKEN.fullmatch(response.chat_response.text.removeprefix("You said: "))


@pytest.mark.parametrize("mode", MODES)
async def test_history_and_tool_call_arguments_are_masked_and_restored(mode):
    advisor = PiiMaskingAdvisor(secret=SECRET, order=HIGHEST_PRECEDENCE + 400)
    token = advisor.mask("bob@example.com", {}, {})
    call = AssistantMessage("", tool_calls=(ToolCall("c1", "send", f'{{"to": "{token}"}}'),))
    model = ScriptedChatModel([ChatResponse((Generation(call),))])
    prompt = Prompt(
        [
            UserMessage("earlier: bob@example.com"),
            AssistantMessage("ok bob@example.com"),
            UserMessage("mail bob@example.com"),
        ]
    )
    response = await run(mode, ChatClient(model, default_advisors=[advisor]), prompt)
    assert "bob@example.com" not in "".join(m.text for m in model.prompts[0].instructions)
    arguments = response.chat_response.result.output.tool_calls[0].arguments
    assert arguments == '{"to": "bob@example.com"}'


def test_custom_patterns_and_kind_validation():
    advisor = PiiMaskingAdvisor(
        kinds=("EMAIL",), patterns={"EMPLOYEE_ID": r"\bEMP-\d{5}\b"}, secret=SECRET
    )
    masked = advisor.mask("EMP-12345 at a@example.com, tel +1 415-555-2671", {}, {})
    assert masked.startswith("<EMPLOYEE_ID_") and "+1 415-555-2671" in masked
    with pytest.raises(ValueError, match="unknown PII kind"):
        PiiMaskingAdvisor(kinds=("SSN",))


class MemorySpy(BaseAdvisor):
    """Sits where a memory advisor sits (inside the masking advisor) and keeps what it sees."""

    order = DEFAULT_CHAT_MEMORY_PRECEDENCE_ORDER

    def __init__(self) -> None:
        self.seen: list[str] = []

    def before(self, request, chain):
        self.seen.append(request.prompt.contents)
        return request

    def after(self, response, chain):
        self.seen.append(response.chat_response.text)
        return response


@pytest.mark.parametrize("mode", MODES)
async def test_an_inner_memory_advisor_never_sees_raw_pii(mode):
    spy = MemorySpy()
    client = ChatClient(
        ScriptedChatModel([echo]), default_advisors=[spy, PiiMaskingAdvisor(secret=SECRET)]
    )
    response = await run(mode, client, TEXT)
    assert response.chat_response.text == "You said: " + TEXT
    assert len(spy.seen) == 2
    assert not any(v in seen for v in VALUES for seen in spy.seen)
