"""The real clients of both protocols against the live site (Daphne on the test database): the
AI SDK's ``DefaultChatTransport`` + ``readUIMessageStream`` (what ``useChat`` runs) and AG-UI's
``HttpAgent`` (which validates every event and its order itself), from the npm registry's ``ai``
and ``@ag-ui/client`` pinned in tests/js/package-lock.json, each streaming a turn with a tool call
and sources."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from rest_framework.authtoken.models import Token

from advisors_app.ingestion.pipeline import ingest_text
from advisors_app.models import Collection
from tests.factories import make_chain, scripted_model

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

JS = Path(__file__).resolve().parents[1] / "js"


@pytest.fixture(scope="module")
def node_clients() -> Path:
    """tests/js with its locked packages installed (``npm ci`` once, from the npm registry)."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("Node.js is not installed: the JavaScript clients cannot run")
    if not (JS / "node_modules" / "ai").is_dir():
        subprocess.run(
            ["npm", "ci", "--no-audit", "--no-fund"], cwd=JS, check=True, capture_output=True
        )
    return JS / "protocol_clients.mjs"


def run_clients(script: Path, base: str, user: Any, chain: str, question: str, *mode: str) -> Any:
    """What the clients saw (see tests/js/protocol_clients.mjs)."""
    token, _ = Token.objects.get_or_create(user=user)
    out = subprocess.run(
        ["node", str(script), base, token.key, chain, question, *mode],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def scripted_tool_model(slug: str, tool: str, arguments: dict[str, Any], after: str) -> Any:
    """A scripted model (in the live server's process too: it is a row) that calls ``tool``
    when the user's message mentions it, then answers ``after``."""
    model = scripted_model(slug, responses=["unused"], repeat=True)
    model.settings.update(
        tool_rules=[{"when": "refund|note", "tool": tool, "arguments": arguments}],
        after_tool=after,
    )
    model.save()
    return model


def test_the_ai_sdk_and_ag_ui_clients_stream_a_turn_with_a_tool_and_sources(
    live_api: str, node_clients: Path, alice: Any
) -> None:
    collection = Collection.objects.create(slug="kb", name="KB")
    ingest_text(collection, "policy.md", "Refunds take 5 days.")
    model = scripted_tool_model(
        "clients-model", "calculator", {"expression": "2+3"}, "Refunds take {tool_result} days."
    )
    make_chain(
        "clients",
        model=model,
        advisors=(("question_answer", {"collection": "kb"}), ("tool_calling", {})),
        tools=["calculator"],
    )
    answer = run_clients(node_clients, live_api, alice, "clients", "How long does a refund take?")

    message = answer["aiSdk"]["first"]  # the UIMessage useChat would show
    assert message["role"] == "assistant"
    kinds = [part["type"] for part in message["parts"]]
    assert "tool-calculator" in kinds and "source-document" in kinds and "text" in kinds
    tool = next(part for part in message["parts"] if part["type"] == "tool-calculator")
    assert (tool["state"], tool["input"]) == ("output-available", {"expression": "2+3"})
    source = next(part for part in message["parts"] if part["type"] == "source-document")
    assert source["title"] == "policy.md"
    text = "".join(part["text"] for part in message["parts"] if part["type"] == "text")
    assert text == "Refunds take 5 days."
    assert message["metadata"]["stored"] is True  # finish's messageMetadata

    [run] = answer["agUi"]["runs"]
    assert run.get("error") is None and run["outcome"] == "success"
    events = run["events"]
    assert events[0] == "RUN_STARTED" and events[-1] == "RUN_FINISHED"
    assert {"TOOL_CALL_START", "TOOL_CALL_RESULT", "CUSTOM", "TEXT_MESSAGE_CONTENT"} <= set(events)
    assert run["result"]["tools"][0]["name"] == "calculator"
    messages = answer["agUi"]["messages"]
    roles = [m["role"] for m in messages]
    assert roles[0] == "user" and "assistant" in roles and "tool" in roles
    assistant = [m for m in messages if m["role"] == "assistant"]
    assert any(m.get("content") == "Refunds take 5 days." for m in assistant)


def test_both_clients_answer_an_approval_and_read_the_resumed_turn(
    live_api: str, node_clients: Path, alice: Any
) -> None:
    from advisors_app.demo.models import DemoNote

    model = scripted_tool_model("notes-model", "save_note", {"text": "milk"}, "{tool_result}")
    make_chain(
        "notes",
        model=model,
        advisors=(("message_chat_memory", {}), ("tool_calling", {})),
        tools=["save_note"],
    )
    answer = run_clients(node_clients, live_api, alice, "notes", "Take a note: milk", "approve")

    first, resumed = answer["aiSdk"]["first"], answer["aiSdk"]["resumed"]
    [paused] = [p for p in first["parts"] if p["type"] == "tool-save_note"]
    assert paused["state"] == "approval-requested" and paused["input"] == {"text": "milk"}
    assert resumed["id"] == first["id"]  # the paused message went on
    [ran] = [p for p in resumed["parts"] if p["type"] == "tool-save_note"]
    assert ran["state"] == "output-available" and ran["output"]["ok"] is True
    text = "".join(p["text"] for p in resumed["parts"] if p["type"] == "text")
    assert text.startswith("Saved note #")

    paused_run, resumed_run = answer["agUi"]["runs"]
    assert paused_run["outcome"] == "interrupt"
    [interrupt] = paused_run["interrupts"]
    assert interrupt["reason"] == "tool_call" and interrupt["toolCallId"] == interrupt["id"]
    assert resumed_run.get("error") is None and resumed_run["outcome"] == "success"
    assert "TOOL_CALL_START" not in resumed_run["events"]  # proposed by the paused run
    assert "TOOL_CALL_RESULT" in resumed_run["events"]
    assert DemoNote.objects.filter(owner=alice).count() == 2  # one per client
